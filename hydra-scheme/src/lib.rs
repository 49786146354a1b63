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
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agreement;
pub mod bound;
pub mod connect;
pub mod content;
pub mod endpoint;
pub mod engine;
pub mod error;
pub mod pool;
pub mod probe;
pub mod proxy;
pub mod registry;
pub mod scheme;
pub mod sink;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
pub mod tls;
pub mod writer;

pub use bound::RangeBound;
pub use connect::{
    AsyncStream, BoxedStream, Connector, Socks5Connector, Target, TcpConnector, TlsConnector,
    TlsOptions,
};
pub use endpoint::{Credentials, Endpoint, EndpointError};
pub use engine::{
    prepare_all, Engine, EngineError, EngineEvent, EngineOptions, FetchView, Joined, Joining,
    Preparing, ProbeAnswer, ProbeFailure, ProbePolicy, Probed, ProbedSource, Progress, Report,
    SourceInput,
};
pub use error::{ErrorKind, SchemeError, TimeoutPhase};
pub use hydra_core::{ByteRange, Capabilities, ConnId, Failure, FetchEnd, FetchId, RangeSet};
pub use pool::{IdlePool, Opening, PoolKey, Pooled};
pub use probe::{Probe, Validator};
pub use registry::{Registry, ResolveError};
pub use scheme::{FetchOutcome, FetchRequest, Scheme, Transport, PRIMED_TTL};
pub use sink::{FileSink, MemorySink, Sink};
pub use tls::{client_config, CertificateRefusal};
pub use url::Url;
pub use writer::{FetchEvent, FetchEventKind, FetchObserver, NoObserver, RangeWriter, WriteResult};
