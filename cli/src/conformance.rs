//! `hydra conformance`: every registered scheme through the conformance suite's live arm
//! (engine → faultnet → reference origin), with each scenario simulated and run live.

use std::path::PathBuf;
use std::time::Duration;

use crate::exit::Exit;
use clap::Args;
use hydra_conformance::live::{self, schemes, SuiteOptions};

/// Arguments of `hydra conformance`.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as JUnit XML here (one testsuite per scheme).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Only these schemes (by name: http, sftp, ftp, rangeline); repeatable.
    #[arg(long = "scheme", value_name = "NAME")]
    pub schemes: Vec<String>,
    /// Only trials whose name contains this; repeatable.
    #[arg(long = "only", value_name = "TEXT")]
    pub only: Vec<String>,
    /// Scenario directory (the files `hydra sim` reads). Default: `sim/scenarios`
    /// here, else in the source tree hydra was built from.
    #[arg(long, value_name = "DIR")]
    pub scenarios: Option<PathBuf>,
    /// Skip the scenario runs.
    #[arg(long)]
    pub no_scenarios: bool,
    /// Emulated round trip of the preempt-cost trial, milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub rtt_ms: u64,
    /// Repetitions of the preempt-cost measurement (the median is reported).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub reps: usize,
    /// Count known failures as failures (exit non-zero on them too).
    #[arg(long)]
    pub strict: bool,
    /// Instead of the suite: N seeded downloads through hostile mirrors (random protocols,
    /// faults, kills and resumes), each checked for corruption, leftovers and hangs.
    #[arg(long, value_name = "N")]
    pub chaos: Option<u64>,
    /// With --chaos: the first run's seed; run i uses SEED + i.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    pub seed: u64,
    /// With --chaos, a test hook: plant a violation the checker must report.
    #[arg(long, hide = true, value_name = "WHAT")]
    pub chaos_plant: Option<crate::chaos::Plant>,
}

fn scenario_dir(given: Option<PathBuf>) -> Option<PathBuf> {
    if given.is_some() {
        return given;
    }
    let here = PathBuf::from("sim/scenarios");
    if here.is_dir() {
        return Some(here);
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sim/scenarios");
    built.is_dir().then_some(built)
}

/// Runs `hydra conformance`.
pub async fn main(args: ConformanceArgs) -> Exit {
    if let Some(runs) = args.chaos {
        return crate::chaos::main(crate::chaos::ChaosOptions {
            runs,
            first_seed: args.seed,
            json: args.json,
            plant: args.chaos_plant,
        })
        .await;
    }
    let mut opts = SuiteOptions {
        preempt_rtt: Duration::from_millis(args.rtt_ms.max(1)),
        preempt_reps: args.reps.max(1),
        only: (!args.only.is_empty()).then(|| args.only.clone()),
        ..SuiteOptions::default()
    };
    if !args.no_scenarios {
        match scenario_dir(args.scenarios.clone()) {
            Some(dir) => match opts.with_scenarios_from(&dir) {
                Ok(o) => opts = o,
                Err(e) => {
                    eprintln!("hydra conformance: {e}");
                    return Exit::Usage;
                }
            },
            None => eprintln!(
                "hydra conformance: no sim/scenarios directory found; \
                 scenarios skipped (give --scenarios DIR)"
            ),
        }
    }
    let unmatched = opts.unmatched_only();
    if !unmatched.is_empty() {
        eprintln!(
            "hydra conformance: --only {} matches no trial (hydra conformance --help lists them)",
            unmatched.join(", ")
        );
        return Exit::Usage;
    }
    let all = match registered() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hydra conformance: cannot set up the schemes: {e}");
            return Exit::Internal;
        }
    };
    let known: Vec<String> = all.iter().map(|s| s.scheme.name().to_owned()).collect();
    for s in &args.schemes {
        if !known.contains(s) {
            eprintln!(
                "hydra conformance: no scheme {s:?} (registered: {})",
                known.join(", ")
            );
            return Exit::Usage;
        }
    }
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|s| args.schemes.is_empty() || args.schemes.iter().any(|n| n == s.scheme.name()))
        .collect();
    eprintln!(
        "hydra conformance: {} scheme(s), {} trials each + {} scenario(s); RTT {} ms for the preempt cost",
        chosen.len(),
        live::TRIALS.len(),
        opts.scenarios.len(),
        args.rtt_ms
    );
    let report = live::run_all(chosen, &opts).await;
    print!("{}", report.table());
    for (path, text) in [
        (&args.json, report.to_json()),
        (&args.junit, report.to_junit()),
    ] {
        if let Some(p) = path {
            if let Err(e) = std::fs::write(p, text) {
                eprintln!("hydra conformance: cannot write {}: {e}", p.display());
                return Exit::Disk;
            }
        }
    }
    let known_failures = report.known_failures();
    if !report.passed() || (args.strict && known_failures > 0) {
        eprintln!("hydra conformance: failed (see the reasons above)");
        return Exit::Internal;
    }
    if known_failures > 0 {
        eprintln!(
            "hint: {known_failures} known failure(s), listed by the scheme that has them \
             (its conformance module); --strict fails on them"
        );
    }
    Exit::Ok
}

/// Every scheme this binary ships, each with its reference origin and its known failures, in
/// a fixed order: http, sftp, ftp, then the rangeline example.
fn registered() -> Result<Vec<live::SchemeUnderTest>, live::LiveError> {
    Ok(vec![
        hydra_scheme_http::conformance::under_test()?,
        hydra_scheme_sftp::conformance::under_test()?,
        hydra_scheme_ftp::conformance::under_test()?,
        schemes::example(),
    ])
}
