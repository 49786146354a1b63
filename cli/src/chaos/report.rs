//! The chaos run's record: one line per run as it ends, the summary table, the failing seeds
//! with their scenarios, and the JSON report.

use super::check::{Kind, Step, Violation};
use super::child::{Outcome, Ran};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// One download of a run.
#[derive(Debug, Clone)]
pub struct StepRecord {
    pub step: Step,
    pub ran: Ran,
    pub bound: Duration,
}

/// One run.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub seed: u64,
    pub scenario: String,
    pub steps: Vec<StepRecord>,
    pub violations: Vec<Violation>,
    /// The runner could not set the run up (not a finding about hydra).
    pub setup_error: Option<String>,
}

impl RunRecord {
    /// How the run ended: the last download's outcome.
    pub fn last(&self) -> Option<Outcome> {
        self.steps.last().map(|s| s.ran.outcome)
    }

    pub fn failed(&self) -> bool {
        !self.violations.is_empty() || self.setup_error.is_some()
    }

    pub fn elapsed(&self) -> Duration {
        self.steps.iter().map(|s| s.ran.elapsed).sum()
    }

    /// The line printed as the run ends.
    pub fn line(&self) -> String {
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{} {} in {:.2} s (bound {:.0} s)",
                    step_name(s.step),
                    s.ran.outcome.label(),
                    s.ran.elapsed.as_secs_f64(),
                    s.bound.as_secs_f64()
                )
            })
            .collect();
        let verdict = match (&self.setup_error, self.violations.len()) {
            (Some(e), _) => format!("SETUP FAILED: {e}"),
            (None, 0) => "ok".into(),
            (None, n) => format!("{n} VIOLATION(S)"),
        };
        format!("seed {}: {} | {verdict}", self.seed, steps.join("; "))
    }

    /// The failing run on one line: seed, what broke, the scenario, what hydra said.
    pub fn failure_line(&self) -> String {
        let mut what: Vec<String> = self.violations.iter().map(|v| v.to_string()).collect();
        if let Some(e) = &self.setup_error {
            what.push(format!("setup failed: {e}"));
        }
        let said: Vec<&str> = self
            .steps
            .iter()
            .map(|s| s.ran.said.as_str())
            .filter(|s| !s.is_empty())
            .collect();
        format!(
            "FAIL seed {}: {} || {}{}",
            self.seed,
            what.join("; "),
            self.scenario,
            if said.is_empty() {
                String::new()
            } else {
                format!(" || hydra said: {}", said.join(" / "))
            }
        )
    }
}

fn step_name(s: Step) -> &'static str {
    match s {
        Step::Get => "get",
        Step::Resume => "get -c",
    }
}

/// Runs with at least one violation of `kind`.
fn runs_with(records: &[RunRecord], kind: Kind) -> usize {
    records
        .iter()
        .filter(|r| r.violations.iter().any(|v| v.kind() == kind))
        .count()
}

/// How the runs ended, by final outcome.
fn exits(records: &[RunRecord]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in records {
        let k = match r.last() {
            None => "not run".into(),
            // The only kill not followed by a resume: FILE was already complete.
            Some(Outcome::Killed) => "kill -9 after FILE was complete".into(),
            Some(o) => o.label(),
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

/// The summary table.
pub fn table(records: &[RunRecord]) -> String {
    let mut s = String::new();
    let resumed = records.iter().filter(|r| r.steps.len() > 1).count();
    let total: f64 = records.iter().map(|r| r.elapsed().as_secs_f64()).sum();
    s.push_str(&format!(
        "chaos: {} runs ({} killed and resumed with -c), {:.1} s of downloads, mean {:.2} s\n\n",
        records.len(),
        resumed,
        total,
        total / records.len().max(1) as f64
    ));
    s.push_str("| final exit | runs |\n|---|---|\n");
    for (k, n) in exits(records) {
        s.push_str(&format!("| {k} | {n} |\n"));
    }
    s.push_str("\n| invariant | runs breaking it |\n|---|---|\n");
    for (name, kind) in [
        (
            "silent corruption (exit 0, FILE not the object)",
            Kind::Corruption,
        ),
        (
            "partial FILE (failure or kill left a file)",
            Kind::FileAfterFailure,
        ),
        ("past bound (killed by the runner)", Kind::PastBound),
        ("crash (signal or panic)", Kind::Crash),
    ] {
        s.push_str(&format!("| {name} | {} |\n", runs_with(records, kind)));
    }
    let setup = records.iter().filter(|r| r.setup_error.is_some()).count();
    s.push_str(&format!("| runner could not set the run up | {setup} |\n"));
    s
}

/// The JSON report.
pub fn json(first_seed: u64, records: &[RunRecord]) -> Value {
    let runs: Vec<Value> = records
        .iter()
        .map(|r| {
            json!({
                "seed": r.seed,
                "scenario": r.scenario,
                "steps": r.steps.iter().map(|s| json!({
                    "step": step_name(s.step),
                    "outcome": s.ran.outcome.label(),
                    "exit": match s.ran.outcome { Outcome::Exited(c) => Some(c), _ => None },
                    "elapsed_ms": s.ran.elapsed.as_millis() as u64,
                    "bound_ms": s.bound.as_millis() as u64,
                    "stderr": s.ran.said,
                })).collect::<Vec<_>>(),
                "violations": r.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                "setup_error": r.setup_error,
            })
        })
        .collect();
    json!({
        "first_seed": first_seed,
        "runs": records.len(),
        "final_exits": exits(records),
        "silent_corruptions": runs_with(records, Kind::Corruption),
        "partial_file": runs_with(records, Kind::FileAfterFailure),
        "past_bound": runs_with(records, Kind::PastBound),
        "crashes": runs_with(records, Kind::Crash),
        "setup_errors": records.iter().filter(|r| r.setup_error.is_some()).count(),
        "failing_seeds": records.iter().filter(|r| r.failed()).map(|r| r.seed).collect::<Vec<_>>(),
        "results": runs,
    })
}
