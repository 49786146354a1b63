//! Transfers against the reference origin. Loopback and port 0 only; every wait is bounded
//! by a timeout; assertions are on bytes and counts, never on wall-clock figures.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hydra_core::{ByteRange, ConnId, FetchId};
use hydra_scheme::testing::{ranged_probe, silent::Silent};
use hydra_scheme::{
    Endpoint, ErrorKind, FetchEvent, FetchEventKind, FetchOutcome, FetchRequest, MemorySink, Probe,
    RangeBound, RangeWriter, Scheme, Sink, Validator,
};
use hydra_scheme_sftp::origin::{key_from_seed, Misbehaviour, Origin, OriginConfig, OriginHandle};
use hydra_scheme_sftp::{HostKeyPolicy, SftpAuth, SftpOptions, SftpScheme};
use tempfile::TempDir;

const LIMIT: Duration = Duration::from_secs(30);

/// A fresh directory under the system temp dir, unique per test, removed when dropped.
fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("hydra-sftp-{name}-"))
        .tempdir()
        .unwrap()
}

/// Options trusting exactly `origin`'s key (a known_hosts file holding its line).
fn trusting(origin: &OriginHandle, dir: &std::path::Path) -> SftpOptions {
    let kh = dir.join("known_hosts");
    std::fs::write(&kh, format!("{}\n", origin.known_hosts_line())).unwrap();
    SftpOptions {
        host_keys: HostKeyPolicy {
            known_hosts: Some(kh),
            accept_new: false,
        },
        ..SftpOptions::default()
    }
}

/// [`trusting`], with a fixed window of four 32 KiB reads: a shrink leaves a known few in flight.
fn four_reads_of_32k(origin: &OriginHandle, dir: &std::path::Path) -> SftpOptions {
    SftpOptions {
        read_size: 32 * 1024,
        max_read_size: 32 * 1024,
        window_initial: 4,
        window_min: 4,
        window_max: 4,
        ..trusting(origin, dir)
    }
}

fn endpoint(origin: &OriginHandle) -> Endpoint {
    Endpoint::parse(&origin.url_with_password("/data.bin")).unwrap()
}

type Events = Arc<Mutex<Vec<FetchEventKind>>>;

struct Fetch {
    bound: Arc<RangeBound>,
    sink: Arc<MemorySink>,
    events: Events,
    request: FetchRequest,
}

fn fetch_of(ep: &Endpoint, probe: &Probe, range: ByteRange, slot: u16) -> Fetch {
    let sink = Arc::new(MemorySink::new(probe.size as usize));
    let events: Events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let observer = Arc::new(move |e: FetchEvent| ev.lock().unwrap().push(e.kind));
    let (bound, writer) = RangeWriter::for_range(
        FetchId(u64::from(slot)),
        range,
        sink.clone() as Arc<dyn Sink>,
        observer,
    );
    Fetch {
        bound,
        sink,
        events,
        request: FetchRequest {
            endpoint: Arc::new(ep.clone()),
            expect: probe.clone(),
            slot: ConnId(slot),
            writer,
        },
    }
}

async fn run(scheme: &SftpScheme, req: FetchRequest) -> FetchOutcome {
    tokio::time::timeout(LIMIT, scheme.fetch(req))
        .await
        .expect("fetch must end within the limit")
}

async fn probe(scheme: &SftpScheme, ep: &Endpoint) -> Probe {
    tokio::time::timeout(LIMIT, scheme.probe(ep))
        .await
        .expect("probe must end within the limit")
        .expect("probe")
}

#[tokio::test]
async fn a_range_is_fetched_byte_exact_with_pipelined_reads() {
    let origin = Origin::start(OriginConfig {
        size: 3 << 20,
        seed: 7,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("exact");
    let dir = tmp.path();
    let scheme = SftpScheme::new(trusting(&origin, dir));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    assert_eq!(p.size, 3 << 20);
    assert!(p.ranged);
    assert!(matches!(p.validator, Some(Validator::Weak(_))));
    assert!(p.last_modified.is_some());

    let range = ByteRange::new(12_345, (3 << 20) - 777);
    let f = fetch_of(&ep, &p, range, 1);
    let outcome = run(&scheme, f.request).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    let got = f.sink.contents();
    assert_eq!(
        &got[range.lo as usize..range.hi as usize],
        &origin.content(range.lo, range.hi)[..]
    );
    assert_eq!(f.sink.written().len_bytes(), range.len());
    assert_eq!(f.sink.overlap_bytes(), 0);
    let stats = scheme.stats();
    // More than one read was needed, and they were pipelined on one session (the probe's).
    assert!(stats.reads_issued > 4, "{stats:?}");
    assert_eq!(origin.sessions_opened(), 1);
    assert_eq!(stats.sessions, 1);
    let ev = f.events.lock().unwrap().clone();
    assert_eq!(
        ev.first(),
        Some(&FetchEventKind::Connected { reused: true })
    );
    assert!(ev.contains(&FetchEventKind::FirstByte));
    // Bytes events are contiguous and in order.
    let mut at = range.lo;
    for e in &ev {
        if let FetchEventKind::Bytes { offset, len } = e {
            assert_eq!(*offset, at);
            at += len;
        }
    }
    assert_eq!(at, range.hi);
}

#[tokio::test]
async fn lowering_the_bound_stops_issuing_reads_and_the_session_is_reused() {
    let origin = Origin::start(OriginConfig {
        size: 8 << 20,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    // Slow replies, so that the shrink lands while the fetch is early in the range.
    origin.set(Misbehaviour {
        reply_delay: Some(Duration::from_millis(2)),
        ..Misbehaviour::default()
    });
    let tmp = temp_dir("shrink");
    let dir = tmp.path();
    let opts = four_reads_of_32k(&origin, dir);
    let scheme = SftpScheme::new(opts);
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    let f = fetch_of(&ep, &p, ByteRange::new(0, p.size), 1);
    let bound = f.bound.clone();
    let task = tokio::spawn({
        let scheme = Arc::new(scheme);
        let s2 = scheme.clone();
        async move { (run(&s2, f.request).await, s2) }
    });
    // Wait (bounded) until some bytes are claimed, then shrink.
    let mut tries = 0;
    while bound.claimed() < 64 * 1024 && tries < 3000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        tries += 1;
    }
    let eff = bound.lower(256 * 1024);
    let (outcome, scheme) = task.await.unwrap();
    assert!(matches!(outcome, FetchOutcome::Shrunk), "{outcome:?}");
    assert_eq!(f.sink.written().len_bytes(), eff);
    assert_eq!(
        &f.sink.contents()[..eff as usize],
        &origin.content(0, eff)[..]
    );
    // Reads are issued only below the bound: at most the window (4 reads of 32 KiB) past it.
    let stats = scheme.stats();
    let issued_bytes_cap = eff + 4 * 32 * 1024;
    assert!(
        stats.reads_issued * 32 * 1024 <= issued_bytes_cap + 32 * 1024,
        "{stats:?} eff {eff}"
    );
    // The session went back to the pool, and the next fetch reuses it (no new session).
    let f2 = fetch_of(&ep, &p, ByteRange::new(eff, eff + 100_000), 1);
    let outcome = run(&scheme, f2.request).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(
        &f2.sink.contents()[eff as usize..eff as usize + 100_000],
        &origin.content(eff, eff + 100_000)[..]
    );
    assert_eq!(origin.sessions_opened(), 1);
    assert_eq!(origin.connections_accepted(), 1);
    assert_eq!(
        f2.events.lock().unwrap().first(),
        Some(&FetchEventKind::Connected { reused: true })
    );
}

#[tokio::test]
async fn a_cancelled_fetch_ends_with_only_claimed_bytes_and_keeps_its_session_unless_abandoned() {
    // The engine abandons a fetch whose connection stalled or collapsed: a restart on that
    // slot must not be handed the same connection from the pool. A plain cancel (the end of a
    // transfer) keeps it.
    let origin = Origin::start(OriginConfig::default()).await.unwrap();
    origin.set(Misbehaviour {
        reply_delay: Some(Duration::from_millis(50)),
        ..Misbehaviour::default()
    });
    let tmp = temp_dir("abandon");
    let dir = tmp.path();
    let scheme = Arc::new(SftpScheme::new(trusting(&origin, dir)));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    for abandon in [false, true] {
        let f = fetch_of(&ep, &p, ByteRange::new(0, p.size), 2);
        let bound = f.bound.clone();
        let s2 = scheme.clone();
        let task = tokio::spawn(async move { run(&s2, f.request).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let eff = if abandon {
            bound.abandon()
        } else {
            bound.cancel()
        };
        let outcome = tokio::time::timeout(LIMIT, task).await.unwrap().unwrap();
        assert!(matches!(outcome, FetchOutcome::Cancelled), "{outcome:?}");
        assert_eq!(f.sink.written().len_bytes(), eff);
        assert_eq!(
            f.events.lock().unwrap().first(),
            Some(&FetchEventKind::Connected { reused: true }),
            "both fetches run on the probe's session"
        );
        let pooled = usize::from(!abandon);
        assert_eq!(scheme.idle_sessions(), pooled, "abandoned: {abandon}");
    }
}

#[tokio::test]
async fn short_reads_are_completed() {
    let origin = Origin::start(OriginConfig {
        size: 300_000,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    origin.set(Misbehaviour {
        short_reads: Some(5_000),
        ..Misbehaviour::default()
    });
    let tmp = temp_dir("short");
    let dir = tmp.path();
    let scheme = SftpScheme::new(trusting(&origin, dir));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    let range = ByteRange::new(1, 299_999);
    let f = fetch_of(&ep, &p, range, 1);
    let outcome = run(&scheme, f.request).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(
        &f.sink.contents()[1..299_999],
        &origin.content(1, 299_999)[..]
    );
    assert_eq!(f.sink.overlap_bytes(), 0);
    assert!(scheme.stats().short_reads > 0);
}

#[tokio::test]
async fn a_replaced_file_is_an_error() {
    let origin = Origin::start(OriginConfig::default()).await.unwrap();
    let tmp = temp_dir("replaced");
    let dir = tmp.path();
    let scheme = SftpScheme::new(trusting(&origin, dir));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    origin.replace_object(99, 1_800_000_000);
    let f = fetch_of(&ep, &p, ByteRange::new(0, p.size), 1);
    let outcome = run(&scheme, f.request).await;
    let err = outcome.error().expect("must fail");
    assert!(
        matches!(err.kind, ErrorKind::ObjectChanged { .. }),
        "{err:?}"
    );
    assert_eq!(err.failure_kind(), hydra_core::Failure::Fatal);
    // Not one byte of the new version was written.
    assert_eq!(f.sink.written().len_bytes(), 0);
}

#[tokio::test]
async fn an_unknown_host_key_is_refused_with_its_fingerprint() {
    let origin = Origin::start(OriginConfig::default()).await.unwrap();
    let tmp = temp_dir("unknown");
    let dir = tmp.path();
    let kh = dir.join("known_hosts");
    let scheme = SftpScheme::new(SftpOptions {
        host_keys: HostKeyPolicy {
            known_hosts: Some(kh.clone()),
            accept_new: false,
        },
        ..SftpOptions::default()
    });
    let err = tokio::time::timeout(LIMIT, scheme.probe(&endpoint(&origin)))
        .await
        .unwrap()
        .expect_err("unknown key must be refused");
    let shown = err.to_string();
    assert!(shown.contains(&origin.fingerprint()), "{shown}");
    assert!(origin.fingerprint().starts_with("SHA256:"));
    assert_eq!(err.failure_kind(), hydra_core::Failure::Fatal);
    assert!(!kh.exists(), "nothing may be recorded without accept_new");
}

#[tokio::test]
async fn a_changed_host_key_is_refused() {
    let origin = Origin::start(OriginConfig {
        host_key_seed: 2,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("changed");
    let dir = tmp.path();
    let kh = dir.join("known_hosts");
    // Record another ed25519 key for the same [host]:port.
    let other = key_from_seed(1).public_key().to_openssh().unwrap();
    let line = format!(
        "[{}]:{} {other}\n",
        origin.addr().ip(),
        origin.addr().port()
    );
    std::fs::write(&kh, &line).unwrap();
    // Even accept_new does not accept a changed key.
    let scheme = SftpScheme::new(SftpOptions {
        host_keys: HostKeyPolicy {
            known_hosts: Some(kh.clone()),
            accept_new: true,
        },
        ..SftpOptions::default()
    });
    let err = tokio::time::timeout(LIMIT, scheme.probe(&endpoint(&origin)))
        .await
        .unwrap()
        .expect_err("changed key must be refused");
    let shown = err.to_string();
    assert!(shown.contains("CHANGED"), "{shown}");
    assert!(shown.contains(&origin.fingerprint()), "{shown}");
    assert_eq!(std::fs::read_to_string(&kh).unwrap(), line);
}

#[tokio::test]
async fn accept_new_records_the_key() {
    let origin = Origin::start(OriginConfig::default()).await.unwrap();
    let tmp = temp_dir("accept-new");
    let dir = tmp.path();
    let kh = dir.join("sub").join("known_hosts");
    let opts = SftpOptions {
        host_keys: HostKeyPolicy {
            known_hosts: Some(kh.clone()),
            accept_new: true,
        },
        ..SftpOptions::default()
    };
    let scheme = SftpScheme::new(opts.clone());
    probe(&scheme, &endpoint(&origin)).await;
    let recorded = std::fs::read_to_string(&kh).unwrap();
    assert_eq!(recorded.trim(), origin.known_hosts_line().trim());
    // A second scheme without accept_new now trusts it.
    let strict = SftpScheme::new(SftpOptions {
        host_keys: HostKeyPolicy {
            known_hosts: Some(kh),
            accept_new: false,
        },
        ..opts
    });
    probe(&strict, &endpoint(&origin)).await;
}

#[tokio::test]
async fn public_key_authentication_works_with_an_encrypted_key() {
    let client_key = key_from_seed(42);
    let origin = Origin::start(OriginConfig {
        authorized_keys: vec![client_key.public_key().clone()],
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("pubkey");
    let dir = tmp.path();
    let key_path = dir.join("id_ed25519");
    let encrypted = client_key
        .encrypt(&mut rand::rng(), "key-passphrase")
        .unwrap();
    std::fs::write(
        &key_path,
        encrypted
            .to_openssh(russh_keys_line_ending())
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    let base = trusting(&origin, dir);
    // URL with a user but no password: only the key can succeed.
    let ep = Endpoint::parse(&format!(
        "sftp://{}@{}/data.bin",
        origin.user(),
        origin.addr()
    ))
    .unwrap();
    let without = SftpScheme::new(SftpOptions {
        auth: SftpAuth {
            identity_files: vec![key_path.clone()],
            passphrase: None,
            ..SftpAuth::default()
        },
        ..base.clone()
    });
    let err = tokio::time::timeout(LIMIT, without.probe(&ep))
        .await
        .unwrap()
        .expect_err("an encrypted key without passphrase is unusable");
    assert!(err.to_string().contains("authentication failed"), "{err}");
    let with = SftpScheme::new(SftpOptions {
        auth: SftpAuth {
            identity_files: vec![key_path],
            passphrase: Some("key-passphrase".into()),
            ..SftpAuth::default()
        },
        ..base
    });
    let p = probe(&with, &ep).await;
    assert_eq!(p.size, origin.size());
}

fn russh_keys_line_ending() -> hydra_scheme_sftp::origin::LineEnding {
    hydra_scheme_sftp::origin::LineEnding::LF
}

#[tokio::test]
async fn credentials_never_appear_in_errors() {
    let origin = Origin::start(OriginConfig::default()).await.unwrap();
    let tmp = temp_dir("creds");
    let dir = tmp.path();
    let scheme = SftpScheme::new(SftpOptions {
        auth: SftpAuth {
            passphrase: Some("pass-phrase-xyz".into()),
            identity_files: vec![dir.join("no-such-key")],
            ..SftpAuth::default()
        },
        ..trusting(&origin, dir)
    });
    let ep = Endpoint::parse(&format!(
        "sftp://{}:wrong-secret-123@{}/data.bin",
        origin.user(),
        origin.addr()
    ))
    .unwrap();
    let err = tokio::time::timeout(LIMIT, scheme.probe(&ep))
        .await
        .unwrap()
        .expect_err("wrong password must fail");
    let shown = format!("{err} {err:?} {scheme:?}");
    for secret in ["wrong-secret-123", "pass-phrase-xyz", origin.password()] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("authentication failed"), "{shown}");
    // A failed fetch says nothing secret either.
    let good = SftpScheme::new(trusting(&origin, dir));
    let p = probe(&good, &endpoint(&origin)).await;
    let f = fetch_of(&ep, &p, ByteRange::new(0, 10), 1);
    let outcome = run(&scheme, f.request).await;
    let shown = format!("{outcome:?}");
    assert!(outcome.error().is_some());
    assert!(!shown.contains("wrong-secret-123"), "{shown}");
}

#[tokio::test]
async fn a_dropped_connection_is_a_transient_error_and_keeps_written_bytes() {
    let origin = Origin::start(OriginConfig {
        size: 2 << 20,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("drop");
    let dir = tmp.path();
    let scheme = SftpScheme::new(SftpOptions {
        request_timeout: Duration::from_secs(5),
        ..trusting(&origin, dir)
    });
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    origin.set(Misbehaviour {
        drop_after_bytes: Some(500_000),
        ..Misbehaviour::default()
    });
    let f = fetch_of(&ep, &p, ByteRange::new(0, p.size), 1);
    let outcome = run(&scheme, f.request).await;
    let err = outcome.error().expect("must fail");
    assert_eq!(
        err.failure_kind(),
        hydra_core::Failure::Transient,
        "{err:?}"
    );
    let written = f.sink.written().len_bytes();
    assert!(written <= 500_000, "{written}");
    assert_eq!(
        &f.sink.contents()[..written as usize],
        &origin.content(0, written)[..]
    );
    // The broken session was not pooled: the next fetch dials anew and completes.
    origin.set(Misbehaviour::default());
    let f2 = fetch_of(&ep, &p, ByteRange::new(written, p.size), 1);
    let outcome = run(&scheme, f2.request).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(origin.connections_accepted(), 2);
}

#[tokio::test]
async fn a_missing_file_is_a_fatal_status() {
    let origin = Origin::start(OriginConfig::default()).await.unwrap();
    let tmp = temp_dir("missing");
    let dir = tmp.path();
    let scheme = SftpScheme::new(trusting(&origin, dir));
    let ep = Endpoint::parse(&origin.url_with_password("/missing/file")).unwrap();
    let err = tokio::time::timeout(LIMIT, scheme.probe(&ep))
        .await
        .unwrap()
        .expect_err("missing");
    assert!(
        matches!(
            err.kind,
            ErrorKind::Rejected {
                protocol: "SFTP",
                code: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.failure_kind(), hydra_core::Failure::Fatal);
}

#[tokio::test]
async fn a_prepared_session_carries_the_probe_without_a_new_handshake() {
    let origin = Origin::start(OriginConfig {
        size: 1 << 20,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("prepare");
    let scheme = SftpScheme::new(trusting(&origin, tmp.path()));
    let ep = endpoint(&origin);
    tokio::time::timeout(LIMIT, scheme.prepare(&ep))
        .await
        .expect("bounded")
        .expect("prepare");
    assert_eq!(scheme.idle_sessions(), 1);
    assert_eq!(scheme.pooled_sessions(&ep), Some(1));
    assert_eq!(origin.connections_accepted(), 1);
    let p = probe(&scheme, &ep).await;
    assert_eq!(p.size, 1 << 20);
    assert_eq!(origin.connections_accepted(), 1);
    assert_eq!(origin.sessions_opened(), 1);
}

#[tokio::test]
async fn a_fetch_is_not_queued_behind_abandoned_reads_while_a_clear_session_is_idle() {
    // Replies on one channel come in order, so a fetch on a session whose earlier fetch left
    // reads in flight past its lowered bound waits for all of them (on a collapsed connection,
    // longer than the stall timeout: the conformance collapse scenario reclaimed such a fetch
    // five times and declared the source dead). With a session idle and clear, the fetch
    // takes that one, even though the draining one is its slot's.
    let origin = Origin::start(OriginConfig {
        size: 8 << 20,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("draining");
    let opts = four_reads_of_32k(&origin, tmp.path());
    let scheme = Arc::new(SftpScheme::new(opts));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    // Each read is answered 150 ms after the one before it on its channel.
    origin.set(Misbehaviour {
        reply_delay: Some(Duration::from_millis(150)),
        ..Misbehaviour::default()
    });
    let log: Arc<Mutex<Vec<(u8, FetchEventKind)>>> = Arc::new(Mutex::new(Vec::new()));
    let request = |tag: u8, range: ByteRange| {
        let l = log.clone();
        let observer = Arc::new(move |e: FetchEvent| l.lock().unwrap().push((tag, e.kind)));
        let sink = Arc::new(MemorySink::new(p.size as usize));
        let (bound, writer) = RangeWriter::for_range(
            FetchId(u64::from(tag)),
            range,
            sink as Arc<dyn Sink>,
            observer,
        );
        let req = FetchRequest {
            endpoint: Arc::new(ep.clone()),
            expect: p.clone(),
            slot: ConnId(1),
            writer,
        };
        (bound, req)
    };
    let (bound, first) = request(1, ByteRange::new(0, p.size));
    let task = tokio::spawn({
        let scheme = scheme.clone();
        async move { run(&scheme, first).await }
    });
    let mut tries = 0;
    while bound.claimed() == 0 && tries < 5000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        tries += 1;
    }
    // Everything past the first reply is abandoned: the rest of its window drains.
    let eff = bound.lower(bound.claimed());
    let out = task.await.unwrap();
    assert!(matches!(out, FetchOutcome::Shrunk), "{out:?}");
    tokio::time::timeout(LIMIT, scheme.prepare(&ep))
        .await
        .expect("prepared in time")
        .expect("prepared");
    let (_, second) = request(2, ByteRange::new(eff, eff + 32 * 1024));
    let out = run(&scheme, second).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    // The second fetch's bytes came before the first one's abandoned reads had all drained:
    // wait (bounded) for a waste event of the first after the second's first bytes.
    let drained_after = || {
        let l = log.lock().unwrap();
        let second_bytes = l
            .iter()
            .position(|(tag, k)| *tag == 2 && matches!(k, FetchEventKind::Bytes { .. }));
        second_bytes.is_some_and(|i| {
            l[i..]
                .iter()
                .any(|(tag, k)| *tag == 1 && matches!(k, FetchEventKind::Waste { .. }))
        })
    };
    let mut tries = 0;
    while !drained_after() && tries < 300 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        tries += 1;
    }
    assert!(drained_after(), "{:?}", log.lock().unwrap());
}

#[tokio::test]
async fn shifted_reads_answer_each_read_with_the_right_length_from_the_wrong_place() {
    let origin = Origin::start(OriginConfig {
        size: 1 << 20,
        seed: 5,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    origin.set(Misbehaviour {
        shifted_reads: Some(7),
        ..Misbehaviour::default()
    });
    let tmp = temp_dir("shifted");
    let scheme = SftpScheme::new(trusting(&origin, tmp.path()));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    let range = ByteRange::new(10_000, 300_000);
    let f = fetch_of(&ep, &p, range, 1);
    let outcome = run(&scheme, f.request).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    let got = &f.sink.contents()[range.lo as usize..range.hi as usize];
    assert_ne!(got, &origin.content(range.lo, range.hi)[..]);
    assert_eq!(got, &origin.content(range.lo + 7, range.hi + 7)[..]);
}

#[tokio::test]
async fn a_trickle_answers_reads_past_its_burst_with_a_tenth_of_its_rate_each() {
    let origin = Origin::start(OriginConfig {
        size: 1 << 20,
        seed: 6,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let tmp = temp_dir("trickle");
    let scheme = SftpScheme::new(four_reads_of_32k(&origin, tmp.path()));
    let ep = endpoint(&origin);
    let p = probe(&scheme, &ep).await;
    origin.set(Misbehaviour {
        trickle: Some(hydra_scheme_sftp::origin::Trickle {
            after: 64 * 1024,
            rate: 100_000,
        }),
        ..Misbehaviour::default()
    });
    let (reads, bytes) = (origin.reads_served(), origin.bytes_served());
    // 64 KiB in two full reads, then 40 000 bytes in replies of 10 000 at most.
    let range = ByteRange::new(0, 64 * 1024 + 40_000);
    let f = fetch_of(&ep, &p, range, 1);
    let outcome = run(&scheme, f.request).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(
        &f.sink.contents()[..range.hi as usize],
        &origin.content(0, range.hi)[..]
    );
    assert_eq!(origin.bytes_served() - bytes, range.len());
    assert!(
        origin.reads_served() - reads >= 2 + 4,
        "{} reads for {} bytes",
        origin.reads_served() - reads,
        range.len()
    );
}

#[tokio::test]
async fn a_fetch_cancelled_while_its_session_opens_ends_without_it() {
    // A server that accepts and never sends its SSH banner (one serving one connection at a
    // time holds the rest so). A fetch cancelled while it waits ends as the engine asked,
    // not with the connect timeout, here longer than the test's bound.
    let silent = Silent::start().await.unwrap();
    let scheme = SftpScheme::new(SftpOptions {
        connect_timeout: Duration::from_secs(120),
        ..SftpOptions::default()
    });
    let ep = Endpoint::parse(&format!("sftp://u:p@{}/data.bin", silent.addr())).unwrap();
    let f = fetch_of(&ep, &ranged_probe(100), ByteRange::new(10, 20), 0);
    let bound = f.bound.clone();
    let task = tokio::spawn(async move { scheme.fetch(f.request).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    bound.abandon();
    let out = tokio::time::timeout(LIMIT, task)
        .await
        .expect("the fetch ended within its bound")
        .unwrap();
    assert!(matches!(out, FetchOutcome::Cancelled), "{out:?}");
}
