//! The **live arm**: a scheme through the engine, through faultnet, to an origin — its own
//! reference origin or a real server — measured against the plugin contract.
//!
//! A plugin's whole conformance test is a few lines:
//!
//! ```no_run
//! # async fn t() -> Result<(), hydra_conformance::live::LiveError> {
//! use hydra_conformance::live::{run_suite, schemes, SuiteOptions};
//! let report = run_suite(schemes::example(), &SuiteOptions::quick()).await;
//! assert!(report.failures().next().is_none(), "{report:#?}");
//! # Ok(()) }
//! ```
//!
//! or, one test per trial (`cargo test -p my-scheme conformance::preempt_cost` runs one), a
//! `harness = false` test whose `main` is [`Harness::main`]:
//!
//! ```no_run
//! use hydra_conformance::live::{schemes, Harness};
//! fn main() -> std::process::ExitCode {
//!     Harness::new(|| Ok(schemes::example())).main()
//! }
//! ```
//!
//! # Trials
//!
//! Every trial has a stable name, `conformance::<scheme>::<trial>`, and ends in
//! [`Outcome::Pass`], [`Outcome::Fail`] (naming the [`Check`] and why) or [`Outcome::Skip`]
//! (naming the capability or origin fault that rules it out). Every trial of [`TRIALS`] is
//! reported for every scheme: nothing is left out silently. `docs/conformance.md` defines each
//! check; the list:
//!
//! | trial | check | needs |
//! |---|---|---|
//! | `coverage_single_connection` | coverage | — |
//! | `coverage_four_connections` | coverage | `ranged` |
//! | `coverage_two_sources` | coverage | `ranged` |
//! | `coverage_under_reset` | coverage, liveness | — |
//! | `coverage_under_truncation` | coverage, liveness | — |
//! | `coverage_under_stall` | coverage, liveness | — |
//! | `liveness_one_source_dies` | liveness, coverage | `ranged` |
//! | `liveness_one_source_hangs` | liveness, coverage | `ranged` |
//! | `liveness_all_sources_dead_then_resume` | liveness, coverage | `ranged` |
//! | `preempt_cost` | preempt cost | `ranged` |
//! | `bad_server_ignores_ranges` | bad server | origin fault `ignore_ranges` |
//! | `bad_server_truncates_every_response` | bad server | origin fault `truncate_every` |
//! | `bad_server_wrong_range` | bad server | origin fault `wrong_range` |
//! | `bad_server_refuses_requests` | bad server | origin fault `refuse_requests` |
//! | `bad_server_replaces_object` | bad server | origin can replace its object |
//! | `bad_server_refuses_connections` | bad server | — |
//! | `bad_server_resets_every_connection` | bad server | — |
//! | `capability_unranged_streams_from_zero` | capability | — |
//! | `capability_connection_ceiling` | capability | — |
//! | `scenario_<name>` | scenario (coverage, makespan live vs sim) | `ranged` |
//!
//! Trials that inject faults on the wire (resets, cuts, stalls, dead links, an emulated round
//! trip) also need a [`Transport`] the emulator can reach: a scheme reading local storage
//! ([`Transport::Local`]) skips them with that reason.

pub mod example;
mod harness;
mod hostile;
pub mod origin;
mod preempt;
pub mod report;
mod rig;
mod scenarios;
pub mod schemes;
mod trials;

use std::sync::Arc;
use std::time::{Duration, Instant};

use faultnet::scenario::Scenario;
use hydra_scheme::{Scheme, Transport};

pub use harness::Harness;

pub use origin::{LiveOrigin, OriginFactory, OriginFault};
pub use report::{
    Check, Outcome, PreemptCost, ScenarioRow, SchemeReport, SuiteReport, TrialResult,
};
pub use rig::sha256_hex;
pub use trials::TRIALS;

/// Why the rig could not be built. Trials turn these into failures of [`Check::Setup`].
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// An origin or socket failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// faultnet refused the setup.
    #[error("faultnet: {0}")]
    Proxy(String),
    /// An origin URL did not parse.
    #[error("bad URL: {0}")]
    Url(String),
    /// The origin cannot do what was asked.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A probe failed.
    #[error("probe: {0}")]
    Probe(String),
}

/// A scheme, where to find origins for it, and the failures it is known to have.
#[derive(Clone)]
pub struct SchemeUnderTest {
    /// The plugin.
    pub scheme: Arc<dyn Scheme>,
    /// Starts origins serving the object.
    pub origin_factory: Arc<dyn OriginFactory>,
    /// Trials this scheme is known to fail, each with why (rclone's per-backend lists): they
    /// run and are reported, but do not fail a suite run; under [`Harness`] they are ignored
    /// tests (`cargo test -- --ignored` runs them).
    pub known_failures: Vec<KnownFailure>,
}

impl std::fmt::Debug for SchemeUnderTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemeUnderTest")
            .field("scheme", &self.scheme.name())
            .field("origin", &self.origin_factory.name())
            .field("transport", &self.scheme.transport())
            .field("known_failures", &self.known_failures.len())
            .finish()
    }
}

impl SchemeUnderTest {
    /// `scheme` against origins from `origin_factory`, with no known failures.
    pub fn new(scheme: Arc<dyn Scheme>, origin_factory: Arc<dyn OriginFactory>) -> Self {
        SchemeUnderTest {
            scheme,
            origin_factory,
            known_failures: Vec::new(),
        }
    }

    /// Adds a known failure of `trial` (a name of [`TRIALS`]), with why.
    pub fn known_failure(mut self, trial: &str, why: &str) -> Self {
        self.known_failures.push(KnownFailure {
            scheme: self.scheme.name().to_owned(),
            trial: trial.to_owned(),
            why: why.to_owned(),
        });
        self
    }

    /// Whether faultnet must rewrite announced data addresses (FTP's passive replies) so
    /// that data connections cross the emulated link too.
    pub(crate) fn announced_data(&self) -> bool {
        self.scheme.transport() == Transport::TcpWithAnnouncedData
    }
}

/// Options of a suite run. [`SuiteOptions::default`] is what `hydra conformance` uses;
/// [`SuiteOptions::quick`] is for `cargo test`.
///
/// | field | default | quick |
/// |---|---|---|
/// | `size` | 2 MiB | 1 MiB |
/// | `link_rate` | 4 MB/s per link | 4 MB/s |
/// | `link_delay` | 5 ms one way | 5 ms |
/// | `stall_timeout` | 2 s (the engine's) | 2 s |
/// | `preempt_rtt` | 100 ms | 100 ms |
/// | `preempt_reps` | 5 | 3 |
/// | `preempt_tolerance_rtt` | 0.3 | 0.3 |
/// | `scenarios` | none (the CLI loads `sim/scenarios/`) | none |
/// | `scenario_size_cap` | 2 MB | 1 MB |
/// | `trial_timeout` | 40 s | 40 s |
/// | `only` | every trial | every trial |
/// | `seed` | 1 | 1 |
/// | `known_failures` | none (each scheme lists its own) | none |
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Object size of the coverage, liveness and bad-server trials.
    pub size: u64,
    /// Capacity of each emulated link, bytes/s.
    pub link_rate: f64,
    /// One-way delay of each link in the coverage, liveness and bad-server trials.
    pub link_delay: Duration,
    /// The engine's stall timeout; the liveness window W is this plus the largest setup cost
    /// (plus [`LIVENESS_SLACK`]).
    pub stall_timeout: Duration,
    /// Added to the liveness window W (default [`LIVENESS_SLACK`]).
    pub liveness_slack: Duration,
    /// The emulated round trip of the preempt-cost trial.
    pub preempt_rtt: Duration,
    /// Repetitions of the preempt-cost measurement (the median is reported).
    pub preempt_reps: usize,
    /// Largest allowed |measured − declared| preempt cost, in round trips.
    pub preempt_tolerance_rtt: f64,
    /// Scenarios to run live and simulated.
    pub scenarios: Vec<Scenario>,
    /// Live scenario runs use `min(object_size, this)` (the simulation uses the same size).
    pub scenario_size_cap: u64,
    /// Bound on each trial.
    pub trial_timeout: Duration,
    /// Run only trials whose name contains one of these (others are reported as skipped); an
    /// entry that matches no trial is a failed `setup` trial, not a silent skip.
    pub only: Option<Vec<String>>,
    /// Seed of the faultnet draws and the object content.
    pub seed: u64,
    /// Failures known and explained beyond the scheme's own
    /// ([`SchemeUnderTest::known_failures`]); reported, but they do not fail the run.
    pub known_failures: Vec<KnownFailure>,
}

/// A failure that is known, with why, in the manner of rclone's per-backend lists: it is still
/// run and reported, with its reason, but does not fail the run. A known failure that passes
/// is reported as a note so the entry can be removed.
#[derive(Debug, Clone)]
pub struct KnownFailure {
    /// The scheme's name, or `"*"` for every scheme.
    pub scheme: String,
    /// The trial's short name.
    pub trial: String,
    /// Why it fails and where it is to be fixed.
    pub why: String,
}

/// Added to W for the engine's tick and backoff granularity and a loaded 2-core machine.
pub const LIVENESS_SLACK: Duration = Duration::from_secs(1);

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            size: 2 << 20,
            link_rate: 4e6,
            link_delay: Duration::from_millis(5),
            stall_timeout: Duration::from_secs(2),
            liveness_slack: LIVENESS_SLACK,
            preempt_rtt: Duration::from_millis(100),
            preempt_reps: 5,
            preempt_tolerance_rtt: 0.3,
            scenarios: Vec::new(),
            scenario_size_cap: 2_000_000,
            trial_timeout: Duration::from_secs(40),
            only: None,
            seed: 1,
            known_failures: Vec::new(),
        }
    }
}

impl SuiteOptions {
    /// Smaller objects, fewer repetitions and a wider preempt tolerance, for `cargo test`.
    pub fn quick() -> Self {
        SuiteOptions {
            size: 1 << 20,
            preempt_reps: 3,
            // `cargo test` runs on a loaded machine: half a round trip of tolerance still
            // catches a plugin lying by two, and `hydra conformance` keeps 0.3; likewise the
            // liveness window gets 4 s of slack (a transfer stuck for good still fails).
            preempt_tolerance_rtt: 0.6,
            liveness_slack: Duration::from_secs(4),
            scenario_size_cap: 1_000_000,
            ..SuiteOptions::default()
        }
    }

    /// Loads every `*.toml` in `dir` (sorted by file name) into `scenarios`.
    pub fn with_scenarios_from(mut self, dir: &std::path::Path) -> Result<Self, String> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let s = Scenario::from_file(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            self.scenarios.push(s);
        }
        Ok(self)
    }

    fn selected(&self, trial: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|v| v.iter().any(|s| trial.contains(s.as_str())))
    }

    /// Every trial name a run with these options has: [`TRIALS`], then one per scenario.
    pub fn trial_names(&self) -> Vec<String> {
        let mut names: Vec<String> = TRIALS.iter().map(|t| (*t).to_owned()).collect();
        names.extend(
            self.scenarios
                .iter()
                .map(|s| format!("scenario_{}", s.name)),
        );
        names
    }

    /// The `only` entries that match no trial (a misspelling).
    pub fn unmatched_only(&self) -> Vec<String> {
        let names = self.trial_names();
        self.only
            .iter()
            .flatten()
            .filter(|o| !names.iter().any(|n| n.contains(o.as_str())))
            .cloned()
            .collect()
    }

    fn known_failure<'a>(&'a self, sut: &'a SchemeUnderTest, trial: &str) -> Option<&'a str> {
        let name = sut.scheme.name();
        sut.known_failures
            .iter()
            .chain(&self.known_failures)
            .find(|k| (k.scheme == "*" || k.scheme == name) && k.trial == trial)
            .map(|k| k.why.as_str())
    }
}

/// Runs every trial of [`TRIALS`] (and one per scenario) against one scheme, one after the
/// other. Never panics on a plugin's misbehaviour: that is a failed trial.
pub async fn run_suite(sut: SchemeUnderTest, opts: &SuiteOptions) -> SchemeReport {
    let mut report = SchemeReport {
        scheme: sut.scheme.name().to_owned(),
        origin: sut.origin_factory.name().to_owned(),
        capabilities: format!("{:?}", sut.scheme.capabilities()),
        trials: Vec::new(),
        preempt: None,
        scenarios: Vec::new(),
    };
    for entry in opts.unmatched_only() {
        report.trials.push(TrialResult {
            name: format!("conformance::{}::only", report.scheme),
            trial: "only".into(),
            outcome: Outcome::fail(
                Check::Setup,
                format!("--only {entry:?} matches no trial (a misspelled name?)"),
            ),
            known_failure: None,
            seconds: 0.0,
            detail: String::new(),
        });
    }
    for trial in opts.trial_names() {
        let result = run_trial(&sut, &trial, opts, &mut report).await;
        report.trials.push(result);
    }
    report
}

/// Runs one trial (a name of [`SuiteOptions::trial_names`]) against `sut`, within
/// `opts.trial_timeout`; the preempt-cost and scenario trials also fill their rows of `report`.
pub async fn run_trial(
    sut: &SchemeUnderTest,
    trial: &str,
    opts: &SuiteOptions,
    report: &mut SchemeReport,
) -> TrialResult {
    let started = Instant::now();
    let (outcome, detail) = if !opts.selected(trial) {
        (Outcome::skip("not selected (--only)"), String::new())
    } else if let Some(why) = trials::gate(trial, sut) {
        (Outcome::skip(why), String::new())
    } else {
        let run = trials::run(trial, sut, opts, report);
        match tokio::time::timeout(opts.trial_timeout, run).await {
            Ok(r) => r,
            Err(_) => (
                Outcome::fail(
                    Check::Liveness,
                    format!("the trial did not end within {:?}", opts.trial_timeout),
                ),
                String::new(),
            ),
        }
    };
    let known = opts.known_failure(sut, trial).map(str::to_owned);
    TrialResult {
        name: format!("conformance::{}::{trial}", sut.scheme.name()),
        known_failure: known.filter(|_| outcome.is_fail()),
        trial: trial.to_owned(),
        outcome,
        seconds: report::secs(started.elapsed()),
        detail,
    }
}

/// Runs [`run_suite`] for each scheme in turn.
pub async fn run_all(suts: Vec<SchemeUnderTest>, opts: &SuiteOptions) -> SuiteReport {
    let mut out = SuiteReport::default();
    for sut in suts {
        let known = sut.known_failures.clone();
        let r = run_suite(sut, opts).await;
        for k in known.iter().chain(&opts.known_failures) {
            let passed = r
                .trial(&k.trial)
                .is_some_and(|t| t.outcome == Outcome::Pass);
            if passed && (k.scheme == "*" || k.scheme == r.scheme) {
                out.notes.push(format!(
                    "known failure {} passed for {} this run (remove it from the list once it passes every run)",
                    k.trial, r.scheme
                ));
            }
        }
        out.schemes.push(r);
    }
    if !opts.scenarios.is_empty() {
        out.notes.push(format!(
            "live scenario runs use object_size capped at {} bytes; the simulation uses the same size",
            opts.scenario_size_cap
        ));
    }
    out
}
