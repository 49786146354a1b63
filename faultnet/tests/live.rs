//! Behaviour of the live proxy, asserted on counted bytes or with wide margins. Every test
//! runs on 127.0.0.1, port 0, under a 20 s timeout.

use faultnet::live::{Proxy, ProxyConfig, ProxyHandle, ScenarioOptions, Stats};
use faultnet::scenario::{Action, DieMode, Event, Link, Scenario, Target};
use faultnet::toxic::{Stream, Toxic, ToxicKind};
use faultnet::units::{ByteSize, Dur, Rate};
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test exceeded its time bound")
}

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

/// An origin that, per connection, reads until it has seen a `\n` (or EOF), records what it
/// read, sends `payload`, and closes.
async fn origin(payload: Vec<u8>) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let payload = payload.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            got.extend_from_slice(&buf[..n]);
                            if buf[..n].contains(&b'\n') {
                                break;
                            }
                        }
                    }
                }
                let _ = tx.send(got);
                let _ = s.write_all(&payload).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, rx)
}

fn link(capacity: f64) -> Link {
    Link::new("origin", Rate(capacity))
}

async fn proxy(upstream: SocketAddr, link: Link) -> ProxyHandle {
    Proxy::start(ProxyConfig::new(upstream.to_string(), link))
        .await
        .unwrap()
}

async fn request(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET\n").await.unwrap();
    s
}

/// Reads to EOF; returns the bytes and the error that ended the read, if any.
async fn read_all(s: &mut TcpStream) -> (Vec<u8>, Option<std::io::ErrorKind>) {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        match s.read(&mut buf).await {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return (out, Some(e.kind())),
        }
    }
}

/// Reads for `d`; returns the bytes read (stops early at EOF or error).
async fn read_for(s: &mut TcpStream, d: Duration) -> usize {
    let end = tokio::time::Instant::now() + d;
    let mut n = 0;
    let mut buf = vec![0u8; 65536];
    loop {
        match tokio::time::timeout_at(end, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return n,
            Ok(Ok(k)) => n += k,
        }
    }
}

async fn read_n(s: &mut TcpStream, n: usize) {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).await.unwrap();
}

fn event(at_bytes: u64, action: Action) -> Event {
    Event {
        link: "origin".into(),
        at_time: None,
        at_progress: None,
        at_bytes: Some(ByteSize(at_bytes)),
        action,
    }
}

#[tokio::test]
async fn bytes_forwarded_equal_bytes_sent() {
    bounded(async {
        let down = pattern(1_000_000, 7);
        // No `\n` inside: the origin stops reading at the first one.
        let up: Vec<u8> = pattern(300_000, 3)
            .into_iter()
            .map(|b| if b == b'\n' { b'x' } else { b })
            .collect();
        let (o, mut seen) = origin(down.clone()).await;
        for l in [link(f64::INFINITY), {
            let mut l = link(50e6);
            l.delay = Dur(Duration::from_millis(2));
            l.jitter = Dur(Duration::from_millis(3));
            l.slow_start = Dur(Duration::from_millis(20));
            l
        }] {
            let p = proxy(o, l).await;
            let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
            let mut body = up.clone();
            body.push(b'\n');
            s.write_all(&body).await.unwrap();
            let (got, err) = read_all(&mut s).await;
            assert_eq!(err, None);
            assert!(
                got == down,
                "downstream bytes differ ({} of {})",
                got.len(),
                down.len()
            );
            let at_origin = seen.recv().await.unwrap();
            assert!(at_origin == body, "upstream bytes differ");
            drop(s);
            let stats = p.shutdown().await;
            let l = &stats.links[0];
            assert_eq!(l.bytes_down, down.len() as u64);
            assert_eq!(l.bytes_up, body.len() as u64);
            assert_eq!(l.connections_opened, 1);
            assert_eq!(l.connections[0].bytes_down, down.len() as u64);
        }
    })
    .await
}

#[tokio::test]
async fn limit_data_cuts_the_stream_at_exactly_n_bytes() {
    bounded(async {
        let (o, _) = origin(pattern(500_000, 1)).await;
        let mut l = link(f64::INFINITY);
        l.toxics.push(Toxic::new(
            Stream::Downstream,
            ToxicKind::LimitData {
                bytes: ByteSize(123_457),
            },
        ));
        let p = proxy(o, l).await;
        let mut s = request(p.local_addr()).await;
        let (got, _) = read_all(&mut s).await;
        assert_eq!(got.len(), 123_457);
        assert!(got[..] == pattern(500_000, 1)[..123_457]);
    })
    .await
}

#[tokio::test]
async fn refuse_new_makes_new_connections_fail_while_open_ones_finish() {
    bounded(async {
        let (o, _) = origin(pattern(300_000, 2)).await;
        let p = proxy(o, link(1e6)).await;
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 1000).await;
        p.apply(Action::RefuseNew);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let e = TcpStream::connect(p.local_addr()).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        let (rest, err) = read_all(&mut s).await;
        assert_eq!((rest.len() + 1000, err), (300_000, None));
    })
    .await
}

#[tokio::test]
async fn die_reset_resets_open_connections_and_refuses_new_ones() {
    bounded(async {
        let (o, _) = origin(pattern(2_000_000, 2)).await;
        let p = proxy(o, link(500e3)).await;
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 10_000).await;
        p.apply(Action::Die {
            mode: DieMode::Reset,
        });
        let (_, err) = read_all(&mut s).await;
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(TcpStream::connect(p.local_addr()).await.is_err());
        let stats = p.shutdown().await;
        assert_eq!(stats.links[0].connections[0].end, "reset");
    })
    .await
}

#[tokio::test]
async fn die_close_ends_open_connections_with_a_clean_eof() {
    bounded(async {
        let (o, _) = origin(pattern(2_000_000, 2)).await;
        let p = proxy(o, link(500e3)).await;
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 10_000).await;
        p.apply(Action::Die {
            mode: DieMode::Close,
        });
        let (rest, err) = read_all(&mut s).await;
        assert_eq!(err, None);
        assert!(rest.len() + 10_000 < 2_000_000);
    })
    .await
}

#[tokio::test]
async fn die_hang_delivers_nothing_more_and_closes_nothing() {
    bounded(async {
        let (o, _) = origin(pattern(2_000_000, 2)).await;
        let p = proxy(o, link(500e3)).await;
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 10_000).await;
        p.apply(Action::Die {
            mode: DieMode::Hang,
        });
        // Whatever was already past the bottleneck may still arrive; then nothing, and no EOF.
        let _ = read_for(&mut s, Duration::from_millis(100)).await;
        let mut buf = [0u8; 1024];
        let r = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await;
        assert!(r.is_err(), "expected silence, got {r:?}");
        let mut fresh = request(p.local_addr()).await;
        let r = tokio::time::timeout(Duration::from_millis(300), fresh.read(&mut buf)).await;
        assert!(r.is_err(), "a new connection was answered: {r:?}");
        let stats = p.shutdown().await;
        let ends: Vec<&str> = stats.links[0]
            .connections
            .iter()
            .map(|c| c.end.as_str())
            .collect();
        assert_eq!(ends, ["hung", "hung"]);
    })
    .await
}

#[tokio::test]
async fn an_at_bytes_die_delivers_exactly_that_many_bytes() {
    bounded(async {
        let (o, _) = origin(pattern(1_000_000, 4)).await;
        let mut cfg = ProxyConfig::new(o.to_string(), link(20e6));
        cfg.events.push(event(
            100_000,
            Action::Die {
                mode: DieMode::Close,
            },
        ));
        let p = Proxy::start(cfg).await.unwrap();
        let mut s = request(p.local_addr()).await;
        let (got, err) = read_all(&mut s).await;
        assert_eq!((got.len(), err), (100_000, None));
        let stats = p.shutdown().await;
        assert_eq!(stats.events.len(), 1);
        assert_eq!(stats.events[0].trigger, "at_bytes=100000");
    })
    .await
}

#[tokio::test]
async fn truncate_next_cuts_the_next_response_short_and_closes() {
    bounded(async {
        let (o, _) = origin(pattern(400_000, 5)).await;
        let p = proxy(o, link(f64::INFINITY)).await;
        p.apply(Action::TruncateNext);
        let mut s = request(p.local_addr()).await;
        let (got, _) = read_all(&mut s).await;
        assert!(!got.is_empty() && got.len() < 400_000, "{}", got.len());
        // Only the next response: the one after is whole.
        let mut s = request(p.local_addr()).await;
        let (got, _) = read_all(&mut s).await;
        assert_eq!(got.len(), 400_000);
    })
    .await
}

#[tokio::test]
async fn two_streams_share_the_bottleneck_roughly_half_each() {
    bounded(async {
        let (o, _) = origin(pattern(4_000_000, 6)).await;
        let p = proxy(o, link(2e6)).await;
        let mut a = request(p.local_addr()).await;
        let mut b = request(p.local_addr()).await;
        let t = Duration::from_millis(800);
        let (na, nb) = tokio::join!(read_for(&mut a, t), read_for(&mut b, t));
        let total = (na + nb) as f64;
        // One bottleneck: the sum stays near 2 MB/s × 0.8 s, far from 2× that.
        assert!(
            total < 1.4 * 2e6 * 0.8,
            "sum {total} exceeds the shared capacity"
        );
        assert!(total > 0.2 * 2e6 * 0.8, "sum {total} is implausibly low");
        let share = na as f64 / total;
        assert!((0.25..=0.75).contains(&share), "a got {na}, b got {nb}");
    })
    .await
}

#[tokio::test]
async fn a_bandwidth_limited_stream_takes_at_least_size_over_rate() {
    bounded(async {
        let (o, _) = origin(pattern(500_000, 8)).await;
        let p = proxy(o, link(1e6)).await;
        let t0 = Instant::now();
        let mut s = request(p.local_addr()).await;
        let (got, _) = read_all(&mut s).await;
        assert_eq!(got.len(), 500_000);
        // 0.5 s at the cap; the burst allowance is 10 ms.
        assert!(
            t0.elapsed() >= Duration::from_millis(450),
            "{:?}",
            t0.elapsed()
        );
    })
    .await
}

#[tokio::test]
async fn latency_delays_the_first_byte_by_at_least_a_round_trip() {
    bounded(async {
        let (o, _) = origin(pattern(1000, 9)).await;
        let mut l = link(f64::INFINITY);
        l.delay = Dur(Duration::from_millis(50));
        let p = proxy(o, l).await;
        let mut s = TcpStream::connect(p.local_addr()).await.unwrap();
        let t0 = Instant::now();
        s.write_all(b"GET\n").await.unwrap();
        read_n(&mut s, 1).await;
        assert!(
            t0.elapsed() >= Duration::from_millis(100),
            "{:?}",
            t0.elapsed()
        );
    })
    .await
}

#[tokio::test]
async fn a_link_collapse_at_a_byte_count_cuts_the_rate() {
    bounded(async {
        let (o, _) = origin(pattern(3_000_000, 10)).await;
        let mut cfg = ProxyConfig::new(o.to_string(), link(2e6));
        cfg.events.push(event(
            200_000,
            Action::Collapse {
                fraction: 0.05,
                target: Target::Link,
            },
        ));
        let p = Proxy::start(cfg).await.unwrap();
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 200_000).await;
        let after = read_for(&mut s, Duration::from_millis(500)).await;
        // Collapsed: 0.05 × 2 MB/s × 0.5 s = 50 kB; uncollapsed would be 1 MB.
        assert!(after < 300_000, "{after} bytes in 0.5 s after the collapse");
        p.apply(Action::Restore {
            target: Target::Link,
        });
        let restored = read_for(&mut s, Duration::from_millis(500)).await;
        assert!(
            restored > after,
            "restore did not raise the rate ({after} then {restored})"
        );
    })
    .await
}

#[tokio::test]
async fn a_connection_collapse_holds_one_connection_and_leaves_the_rest_to_others() {
    bounded(async {
        let (o, _) = origin(pattern(4_000_000, 11)).await;
        let p = proxy(o, link(2e6)).await;
        let mut a = request(p.local_addr()).await;
        read_n(&mut a, 50_000).await;
        let mut b = request(p.local_addr()).await;
        read_n(&mut b, 10_000).await;
        p.apply(Action::Collapse {
            fraction: 0.05,
            target: Target::Connection,
        });
        let t = Duration::from_millis(600);
        let (na, nb) = tokio::join!(read_for(&mut a, t), read_for(&mut b, t));
        assert!(
            nb > 4 * na,
            "the oldest connection was not the one held: a {na}, b {nb}"
        );
    })
    .await
}

#[tokio::test]
async fn a_stall_lets_almost_nothing_through_for_its_duration() {
    bounded(async {
        let (o, _) = origin(pattern(3_000_000, 12)).await;
        let p = proxy(o, link(2e6)).await;
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 100_000).await;
        p.apply(Action::Stall {
            duration: Dur(Duration::from_millis(600)),
        });
        let during = read_for(&mut s, Duration::from_millis(300)).await;
        // Unstalled: 600 kB in 0.3 s. Only bytes already past the bottleneck may arrive.
        assert!(during < 200_000, "{during} bytes crossed a stalled link");
    })
    .await
}

#[tokio::test]
async fn progress_events_fire_at_their_fraction_and_excess_counts_bytes_beyond_the_object() {
    bounded(async {
        let (o, _) = origin(pattern(400_000, 13)).await;
        let mut cfg = ProxyConfig::new(o.to_string(), link(f64::INFINITY));
        cfg.object_size = Some(ByteSize(400_000));
        cfg.events.push(Event {
            link: "origin".into(),
            at_time: None,
            at_progress: Some(0.5),
            at_bytes: None,
            action: Action::ReplaceObject,
        });
        let p = Proxy::start(cfg).await.unwrap();
        let mut fired = p.subscribe();
        for _ in 0..2 {
            let mut s = request(p.local_addr()).await;
            let (got, _) = read_all(&mut s).await;
            assert_eq!(got.len(), 400_000);
        }
        let ev = fired.recv().await.unwrap();
        assert_eq!(ev.trigger, "at_progress=0.5");
        assert_eq!(ev.action, Action::ReplaceObject);
        let stats: Stats = p.shutdown().await;
        assert_eq!(stats.progress_bytes, 800_000);
        assert_eq!(stats.links[0].excess_bytes, Some(400_000));
        assert_eq!(stats.links[0].connections_opened, 2);
    })
    .await
}

#[tokio::test]
async fn an_at_time_event_fires_after_the_transfer_starts() {
    bounded(async {
        let (o, _) = origin(pattern(3_000_000, 14)).await;
        let mut cfg = ProxyConfig::new(o.to_string(), link(2e6));
        cfg.events.push(Event {
            link: "origin".into(),
            at_time: Some(Dur(Duration::from_millis(150))),
            at_progress: None,
            at_bytes: None,
            action: Action::Die {
                mode: DieMode::Close,
            },
        });
        let p = Proxy::start(cfg).await.unwrap();
        let mut s = request(p.local_addr()).await;
        let (got, err) = read_all(&mut s).await;
        assert_eq!(err, None);
        assert!(got.len() < 3_000_000);
        let stats = p.shutdown().await;
        assert_eq!(stats.events[0].trigger, "at_time=150ms");
        assert!(stats.events[0].at_ms >= 150);
    })
    .await
}

#[tokio::test]
async fn a_reset_peer_toxic_resets_the_connection() {
    bounded(async {
        let (o, _) = origin(pattern(3_000_000, 15)).await;
        let p = proxy(o, link(1e6)).await;
        let mut s = request(p.local_addr()).await;
        read_n(&mut s, 1000).await;
        p.set_toxic(Toxic::new(
            Stream::Downstream,
            ToxicKind::ResetPeer {
                timeout: Dur(Duration::from_millis(50)),
            },
        ))
        .unwrap();
        let (_, err) = read_all(&mut s).await;
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
    })
    .await
}

#[tokio::test]
async fn a_timeout_toxic_holds_data_then_closes() {
    bounded(async {
        let (o, _) = origin(pattern(10_000, 16)).await;
        let mut l = link(f64::INFINITY);
        l.toxics.push(Toxic::new(
            Stream::Downstream,
            ToxicKind::Timeout {
                timeout: Dur(Duration::from_millis(200)),
            },
        ));
        let p = proxy(o, l).await;
        let mut s = request(p.local_addr()).await;
        let (got, _) = read_all(&mut s).await;
        assert!(
            got.is_empty(),
            "{} bytes crossed a timeout toxic",
            got.len()
        );
    })
    .await
}

#[tokio::test]
async fn sliced_and_delayed_data_arrives_whole_and_in_order() {
    bounded(async {
        let payload = pattern(50_000, 17);
        let (o, _) = origin(payload.clone()).await;
        let mut l = link(f64::INFINITY);
        l.toxics.push(Toxic::new(
            Stream::Downstream,
            ToxicKind::Slicer {
                average_size: ByteSize(1000),
                size_variation: ByteSize(500),
                delay: Dur(Duration::from_micros(100)),
            },
        ));
        l.toxics.push(Toxic::new(
            Stream::Downstream,
            ToxicKind::Latency {
                latency: Dur(Duration::from_millis(5)),
                jitter: Dur(Duration::from_millis(5)),
            },
        ));
        l.toxics.push(Toxic::new(
            Stream::Downstream,
            ToxicKind::SlowClose {
                delay: Dur(Duration::from_millis(20)),
            },
        ));
        let p = proxy(o, l).await;
        let mut s = request(p.local_addr()).await;
        let (got, err) = read_all(&mut s).await;
        assert_eq!(err, None);
        assert!(got == payload);
    })
    .await
}

#[tokio::test]
async fn a_non_loopback_upstream_is_refused() {
    bounded(async {
        for up in ["10.1.2.3:80", "192.168.0.1:21", "8.8.8.8:53"] {
            let e = Proxy::start(ProxyConfig::new(up, link(1e6)))
                .await
                .err()
                .expect("a non-loopback upstream was accepted");
            assert!(e.to_string().contains("not a loopback address"), "{e}");
        }
        let (o, _) = origin(vec![1]).await;
        let by_name = format!("localhost:{}", o.port());
        assert!(Proxy::start(ProxyConfig::new(by_name, link(1e6)))
            .await
            .is_ok());
    })
    .await
}

#[tokio::test]
async fn a_seed_replays_the_same_share_weights() {
    bounded(async {
        let (o, _) = origin(vec![1, 2, 3]).await;
        let mut weights = Vec::new();
        for seed in [42, 42, 43] {
            let mut l = link(f64::INFINITY);
            l.share_spread = 0.5;
            let mut cfg = ProxyConfig::new(o.to_string(), l);
            cfg.seed = seed;
            let p = Proxy::start(cfg).await.unwrap();
            for _ in 0..3 {
                let mut s = request(p.local_addr()).await;
                read_all(&mut s).await;
            }
            let stats = p.shutdown().await;
            let w: Vec<f64> = stats.links[0]
                .connections
                .iter()
                .map(|c| c.weight)
                .collect();
            assert_eq!(w.len(), 3);
            weights.push(w);
        }
        assert_eq!(weights[0], weights[1]);
        assert_ne!(weights[0], weights[2]);
    })
    .await
}

#[tokio::test]
async fn a_scenario_starts_one_proxy_per_link_with_shared_progress() {
    bounded(async {
        let (a, _) = origin(pattern(100_000, 18)).await;
        let (b, _) = origin(pattern(100_000, 19)).await;
        let text = format!(
            r#"
name = "two"
object_size = "200kB"
[[link]]
name = "a"
capacity = "50MB/s"
upstream = "{a}"
[[link]]
name = "b"
capacity = "50MB/s"
upstream = "{b}"
[[event]]
link = "b"
at_progress = 0.75
kind = "refuse_new"
"#
        );
        let s = Scenario::from_toml(&text).unwrap();
        let p = Proxy::start_scenario(
            &s,
            ScenarioOptions {
                seed: 1,
                ftp: false,
            },
        )
        .await
        .unwrap();
        let addrs = p.local_addrs();
        assert_eq!(addrs.len(), 2);
        for (_, addr) in &addrs {
            let mut s = request(*addr).await;
            let (got, _) = read_all(&mut s).await;
            assert_eq!(got.len(), 100_000);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            TcpStream::connect(addrs[1].1).await.is_err(),
            "link b should refuse"
        );
        let stats = p.shutdown().await;
        assert_eq!(stats.link("a").unwrap().bytes_down, 100_000);
        assert_eq!(stats.progress_bytes, 200_000);
        assert_eq!(stats.events[0].link, "b");
    })
    .await
}
