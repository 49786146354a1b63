//! Property-based fuzzing of the FTP scheme's reply handling (its own and suppaftp's: the
//! greeting, login, `FEAT`, `SIZE`, `MDTM`, `MLST`, `EPSV`/`PASV`, `REST`, `RETR`) against a
//! loopback control server whose replies to each command are proper or arbitrary and
//! near-valid. Whatever it answers, a probe and a fetch end (bounded in time) with a result,
//! nothing panics (in any task), and a fetch that reports `Completed` wrote exactly its range,
//! once, with the object's bytes.
//!
//! Cases per property: the default below, or `HYDRA_FUZZ_CASES` for a longer run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, SystemTime};

use hydra_scheme::{
    ByteRange, ConnId, Endpoint, FetchId, FetchOutcome, FetchRequest, MemorySink, NoObserver,
    Probe, RangeSet, RangeWriter, Scheme, Sink,
};
use hydra_scheme_ftp::{FtpOptions, FtpScheme, Passive};
use proptest::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const SIZE: u64 = 3000;
/// Every case ends within this, or fails.
const CASE_LIMIT: Duration = Duration::from_secs(15);
/// Control connections one case's server accepts.
const MAX_SESSIONS: usize = 6;
/// Commands one control connection answers.
const MAX_COMMANDS: usize = 40;

fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("HYDRA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(n)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Panics anywhere in the process (spawned tasks included), counted.
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

fn byte_at(i: u64) -> u8 {
    (i * 13 + 5) as u8
}

/// What the server answers, per command (`"greeting"` for the banner); a command not listed
/// gets its proper reply. `{DATA}`, `{P1}`, `{P2}` stand for the data port.
type Script = BTreeMap<&'static str, String>;

fn proper(cmd: &str) -> &'static str {
    match cmd {
        "greeting" => "220 fuzz ready",
        "USER" => "331 password please",
        "PASS" => "230 logged in",
        "TYPE" => "200 binary",
        "FEAT" => "211-Features:\r\n SIZE\r\n MDTM\r\n REST STREAM\r\n EPSV\r\n MLST size*;modify*;\r\n211 End",
        "SIZE" => "213 3000",
        "MDTM" => "213 20150101000000",
        "MLST" => "250-Listing\r\n type=file;size=3000;modify=20150101000000; /object\r\n250 End",
        "EPSV" => "229 Entering Extended Passive Mode (|||{DATA}|)",
        "PASV" => "227 Entering Passive Mode (127,0,0,1,{P1},{P2})",
        "REST" => "350 restarting",
        "RETR" => "150 opening",
        "ABOR" => "226 aborted",
        "QUIT" => "221 bye",
        "OPTS" => "200 ok",
        _ => "502 not implemented",
    }
}

const COMMANDS: &[&str] = &[
    "greeting", "USER", "PASS", "TYPE", "FEAT", "SIZE", "MDTM", "MLST", "EPSV", "PASV", "REST",
    "RETR", "ABOR",
];

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        Just("3000".to_owned()),
        Just("-1".to_owned()),
        Just("99999999999999999999999".to_owned()),
        "[0-9a-z.+ -]{0,8}",
    ]
}

/// A reply near what `cmd` expects, or any line.
fn near(cmd: &'static str) -> BoxedStrategy<String> {
    let code = prop_oneof![(100u16..600).prop_map(|c| c.to_string()), "[0-9]{0,4}"];
    let any_line = (code, "[ -~]{0,24}").prop_map(|(c, t)| format!("{c} {t}"));
    let specific: BoxedStrategy<String> = match cmd {
        "SIZE" => number().prop_map(|n| format!("213 {n}")).boxed(),
        "MDTM" => prop_oneof![
            "[0-9]{0,16}(\\.[0-9]{0,4})?",
            Just("99999999999999".to_owned()),
            Just("00000000000000".to_owned()),
            Just("20241301000000".to_owned()),
        ]
        .prop_map(|t| format!("213 {t}"))
        .boxed(),
        "MLST" => ("[ -~]{0,40}", prop::bool::ANY)
            .prop_map(|(f, end)| {
                if end {
                    format!("250-Listing\r\n {f}\r\n250 End")
                } else {
                    format!("250 {f}")
                }
            })
            .boxed(),
        "EPSV" => prop_oneof![
            Just("{DATA}".to_owned()),
            Just("0".to_owned()),
            Just("65536".to_owned()),
            "[0-9a-z|]{0,6}",
        ]
        .prop_map(|p| format!("229 Entering (|||{p}|)"))
        .boxed(),
        "PASV" => (
            prop::sample::select(vec![
                "127,0,0,1",
                "10,0,0,1",
                "127,0,0",
                "256,1,1,1",
                "a,b,c,d",
            ]),
            prop_oneof![
                Just("{P1},{P2}".to_owned()),
                Just("0,0".to_owned()),
                "[0-9,]{0,8}"
            ],
        )
            .prop_map(|(h, p)| format!("227 Entering Passive Mode ({h},{p})"))
            .boxed(),
        "FEAT" => prop::collection::vec("[ -~]{0,16}", 0..4)
            .prop_map(|lines| {
                let body: String = lines.iter().map(|l| format!(" {l}\r\n")).collect();
                format!("211-Features:\r\n{body}211 End")
            })
            .boxed(),
        _ => Just(proper(cmd).to_owned()).boxed(),
    };
    prop_oneof![3 => specific, 2 => any_line, 1 => "[ -~]{0,12}"].boxed()
}

fn script() -> impl Strategy<Value = Script> {
    prop::collection::vec(
        (prop::sample::select(COMMANDS), any::<prop::sample::Index>()),
        0..4,
    )
    .prop_flat_map(|picks| {
        let chosen: Vec<&'static str> = picks.into_iter().map(|(c, _)| c).collect();
        let strategies: Vec<BoxedStrategy<(&'static str, String)>> = chosen
            .into_iter()
            .map(|c| near(c).prop_map(move |r| (c, r)).boxed())
            .collect();
        strategies
    })
    .prop_map(|pairs| pairs.into_iter().collect())
}

fn reply_text(script: &Script, cmd: &str, data_port: u16) -> String {
    let raw = script.get(cmd).map_or(proper(cmd), String::as_str);
    raw.replace("{DATA}", &data_port.to_string())
        .replace("{P1}", &(data_port / 256).to_string())
        .replace("{P2}", &(data_port % 256).to_string())
}

/// Serves one control connection: each command gets its scripted reply; `RETR` with a
/// preliminary (1xx) reply sends the object from the `REST` offset on the data connection.
async fn control(sock: TcpStream, script: Arc<Script>, data_len: Option<u64>) {
    let (rd, mut wr) = sock.into_split();
    let mut lines = BufReader::new(rd).lines();
    let Ok(data) = TcpListener::bind("127.0.0.1:0").await else {
        return;
    };
    let port = data.local_addr().map_or(0, |a| a.port());
    let send = |text: String| format!("{text}\r\n").into_bytes();
    if wr
        .write_all(&send(reply_text(&script, "greeting", port)))
        .await
        .is_err()
    {
        return;
    }
    let mut rest = 0u64;
    for _ in 0..MAX_COMMANDS {
        let Ok(Ok(Some(line))) = tokio::time::timeout(CASE_LIMIT, lines.next_line()).await else {
            return;
        };
        let cmd = line
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        if cmd == "REST" {
            rest = line[4..].trim().parse().unwrap_or(0);
        }
        let text = reply_text(&script, &cmd, port);
        if wr.write_all(&send(text.clone())).await.is_err() {
            return;
        }
        if cmd == "RETR" && text.starts_with('1') {
            if let Ok(Ok((mut d, _))) =
                tokio::time::timeout(Duration::from_secs(1), data.accept()).await
            {
                let end = data_len.map_or(SIZE, |n| (rest + n).min(SIZE));
                let bytes: Vec<u8> = (rest.min(end)..end).map(byte_at).collect();
                let _ = d.write_all(&bytes).await;
                let _ = d.shutdown().await;
            }
            let _ = wr.write_all(b"226 done\r\n").await;
        }
        if cmd == "QUIT" {
            return;
        }
    }
}

async fn serve(listener: TcpListener, script: Arc<Script>, data_len: Option<u64>) {
    for _ in 0..MAX_SESSIONS {
        let Ok((sock, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(control(sock, script.clone(), data_len));
    }
}

fn options(epsv: bool) -> FtpOptions {
    FtpOptions {
        // Loopback replies are immediate: a reply that never comes costs a case this much.
        connect_timeout: Duration::from_millis(500),
        reply_timeout: Duration::from_millis(500),
        idle_read_timeout: Duration::from_millis(500),
        stop_timeout: Duration::from_millis(500),
        passive: if epsv { Passive::Epsv } else { Passive::Pasv },
        ..FtpOptions::default()
    }
}

fn expect() -> Probe {
    Probe {
        size: SIZE,
        ranged: true,
        validator: None,
        last_modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_420_070_400)),
        connect: Duration::ZERO,
        first_byte: Duration::ZERO,
    }
}

struct Case {
    lo: u64,
    hi: u64,
    epsv: bool,
    script: Script,
    data_len: Option<u64>,
}

/// Runs a probe and a fetch; checks what the fetch claims. Returns whether it completed.
fn run(case: Case) -> Result<bool, TestCaseError> {
    count_panics();
    let before = PANICS.load(Ordering::SeqCst);
    let Case {
        lo,
        hi,
        epsv,
        script,
        data_len,
    } = case;
    let shown = format!("{script:?}");
    let completed = runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(serve(listener, Arc::new(script), data_len));
        let scheme = Arc::new(FtpScheme::new(options(epsv)).expect("scheme"));
        let endpoint = Endpoint::parse(&format!("ftp://127.0.0.1:{port}/object")).expect("url");
        let probe = tokio::time::timeout(CASE_LIMIT, scheme.probe(&endpoint)).await;
        prop_assert!(probe.is_ok(), "the probe did not end: {shown}");
        let sink = Arc::new(MemorySink::new(SIZE as usize));
        let (_bound, writer) = RangeWriter::for_range(
            FetchId(1),
            ByteRange::new(lo, hi),
            sink.clone(),
            Arc::new(NoObserver),
        );
        let req = FetchRequest {
            endpoint: Arc::new(endpoint),
            expect: expect(),
            slot: ConnId(0),
            writer,
        };
        let outcome = tokio::time::timeout(CASE_LIMIT, scheme.fetch(req)).await;
        server.abort();
        prop_assert!(outcome.is_ok(), "the fetch did not end: {shown}");
        prop_assert_eq!(sink.overlap_bytes(), 0);
        let written = sink.written();
        prop_assert!(
            written.iter().all(|r| r.lo >= lo && r.hi <= hi),
            "{written:?} outside [{lo}, {hi})"
        );
        let completed = matches!(outcome, Ok(FetchOutcome::Completed));
        if completed {
            prop_assert_eq!(
                written,
                RangeSet::from_range(ByteRange::new(lo, hi)),
                "{}",
                shown
            );
            let contents = sink.contents();
            prop_assert!(
                (lo..hi).all(|i| contents[i as usize] == byte_at(i)),
                "{shown}"
            );
        }
        Ok(completed)
    })?;
    prop_assert_eq!(PANICS.load(Ordering::SeqCst), before, "a task panicked");
    Ok(completed)
}

fn range() -> impl Strategy<Value = (u64, u64)> {
    (0..SIZE).prop_flat_map(|lo| (Just(lo), lo + 1..=SIZE))
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_reply_to_any_command_ends_a_probe_and_fetch_in_a_result_never_a_panic(
        (lo, hi) in range(), epsv in any::<bool>(), script in script(),
        data_len in prop::option::weighted(0.2, 0u64..SIZE)
    ) {
        run(Case { lo, hi, epsv, script, data_len })?;
    }
}

proptest! {
    // The oracle for the property above: fewer cases, each a whole proper transfer.
    #![proptest_config(cases(64))]

    #[test]
    fn a_proper_server_completes_every_range_with_the_objects_bytes(
        (lo, hi) in range(), epsv in any::<bool>()
    ) {
        let completed = run(Case { lo, hi, epsv, script: Script::new(), data_len: None })?;
        prop_assert!(completed);
    }
}
