//! moto's S3 server on loopback, and origins of the conformance suite stored in it.
// Each test binary uses part of this module.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hydra_conformance::live::{LiveError, LiveOrigin, OriginFactory, SchemeUnderTest};
use hydra_s3_example::{Credentials, S3Options, S3Scheme};
use hydra_scheme::Url;
use rusty_s3::{Bucket, S3Action, UrlStyle};

/// The bucket every test object is stored in.
pub const BUCKET: &str = "hydra-test";
/// The region signed into requests.
pub const REGION: &str = "us-east-1";

/// A moto server process, killed on drop.
pub struct Moto {
    child: Child,
    addr: SocketAddr,
}

impl Moto {
    /// Starts `moto_server` (or `$MOTO_SERVER`) on a free loopback port and creates
    /// [`BUCKET`]. `Err` names why it cannot run (not installed, did not come up): the caller
    /// skips with that reason.
    pub fn start() -> Result<Moto, String> {
        let program = std::env::var("MOTO_SERVER").unwrap_or_else(|_| "moto_server".into());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start {program} ({e}); run examples/s3-plugin/run.sh, which installs moto")
            })?;
        let moto = Moto {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(moto.addr).is_err() {
            if Instant::now() > deadline {
                return Err(format!(
                    "{program} did not listen on {} within 20 s",
                    moto.addr
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let create = moto.bucket().create_bucket(&credentials()).sign(TTL);
        ureq::put(create.as_str())
            .send_empty()
            .map_err(|e| format!("cannot create bucket {BUCKET}: {e}"))?;
        Ok(moto)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its endpoint URL.
    pub fn endpoint(&self) -> Url {
        endpoint(self.addr)
    }

    fn bucket(&self) -> Bucket {
        bucket(self.addr)
    }

    /// Stores `bytes` under `key`.
    pub fn put(&self, key: &str, bytes: &[u8]) -> Result<(), String> {
        put(self.addr, key, bytes)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TTL: Duration = Duration::from_secs(3600);

/// The credentials the tests sign with (moto accepts any).
pub fn credentials() -> Credentials {
    Credentials::new("AKIDHYDRATEST", "hydra-test-secret")
}

fn endpoint(addr: SocketAddr) -> Url {
    Url::parse(&format!("http://{addr}")).expect("a loopback URL")
}

fn bucket(addr: SocketAddr) -> Bucket {
    Bucket::new(endpoint(addr), UrlStyle::Path, BUCKET, REGION).expect("an http endpoint")
}

fn put(addr: SocketAddr, key: &str, bytes: &[u8]) -> Result<(), String> {
    let url = bucket(addr).put_object(Some(&credentials()), key).sign(TTL);
    ureq::put(url.as_str())
        .send(bytes)
        .map(|_| ())
        .map_err(|e| format!("cannot store {key}: {e}"))
}

/// `size` bytes derived from `seed` (the same for the same pair).
pub fn object(size: u64, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The S3 scheme against origins stored in `moto`.
pub fn under_test(moto: SocketAddr) -> Result<SchemeUnderTest, LiveError> {
    let mut opts = S3Options::aws(REGION, Some(credentials()));
    opts.endpoint = endpoint(moto);
    opts.http.connect_timeout = Duration::from_secs(5);
    opts.http.first_byte_timeout = Duration::from_secs(5);
    opts.http.idle_read_timeout = Duration::from_secs(5);
    let scheme = S3Scheme::new(opts).map_err(LiveError::Unsupported)?;
    Ok(SchemeUnderTest::new(
        Arc::new(scheme),
        Arc::new(MotoOrigins { moto }),
    ))
}

struct MotoOrigins {
    moto: SocketAddr,
}

/// Each origin its own key, so replacing one origin's object leaves the others' alone.
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

#[async_trait]
impl OriginFactory for MotoOrigins {
    fn name(&self) -> &str {
        "moto"
    }

    async fn start(&self, size: u64, seed: u64) -> Result<Box<dyn LiveOrigin>, LiveError> {
        let key = format!("object-{}", NEXT_KEY.fetch_add(1, Ordering::Relaxed));
        let bytes = object(size, seed);
        let (addr, k, b) = (self.moto, key.clone(), bytes.clone());
        tokio::task::spawn_blocking(move || put(addr, &k, &b))
            .await
            .map_err(|e| LiveError::Unsupported(e.to_string()))?
            .map_err(LiveError::Unsupported)?;
        Ok(Box::new(MotoObject {
            moto: self.moto,
            key,
            seed,
            bytes: std::sync::Mutex::new(bytes),
        }))
    }
}

struct MotoObject {
    moto: SocketAddr,
    key: String,
    seed: u64,
    bytes: std::sync::Mutex<Vec<u8>>,
}

impl LiveOrigin for MotoObject {
    fn addr(&self) -> SocketAddr {
        self.moto
    }

    fn url_via(&self, via: SocketAddr) -> String {
        format!("s3+http://{via}/{BUCKET}/{}", self.key)
    }

    fn size(&self) -> u64 {
        self.bytes.lock().map_or(0, |b| b.len() as u64)
    }

    fn content(&self) -> Vec<u8> {
        self.bytes.lock().map(|b| b.clone()).unwrap_or_default()
    }

    fn can_replace(&self) -> bool {
        true
    }

    fn replace_object(&self) -> Result<(), LiveError> {
        let fresh = object(self.size(), self.seed.wrapping_add(0x5151));
        put(self.moto, &self.key, &fresh).map_err(LiveError::Unsupported)?;
        if let Ok(mut b) = self.bytes.lock() {
            *b = fresh;
        }
        Ok(())
    }
}
