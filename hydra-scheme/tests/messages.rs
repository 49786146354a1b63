//! Every message a person reads speaks in the protocols' words: no Debug output (`Some(`,
//! `Strong(`, braces) in any error kind, engine error or agreement verdict.

use hydra_scheme::agreement::{self, disagreement, quorum};
use hydra_scheme::{engine::EngineError, ByteRange, ErrorKind, Probe, TimeoutPhase, Validator};
use std::time::{Duration, SystemTime};

fn assert_plain(text: &str) {
    for bad in ["Some(", "None", "Strong(", "Weak(", "{", "}"] {
        assert!(!text.contains(bad), "{bad:?} in {text:?}");
    }
}

fn probe(size: u64, etag: Option<&str>, mtime: Option<u64>) -> Probe {
    Probe {
        size,
        ranged: true,
        validator: etag.map(|e| Validator::Strong(e.to_owned())),
        last_modified: mtime.map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s)),
        connect: Duration::ZERO,
        first_byte: Duration::ZERO,
    }
}

fn every_kind() -> Vec<ErrorKind> {
    vec![
        ErrorKind::ObjectChanged {
            detail: "validator \"a\" became \"b\"".into(),
        },
        ErrorKind::RangeIgnored,
        ErrorKind::Misplaced {
            detail: "acknowledged REST 5 but sent more than the 10 bytes after it".into(),
        },
        ErrorKind::WrongRange {
            asked: ByteRange::new(0, 10),
            got: "Content-Range: bytes 1-10/20".into(),
        },
        ErrorKind::Truncated {
            expected: 10,
            got: 5,
        },
        ErrorKind::Rejected {
            protocol: "HTTP",
            code: 404,
            text: Some("Not Found".into()),
            transient: false,
        },
        ErrorKind::Rejected {
            protocol: "SFTP",
            code: 2,
            text: None,
            transient: false,
        },
        ErrorKind::Timeout {
            phase: TimeoutPhase::IdleRead,
            after: Duration::from_millis(1500),
        },
        ErrorKind::Refused {
            retry_after: Some(Duration::from_secs(3)),
        },
        ErrorKind::Refused { retry_after: None },
        ErrorKind::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        ErrorKind::TooManyRedirects { limit: 10 },
        ErrorKind::Protocol("550 no such file".into()),
        ErrorKind::Unsupported("no port".into()),
        ErrorKind::Sink(std::io::Error::from(std::io::ErrorKind::StorageFull)),
    ]
}

#[test]
fn no_error_kind_shows_debug_output() {
    for k in every_kind() {
        assert_plain(&k.to_string());
    }
}

#[test]
fn no_engine_error_shows_debug_output() {
    let pair = vec![("http://h/x".to_owned(), "HTTP 404 Not Found".to_owned())];
    for e in [
        EngineError::NoSources,
        EngineError::NoUsableSource(pair.clone()),
        EngineError::AllSourcesFailed(pair),
        EngineError::Sink(std::io::Error::from(std::io::ErrorKind::StorageFull)),
        EngineError::Coverage("3 bytes missing and 0 written twice".into()),
        EngineError::ObjectChanged("http://h/x".into(), "size 1 became 2".into()),
        EngineError::Inconsistent("the sources do not serve the same bytes".into()),
    ] {
        assert_plain(&e.to_string());
    }
}

#[test]
fn agreement_verdicts_name_sizes_validators_and_times_in_words() {
    let a = probe(123_456, Some("\"v1\""), Some(1_700_000_000));
    let b = probe(123_456, Some("\"v2\""), Some(1_700_003_600));
    let c = probe(99, None, None);
    let d = disagreement(&a, &b).unwrap();
    assert_plain(&d);
    assert!(d.contains("\"v2\"") && d.contains("\"v1\""), "{d}");
    let d = disagreement(&a, &c).unwrap();
    assert_plain(&d);
    assert!(d.contains("size 99 differs from size 123 456"), "{d}");
    for o in quorum(&[&a, &b, &c]).unwrap().odd {
        assert_plain(&o.why);
    }
    for (now, vouched) in [
        (&b, false),
        (&c, true),
        (&probe(123_456, None, None), false),
    ] {
        let why = agreement::resume_misfit(Some(&a), &[&a], now, vouched).unwrap();
        assert_plain(&why);
    }
    let why = agreement::resume_misfit(Some(&a), &[&a], &b, false).unwrap();
    assert!(why.contains("Tue, 14 Nov 2023 23:13:20 GMT"), "{why}");
}
