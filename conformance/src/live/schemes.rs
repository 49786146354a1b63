//! The schemes this workspace ships, each with its reference origin: what `hydra conformance`
//! runs. A third-party plugin builds its own [`SchemeUnderTest`] the same way.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_scheme::ByteRange;
use hydra_scheme_ftp::origin as ftp_origin;
use hydra_scheme_ftp::{FtpOptions, FtpScheme};
use hydra_scheme_http::origin as http_origin;
use hydra_scheme_http::{HttpOptions, HttpScheme};
use hydra_scheme_sftp::origin as sftp_origin;
use hydra_scheme_sftp::{HostKeyPolicy, SftpOptions, SftpScheme};

use super::example::{ExampleOriginFactory, ExampleScheme};
use super::origin::{LiveOrigin, OriginFactory, OriginFault};
use super::{LiveError, SchemeUnderTest};

/// Per-request deadlines used by every shipped scheme under test: short enough that a trial
/// ends quickly, long enough for a 100 ms round trip.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Every scheme the workspace ships, with its reference origin, in a fixed order:
/// http, sftp, ftp, then the rangeline example.
pub fn registered() -> Result<Vec<SchemeUnderTest>, LiveError> {
    Ok(vec![http(), sftp()?, ftp()?, example()])
}

/// The HTTP scheme against its hyper reference origin.
pub fn http() -> SchemeUnderTest {
    let scheme = HttpScheme::new(HttpOptions {
        connect_timeout: TEST_TIMEOUT,
        first_byte_timeout: TEST_TIMEOUT,
        idle_read_timeout: TEST_TIMEOUT,
        ..HttpOptions::default()
    })
    // Invariant: the default options hold no TLS roots or proxies that could fail to load.
    .expect("HTTP scheme with default options");
    SchemeUnderTest::new(Arc::new(scheme), Arc::new(HttpOrigins))
}

/// The SFTP scheme against its russh reference origin. Host keys: a fresh known_hosts file in
/// a temporary directory, with `accept_new` (every origin has the same seeded key, and every
/// address is loopback).
pub fn sftp() -> Result<SchemeUnderTest, LiveError> {
    let dir = tempfile::tempdir()?;
    let known_hosts: PathBuf = dir.path().join("known_hosts");
    let scheme = SftpScheme::new(SftpOptions {
        connect_timeout: TEST_TIMEOUT,
        request_timeout: TEST_TIMEOUT,
        host_keys: HostKeyPolicy {
            known_hosts: Some(known_hosts),
            accept_new: true,
        },
        ..SftpOptions::default()
    });
    Ok(SchemeUnderTest::new(
        Arc::new(scheme),
        Arc::new(SftpOrigins {
            _dir: Arc::new(dir),
        }),
    ))
}

/// The FTP scheme against its libunftp reference origin (faultnet in FTP mode, so passive
/// data connections cross the same link).
pub fn ftp() -> Result<SchemeUnderTest, LiveError> {
    let scheme = FtpScheme::new(FtpOptions {
        connect_timeout: TEST_TIMEOUT,
        reply_timeout: TEST_TIMEOUT,
        idle_read_timeout: TEST_TIMEOUT,
        ..FtpOptions::default()
    })?;
    let mut sut = SchemeUnderTest::new(Arc::new(scheme), Arc::new(FtpOrigins));
    sut.ftp = true;
    Ok(sut)
}

/// The rangeline example scheme (`docs/plugin-guide.md`) against its origin.
pub fn example() -> SchemeUnderTest {
    SchemeUnderTest::new(
        Arc::new(ExampleScheme::new(TEST_TIMEOUT)),
        Arc::new(ExampleOriginFactory),
    )
}

// ---------------------------------------------------------------------------------------------
// HTTP

struct HttpOrigins;

#[async_trait]
impl OriginFactory for HttpOrigins {
    fn name(&self) -> &str {
        "hyper reference"
    }
    async fn start(&self, size: u64, seed: u64) -> Result<Box<dyn LiveOrigin>, LiveError> {
        let o = http_origin::Origin::start(http_origin::OriginConfig {
            size,
            seed,
            misbehaviour: http_origin::Misbehaviour::default(),
        })
        .await?;
        Ok(Box::new(HttpLive { o, seed }))
    }
}

struct HttpLive {
    o: http_origin::Origin,
    seed: u64,
}

impl LiveOrigin for HttpLive {
    fn addr(&self) -> SocketAddr {
        self.o.addr()
    }
    fn url_via(&self, via: SocketAddr) -> String {
        format!("http://{via}/object")
    }
    fn size(&self) -> u64 {
        self.o.size()
    }
    fn content(&self) -> Vec<u8> {
        self.o.content(ByteRange::new(0, self.o.size()))
    }
    fn supports(&self, _: OriginFault) -> bool {
        true
    }
    fn set_fault(&self, fault: Option<OriginFault>) -> Result<(), LiveError> {
        let mut m = http_origin::Misbehaviour::default();
        match fault {
            None => {}
            Some(OriginFault::IgnoreRanges) => m.ignore_ranges = true,
            Some(OriginFault::TruncateEvery { after }) => {
                m.truncate = Some(http_origin::Truncate { after, once: false })
            }
            Some(OriginFault::WrongRange) => m.wrong_content_range = true,
            Some(OriginFault::RefuseRequests) => m.refuse = Some(Duration::from_secs(1)),
            Some(OriginFault::MisplacedStart) => m.shifted_body = Some(4096),
            Some(OriginFault::EncodedRanges) => m.gzip_ranges = true,
            Some(OriginFault::DropValidators) => m.no_validators = true,
            Some(OriginFault::Trickle { rate }) => {
                m.trickle = Some(http_origin::Trickle { after: 0, rate })
            }
        }
        self.o.set(m);
        Ok(())
    }
    fn can_replace(&self) -> bool {
        true
    }
    fn replace_object(&self) -> Result<(), LiveError> {
        self.o.replace_object(self.seed.wrapping_add(0x5151));
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// SFTP

struct SftpOrigins {
    _dir: Arc<tempfile::TempDir>,
}

#[async_trait]
impl OriginFactory for SftpOrigins {
    fn name(&self) -> &str {
        "russh reference"
    }
    async fn start(&self, size: u64, seed: u64) -> Result<Box<dyn LiveOrigin>, LiveError> {
        let h = sftp_origin::Origin::start(sftp_origin::OriginConfig {
            size,
            seed,
            ..sftp_origin::OriginConfig::default()
        })
        .await?;
        Ok(Box::new(SftpLive { h, seed }))
    }
}

struct SftpLive {
    h: sftp_origin::OriginHandle,
    seed: u64,
}

impl LiveOrigin for SftpLive {
    fn addr(&self) -> SocketAddr {
        self.h.addr()
    }
    fn url_via(&self, via: SocketAddr) -> String {
        format!(
            "sftp://{}:{}@{via}/object.bin",
            self.h.user(),
            self.h.password()
        )
    }
    fn size(&self) -> u64 {
        self.h.size()
    }
    fn content(&self) -> Vec<u8> {
        self.h.content(0, self.h.size())
    }
    fn supports(&self, fault: OriginFault) -> bool {
        // SFTP reads are positioned and their replies carry no offset: there is no range to
        // ignore or to name wrongly, no content coding, no validator but size and mtime, and
        // no protocol-level refusal switch in the origin.
        matches!(
            fault,
            OriginFault::TruncateEvery { .. }
                | OriginFault::MisplacedStart
                | OriginFault::Trickle { .. }
        )
    }
    fn set_fault(&self, fault: Option<OriginFault>) -> Result<(), LiveError> {
        let m = match fault {
            None => sftp_origin::Misbehaviour::default(),
            Some(OriginFault::TruncateEvery { after }) => sftp_origin::Misbehaviour {
                drop_after_bytes: Some(after),
                ..sftp_origin::Misbehaviour::default()
            },
            Some(OriginFault::MisplacedStart) => sftp_origin::Misbehaviour {
                shifted_reads: Some(4096),
                ..sftp_origin::Misbehaviour::default()
            },
            Some(OriginFault::Trickle { rate }) => sftp_origin::Misbehaviour {
                trickle: Some(sftp_origin::Trickle { after: 0, rate }),
                ..sftp_origin::Misbehaviour::default()
            },
            Some(f) => {
                return Err(LiveError::Unsupported(format!(
                    "the SFTP origin cannot {}",
                    f.name()
                )))
            }
        };
        self.h.set(m);
        Ok(())
    }
    fn can_replace(&self) -> bool {
        true
    }
    fn replace_object(&self) -> Result<(), LiveError> {
        self.h
            .replace_object(self.seed.wrapping_add(0x5151), 1_700_003_600);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// FTP

struct FtpOrigins;

#[async_trait]
impl OriginFactory for FtpOrigins {
    fn name(&self) -> &str {
        "libunftp reference"
    }
    async fn start(&self, size: u64, seed: u64) -> Result<Box<dyn LiveOrigin>, LiveError> {
        let o = ftp_origin::Origin::start(ftp_origin::OriginConfig {
            size,
            seed,
            ftps: None,
        })
        .await?;
        Ok(Box::new(FtpLive { o, seed, size }))
    }
}

struct FtpLive {
    o: ftp_origin::Origin,
    seed: u64,
    size: u64,
}

impl LiveOrigin for FtpLive {
    fn addr(&self) -> SocketAddr {
        self.o.addr()
    }
    fn url_via(&self, via: SocketAddr) -> String {
        format!("ftp://{via}/{}", ftp_origin::OBJECT)
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn content(&self) -> Vec<u8> {
        self.o.content(ByteRange::new(0, self.size))
    }
    fn supports(&self, fault: OriginFault) -> bool {
        // FTP replies name no range (`REST` gives only a start, `RETR` carries no offset):
        // there is nothing to name wrongly, so `WrongRange` has no FTP form; nor has a content
        // coding, or validators to drop (`MDTM` is the file's), or a trickle in the origin.
        !matches!(
            fault,
            OriginFault::WrongRange
                | OriginFault::EncodedRanges
                | OriginFault::DropValidators
                | OriginFault::Trickle { .. }
        )
    }
    fn set_fault(&self, fault: Option<OriginFault>) -> Result<(), LiveError> {
        let mut m = ftp_origin::Misbehaviour::default();
        match fault {
            None => {}
            // A server that cannot resume: `REST` answered `502`, left out of `FEAT`.
            Some(OriginFault::IgnoreRanges) => m.no_rest = true,
            // Every `RETR` cut after `after` bytes, answered `426`.
            Some(OriginFault::TruncateEvery { after }) => m.truncate_after = Some(after),
            // `421` to every new control connection (open ones are closed on the switch).
            Some(OriginFault::RefuseRequests) => m.refuse = true,
            // `350` to `REST`, and every `RETR` from byte 0.
            Some(OriginFault::MisplacedStart) => m.rest_ignored = true,
            Some(f) => {
                return Err(LiveError::Unsupported(format!(
                    "the FTP origin cannot {}",
                    f.name()
                )))
            }
        }
        self.o.set_misbehaviour(m);
        Ok(())
    }
    fn can_replace(&self) -> bool {
        true
    }
    fn replace_object(&self) -> Result<(), LiveError> {
        self.o
            .replace_object(self.seed.wrapping_add(0x5151), self.size)?;
        Ok(())
    }
}
