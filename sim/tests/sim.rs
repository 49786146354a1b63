//! The seed's claims, checked in virtual time: deterministic, so the thresholds are the
//! issue's own and a failure is a regression, not noise.

use hydra_sim::experiments::{run_experiment, ExperimentOptions, Report};
use hydra_sim::Summary;

fn report(name: &str, seeds: u64) -> Report {
    run_experiment(name, &ExperimentOptions { seeds }).expect("a shipped experiment")
}

fn row<'a>(r: &'a Report, n: usize, arm: &str) -> &'a Summary {
    &r.rows
        .iter()
        .find(|x| x.summary.n == n && x.summary.arm == arm)
        .unwrap_or_else(|| panic!("no row n={n} arm={arm}"))
        .summary
}

#[test]
fn on_a_stationary_shared_bottleneck_hydra_stays_near_the_oracle_without_repairs_or_duplicates() {
    let r = report("storm", 12);
    for n in [1, 2, 4, 8, 16] {
        let s = row(&r, n, "hydra");
        assert_eq!(s.completed_runs, 12);
        assert!(s.ratio_mean.unwrap() <= 1.03, "n={n}: {s:?}");
        assert_eq!(s.dup_bytes_mean, 0.0, "n={n}");
        assert!(
            s.repairs_mean <= 0.5,
            "n={n}: a repair that buys nothing: {s:?}"
        );
    }
}

#[test]
fn unpropagated_shrinks_are_visible_as_duplicate_bytes_and_lost_time() {
    let r = report("storm", 12);
    for n in [2, 4, 8, 16] {
        let z = row(&r, n, "zombie");
        assert!(
            z.dup_bytes_mean > 0.0,
            "n={n}: the harness must see the storm"
        );
        assert!(z.ratio_mean.unwrap() > row(&r, n, "hydra").ratio_mean.unwrap());
    }
    assert!(row(&r, 4, "zombie").ratio_mean.unwrap() >= 1.2);
}

#[test]
fn a_collapsing_share_is_repaired_and_the_makespan_stays_near_the_oracle() {
    let r = report("collapse", 12);
    for n in [2, 4, 8] {
        let s = row(&r, n, "hydra");
        assert_eq!(s.completed_runs, 12);
        assert!(s.ratio_mean.unwrap() <= 1.04, "n={n}: {s:?}");
        assert!(
            s.repairs_mean >= 1.0,
            "n={n}: the collapse must be repaired"
        );
        let st = row(&r, n, "static");
        assert!(
            st.ratio_mean.unwrap() > 2.0,
            "n={n}: the static split should suffer"
        );
    }
}

#[test]
fn when_a_mirror_dies_the_static_split_never_completes_and_hydra_always_does() {
    let r = report("failure", 12);
    let st = row(&r, 2, "static");
    assert!(st.completed_fraction < 1.0);
    assert_eq!(st.completed_runs, 0);
    let h = row(&r, 2, "hydra");
    assert_eq!(h.completed_runs, 12);
    assert_eq!(h.completed_fraction, 1.0);
}

#[test]
fn the_excess_over_the_oracle_stops_growing_with_object_size() {
    let r = report("sweep", 4);
    let fit = |arm: &str| r.fit.iter().find(|f| f.arm == arm).expect("fit");
    let (h, c) = (fit("hydra"), fit("committed"));
    let exponent =
        |f: &hydra_sim::experiments::Fit| f.exponent.unwrap_or_else(|| panic!("unfitted: {f:?}"));
    assert!(exponent(h) <= 0.36, "{h:?}");
    assert!(
        exponent(c) >= 0.4,
        "the committed baseline must show the classical law: {c:?}"
    );
    assert!(exponent(h) < exponent(c));
    assert!(h.requests_growth < c.requests_growth);
}

#[test]
fn a_simulation_is_a_pure_function_of_its_seed() {
    let a = serde_json::to_string(&report("collapse", 2)).unwrap();
    let b = serde_json::to_string(&report("collapse", 2)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_first_download_from_three_unequal_mirrors_completes_without_duplicates_within_today_s_bound() {
    // The opening row of issue #29 (6/3/1 MiB/s, 20/30/40 ms, 32 MiB): the default search and
    // every fixed count deliver each byte once; the search's first download stays within
    // 1.09× (1.076× at 12 seeds since a repair projects a fetch left alone on its link at the
    // pair's rate, 1.110× before; the target is 1.03×).
    let r = report("opening", 12);
    for (n, arm) in [(1, "search"), (1, "hydra"), (2, "hydra"), (4, "hydra")] {
        let s = row(&r, n, arm);
        assert_eq!(s.completed_runs, 12, "n={n} {arm}");
        assert_eq!(s.dup_bytes_mean, 0.0, "n={n} {arm}");
    }
    let search = row(&r, 1, "search");
    assert!(search.ratio_mean.unwrap() <= 1.09, "{search:?}");
}

#[test]
fn an_in_order_consumer_completes_every_seed_and_pays_at_most_a_tenth_over_the_file() {
    // The pipe row of issue #28 (bench/peers/collapse.toml in virtual time): with the
    // lookahead of the default 16 MiB stream buffer, the slow mirror holding the write point
    // is repaired like any laggard and two connections per mirror cover each piece's round
    // trip, so the stream costs no more than a tenth over the same download to a file
    // (docs/results/sim.md: 1.100× the oracle against the file's 1.078×; 1.173× with one
    // connection per mirror); every lookahead, the smallest included, completes every seed
    // without a byte delivered twice.
    let r = report("stream", 12);
    let file = row(&r, 0, "file").ratio_mean.unwrap();
    for n in [63, 15, 3] {
        let s = row(&r, n, "stream");
        assert_eq!(s.completed_runs, 12, "lookahead {n} MiB: {s:?}");
        assert_eq!(s.dup_bytes_mean, 0.0, "lookahead {n} MiB");
    }
    let stream = row(&r, 15, "stream").ratio_mean.unwrap();
    assert!(stream <= 1.1 * file, "stream {stream} against file {file}");
}
