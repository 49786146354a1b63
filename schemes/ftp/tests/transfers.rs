//! Transfers against the libunftp reference origin and the scripted server. Loopback only,
//! port 0, every wait bounded; assertions on bytes, counts and orderings only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::{
    ByteRange, ConnId, Endpoint, ErrorKind, Failure, FetchEvent, FetchEventKind, FetchId,
    FetchOutcome, FetchRequest, MemorySink, Probe, RangeBound, RangeSet, RangeWriter, Scheme, Sink,
};
use hydra_scheme_ftp::origin::{
    object_bytes, AbortOrder, MlstReply, Origin, OriginConfig, Script, Scripted,
};
use hydra_scheme_ftp::{FtpOptions, FtpScheme, Passive, PasvHost, StopMethod};

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("step exceeded its bound")
}

fn options() -> FtpOptions {
    FtpOptions {
        connect_timeout: Duration::from_secs(5),
        reply_timeout: Duration::from_secs(5),
        idle_read_timeout: Duration::from_secs(5),
        ..FtpOptions::default()
    }
}

fn scheme(o: FtpOptions) -> Arc<FtpScheme> {
    Arc::new(FtpScheme::new(o).expect("scheme"))
}

async fn origin(size: u64, seed: u64) -> Origin {
    Origin::start(OriginConfig {
        size,
        seed,
        ftps: None,
    })
    .await
    .expect("origin")
}

async fn probe(s: &FtpScheme, url: &str) -> Probe {
    bounded(s.probe(&Endpoint::parse(url).unwrap()))
        .await
        .expect("probe")
}

/// Fetches `range`; when `lower_to` is set, the bound is lowered to it from inside the
/// observer on the first bytes written (so the shrink lands mid-transfer, deterministically).
async fn fetch(
    s: &Arc<FtpScheme>,
    url: &str,
    expect: &Probe,
    range: ByteRange,
    slot: u16,
    sink: &Arc<MemorySink>,
    lower_to: Option<u64>,
) -> FetchOutcome {
    fetch_seen(s, url, expect, range, slot, sink, lower_to)
        .await
        .0
}

/// [`fetch`], also returning how the fetch reported its session (`Connected` or `Primed`).
async fn fetch_seen(
    s: &Arc<FtpScheme>,
    url: &str,
    expect: &Probe,
    range: ByteRange,
    slot: u16,
    sink: &Arc<MemorySink>,
    lower_to: Option<u64>,
) -> (FetchOutcome, Vec<FetchEventKind>) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let fetch = FetchId(NEXT.fetch_add(1, Ordering::SeqCst));
    let bound = Arc::new(RangeBound::new(range));
    let b = bound.clone();
    let once = AtomicBool::new(false);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let observer = Arc::new(move |e: FetchEvent| {
        if matches!(
            e.kind,
            FetchEventKind::Connected { .. } | FetchEventKind::Primed
        ) {
            log.lock().unwrap().push(e.kind);
        }
        if let (FetchEventKind::Bytes { .. }, Some(hi)) = (e.kind, lower_to) {
            if !once.swap(true, Ordering::SeqCst) {
                b.lower(hi);
            }
        }
    });
    let writer = RangeWriter::new(fetch, bound, sink.clone(), observer);
    let req = FetchRequest {
        endpoint: Arc::new(Endpoint::parse(url).unwrap()),
        expect: expect.clone(),
        slot: ConnId(slot),
        writer,
    };
    let out = bounded(s.fetch(req)).await;
    let seen = seen.lock().unwrap().clone();
    (out, seen)
}

#[tokio::test]
async fn an_abandoned_fetch_s_session_is_dropped_where_a_cancelled_one_s_is_pooled() {
    // The engine abandons a fetch whose connection stalled or collapsed: a restart on that
    // slot must not be handed the same session from the pool.
    let size = 4_000_000;
    let o = origin(size, 7).await;
    let s = scheme(options());
    let p = probe(&s, &o.url()).await;
    assert_eq!(s.idle_sessions(), 1);
    for abandon in [false, true] {
        let range = ByteRange::new(0, size);
        let bound = Arc::new(RangeBound::new(range));
        let b = bound.clone();
        let once = AtomicBool::new(false);
        // Stopped on the first bytes written, so that the stop lands mid-transfer.
        let observer = Arc::new(move |e: FetchEvent| {
            if matches!(e.kind, FetchEventKind::Bytes { .. }) && !once.swap(true, Ordering::SeqCst)
            {
                if abandon {
                    b.abandon();
                } else {
                    b.cancel();
                }
            }
        });
        let sink = Arc::new(MemorySink::new(size as usize));
        let req = FetchRequest {
            endpoint: Arc::new(Endpoint::parse(&o.url()).unwrap()),
            expect: p.clone(),
            slot: ConnId(0),
            writer: RangeWriter::new(
                FetchId(u64::from(abandon) + 1),
                bound,
                sink.clone(),
                observer,
            ),
        };
        let out = bounded(s.fetch(req)).await;
        assert!(matches!(out, FetchOutcome::Cancelled), "{out:?}");
        assert!(sink.written().len_bytes() < size);
        assert_eq!(
            s.idle_sessions(),
            usize::from(!abandon),
            "abandoned: {abandon}"
        );
    }
    // Both ran on the probe's session.
    assert_eq!(s.sessions_dialled(), 1);
}

#[tokio::test]
async fn a_range_is_fetched_byte_exact_with_rest() {
    let size = 1_000_000;
    let o = origin(size, 7).await;
    let s = scheme(options());
    let p = probe(&s, &o.url()).await;
    assert_eq!(p.size, size);
    assert!(p.ranged);
    assert!(matches!(
        p.validator,
        Some(hydra_scheme::Validator::Weak(_))
    ));
    let sink = Arc::new(MemorySink::new(size as usize));
    for (i, r) in [
        ByteRange::new(12_345, 300_000),
        ByteRange::new(size - 1000, size),
        ByteRange::new(0, 12_345),
    ]
    .into_iter()
    .enumerate()
    {
        let out = fetch(&s, &o.url(), &p, r, i as u16, &sink, None).await;
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
        assert_eq!(&sink.contents()[r.lo as usize..r.hi as usize], o.content(r));
    }
    let mut want = RangeSet::from_range(ByteRange::new(0, 300_000));
    want.insert(ByteRange::new(size - 1000, size));
    assert_eq!(sink.written(), want);
    assert_eq!(sink.overlap_bytes(), 0);
    // One session carried the probe and all three ranges.
    assert_eq!(s.sessions_dialled(), 1);
    assert_eq!(s.sessions_reused(), 3);
}

#[tokio::test]
async fn lowering_the_bound_stops_the_data_transfer_and_the_control_connection_is_reused() {
    let size = 8 << 20;
    let o = origin(size, 11).await;
    for method in [StopMethod::DropData, StopMethod::Abor] {
        let s = scheme(FtpOptions {
            stop: method,
            ..options()
        });
        let p = probe(&s, &o.url()).await;
        let sink = Arc::new(MemorySink::new(size as usize));
        let out = fetch(
            &s,
            &o.url(),
            &p,
            ByteRange::new(0, size),
            0,
            &sink,
            Some(100_000),
        )
        .await;
        assert!(matches!(out, FetchOutcome::Shrunk), "{method:?}: {out:?}");
        let got = sink.written();
        let end = got.iter().next().map(|r| r.hi).unwrap_or(0);
        assert!(
            end >= 100_000 && end < size,
            "{method:?}: wrote up to {end}"
        );
        assert_eq!(got, RangeSet::from_range(ByteRange::new(0, end)));
        assert_eq!(
            &sink.contents()[..end as usize],
            object_bytes(11, ByteRange::new(0, end))
        );
        let stops = s.recent_stops();
        assert_eq!(stops.len(), 1, "{method:?}");
        assert_eq!(stops[0].method, method);
        let want = if method == StopMethod::Abor { 2 } else { 1 };
        assert_eq!(stops[0].replies.len(), want, "{method:?}: {stops:?}");
        let totals = s.stats().stops(method);
        assert_eq!((totals.completed, totals.failed), (1, 0), "{method:?}");
        assert_eq!(totals.replies, want as u64, "{method:?}");
        // The same control connection carries the next range, from the right offset.
        let r = ByteRange::new(end, end + 50_000);
        let out = fetch(&s, &o.url(), &p, r, 0, &sink, None).await;
        assert!(
            matches!(out, FetchOutcome::Completed),
            "{method:?}: {out:?}"
        );
        assert_eq!(
            &sink.contents()[r.lo as usize..r.hi as usize],
            object_bytes(11, r)
        );
        assert_eq!(s.sessions_dialled(), 1, "{method:?}");
        assert_eq!(sink.overlap_bytes(), 0);
        // A range from byte 0 after a stopped REST range starts at 0 (explicit REST 0).
        let r0 = ByteRange::new(0, 1000);
        let sink0 = Arc::new(MemorySink::new(size as usize));
        let out = fetch(&s, &o.url(), &p, r0, 0, &sink0, None).await;
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
        assert_eq!(&sink0.contents()[..1000], object_bytes(11, r0));
        assert_eq!(s.sessions_dialled(), 1, "{method:?}");
    }
}

#[tokio::test]
async fn both_abort_reply_orders_leave_the_control_connection_usable() {
    // Large enough that the server is still sending (blocked on a full socket) when the
    // range ends; the scripted server generates it on the fly.
    let size = 1 << 30;
    for order in [AbortOrder::Rfc426Then226, AbortOrder::Unftp226Then426] {
        for method in [StopMethod::Abor, StopMethod::DropData] {
            let srv = Scripted::start(Script {
                abort_order: order,
                ..Script::new(size, 3)
            })
            .await
            .unwrap();
            let s = scheme(FtpOptions {
                stop: method,
                ..options()
            });
            let p = probe(&s, &srv.url()).await;
            let sink = Arc::new(MemorySink::new(2000));
            for (i, r) in [ByteRange::new(0, 1000), ByteRange::new(1000, 2000)]
                .into_iter()
                .enumerate()
            {
                let out = fetch(&s, &srv.url(), &p, r, 0, &sink, None).await;
                assert!(
                    matches!(out, FetchOutcome::Completed),
                    "{order:?} {method:?} range {i}: {out:?}"
                );
            }
            assert_eq!(
                &sink.contents()[..2000],
                object_bytes(3, ByteRange::new(0, 2000))
            );
            assert_eq!(s.sessions_dialled(), 1, "{order:?} {method:?}");
            let stops = s.recent_stops();
            assert_eq!(stops.len(), 2);
            let totals = s.stats().stops(method);
            assert_eq!(
                (totals.completed, totals.failed),
                (2, 0),
                "{order:?} {method:?}"
            );
            if method == StopMethod::Abor {
                let want = match order {
                    AbortOrder::Rfc426Then226 => vec![426, 226],
                    AbortOrder::Unftp226Then426 => vec![226, 426],
                };
                assert!(stops.iter().all(|s| s.replies == want), "{stops:?}");
                assert_eq!(
                    srv.commands().iter().filter(|c| *c == "ABOR").count(),
                    2,
                    "{:?}",
                    srv.commands()
                );
            } else {
                assert!(stops.iter().all(|s| s.replies.len() == 1), "{stops:?}");
                assert!(!srv.commands().iter().any(|c| c == "ABOR"));
            }
        }
    }
}

#[tokio::test]
async fn a_227_pointing_elsewhere_is_refused() {
    let srv = Scripted::start(Script {
        pasv_host: Some(std::net::Ipv4Addr::new(192, 0, 2, 1)),
        ..Script::new(10_000, 5)
    })
    .await
    .unwrap();
    let s = scheme(FtpOptions {
        passive: Passive::Pasv,
        ..options()
    });
    let p = probe(&s, &srv.url()).await;
    let sink = Arc::new(MemorySink::new(10_000));
    let out = fetch(
        &s,
        &srv.url(),
        &p,
        ByteRange::new(0, 10_000),
        0,
        &sink,
        None,
    )
    .await;
    let e = out.error().expect("refused");
    assert!(
        matches!(&e.kind, ErrorKind::Protocol(m) if m.contains("bounce")),
        "{e}"
    );
    assert_eq!(e.failure_kind(), Failure::Fatal);
    assert_eq!(srv.data_connections(), 0);
    assert_eq!(sink.written(), RangeSet::new());
    // With the NAT workaround the reply's port is used on the control host.
    let s = scheme(FtpOptions {
        passive: Passive::Pasv,
        pasv_host: PasvHost::UseControlHost,
        ..options()
    });
    let out = fetch(
        &s,
        &srv.url(),
        &p,
        ByteRange::new(0, 10_000),
        0,
        &sink,
        None,
    )
    .await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents(), object_bytes(5, ByteRange::new(0, 10_000)));
}

#[tokio::test]
async fn a_server_without_epsv_is_served_with_pasv() {
    let srv = Scripted::start(Script {
        no_epsv: true,
        ..Script::new(5000, 9)
    })
    .await
    .unwrap();
    let s = scheme(options());
    let p = probe(&s, &srv.url()).await;
    let sink = Arc::new(MemorySink::new(5000));
    let out = fetch(
        &s,
        &srv.url(),
        &p,
        ByteRange::new(100, 5000),
        0,
        &sink,
        None,
    )
    .await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(
        &sink.contents()[100..],
        object_bytes(9, ByteRange::new(100, 5000))
    );
    let cmds = srv.commands();
    let epsv = cmds.iter().position(|c| c == "EPSV").expect("EPSV tried");
    let pasv = cmds.iter().position(|c| c == "PASV").expect("PASV after");
    assert!(epsv < pasv, "{cmds:?}");
    // REST is resent for the retried RETR, right before it.
    let retr = cmds.iter().position(|c| c.starts_with("RETR")).unwrap();
    assert_eq!(cmds[retr - 1], "REST 100", "{cmds:?}");
}

/// The commands a session sent after its login (`TYPE I` on).
fn after_login(cmds: &[String]) -> Vec<String> {
    let at = cmds.iter().position(|c| c == "TYPE I").expect("logged in");
    cmds[at + 1..].to_vec()
}

/// A scripted server of 5000 bytes (seed 9), a scheme that checks before every `RETR`, its
/// probe of the server, and an empty sink for the object.
async fn probed_scripted() -> (Scripted, Arc<FtpScheme>, Probe, Arc<MemorySink>) {
    let srv = Scripted::start(Script::new(5000, 9)).await.unwrap();
    let s = scheme(FtpOptions {
        revalidate_after: Duration::ZERO,
        ..options()
    });
    let p = probe(&s, &srv.url()).await;
    (srv, s, p, Arc::new(MemorySink::new(5000)))
}

#[tokio::test]
async fn the_fetch_on_the_probes_session_takes_the_probes_check_and_feat_is_asked_once() {
    let (srv, s, p, sink) = probed_scripted().await;
    let out = fetch(&s, &srv.url(), &p, ByteRange::new(0, 5000), 0, &sink, None).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents(), object_bytes(9, ByteRange::new(0, 5000)));
    // A second look on the pooled session (the engine's closing re-check) asks no FEAT.
    let again = probe(&s, &srv.url()).await;
    assert!(again.same_object(&p));
    assert_eq!(s.sessions_dialled(), 1);
    let file = "object.bin";
    assert_eq!(
        after_login(&srv.commands()),
        [
            "FEAT".to_owned(),
            format!("SIZE {file}"),
            format!("MDTM {file}"),
            // The probe's SIZE and MDTM were the session's last word on the file: the fetch
            // that takes the session does not ask them again, and a new session holds no
            // restart offset, so no `REST 0` either.
            "EPSV".to_owned(),
            format!("RETR {file}"),
            format!("SIZE {file}"),
            format!("MDTM {file}"),
        ]
    );
}

#[tokio::test]
async fn a_transfer_since_the_last_check_makes_the_next_retr_check_again_and_rest_0_follows_a_rest()
{
    let (srv, s, p, sink) = probed_scripted().await;
    let mut sessions = Vec::new();
    for r in [ByteRange::new(100, 5000), ByteRange::new(0, 100)] {
        let (out, seen) = fetch_seen(&s, &srv.url(), &p, r, 0, &sink, None).await;
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
        sessions.push(seen);
    }
    // The first continues the probe's exchange: its first byte is no sample of what a
    // request on a pooled session costs (two round trips more). The second is such a request.
    assert_eq!(
        sessions,
        [
            vec![FetchEventKind::Primed],
            vec![FetchEventKind::Connected { reused: true }]
        ]
    );
    assert_eq!(sink.contents(), object_bytes(9, ByteRange::new(0, 5000)));
    let file = "object.bin";
    let cmds = after_login(&srv.commands());
    let retrs: Vec<usize> = (0..cmds.len())
        .filter(|&i| cmds[i].starts_with("RETR"))
        .collect();
    assert_eq!(retrs.len(), 2, "{cmds:?}");
    // First RETR: the probe's check stands, so only EPSV and REST 100 precede it.
    assert_eq!(
        cmds[retrs[0] - 2..retrs[0]],
        ["EPSV", "REST 100"],
        "{cmds:?}"
    );
    // Second: a transfer ran since the check, so SIZE and MDTM are asked again; a REST was
    // sent on this session, so the range from byte 0 resets it.
    assert_eq!(
        cmds[retrs[0] + 1..retrs[1]],
        [
            format!("SIZE {file}"),
            format!("MDTM {file}"),
            "REST 0".to_owned(),
            "EPSV".to_owned(),
        ],
        "{cmds:?}"
    );
}

#[tokio::test]
async fn a_session_opened_ahead_reads_its_check_then_and_its_first_retr_asks_nothing_more() {
    let srv = Scripted::start(Script::new(5000, 9)).await.unwrap();
    let p = probe(&scheme(options()), &srv.url()).await;
    // A second scheme, so that its pool holds only the session opened ahead.
    let s = scheme(FtpOptions {
        revalidate_after: Duration::ZERO,
        ..options()
    });
    bounded(s.prepare(&Endpoint::parse(&srv.url()).unwrap()))
        .await
        .expect("prepared");
    let sink = Arc::new(MemorySink::new(5000));
    let (out, seen) = fetch_seen(&s, &srv.url(), &p, ByteRange::new(0, 5000), 0, &sink, None).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents(), object_bytes(9, ByteRange::new(0, 5000)));
    assert_eq!((s.sessions_dialled(), s.sessions_reused()), (1, 1));
    // Its first byte is no sample of what a request on a pooled session costs.
    assert_eq!(seen, [FetchEventKind::Primed]);
    let file = "object.bin";
    let cmds = srv.commands();
    let login = cmds.iter().rposition(|c| c == "TYPE I").expect("logged in");
    assert_eq!(
        cmds[login + 1..],
        [
            format!("SIZE {file}"),
            format!("MDTM {file}"),
            "EPSV".to_owned(),
            format!("RETR {file}"),
        ]
    );
}

#[tokio::test]
async fn a_later_probe_on_a_session_that_never_asked_feat_is_two_commands() {
    // The closing re-check is a probe on a pooled session, often one opened ahead or by a
    // fetch, which never asked FEAT: what the host's first probe learned about REST holds for
    // it too, so the check costs SIZE and MDTM, as on the probe's own session.
    let srv = Scripted::start(Script::new(5000, 9)).await.unwrap();
    let s = scheme(options());
    let first = probe(&s, &srv.url()).await;
    bounded(s.prepare(&Endpoint::parse(&srv.url()).unwrap()))
        .await
        .expect("prepared");
    // The session opened ahead is the one put back last: the next probe takes it.
    let again = probe(&s, &srv.url()).await;
    assert!(again.same_object(&first));
    assert_eq!(again.ranged, first.ranged);
    assert_eq!(
        s.sessions_dialled(),
        2,
        "the second probe dialled no session"
    );
    let file = "object.bin";
    let cmds = srv.commands();
    assert_eq!(cmds.iter().filter(|c| *c == "FEAT").count(), 1, "{cmds:?}");
    let login = cmds.iter().rposition(|c| c == "TYPE I").expect("logged in");
    assert_eq!(
        cmds[login + 1..],
        [
            format!("SIZE {file}"),
            format!("MDTM {file}"),
            format!("SIZE {file}"),
            format!("MDTM {file}"),
        ]
    );
}

/// A well-behaved scripted server of 5000 bytes whose `MLST` is `mlst`.
async fn scripted_with(mlst: MlstReply) -> Scripted {
    Scripted::start(Script {
        mlst,
        ..Script::new(5000, 9)
    })
    .await
    .unwrap()
}

/// The commands after the last login's `TYPE I`.
fn after_last_login(cmds: &[String]) -> Vec<String> {
    let login = cmds.iter().rposition(|c| c == "TYPE I").expect("logged in");
    cmds[login + 1..].to_vec()
}

#[tokio::test]
async fn where_feat_lists_mlst_the_file_is_looked_at_with_one_command() {
    // MLST gives the size and the modification time in one round trip where SIZE and MDTM
    // take two; a later probe (the closing re-check) on a session that never asked FEAT
    // uses it too.
    let srv = scripted_with(MlstReply::Facts).await;
    let s = scheme(options());
    let first = probe(&s, &srv.url()).await;
    assert_eq!(first.size, 5000);
    assert!(first.ranged);
    let file = "object.bin";
    assert_eq!(
        after_last_login(&srv.commands()),
        ["FEAT".to_owned(), format!("MLST {file}")]
    );
    bounded(s.prepare(&Endpoint::parse(&srv.url()).unwrap()))
        .await
        .expect("prepared");
    let again = probe(&s, &srv.url()).await;
    assert!(again.same_object(&first));
    assert_eq!(s.sessions_dialled(), 2);
    // The session opened ahead read the facts after its login, and the second probe on it
    // read them again: one command each.
    assert_eq!(
        after_last_login(&srv.commands()),
        [format!("MLST {file}"), format!("MLST {file}")]
    );
}

#[tokio::test]
async fn mlst_s_modify_fact_is_the_same_validator_as_mdtm() {
    // The same file through MLST (`modify=20240101000000.5`) and through SIZE and MDTM
    // (`20240101000000`): one object, so a host whose sessions differ in what they ask
    // cannot look like a replaced file.
    let with = scripted_with(MlstReply::Facts).await;
    let without = Scripted::start(Script::new(5000, 9)).await.unwrap();
    let a = probe(&scheme(options()), &with.url()).await;
    let b = probe(&scheme(options()), &without.url()).await;
    assert_eq!(a.validator, b.validator);
    assert_eq!(a.last_modified, b.last_modified);
    assert!(a.validator.is_some());
}

#[tokio::test]
async fn an_mlst_that_is_refused_is_followed_by_size_and_mdtm_and_not_asked_again() {
    let srv = scripted_with(MlstReply::Refused).await;
    let s = scheme(options());
    let p = probe(&s, &srv.url()).await;
    assert_eq!(p.size, 5000);
    assert!(p.validator.is_some());
    // The same session, pooled, probed again.
    let again = probe(&s, &srv.url()).await;
    assert!(again.same_object(&p));
    assert_eq!(s.sessions_dialled(), 1);
    let file = "object.bin";
    assert_eq!(
        after_last_login(&srv.commands()),
        [
            "FEAT".to_owned(),
            format!("MLST {file}"),
            format!("SIZE {file}"),
            format!("MDTM {file}"),
            format!("SIZE {file}"),
            format!("MDTM {file}"),
        ]
    );
}

#[tokio::test]
async fn a_file_replaced_before_a_session_was_opened_ahead_is_refused_by_its_first_transfer() {
    let size = 200_000;
    let o = origin(size, 21).await;
    let p = probe(&scheme(options()), &o.url()).await;
    // Same size, new content and MDTM, between the probe and the session's check.
    o.replace_object(22, size).unwrap();
    let s = scheme(options());
    bounded(s.prepare(&Endpoint::parse(&o.url()).unwrap()))
        .await
        .expect("prepared");
    let sink = Arc::new(MemorySink::new(size as usize));
    let out = fetch(&s, &o.url(), &p, ByteRange::new(0, size), 0, &sink, None).await;
    assert_eq!(
        s.sessions_reused(),
        1,
        "the fetch took the session opened ahead"
    );
    let e = out.error().expect("object changed");
    assert!(matches!(e.kind, ErrorKind::ObjectChanged { .. }), "{e}");
    assert!(sink.written().is_empty(), "{:?}", sink.written());
}

#[tokio::test]
async fn a_replaced_file_is_an_error_not_a_mixed_file() {
    let size = 200_000;
    let o = origin(size, 21).await;
    let s = scheme(FtpOptions {
        revalidate_after: Duration::ZERO,
        ..options()
    });
    let p = probe(&s, &o.url()).await;
    let sink = Arc::new(MemorySink::new(size as usize));
    let first = ByteRange::new(0, 100_000);
    let out = fetch(&s, &o.url(), &p, first, 0, &sink, None).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    // Same size, new content and MDTM.
    o.replace_object(22, size).unwrap();
    let out = fetch(
        &s,
        &o.url(),
        &p,
        ByteRange::new(100_000, size),
        0,
        &sink,
        None,
    )
    .await;
    let e = out.error().expect("object changed");
    assert!(matches!(e.kind, ErrorKind::ObjectChanged { .. }), "{e}");
    assert_eq!(e.failure_kind(), Failure::Fatal);
    assert_eq!(sink.written(), RangeSet::from_range(first));
    // A new size is caught too, on a fresh session.
    o.replace_object(23, size + 1).unwrap();
    let s2 = scheme(options());
    let out = fetch(
        &s2,
        &o.url(),
        &p,
        ByteRange::new(100_000, size),
        0,
        &sink,
        None,
    )
    .await;
    assert!(
        matches!(
            out.error().map(|e| &e.kind),
            Some(ErrorKind::ObjectChanged { .. })
        ),
        "{out:?}"
    );
    assert_eq!(sink.written(), RangeSet::from_range(first));
}

#[tokio::test]
async fn credentials_never_appear_in_errors() {
    let srv = Scripted::start(Script {
        login: Some(("alice".into(), "s3cret-pw".into())),
        ..Script::new(1000, 1)
    })
    .await
    .unwrap();
    let s = scheme(options());
    let port = srv.addr().port();
    // Wrong password: 530, a refusal (backoff), without the credentials in the error.
    let bad =
        Endpoint::parse(&format!("ftp://alice:wr0ng-pw@127.0.0.1:{port}/object.bin")).unwrap();
    let e = bounded(s.probe(&bad)).await.expect_err("530");
    assert_eq!(e.failure_kind(), Failure::Refused { retry_after: None });
    // Right password, missing file: 550, fatal, without the credentials.
    let good = Endpoint::parse(&format!(
        "ftp://alice:s3cret-pw@127.0.0.1:{port}/missing.bin"
    ))
    .unwrap();
    let e2 = bounded(s.probe(&good)).await.expect_err("550");
    assert_eq!(e2.failure_kind(), Failure::Fatal);
    for shown in [
        format!("{e} {e:?}"),
        format!("{e2} {e2:?}"),
        format!("{s:?}"),
    ] {
        assert!(!shown.contains("wr0ng-pw"), "{shown}");
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(!shown.contains("alice"), "{shown}");
    }
    assert!(srv.commands().contains(&"USER alice".to_owned()));
}

#[tokio::test]
async fn a_421_greeting_is_a_refusal() {
    let srv = Scripted::start(Script {
        refuse_greeting: true,
        ..Script::new(1000, 1)
    })
    .await
    .unwrap();
    let s = scheme(options());
    let e = bounded(s.probe(&Endpoint::parse(&srv.url()).unwrap()))
        .await
        .expect_err("421");
    assert_eq!(e.failure_kind(), Failure::Refused { retry_after: None });
}

#[tokio::test]
async fn a_cut_data_connection_is_truncated_and_keeps_what_arrived() {
    let srv = Scripted::start(Script {
        truncate_after: Some(3000),
        ..Script::new(10_000, 4)
    })
    .await
    .unwrap();
    let s = scheme(options());
    let p = probe(&s, &srv.url()).await;
    let sink = Arc::new(MemorySink::new(10_000));
    let out = fetch(
        &s,
        &srv.url(),
        &p,
        ByteRange::new(1000, 10_000),
        0,
        &sink,
        None,
    )
    .await;
    let e = out.error().expect("truncated");
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                expected: 10_000,
                got: 4000
            }
        ),
        "{e}"
    );
    assert_eq!(e.failure_kind(), Failure::Transient);
    assert_eq!(
        sink.written(),
        RangeSet::from_range(ByteRange::new(1000, 4000))
    );
    assert_eq!(
        &sink.contents()[1000..4000],
        object_bytes(4, ByteRange::new(1000, 4000))
    );
}

#[tokio::test]
async fn the_per_host_ceiling_is_declared_and_one_session_serves_the_host() {
    let srv = Scripted::start(Script::new(100_000, 2)).await.unwrap();
    let s = scheme(FtpOptions {
        max_sessions_per_host: 1,
        ..options()
    });
    assert_eq!(s.capabilities().max_connections_per_host, Some(1));
    let p = probe(&s, &srv.url()).await;
    // The probe's idle session is the one session; a fetch reuses it.
    let sink = Arc::new(MemorySink::new(100_000));
    let out = fetch(
        &s,
        &srv.url(),
        &p,
        ByteRange::new(0, 100_000),
        0,
        &sink,
        None,
    )
    .await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(s.sessions_dialled(), 1);
}

#[tokio::test]
async fn a_revalidating_probe_reuses_an_idle_session_instead_of_logging_in_again() {
    let size = 100_000;
    let o = origin(size, 3).await;
    let s = scheme(options());
    let first = probe(&s, &o.url()).await;
    let sink = Arc::new(MemorySink::new(size as usize));
    let out = fetch(
        &s,
        &o.url(),
        &first,
        ByteRange::new(0, size),
        0,
        &sink,
        None,
    )
    .await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    // The engine's closing revalidation: same answers, on the session the fetch returned.
    let again = probe(&s, &o.url()).await;
    assert_eq!(again.size, first.size);
    assert_eq!(again.validator, first.validator);
    assert_eq!(s.sessions_dialled(), 1);
}

#[tokio::test]
async fn a_prepared_session_carries_the_next_probe_and_none_is_opened_past_the_ceiling() {
    let o = origin(100_000, 3).await;
    let s = scheme(FtpOptions {
        max_sessions_per_host: 1,
        ..options()
    });
    let ep = Endpoint::parse(&o.url()).unwrap();
    bounded(s.prepare(&ep)).await.expect("prepare");
    assert_eq!((s.sessions_dialled(), s.idle_sessions()), (1, 1));
    assert_eq!(s.pooled_sessions(&ep), Some(1));
    // The ceiling of one is held by the idle session: a second prepare opens nothing.
    bounded(s.prepare(&ep))
        .await
        .expect("prepare at the ceiling");
    assert_eq!((s.sessions_dialled(), s.idle_sessions()), (1, 1));
    let p = probe(&s, &o.url()).await;
    assert_eq!(p.size, 100_000);
    assert_eq!(s.sessions_dialled(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_at_the_session_ceiling_waits_for_a_session_being_opened_ahead_not_refused() {
    use faultnet::live::{Proxy, ProxyConfig};
    use faultnet::scenario::Link;
    use faultnet::units::{Dur, Rate};
    // Through a link of 20 ms each way a login takes several round trips, so the prepare is
    // still logging in when the fetch asks for a session.
    let size = 200_000;
    let o = origin(size, 5).await;
    let mut link = Link::new("slow-login", Rate(50e6));
    link.delay = Dur(Duration::from_millis(20));
    let mut cfg = ProxyConfig::new(o.addr().to_string(), link);
    cfg.ftp = true;
    let proxy = Proxy::start(cfg).await.expect("proxy");
    let url = format!("ftp://{}/object.bin", proxy.local_addr());
    let s = scheme(options());
    let p = probe(&s, &url).await;
    let s = scheme(FtpOptions {
        max_sessions_per_host: 1,
        ..options()
    });
    let ep = Endpoint::parse(&url).unwrap();
    let preparing = tokio::spawn({
        let (s, ep) = (s.clone(), ep.clone());
        async move { s.prepare(&ep).await }
    });
    for _ in 0..2000 {
        if s.sessions_dialled() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        s.sessions_dialled(),
        1,
        "the prepare holds the only session"
    );
    let sink = Arc::new(MemorySink::new(size as usize));
    let r = ByteRange::new(0, size);
    let out = fetch(&s, &url, &p, r, 0, &sink, None).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert!(sink.contents() == o.content(r), "bytes differ");
    bounded(preparing).await.unwrap().expect("prepare");
    // The fetch took the prepared session: one login, reused once.
    assert_eq!(s.sessions_dialled(), 1);
    assert_eq!(s.sessions_reused(), 1);
}
