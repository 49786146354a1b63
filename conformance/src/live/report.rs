//! Results: per trial an [`Outcome`], per scheme a [`SchemeReport`], for the suite a
//! [`SuiteReport`] with a table for people, JSON for machines and JUnit XML for CI systems.

use std::fmt::{self, Write as _};
use std::time::Duration;

use serde::Serialize;

/// The check a failure is about. Its name starts every failure reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// The sink's written set, overlap and digest after a transfer.
    Coverage,
    /// Progress within the window W; failure within W when every source is dead; resume.
    Liveness,
    /// Measured against declared `preempt_cost_rtt`.
    PreemptCost,
    /// A misbehaving server ends byte-exact or in a clear error.
    BadServer,
    /// The engine keeps to what the scheme declared.
    Capability,
    /// A scenario run live (and simulated).
    Scenario,
    /// The rig itself (origin, proxy, probe) could not be set up.
    Setup,
}

impl Check {
    /// The check's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Check::Coverage => "coverage",
            Check::Liveness => "liveness",
            Check::PreemptCost => "preempt_cost",
            Check::BadServer => "bad_server",
            Check::Capability => "capability",
            Check::Scenario => "scenario",
            Check::Setup => "setup",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a trial ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every check held.
    Pass,
    /// A check did not hold.
    Fail {
        /// Which check.
        check: Check,
        /// Why, one line.
        reason: String,
    },
    /// Not run, and why (the capability or origin fault that rules it out).
    Skip {
        /// Why.
        reason: String,
    },
}

impl Outcome {
    /// A failure of `check`.
    pub fn fail(check: Check, reason: impl Into<String>) -> Self {
        Outcome::Fail {
            check,
            reason: reason.into(),
        }
    }

    /// A skip.
    pub fn skip(reason: impl Into<String>) -> Self {
        Outcome::Skip {
            reason: reason.into(),
        }
    }

    /// True for [`Outcome::Fail`].
    pub fn is_fail(&self) -> bool {
        matches!(self, Outcome::Fail { .. })
    }

    /// `"pass"`, `"fail"` or `"skip"`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail { .. } => "fail",
            Outcome::Skip { .. } => "skip",
        }
    }

    /// The reason line: `"check: why"` for a failure, the reason for a skip, empty for a pass.
    pub fn reason(&self) -> String {
        match self {
            Outcome::Pass => String::new(),
            Outcome::Fail { check, reason } => format!("{check}: {reason}"),
            Outcome::Skip { reason } => reason.clone(),
        }
    }
}

/// One trial's result.
#[derive(Debug, Clone, Serialize)]
pub struct TrialResult {
    /// Stable name: `conformance::<scheme>::<trial>`.
    pub name: String,
    /// The trial's short name (`coverage_under_reset`).
    pub trial: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Measurements worth keeping (wire waste, makespans, errors seen), one line.
    pub detail: String,
    /// Set when the trial failed and the failure is a listed known failure
    /// ([`KnownFailure`](super::KnownFailure)): why it is known. Known failures are reported
    /// but do not fail the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_failure: Option<String>,
}

impl TrialResult {
    /// A failure not on the known-failure list.
    pub fn is_unexpected_failure(&self) -> bool {
        self.outcome.is_fail() && self.known_failure.is_none()
    }
}

/// The preempt-cost measurement of one scheme.
#[derive(Debug, Clone, Serialize)]
pub struct PreemptCost {
    /// What the scheme declares (`Capabilities::preempt_cost_rtt`).
    pub declared_rtt: f64,
    /// Median of the repetitions, in round trips; `None` when no repetition completed.
    pub measured_rtt: Option<f64>,
    /// Every repetition, in round trips.
    pub samples_rtt: Vec<f64>,
    /// The emulated round trip, milliseconds.
    pub rtt_ms: f64,
    /// Median time-to-first-byte of a normal follow-up request on a warm slot, in round trips
    /// (subtracted from each sample); `None` when no repetition completed.
    pub baseline_rtt: Option<f64>,
    /// Median time from the shrink to the fetch's return, in round trips; `None` when no
    /// repetition completed.
    pub stop_rtt: Option<f64>,
    /// Median payload bytes the proxy delivered between the shrink and the next range's first
    /// byte (less that first chunk).
    pub bytes_after_shrink: u64,
    /// Median bytes the scheme received past the lowered bound (reported as waste).
    pub waste_bytes: u64,
    /// The tolerance, in round trips.
    pub tolerance_rtt: f64,
}

/// One scenario run simulated and live.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRow {
    /// The scenario's name.
    pub scenario: String,
    /// Object size used (scaled down from the file's for the live run; the sim uses the same).
    pub size: u64,
    /// The file's object size.
    pub file_size: u64,
    /// Simulated makespan, seconds (hydra arm, same connections and seed).
    pub sim_seconds: f64,
    /// Live makespan, seconds (`None` when the live run failed).
    pub live_seconds: Option<f64>,
    /// `live / sim`.
    pub ratio: Option<f64>,
    /// Wire waste of the live run, bytes.
    pub live_waste_bytes: u64,
}

/// Everything about one scheme.
#[derive(Debug, Clone, Serialize)]
pub struct SchemeReport {
    /// The scheme's name (`http`).
    pub scheme: String,
    /// The origin factory's name.
    pub origin: String,
    /// Its declared capabilities, as `Debug`.
    pub capabilities: String,
    /// Every trial, registered or skipped, in a fixed order.
    pub trials: Vec<TrialResult>,
    /// The preempt-cost measurement, when it ran.
    pub preempt: Option<PreemptCost>,
    /// Scenario rows.
    pub scenarios: Vec<ScenarioRow>,
}

impl SchemeReport {
    /// Trials that failed, known failures included.
    pub fn failures(&self) -> impl Iterator<Item = &TrialResult> {
        self.trials.iter().filter(|t| t.outcome.is_fail())
    }

    /// Trials that failed and are not listed as known failures: these fail the run.
    pub fn unexpected_failures(&self) -> impl Iterator<Item = &TrialResult> {
        self.trials.iter().filter(|t| t.is_unexpected_failure())
    }

    /// The trial called `trial` (short name).
    pub fn trial(&self, trial: &str) -> Option<&TrialResult> {
        self.trials.iter().find(|t| t.trial == trial)
    }
}

/// The whole suite's results.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SuiteReport {
    /// One entry per scheme run.
    pub schemes: Vec<SchemeReport>,
    /// Notes (e.g. scaled object sizes, schemes left out and why).
    pub notes: Vec<String>,
}

impl SuiteReport {
    /// True when no trial failed other than listed known failures.
    pub fn passed(&self) -> bool {
        self.schemes
            .iter()
            .all(|s| s.unexpected_failures().next().is_none())
    }

    /// Failures on the known-failure list, over every scheme.
    pub fn known_failures(&self) -> usize {
        self.schemes
            .iter()
            .flat_map(|s| &s.trials)
            .filter(|t| t.outcome.is_fail() && t.known_failure.is_some())
            .count()
    }

    /// `(pass, fail, skip)` over every scheme.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for t in self.schemes.iter().flat_map(|s| &s.trials) {
            match t.outcome {
                Outcome::Pass => c.0 += 1,
                Outcome::Fail { .. } => c.1 += 1,
                Outcome::Skip { .. } => c.2 += 1,
            }
        }
        c
    }

    /// The report as a table for people.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for s in &self.schemes {
            let _ = writeln!(out, "scheme {} (origin: {})", s.scheme, s.origin);
            let width = s.trials.iter().map(|t| t.trial.len()).max().unwrap_or(0);
            for t in &s.trials {
                let mut line = format!(
                    "  {:<width$}  {:<4}  {:>6.2}s",
                    t.trial,
                    t.outcome.word(),
                    t.seconds
                );
                let why = t.outcome.reason();
                if let Some(k) = &t.known_failure {
                    let _ = write!(line, "  KNOWN FAILURE ({k}): {why}");
                } else if !why.is_empty() {
                    let _ = write!(line, "  {why}");
                } else if !t.detail.is_empty() {
                    let _ = write!(line, "  {}", t.detail);
                }
                let _ = writeln!(out, "{line}");
            }
            if let Some(p) = &s.preempt {
                let _ = writeln!(
                    out,
                    "  preempt cost: declared {:.2} RTT, measured {} (median of {}, RTT {:.0} ms, \
                     stop {}, baseline {}, {} B after the shrink)",
                    p.declared_rtt,
                    rtts(p.measured_rtt),
                    p.samples_rtt.len(),
                    p.rtt_ms,
                    rtts(p.stop_rtt),
                    rtts(p.baseline_rtt),
                    p.bytes_after_shrink
                );
            }
            if !s.scenarios.is_empty() {
                let _ = writeln!(
                    out,
                    "  {:<10} {:>10} {:>9} {:>9} {:>7}",
                    "scenario", "size", "sim s", "live s", "live/sim"
                );
                for r in &s.scenarios {
                    let live = r
                        .live_seconds
                        .map_or_else(|| "failed".to_owned(), |v| format!("{v:.2}"));
                    let ratio = r
                        .ratio
                        .map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
                    let _ = writeln!(
                        out,
                        "  {:<10} {:>10} {:>9.2} {:>9} {:>7}",
                        r.scenario, r.size, r.sim_seconds, live, ratio
                    );
                }
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        let (p, f, k) = self.counts();
        let known = self.known_failures();
        let _ = writeln!(
            out,
            "{p} passed, {} failed, {known} known failures, {k} skipped",
            f - known
        );
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        // Invariant: every field is a plain number, string, bool or list of them.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report as JUnit XML: one `<testsuite>` per scheme, one `<testcase>` per trial.
    pub fn to_junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let (_, f, _) = self.counts();
        let total: usize = self.schemes.iter().map(|s| s.trials.len()).sum();
        let secs: f64 = self
            .schemes
            .iter()
            .flat_map(|s| &s.trials)
            .map(|t| t.seconds)
            .sum();
        let _ = writeln!(
            out,
            "<testsuites name=\"hydra-conformance\" tests=\"{total}\" failures=\"{f}\" time=\"{secs:.3}\">"
        );
        for s in &self.schemes {
            let fails = s.failures().count();
            let skips = s
                .trials
                .iter()
                .filter(|t| matches!(t.outcome, Outcome::Skip { .. }))
                .count();
            let time: f64 = s.trials.iter().map(|t| t.seconds).sum();
            let _ = writeln!(
                out,
                "  <testsuite name=\"conformance::{}\" tests=\"{}\" failures=\"{fails}\" skipped=\"{skips}\" time=\"{time:.3}\">",
                xml(&s.scheme),
                s.trials.len()
            );
            for t in &s.trials {
                let _ = write!(
                    out,
                    "    <testcase classname=\"conformance::{}\" name=\"{}\" time=\"{:.3}\"",
                    xml(&s.scheme),
                    xml(&t.trial),
                    t.seconds
                );
                match &t.outcome {
                    Outcome::Pass => {
                        let _ = writeln!(out, "/>");
                    }
                    Outcome::Fail { check, reason } => {
                        let _ = writeln!(
                            out,
                            ">\n      <failure type=\"{check}\" message=\"{}\"/>\n    </testcase>",
                            xml(&format!("{check}: {reason}"))
                        );
                    }
                    Outcome::Skip { reason } => {
                        let _ = writeln!(
                            out,
                            ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                            xml(reason)
                        );
                    }
                }
            }
            let _ = writeln!(out, "  </testsuite>");
        }
        out.push_str("</testsuites>\n");
        out
    }
}

fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Seconds of a duration, for reports.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A count of round trips as the report prints it, or "not measured".
pub(crate) fn rtts(v: Option<f64>) -> String {
    v.map_or_else(|| "not measured".to_owned(), |r| format!("{r:.2} RTT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_reasons_and_counts_failures() {
        let r = SuiteReport {
            schemes: vec![SchemeReport {
                scheme: "x".into(),
                origin: "o".into(),
                capabilities: String::new(),
                trials: vec![TrialResult {
                    name: "conformance::x::t".into(),
                    trial: "t".into(),
                    outcome: Outcome::fail(Check::Coverage, "a <b> & \"c\""),
                    seconds: 0.5,
                    detail: String::new(),
                    known_failure: None,
                }],
                preempt: None,
                scenarios: vec![],
            }],
            notes: vec![],
        };
        let x = r.to_junit();
        assert!(x.contains("failures=\"1\""), "{x}");
        assert!(
            x.contains("coverage: a &lt;b&gt; &amp; &quot;c&quot;"),
            "{x}"
        );
        assert!(!r.passed());
    }
}
