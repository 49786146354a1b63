//! hydra's plugin contract: what a protocol crate implements and what the engine relies on.
//!
//! # The contract in one page
//!
//! * A protocol is a [`Scheme`]: it names the URL schemes it serves, declares its
//!   [`Capabilities`] (re-exported from `hydra-core`; one struct, priced by the scheduler),
//!   [`probes`](Scheme::probe) an [`Endpoint`] into a [`Probe`], and
//!   [`fetches`](Scheme::fetch) one range per [`FetchRequest`], ending with a [`FetchOutcome`].
//! * The far end of a running range is a [`RangeBound`]: it only ever moves down, never below
//!   bytes already claimed, and claim and lower are atomic with respect to each other.
//! * A scheme delivers bytes only through its [`RangeWriter`], which claims them against the
//!   bound, writes them at their offsets into the [`Sink`], reports them to the
//!   [`FetchObserver`], and drops (as waste) whatever lies past the bound. A scheme checks
//!   `remaining()` before every read and every write and selects on `exhausted()` while it
//!   waits on the network.
//! * Errors are [`SchemeError`]s naming the source (URL without credentials) and a typed cause
//!   ([`ErrorKind`]); [`SchemeError::failure_kind`] classifies them for the scheduler.
//! * Byte streams come from composable [`Connector`]s (TCP, TLS, SOCKS5) shared by every
//!   scheme. A [`Registry`] maps URL schemes to plugins.
//!
//! The transfer engine that drives `hydra-core` over these is built on this contract (see the
//! driving sketch on [`Scheme`]).
//!
//! # Where things are
//!
//! Each item has one path:
//!
//! * the crate root: the contract a plugin implements and the parts it builds with (the items
//!   above, [`IdlePool`] for idle sessions, the [`Connector`]s);
//! * [`engine`]: driving a transfer ([`engine::Engine`], its options, probe phase, events and
//!   report) — what a download tool needs, not a plugin;
//! * [`proxy`], [`tls`]: the proxy rules and connectors, the trust store and certificate
//!   wording a scheme dials with;
//! * [`agreement`]: when two probes describe the same object (the rule every source is held
//!   to); [`text`]: showing what a peer sent; [`content`]: the deterministic test object;
//! * `testing` (feature `testing`): what a plugin's own conformance harness needs.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod advertised;
pub mod agreement;
mod bound;
mod connect;
pub mod content;
mod endpoint;
pub mod engine;
mod error;
mod pool;
mod probe;
pub mod proxy;
mod registry;
mod scheme;
mod sink;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
pub mod tls;
mod writer;

pub use advertised::{
    Advertised, AdvertisedDigest, AdvertisedMirror, DigestAlgorithm, MAX_ADVERTISED_MIRRORS,
};
pub use bound::RangeBound;
pub use connect::{
    AsyncStream, BoxedStream, Connector, Socks5Connector, Target, TcpConnector, TlsConnector,
    TlsOptions,
};
pub use endpoint::{Credentials, Endpoint, EndpointError};
pub use error::{ErrorKind, SchemeError, TimeoutPhase};
pub use hydra_core::{ByteRange, Capabilities, ConnId, Failure, FetchEnd, FetchId, RangeSet};
pub use pool::{IdlePool, Opening, PoolKey, Pooled};
pub use probe::{Probe, Validator};
pub use registry::{Registry, ResolveError};
pub use scheme::{FetchOutcome, FetchRequest, Scheme, Transport, PRIMED_TTL};
pub use sink::{FileSink, MemorySink, Offered, Sink, WITHDRAW_POLL};
pub use url::Url;
pub use writer::{FetchEvent, FetchEventKind, FetchObserver, NoObserver, RangeWriter, WriteResult};
