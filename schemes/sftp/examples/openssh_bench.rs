//! A benchmark driver: one whole-object fetch on one SFTP session with a chosen
//! window and read size, against an external server (`bench/sftp-openssh.sh` runs it against
//! OpenSSH's sftp-server behind faultnet, next to OpenSSH's `sftp`). The `hydra` binary has
//! no flag for the pipeline depth, so the "one read at a time" arm runs the library here.
//!
//! Configured by the environment (`HYDRA_SFTP_BENCH_URL` is required):
//!
//! ```text
//! HYDRA_SFTP_BENCH_URL=sftp://user@127.0.0.1:PORT/path  HYDRA_SFTP_BENCH_OUT=FILE \
//! HYDRA_SFTP_BENCH_KNOWN_HOSTS=FILE  HYDRA_SFTP_BENCH_IDENTITY=KEY \
//! HYDRA_SFTP_BENCH_WINDOW=1 | MIN..MAX      (outstanding reads; default 16..64)
//! HYDRA_SFTP_BENCH_READ=LEN | FIRST..MAX    (read size in bytes; default 32768..261120)
//! cargo run --release -p hydra-scheme-sftp --example openssh_bench
//! ```
//!
//! Prints one line `bench: bytes=… seconds=… reads=… sessions=…` (seconds from before the
//! probe to the end of the fetch) and exits non-zero unless the fetch completed byte for byte.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hydra_core::{ByteRange, ConnId, FetchId};
use hydra_scheme::{
    Endpoint, FetchOutcome, FetchRequest, FileSink, NoObserver, RangeWriter, Scheme, Sink,
};
use hydra_scheme_sftp::{HostKeyPolicy, SftpAuth, SftpOptions, SftpScheme};

/// "A" → (A, A); "A..B" → (A, B).
fn pair(s: &str) -> (u64, u64) {
    let (a, b) = s.split_once("..").unwrap_or((s, s));
    let a = a.trim().parse().expect("a number");
    let b = b.trim().parse().expect("a number");
    assert!(a >= 1 && a <= b, "want 1 <= A <= B, got {s}");
    (a, b)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(url) = env("HYDRA_SFTP_BENCH_URL") else {
        eprintln!("openssh_bench: set HYDRA_SFTP_BENCH_URL (see the file's header)");
        std::process::exit(2);
    };
    let out = PathBuf::from(env("HYDRA_SFTP_BENCH_OUT").expect("HYDRA_SFTP_BENCH_OUT"));
    let (wmin, wmax) = pair(&env("HYDRA_SFTP_BENCH_WINDOW").unwrap_or_else(|| "16..64".into()));
    let (rfirst, rmax) =
        pair(&env("HYDRA_SFTP_BENCH_READ").unwrap_or_else(|| "32768..261120".into()));
    let options = SftpOptions {
        host_keys: HostKeyPolicy {
            known_hosts: env("HYDRA_SFTP_BENCH_KNOWN_HOSTS").map(PathBuf::from),
            accept_new: false,
        },
        auth: SftpAuth {
            identity_files: env("HYDRA_SFTP_BENCH_IDENTITY")
                .map(PathBuf::from)
                .into_iter()
                .collect(),
            ..SftpAuth::default()
        },
        window_initial: wmin as usize,
        window_min: wmin as usize,
        window_max: wmax as usize,
        read_size: u32::try_from(rfirst).expect("read size"),
        max_read_size: u32::try_from(rmax).expect("read size"),
        ..SftpOptions::default()
    };
    let limit = Duration::from_secs(600);
    let scheme = SftpScheme::new(options);
    let ep = Endpoint::parse(&url).expect("url");
    let t0 = Instant::now();
    let probe = tokio::time::timeout(limit, scheme.probe(&ep))
        .await
        .expect("probe within the limit")
        .expect("probe");
    let size = probe.size;
    let sink = Arc::new(FileSink::create(&out, size).expect("output file"));
    let (_bound, writer) = RangeWriter::for_range(
        FetchId(0),
        ByteRange::new(0, size),
        sink.clone() as Arc<dyn Sink>,
        Arc::new(NoObserver),
    );
    let req = FetchRequest {
        endpoint: Arc::new(ep),
        expect: probe,
        slot: ConnId(0),
        writer,
    };
    let outcome = tokio::time::timeout(limit, scheme.fetch(req))
        .await
        .expect("fetch within the limit");
    let secs = t0.elapsed().as_secs_f64();
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(sink.written().len_bytes(), size);
    let stats = scheme.stats();
    println!(
        "bench: bytes={size} seconds={secs:.3} reads={} sessions={} window={wmin}..{wmax} read={rfirst}..{rmax}",
        stats.reads_issued, stats.sessions
    );
}
