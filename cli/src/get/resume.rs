//! Which sources may continue a partial download, and which may join a transfer late: the
//! rules of [`hydra_scheme::agreement`], applied to what the control file recorded.

use crate::control::Control;
use hydra_scheme::agreement::{self, disagreement};
use hydra_scheme::Probe;

/// Why a source that answered its probe cannot be part of a resume: `None` when it describes
/// the object the partial download recorded (strictly: every recorded validator present and
/// equal; see [`agreement::resume_misfit`]). `vouched`: a checksum will verify the result.
pub(super) fn resume_misfit(
    prev: &Control,
    url: &str,
    probe: &Probe,
    vouched: bool,
) -> Option<String> {
    let own = prev.source(url).map(|r| r.probe());
    let recorded: Vec<Probe> = prev.sources.iter().map(|r| r.probe()).collect();
    let refs: Vec<&Probe> = recorded.iter().collect();
    agreement::resume_misfit(own.as_ref(), &refs, probe, vouched)
}

/// Why a source that answered its probe after the transfer started cannot join it: the
/// resume's rule, or else a disagreement with the reference source (`first`, at `first_url`).
pub(super) fn late_misfit(
    prev: Option<&Control>,
    vouched: bool,
    first: &Probe,
    first_url: &str,
    url: &str,
    probe: &Probe,
) -> Option<String> {
    match prev {
        Some(prev) => resume_misfit(prev, url, probe, vouched).map(|w| format!("{w}; left out")),
        None => disagreement(first, probe).map(|w| format!("{w} at {first_url}; not combined")),
    }
}
