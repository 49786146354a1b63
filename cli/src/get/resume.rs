//! Which sources may be combined, and which may continue a partial download.

use crate::control::Control;
use hydra_scheme::{Probe, Validator};

/// Why a source that answered its probe cannot be part of a resume: `None` when it describes
/// the object the partial download recorded (its own record, or the first source's for a
/// source not recorded).
pub(super) fn resume_misfit(prev: &Control, url: &str, probe: &Probe) -> Option<String> {
    let why = match prev.sources.iter().find(|s| s.url == url) {
        Some(rec) => {
            let was = rec.probe();
            (!was.same_object(probe)).then(|| change(&was, probe))
        }
        None => disagreement(&prev.sources[0].probe(), probe),
    }?;
    Some(format!("object changed since the partial download ({why})"))
}

/// Why a source that answered its probe after the transfer started cannot join it: the
/// resume's rule, or else a disagreement with the first source (`first`, at `first_url`).
pub(super) fn late_misfit(
    prev: Option<&Control>,
    first: &Probe,
    first_url: &str,
    url: &str,
    probe: &Probe,
) -> Option<String> {
    match prev {
        Some(prev) => resume_misfit(prev, url, probe).map(|w| format!("{w}; left out")),
        None => disagreement(first, probe).map(|w| format!("{w} at {first_url}; not combined")),
    }
}

/// Why `other` cannot be combined with `first` (the engine's rule: size, and strong
/// validators when both have one).
pub(super) fn disagreement(first: &Probe, other: &Probe) -> Option<String> {
    if first.size != other.size {
        return Some(format!(
            "size {} differs from size {}",
            other.size, first.size
        ));
    }
    if let (Some(Validator::Strong(a)), Some(Validator::Strong(b))) =
        (&first.validator, &other.validator)
    {
        if a != b {
            return Some(format!("strong validator {b} differs from {a}"));
        }
    }
    None
}

/// What changed between a recorded probe and a new one, in words.
pub(super) fn change(was: &Probe, now: &Probe) -> String {
    let mut d = Vec::new();
    if was.size != now.size {
        d.push(format!("size {} became {}", was.size, now.size));
    }
    if let (Some(a), Some(b)) = (&was.validator, &now.validator) {
        if a != b {
            d.push(format!("validator {a:?} became {b:?}"));
        }
    }
    if let (Some(a), Some(b)) = (was.last_modified, now.last_modified) {
        if a != b {
            d.push("modification time changed".to_owned());
        }
    }
    if d.is_empty() {
        d.push("probe differs".to_owned());
    }
    d.join(", ")
}
