//! Which sources may continue a partial download: the rules of [`hydra_scheme::agreement`],
//! applied to what the control file recorded.

use crate::control::Control;
use hydra_scheme::agreement;
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
