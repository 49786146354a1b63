//! SFTP for hydra, on russh (ring backend) and russh-sftp's raw session.
//!
//! See [`SftpScheme`] for how a range is fetched as a window of pipelined `SSH_FXP_READ`s
//! under the [`RangeBound`](hydra_scheme::RangeBound), [`SftpOptions`] for every knob and its
//! default, [`pool`] for when a session is reused, and (with the `origin` feature) `origin`
//! for the reference server the tests, examples and the conformance suite run against.
//! `README.md` has the capability checklist and the measurements.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod auth;
mod error;
pub mod options;
pub mod pool;
mod relay;
mod scheme;
mod session;
pub mod ssh_config;
pub mod target;
mod window;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "origin")]
pub mod origin;

pub use auth::{KeyCache, PassphrasePrompt, TerminalPrompt};
pub use options::{HostKeyPolicy, SessionMode, SftpAuth, SftpOptions};
pub use relay::RelayCommand;
pub use scheme::{SftpScheme, SftpStats, SFTP_CAPABILITIES};
pub use session::fingerprint;
pub use ssh_config::SshConfig;
pub use target::SshTarget;
