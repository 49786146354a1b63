//! Reference FTP servers for tests and the conformance suite (feature `origin`), loopback only.
//!
//! * [`Origin`]: libunftp with the unftp-sbe-fs back end, serving a temporary directory that
//!   holds one generated object ([`object_bytes`]) as [`OBJECT`], on `127.0.0.1:0`, passive
//!   ports on loopback, anonymous login, optional explicit FTPS; switched into a
//!   [`Misbehaviour`] (refuse, no `REST`, `REST` acknowledged but ignored, cut data
//!   connections) with
//!   [`Origin::set_misbehaviour`].
//! * [`Scripted`]: a small hand-written FTP server for what libunftp has no hook for: the
//!   order of the replies after `ABOR`, a `421` greeting, a `227` naming another host, a data
//!   connection cut short, required credentials. It logs every command it receives.

mod scripted;
mod unftp;

pub use scripted::{AbortOrder, MlstReply, Script, Scripted};
pub use unftp::{Misbehaviour, Origin, OriginConfig};

/// The object's file name in the served directory.
pub const OBJECT: &str = "object.bin";

/// The object's bytes: the generator every reference origin shares, so origins of every
/// protocol started with one seed are mirrors of one object.
pub use hydra_scheme::content::object_bytes;
