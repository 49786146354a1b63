//! Property-based fuzzing of what faultnet reads from users: the unit strings and scenario
//! files. Arbitrary and near-valid input never panics; what parses round-trips.
//!
//! Cases per property: the default below, or `HYDRA_FUZZ_CASES` for a longer run.

use faultnet::scenario::Scenario;
use faultnet::units::{ByteSize, Dur, Rate};
use proptest::prelude::*;

fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("HYDRA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(n)
}

/// Scenario files shipped with the repository: the seeds the mutations start from.
const SEEDS: &[&str] = &[
    include_str!("../../sim/scenarios/collapse.toml"),
    include_str!("../../sim/scenarios/storm.toml"),
    include_str!("../../sim/scenarios/failure.toml"),
    include_str!("../../bench/peers/die.toml"),
];

/// A number as a scenario file might write one, valid or not.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|x| x.to_string()),
        (0u32..100_000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        (1u32..10, 0i32..400).prop_map(|(a, e)| format!("{a}e{e}")),
        "[0-9._eE+-]{0,12}",
    ]
}

fn unit_string(units: &'static [&'static str]) -> impl Strategy<Value = String> {
    (number(), prop::sample::select(units), "[ ]{0,2}")
        .prop_map(|(n, u, pad)| format!("{pad}{n}{u}{pad}"))
}

const BYTE_UNITS: &[&str] = &[
    "", "B", "k", "kB", "KB", "K", "M", "MB", "G", "GB", "KiB", "Ki", "MiB", "Mi", "GiB", "Gi",
    "TB", "x",
];
const RATE_UNITS: &[&str] = &[
    "/s", "B/s", "kB/s", "MB/s", "GB/s", "MiB/s", "GiBps", "Mbit/s", "",
];
const DUR_UNITS: &[&str] = &["ns", "us", "µs", "ms", "s", "m", "min", "", "h"];

/// One edit of a scenario text: a line dropped or duplicated, a value replaced, bytes
/// inserted.
#[derive(Debug, Clone)]
enum Edit {
    DropLine(usize),
    DupLine(usize),
    Value(usize, String),
    Insert(usize, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    let value = prop_oneof![
        unit_string(BYTE_UNITS).prop_map(|s| format!("\"{s}\"")),
        unit_string(RATE_UNITS).prop_map(|s| format!("\"{s}\"")),
        unit_string(DUR_UNITS).prop_map(|s| format!("\"{s}\"")),
        number(),
        Just("\"\"".to_owned()),
        Just("[]".to_owned()),
        "\"[a-z_]{0,8}\"",
    ];
    prop_oneof![
        any::<usize>().prop_map(Edit::DropLine),
        any::<usize>().prop_map(Edit::DupLine),
        (any::<usize>(), value).prop_map(|(i, v)| Edit::Value(i, v)),
        (any::<usize>(), "[\\[\\]=\"a-z0-9 \n.#]{0,6}").prop_map(|(i, s)| Edit::Insert(i, s)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match e {
            Edit::DropLine(i) => {
                lines.remove(i % n);
            }
            Edit::DupLine(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::Value(i, v) => {
                let l = &mut lines[i % n];
                if let Some((k, _)) = l.split_once('=') {
                    *l = format!("{k}= {v}");
                }
            }
            Edit::Insert(i, s) => {
                let l = &mut lines[i % n];
                let at = (i / n) % (l.len() + 1);
                if l.is_char_boundary(at) {
                    l.insert_str(at, s);
                }
            }
        }
    }
    lines.join("\n")
}

/// A parsed scenario serializes, and the text reads back as the same scenario.
fn round_trips(s: &Scenario) -> Result<(), TestCaseError> {
    let text = s.to_toml();
    let again = Scenario::from_toml(&text);
    prop_assert!(again.is_ok(), "{text}\n{:?}", again);
    prop_assert_eq!(&again.unwrap(), s);
    Ok(())
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn any_string_read_as_a_unit_is_a_value_or_an_error_never_a_panic(s in "\\PC{0,24}") {
        let _ = s.parse::<ByteSize>();
        let _ = s.parse::<Rate>();
        let _ = s.parse::<Dur>();
    }

    #[test]
    fn a_size_that_parses_prints_as_a_size_that_parses_to_it(s in unit_string(BYTE_UNITS)) {
        if let Ok(b) = s.parse::<ByteSize>() {
            let shown = b.to_string();
            let again = shown.parse::<ByteSize>();
            prop_assert!(again.is_ok(), "{s:?} → {b:?} → {shown:?} → {again:?}");
            prop_assert_eq!(again.unwrap(), b, "{:?} → {}", s, shown);
        }
    }

    #[test]
    fn a_rate_that_parses_prints_as_a_rate_that_parses_to_it(s in unit_string(RATE_UNITS)) {
        if let Ok(r) = s.parse::<Rate>() {
            prop_assert!(r.0.is_finite() && r.0 >= 0.0, "{s:?} → {r:?}");
            let shown = r.to_string();
            let again = shown.parse::<Rate>();
            prop_assert!(again.is_ok(), "{s:?} → {r:?} → {shown:?} → {again:?}");
            prop_assert_eq!(again.unwrap(), r, "{:?} → {}", s, shown);
        }
    }

    #[test]
    fn a_duration_that_parses_prints_as_the_same_duration(s in unit_string(DUR_UNITS)) {
        if let Ok(d) = s.parse::<Dur>() {
            let shown = d.to_string();
            let again = shown.parse::<Dur>();
            prop_assert_eq!(again, Ok(d), "{:?} → {}", s, shown);
        }
    }

    #[test]
    fn any_text_read_as_a_scenario_is_a_scenario_or_an_error_never_a_panic(s in "\\PC{0,200}") {
        if let Ok(sc) = Scenario::from_toml(&s) {
            round_trips(&sc)?;
        }
    }

    #[test]
    fn an_edited_scenario_file_is_read_or_refused_and_what_is_read_round_trips(
        seed in 0..SEEDS.len(), edits in prop::collection::vec(edit(), 1..6)
    ) {
        let text = apply(SEEDS[seed], &edits);
        if let Ok(sc) = Scenario::from_toml(&text) {
            round_trips(&sc)?;
        }
    }
}

#[test]
fn every_seed_scenario_parses_and_round_trips() {
    for (i, text) in SEEDS.iter().enumerate() {
        let sc = Scenario::from_toml(text).unwrap_or_else(|e| panic!("seed {i}: {e}"));
        round_trips(&sc).unwrap_or_else(|e| panic!("seed {i}: {e}"));
    }
}

/// Regressions found by the properties above.
mod found {
    use super::*;

    #[test]
    fn a_duration_past_u64_nanoseconds_is_an_error_not_a_panic() {
        assert!("1e29ns".parse::<Dur>().is_err());
        assert!("1e300s".parse::<Dur>().is_err());
        // The edit proptest first found: a value set to "1e29ns", a line dropped.
        let edits = [
            Edit::Value(3470824201841153839, "\"1e29ns\"".into()),
            Edit::DropLine(185937450740),
        ];
        let text = apply(SEEDS[1], &edits);
        assert!(text.contains("\"1e29ns\""));
        assert!(Scenario::from_toml(&text).is_err());
    }

    #[test]
    fn a_rate_past_u64_prints_its_value_not_a_saturated_one() {
        let r: Rate = "1e20GiBps".parse().unwrap();
        let back: Rate = r.to_string().parse().unwrap();
        assert!(
            (back.0 - r.0).abs() <= r.0 * 1e-9,
            "{r} read back as {back}"
        );
        assert!(
            "1e308GB/s".parse::<Rate>().is_err(),
            "an infinite rate is refused"
        );
    }

    #[test]
    fn a_size_or_rate_the_short_form_would_round_prints_exactly() {
        // The 100,000-case run found `object_size = 1000000001` written back as `1GB`.
        let edits = [Edit::Value(1678922943073486709, "1000000001".into())];
        let text = apply(SEEDS[0], &edits);
        let sc = Scenario::from_toml(&text).expect("an edited size still parses");
        assert_eq!(sc.object_size, ByteSize(1_000_000_001));
        round_trips(&sc).unwrap();
        for n in [1_000_000_001u64, (1 << 53) + 1, u64::MAX] {
            assert_eq!(ByteSize(n).to_string().parse::<ByteSize>(), Ok(ByteSize(n)));
        }
        let r = Rate(1_234_567.891);
        assert_eq!(r.to_string().parse::<Rate>(), Ok(r));
        assert_eq!(
            Rate(1_500_000.0).to_string(),
            "1.5MB/s",
            "short where exact"
        );
        assert_eq!(ByteSize(64_000_000).to_string(), "64MB");
    }

    #[test]
    fn a_duration_read_from_minutes_prints_as_the_same_duration() {
        let d: Dur = "69905.869m".parse().unwrap();
        assert_eq!(d.to_string().parse::<Dur>(), Ok(d));
    }
}
