//! This scheme under hydra's conformance suite: the scheme with its reference origin as a
//! [`SchemeUnderTest`], and the failures it is known to have. `tests/conformance.rs` runs it
//! one test per trial; `hydra conformance` runs it with the other shipped schemes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_conformance::live::schemes::TEST_TIMEOUT;
use hydra_conformance::live::{LiveError, LiveOrigin, OriginFactory, OriginFault, SchemeUnderTest};
use hydra_scheme::ByteRange;

use crate::origin as http_origin;
use crate::{HttpOptions, HttpScheme};

/// The HTTP scheme against its hyper reference origin.
pub fn under_test() -> Result<SchemeUnderTest, LiveError> {
    let scheme = HttpScheme::new(HttpOptions {
        connect_timeout: TEST_TIMEOUT,
        first_byte_timeout: TEST_TIMEOUT,
        idle_read_timeout: TEST_TIMEOUT,
        ..HttpOptions::default()
    })
    // Invariant: the default options hold no TLS roots or proxies that could fail to load.
    .expect("HTTP scheme with default options");
    Ok(SchemeUnderTest::new(
        Arc::new(scheme),
        Arc::new(HttpOrigins),
    ))
}

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
