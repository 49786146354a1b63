//! FTP for hydra, on suppaftp's tokio client.
//!
//! See [`FtpScheme`] for what a fetch sends and checks, [`StopMethod`] for how a range is
//! stopped before the end of the file, and (with the `origin` feature) `origin` for the
//! reference server (libunftp) and the scripted server the tests run against. `README.md` has
//! the capability checklist and the measured preemption cost.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod options;
mod pool;
mod scheme;
mod session;
mod stats;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "origin")]
pub mod origin;

pub use options::{FtpOptions, FtpsMode, Passive, PasvHost, StopMethod};
pub use scheme::{FtpScheme, FRESH_CHECK, PREEMPT_COST_RTT_ABOR, PREEMPT_COST_RTT_DROP_DATA};
pub use stats::{FtpStats, StopRecord, StopTotals, RECENT_STOPS};
