//! How a batch ends: its exit status (the worst of its objects'), the summary table, and one
//! line per failed object.

use crate::exit::Exit;
use crate::ui::{emit, mb, Ui};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// How bad an exit is, to pick a batch's: the least bad is success; then an object whose
/// partial download `-c` resumes (7); then what the network (3), the servers (4) or the
/// object (5, 6) did; then this machine (8); then a usage error (2) and a bug in hydra (1);
/// an interrupt (130) outranks every other, since the batch did not finish.
pub fn severity(e: Exit) -> u8 {
    match e {
        Exit::Ok => 0,
        Exit::AllFailed => 1,
        Exit::Network => 2,
        Exit::Protocol => 3,
        Exit::Changed => 4,
        Exit::Checksum => 5,
        Exit::Disk => 6,
        Exit::Usage => 7,
        Exit::Internal => 8,
        // A batch never streams (--input-file conflicts with -o): no broken pipe.
        Exit::Interrupted | Exit::BrokenPipe => 9,
    }
}

/// The worst of `exits` by [`severity`]; success when there is none.
pub fn worst(exits: impl IntoIterator<Item = Exit>) -> Exit {
    exits
        .into_iter()
        .max_by_key(|&e| severity(e))
        .unwrap_or(Exit::Ok)
}

/// How one object ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Complete and verified.
    Done {
        /// Object size, bytes.
        size: u64,
        /// From its first probe to its last byte.
        elapsed: Duration,
        /// Mirrors that took part.
        used: usize,
        /// Bytes fetched by this run (0: it was already complete).
        fetched: u64,
    },
    /// Failed, with the exit code and the one line that says why.
    Failed(Exit, String),
    /// Never started (the batch was interrupted first).
    NotStarted,
}

impl Outcome {
    /// The exit this outcome stands for.
    pub fn exit(&self) -> Exit {
        match self {
            Outcome::Done { .. } => Exit::Ok,
            Outcome::Failed(code, _) => *code,
            Outcome::NotStarted => Exit::Interrupted,
        }
    }

    /// The status column.
    fn status(&self) -> String {
        match self {
            Outcome::Done { size, fetched, .. } if *fetched == 0 && *size > 0 => {
                "ok (already complete)".into()
            }
            Outcome::Done { .. } => "ok".into(),
            Outcome::Failed(code, _) => format!("failed: {} (exit {})", code.name(), *code as u8),
            Outcome::NotStarted => "not started".into(),
        }
    }
}

/// One object of a batch, once it ended.
#[derive(Debug, Clone)]
pub struct Row {
    /// Its place in the input file (0-based).
    pub index: usize,
    /// Its output path.
    pub output: PathBuf,
    /// Mirrors given.
    pub given: usize,
    /// How it ended.
    pub outcome: Outcome,
}

/// Shows how the batch ended: the table on stderr (unless `-q` or `--json`), a
/// `batch_done` event with `--json`, and one line per failed object on stderr.
pub fn show(ui: Ui, rows: &[Row]) {
    if ui.json {
        emit(
            "batch_done",
            json!({
                "exit": worst(rows.iter().map(|r| r.outcome.exit())) as u8,
                "objects": rows.iter().map(row_json).collect::<Vec<_>>(),
            }),
        );
    }
    if !ui.quiet && !ui.json {
        eprint!("{}", table(rows));
    }
    for r in rows {
        if let Outcome::Failed(_, why) = &r.outcome {
            eprintln!(
                "hydra: [{}] {}: {}",
                r.index,
                r.output.display(),
                hydra_scheme::text::for_people(why)
            );
        }
    }
}

fn row_json(r: &Row) -> serde_json::Value {
    let mut v = json!({
        "index": r.index, "output": r.output, "given": r.given,
        "status": r.outcome.exit().name(), "code": r.outcome.exit() as u8,
    });
    if let Outcome::Done {
        size,
        elapsed,
        used,
        fetched,
    } = &r.outcome
    {
        v["size"] = json!(size);
        v["elapsed_s"] = json!(elapsed.as_secs_f64());
        v["used"] = json!(used);
        v["fetched"] = json!(fetched);
    }
    v
}

/// The summary table: object, size, time, mirrors used of those given, status.
pub fn table(rows: &[Row]) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let (size, time, used) = match &r.outcome {
                Outcome::Done {
                    size,
                    elapsed,
                    used,
                    ..
                } => (
                    mb(*size as f64),
                    format!("{:.2} s", elapsed.as_secs_f64()),
                    used.to_string(),
                ),
                _ => ("-".into(), "-".into(), "-".into()),
            };
            [
                r.index.to_string(),
                hydra_scheme::text::for_people(&r.output.display().to_string()),
                size,
                time,
                format!("{used}/{}", r.given),
                r.outcome.status(),
            ]
        })
        .collect();
    let head = ["#", "object", "size", "time", "mirrors", "status"].map(String::from);
    let mut width = head.clone().map(|h| h.chars().count());
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let mut out = String::new();
    for c in std::iter::once(&head).chain(&cells) {
        let line: Vec<String> = c
            .iter()
            .zip(width)
            .map(|(s, w)| format!("{s:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_exit_follows_the_documented_order() {
        let order = [
            Exit::Ok,
            Exit::AllFailed,
            Exit::Network,
            Exit::Protocol,
            Exit::Changed,
            Exit::Checksum,
            Exit::Disk,
            Exit::Usage,
            Exit::Internal,
            Exit::Interrupted,
        ];
        for w in order.windows(2) {
            assert!(severity(w[0]) < severity(w[1]), "{:?} {:?}", w[0], w[1]);
            assert_eq!(worst([w[1], w[0], Exit::Ok]), w[1]);
        }
        assert_eq!(worst([]), Exit::Ok);
    }

    #[test]
    fn the_table_has_a_row_per_object_with_its_status() {
        let rows = [
            Row {
                index: 0,
                output: "a.bin".into(),
                given: 3,
                outcome: Outcome::Done {
                    size: 2_000_000,
                    elapsed: Duration::from_millis(1500),
                    used: 2,
                    fetched: 2_000_000,
                },
            },
            Row {
                index: 1,
                output: "b.bin".into(),
                given: 1,
                outcome: Outcome::Failed(Exit::Network, "refused".into()),
            },
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[1].contains("a.bin") && lines[1].contains("2/3"),
            "{t}"
        );
        assert!(
            lines[1].contains("2.0 MB") && lines[1].ends_with("ok"),
            "{t}"
        );
        assert!(lines[2].contains("failed: network (exit 3)"), "{t}");
    }
}
