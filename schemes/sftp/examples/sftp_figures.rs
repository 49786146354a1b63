//! Measurements behind the SFTP scheme's defaults, printed as tables (nothing asserted).
//!
//! ```text
//! cargo run --release -p hydra-scheme-sftp --features origin --example sftp_figures -- [RTT_MS] [MIB]
//! ```
//!
//! Every figure runs the reference origin behind a faultnet proxy whose link adds `RTT_MS/2`
//! each way (default 20 ms RTT); `MIB` (default 16) is the object size.
//!
//! 1. **Pipelining**: one range of the whole object on one session, with one 32 KiB read at
//!    a time, fixed windows, and the adaptive default.
//! 2. **Session per connection vs channels sharing one**: the cost of each extra session
//!    (time to `Connected`, wire bytes) and the throughput of 4 concurrent fetches, with and
//!    without a per-connection rate cap (faultnet's `bandwidth` toxic, standing for per-flow
//!    shaping and per-flow congestion windows).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use faultnet::live::{Proxy, ProxyConfig, ProxyHandle};
use faultnet::scenario::Link;
use faultnet::toxic::{Stream, Toxic, ToxicKind};
use faultnet::units::{Dur, Rate};
use hydra_core::{ByteRange, ConnId, FetchId};
use hydra_scheme::{
    Endpoint, FetchEvent, FetchEventKind, FetchOutcome, FetchRequest, MemorySink, Probe,
    RangeWriter, Scheme, Sink,
};
use hydra_scheme_sftp::origin::{Origin, OriginConfig, OriginHandle};
use hydra_scheme_sftp::{HostKeyPolicy, SessionMode, SftpOptions, SftpScheme};

struct Bench {
    origin: OriginHandle,
    proxy: ProxyHandle,
    known_hosts: std::path::PathBuf,
}

impl Bench {
    async fn new(size: u64, rtt: Duration, per_conn_cap: Option<f64>) -> Bench {
        let origin = Origin::start(OriginConfig {
            size,
            ..OriginConfig::default()
        })
        .await
        .expect("origin");
        let mut link = Link::new("sftp", Rate(f64::INFINITY));
        link.delay = Dur(rtt / 2);
        if let Some(rate) = per_conn_cap {
            link.toxics.push(Toxic::new(
                Stream::Downstream,
                ToxicKind::Bandwidth { rate: Rate(rate) },
            ));
        }
        let proxy = Proxy::start(ProxyConfig::new(origin.addr().to_string(), link))
            .await
            .expect("proxy");
        // The client dials the proxy, so the known_hosts entry names the proxy's address.
        let known_hosts = std::env::temp_dir().join(format!(
            "hydra-sftp-figures-{}-{}",
            std::process::id(),
            proxy.local_addr().port()
        ));
        let a = proxy.local_addr();
        let key = origin.host_key().to_openssh().expect("key");
        std::fs::write(&known_hosts, format!("[{}]:{} {key}\n", a.ip(), a.port())).expect("kh");
        Bench {
            origin,
            proxy,
            known_hosts,
        }
    }

    fn endpoint(&self) -> Endpoint {
        let a = self.proxy.local_addr();
        Endpoint::parse(&format!("sftp://{a}/data.bin"))
            .expect("url")
            .with_credentials(self.origin.user(), self.origin.password())
    }

    fn options(&self) -> SftpOptions {
        SftpOptions {
            host_keys: HostKeyPolicy {
                known_hosts: Some(self.known_hosts.clone()),
                accept_new: false,
            },
            ..SftpOptions::default()
        }
    }

    fn wire_bytes(&self) -> u64 {
        let s = self.proxy.stats();
        s.links.iter().map(|l| l.bytes_up + l.bytes_down).sum()
    }
}

/// One fetch; returns its outcome, the sink and the time from start to `Connected`.
async fn fetch(
    scheme: &SftpScheme,
    ep: &Endpoint,
    probe: &Probe,
    range: ByteRange,
    slot: u16,
) -> (FetchOutcome, Arc<MemorySink>, Duration) {
    let sink = Arc::new(MemorySink::new(probe.size as usize));
    let t0 = Instant::now();
    let connected = Arc::new(Mutex::new(None));
    let c = connected.clone();
    let observer = Arc::new(move |e: FetchEvent| {
        if let FetchEventKind::Connected { .. } = e.kind {
            c.lock().unwrap().get_or_insert(t0.elapsed());
        }
    });
    let (_bound, writer) = RangeWriter::for_range(
        FetchId(u64::from(slot)),
        range,
        sink.clone() as Arc<dyn Sink>,
        observer,
    );
    let req = FetchRequest {
        endpoint: Arc::new(ep.clone()),
        expect: probe.clone(),
        slot: ConnId(slot),
        writer,
    };
    let outcome = tokio::time::timeout(Duration::from_secs(300), scheme.fetch(req))
        .await
        .expect("fetch within 300 s");
    let conn = connected.lock().unwrap().unwrap_or_default();
    (outcome, sink, conn)
}

fn mib_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

async fn pipelining(size: u64, rtt: Duration) {
    println!(
        "\n## Pipelining: one session, one range of {} MiB, RTT {} ms\n",
        size >> 20,
        rtt.as_millis()
    );
    println!("| reads | read size | MiB/s | reads issued |");
    println!("|---|---|---|---|");
    let cases: [(&str, usize, usize, usize, u32); 5] = [
        ("1 at a time", 1, 1, 1, 32 * 1024),
        ("fixed 16", 16, 16, 16, 32 * 1024),
        ("fixed 64", 64, 64, 64, 32 * 1024),
        ("adaptive 16..64 (default)", 16, 16, 64, 255 * 1024),
        ("adaptive 16..256", 16, 16, 256, 255 * 1024),
    ];
    for (name, init, min, max, max_read) in cases {
        let b = Bench::new(size, rtt, None).await;
        let scheme = SftpScheme::new(SftpOptions {
            window_initial: init,
            window_min: min,
            window_max: max,
            max_read_size: max_read,
            ..b.options()
        });
        let ep = b.endpoint();
        let probe = scheme.probe(&ep).await.expect("probe");
        // One read at a time over the whole object takes size/32K RTTs: cap it at 2 MiB.
        let len = if max == 1 { size.min(2 << 20) } else { size };
        let t = Instant::now();
        let (o, sink, _) = fetch(&scheme, &ep, &probe, ByteRange::new(0, len), 1).await;
        let d = t.elapsed();
        assert!(matches!(o, FetchOutcome::Completed), "{o:?}");
        assert_eq!(sink.written().len_bytes(), len);
        let read = if max_read == 32 * 1024 {
            "32 KiB".to_owned()
        } else {
            "32 KiB → 255 KiB".to_owned()
        };
        println!(
            "| {name} | {read} | {:.1} | {} |",
            mib_s(len, d),
            scheme.stats().reads_issued
        );
    }
}

async fn sharing(size: u64, rtt: Duration, cap: Option<f64>) {
    let label = match cap {
        Some(c) => format!("per-connection cap {:.0} MiB/s", c / 1048576.0),
        None => "no per-connection cap".to_owned(),
    };
    println!(
        "\n## Session per SSH connection vs channels on one: 4 concurrent fetches of {} MiB, RTT {} ms, {label}\n",
        size >> 22,
        rtt.as_millis()
    );
    println!("| mode | SSH connections | sessions | extra session setup (mean, ms) | setup bytes per extra session | aggregate MiB/s | MiB/s per setup KiB |");
    println!("|---|---|---|---|---|---|---|");
    for (name, mode) in [
        ("dedicated (default)", SessionMode::Dedicated),
        (
            "shared, 4 channels",
            SessionMode::Shared {
                channels_per_connection: 4,
            },
        ),
    ] {
        let b = Bench::new(size, rtt, cap).await;
        let scheme = Arc::new(SftpScheme::new(SftpOptions {
            sessions: mode,
            ..b.options()
        }));
        let ep = b.endpoint();
        let probe = scheme.probe(&ep).await.expect("probe");
        // Setup: 4 one-byte fetches at once: one takes the probe's session, three open new
        // ones. Wire bytes minus the 4 payload bytes are the setup cost of three sessions.
        let before = b.wire_bytes();
        let mut tasks = Vec::new();
        for slot in 0..4u16 {
            let (s, e, p) = (scheme.clone(), ep.clone(), probe.clone());
            let lo = u64::from(slot);
            tasks.push(tokio::spawn(async move {
                fetch(&s, &e, &p, ByteRange::new(lo, lo + 1), slot).await
            }));
        }
        let mut connects = Vec::new();
        for t in tasks {
            let (o, _, c) = t.await.expect("task");
            assert!(matches!(o, FetchOutcome::Completed), "{o:?}");
            connects.push(c);
        }
        connects.sort();
        let extra: Vec<Duration> = connects.into_iter().skip(1).collect();
        let mean_ms = extra.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / 3.0;
        tokio::time::sleep(Duration::from_millis(50) + rtt).await;
        let setup_bytes = (b.wire_bytes() - before) / 3;
        // Throughput: 4 concurrent fetches of a quarter each, on the 4 pooled sessions.
        let quarter = size / 4;
        let t = Instant::now();
        let mut tasks = Vec::new();
        for slot in 0..4u16 {
            let (s, e, p) = (scheme.clone(), ep.clone(), probe.clone());
            let lo = u64::from(slot) * quarter;
            tasks.push(tokio::spawn(async move {
                fetch(&s, &e, &p, ByteRange::new(lo, lo + quarter), slot).await
            }));
        }
        for t in tasks {
            let (o, _, _) = t.await.expect("task");
            assert!(matches!(o, FetchOutcome::Completed), "{o:?}");
        }
        let d = t.elapsed();
        let st = scheme.stats();
        let rate = mib_s(4 * quarter, d);
        println!(
            "| {name} | {} | {} | {mean_ms:.1} | {setup_bytes} | {rate:.1} | {:.2} |",
            st.ssh_connections,
            st.sessions,
            rate / (setup_bytes as f64 / 1024.0)
        );
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rtt_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let mib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let rtt = Duration::from_millis(rtt_ms);
    let size = mib << 20;
    println!("# hydra-scheme-sftp figures (RTT {rtt_ms} ms, object {mib} MiB)");
    pipelining(size, rtt).await;
    sharing(size, rtt, None).await;
    sharing(size, rtt, Some(4.0 * 1048576.0)).await;
}
