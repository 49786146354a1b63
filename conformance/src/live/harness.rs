//! The suite as one test per trial, for a plugin crate's `cargo test`: a `harness = false`
//! test target whose `main` is [`Harness::main`] lists every trial as
//! `conformance::<trial>`, so `cargo test -p my-scheme conformance::preempt_cost` runs one
//! and CI shows each.
//!
//! A trial the scheme cannot take (a capability it does not declare, a transport faultnet
//! cannot reach, an origin fault its origin cannot show) and a known failure are listed as
//! *ignored*, each with its reason printed once before the run; `cargo test -- --ignored`
//! runs them. A trial that turns out to be skipped only at run time fails: a skip the
//! listing did not foresee is never a pass.

use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};

use super::report::{Outcome, SchemeReport};
use super::trials::{self, OriginNeed};
use super::{run_trial, LiveError, SchemeUnderTest, SuiteOptions};

type Build = dyn Fn() -> Result<SchemeUnderTest, LiveError> + Send + Sync;

/// The conformance suite for one scheme as libtest trials.
pub struct Harness {
    build: Arc<Build>,
    opts: SuiteOptions,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Why a trial is listed as ignored.
struct Listing {
    ignored: Option<String>,
}

impl Harness {
    /// The suite for the scheme `build` makes (called once to list the trials and once per
    /// trial, so each trial gets fresh state), with [`SuiteOptions::quick`].
    pub fn new(
        build: impl Fn() -> Result<SchemeUnderTest, LiveError> + Send + Sync + 'static,
    ) -> Self {
        Harness {
            build: Arc::new(build),
            opts: SuiteOptions::quick(),
        }
    }

    /// Other suite options.
    pub fn options(mut self, opts: SuiteOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Every trial, with the ignored ones marked and their reasons.
    pub fn trials(&self) -> Result<Vec<Trial>, LiveError> {
        let sut = (self.build)()?;
        let names = self.opts.trial_names();
        let listings = runtime()?.block_on(list(&sut, &names))?;
        let mut out = Vec::new();
        for (name, listing) in names.into_iter().zip(listings) {
            let full = format!("conformance::{name}");
            if let Some(why) = &listing.ignored {
                eprintln!("{full}: ignored: {why}");
            }
            let build = self.build.clone();
            let opts = self.opts.clone();
            let trial = Trial::test(full, move || run_one(&*build, &name, &opts))
                .with_ignored_flag(listing.ignored.is_some());
            out.push(trial);
        }
        Ok(out)
    }

    /// Parses libtest's arguments (one test thread unless `--test-threads` says otherwise:
    /// trials measure time, and parallel trials on a small machine turn slack into flakes),
    /// runs the trials and returns the exit code.
    pub fn main(self) -> ExitCode {
        let mut args = Arguments::from_args();
        args.test_threads.get_or_insert(1);
        match self.trials() {
            Ok(trials) => libtest_mimic::run(&args, trials).exit_code(),
            Err(e) => {
                eprintln!("conformance: cannot list the trials: {e}");
                ExitCode::FAILURE
            }
        }
    }
}

/// Why each of `names` is ignored for `sut`, if it is: a known failure, a capability or
/// transport gate, or an origin that cannot show the fault (asked of one started origin).
async fn list(sut: &SchemeUnderTest, names: &[String]) -> Result<Vec<Listing>, LiveError> {
    let origin = sut.origin_factory.start(4096, 1).await?;
    Ok(names
        .iter()
        .map(|name| {
            let known = sut
                .known_failures
                .iter()
                .find(|k| k.trial == *name)
                .map(|k| format!("known failure: {}", k.why));
            let unable = trials::origin_need(name).and_then(|need| match need {
                OriginNeed::Fault(f) if !origin.supports(f) => Some(format!(
                    "the {} origin cannot show the fault {}",
                    sut.origin_factory.name(),
                    f.name()
                )),
                OriginNeed::Replace if !origin.can_replace() => Some(format!(
                    "the {} origin cannot replace its object",
                    sut.origin_factory.name()
                )),
                _ => None,
            });
            Listing {
                ignored: known.or_else(|| trials::gate(name, sut)).or(unable),
            }
        })
        .collect())
}

fn runtime() -> Result<tokio::runtime::Runtime, LiveError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Runs one trial on its own runtime against a freshly built scheme.
fn run_one(build: &Build, name: &str, opts: &SuiteOptions) -> Result<(), Failed> {
    let sut = build().map_err(|e| format!("setup: {e}"))?;
    let mut report = SchemeReport {
        scheme: sut.scheme.name().to_owned(),
        origin: sut.origin_factory.name().to_owned(),
        capabilities: format!("{:?}", sut.scheme.capabilities()),
        trials: Vec::new(),
        preempt: None,
        scenarios: Vec::new(),
    };
    let result = runtime()
        .map_err(|e| format!("setup: {e}"))?
        .block_on(run_trial(&sut, name, opts, &mut report));
    let detail = if result.detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", result.detail)
    };
    match &result.outcome {
        Outcome::Pass => Ok(()),
        Outcome::Skip { .. } => Err(format!(
            "skipped at run time, which the listing did not foresee: {}",
            result.outcome.reason()
        )
        .into()),
        Outcome::Fail { .. } => Err(format!("{}{detail}", result.outcome.reason()).into()),
    }
}
