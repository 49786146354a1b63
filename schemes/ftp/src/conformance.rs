//! This scheme under hydra's conformance suite: the scheme with its reference origin as a
//! [`SchemeUnderTest`], and the failures it is known to have. `tests/conformance.rs` runs it
//! one test per trial; `hydra conformance` runs it with the other shipped schemes.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use hydra_conformance::live::schemes::TEST_TIMEOUT;
use hydra_conformance::live::{LiveError, LiveOrigin, OriginFactory, OriginFault, SchemeUnderTest};
use hydra_scheme::ByteRange;

use crate::origin as ftp_origin;
use crate::{FtpOptions, FtpScheme};

/// The FTP scheme against its libunftp reference origin (the scheme declares
/// announced data connections, so faultnet rewrites passive replies and data crosses the link).
pub fn under_test() -> Result<SchemeUnderTest, LiveError> {
    let scheme = FtpScheme::new(FtpOptions {
        connect_timeout: TEST_TIMEOUT,
        reply_timeout: TEST_TIMEOUT,
        idle_read_timeout: TEST_TIMEOUT,
        ..FtpOptions::default()
    })?;
    Ok(SchemeUnderTest::new(Arc::new(scheme), Arc::new(FtpOrigins)))
}

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
