//! What a person (or a script) sees while a transfer runs.
//!
//! * **Bars** (stderr, indicatif): the overall bar with rate and ETA, one row per live
//!   connection (source, connection slot, range still owned, rate, health grade) and one line
//!   per source saying why it has the connections it has (`LimitReason`). Only when stderr is
//!   a terminal and neither `-q` nor `--json` was given; `NO_COLOR` turns colour off.
//! * **Verbose lines** (`-v`): repairs, grade changes, limit changes, failed fetches.
//! * **JSON** (`--json`): one event per line on stdout; the schema is in `docs/cli.md`.

use hydra_core::{ConnId, FetchId, LimitReason, Notice, SourceId};
use hydra_scheme::engine::{EngineEvent, PieceFailure, Progress};
use hydra_scheme::text::redact_userinfo;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// How output is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ui {
    /// Progress bars on stderr.
    pub bars: bool,
    /// Event lines on stderr.
    pub verbose: bool,
    /// NDJSON events on stdout.
    pub json: bool,
    /// Nothing on stderr but errors.
    pub quiet: bool,
    /// Without bars: one plain progress line per update (the demo, when not on a terminal).
    pub lines: bool,
}

impl Ui {
    /// From the flags: bars only on a terminal, never with `-q` or `--json`.
    pub fn new(quiet: bool, verbose: bool, json: bool) -> Self {
        Ui {
            bars: !quiet && !json && std::io::stderr().is_terminal(),
            verbose: verbose && !quiet,
            json,
            quiet,
            lines: false,
        }
    }
}

fn t0() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}

/// Starts the clock events are stamped with.
pub fn start_clock() {
    let _ = t0();
}

/// Writes one NDJSON event to stdout: `{"event": kind, "t": seconds since start, ...}`, with
/// `"object"` when it belongs to an object of a batch ([`crate::batch::tag`]). Every string
/// in it shows URLs without user info ([`redact_userinfo`]). A [`crate::Download`] given an
/// events callback receives the event there instead.
pub fn emit(kind: &str, mut fields: Value) {
    redact_strings(&mut fields);
    if let Value::Object(m) = &mut fields {
        let mut out = serde_json::Map::new();
        out.insert("event".into(), kind.into());
        out.insert(
            "t".into(),
            json!((t0().elapsed().as_secs_f64() * 1000.0).round() / 1000.0),
        );
        if let Some(object) = crate::batch::tag::current() {
            out.insert("object".into(), object);
        }
        out.append(m);
        let Some(out) = crate::download::events::deliver(out) else {
            return;
        };
        let line = Value::Object(out).to_string();
        let mut so = std::io::stdout().lock();
        let _ = writeln!(so, "{line}");
        let _ = so.flush();
    }
}

/// Replaces every string in `v` by its [`redact_userinfo`]ed form.
fn redact_strings(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(r) = redact_userinfo(s) {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_strings),
        Value::Object(m) => m.values_mut().for_each(redact_strings),
        _ => {}
    }
}

/// Byte counts for people: `12.3 MB`.
pub fn mb(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// Consumes engine events until the channel closes; draws bars, prints lines, emits JSON.
/// `urls[i]` names source `i` for JSON, and `names[urls[i]]` for people; a source that joins
/// later is added to both when the engine says so.
pub async fn run(
    ui: Ui,
    mut rx: UnboundedReceiver<EngineEvent>,
    mut urls: Vec<String>,
    names: BTreeMap<String, String>,
    size: u64,
    already: u64,
) -> Vec<Option<LimitReason>> {
    let mut labels: Vec<String> = urls.iter().map(|u| label_of(&names, u)).collect();
    let mut seen: Vec<Option<LimitReason>> = vec![None; urls.len()];
    let mut bars = ui.bars.then(|| Bars::new(size, already));
    let mut live: BTreeSet<(usize, u16)> = BTreeSet::new();
    let mut last_done = already;
    let mut last_t = Duration::ZERO;
    let mut last_line: Option<Duration> = None;
    let say = |bars: &Option<Bars>, line: String| match bars {
        Some(b) => b.mp.suspend(|| eprintln!("{line}")),
        None => eprintln!("{line}"),
    };
    while let Some(ev) = rx.recv().await {
        let label = |i: usize| labels.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
        match ev {
            EngineEvent::Progress(p) => {
                let now: BTreeSet<(usize, u16)> =
                    p.fetches.iter().map(|f| (f.source, f.conn)).collect();
                if ui.json {
                    emit_progress(&p, &now, &live, &urls, last_done, last_t);
                }
                note_serving(&mut seen, &p.limits);
                last_done = p.done;
                last_t = p.elapsed;
                live = now;
                if let Some(b) = &mut bars {
                    b.update(&p, &label);
                } else if ui.lines && line_due(&mut last_line, p.elapsed) {
                    eprintln!("{}", progress_line(&p, &label));
                }
            }
            EngineEvent::Notice(n) => {
                let (kind, fields, line) = notice(&n, &label, &urls);
                if ui.json {
                    emit(kind, fields);
                }
                if ui.verbose {
                    say(&bars, format!("hydra: {line}"));
                } else if matches!(n, Notice::Repair { .. }) && (bars.is_some() || ui.lines) {
                    say(&bars, format!("  {line}"));
                }
            }
            EngineEvent::Joined {
                source, endpoint, ..
            } => {
                if ui.json {
                    emit("joined", json!({"source": source, "url": endpoint}));
                }
                if ui.verbose {
                    say(
                        &bars,
                        format!("hydra: {endpoint}: joined as source {source}"),
                    );
                }
                if source >= urls.len() {
                    urls.resize(source + 1, String::new());
                    labels.resize(source + 1, String::new());
                    seen.resize(source + 1, None);
                }
                labels[source] = label_of(&names, &endpoint);
                urls[source] = endpoint;
            }
            EngineEvent::Dropped { source, why } => {
                if ui.json {
                    emit(
                        "source_dropped",
                        json!({"source": source, "url": urls.get(source), "reason": why}),
                    );
                } else if !ui.quiet {
                    say(&bars, format!("hydra: warning: {}: {why}", label(source)));
                }
            }
            EngineEvent::PieceFailed(f) => {
                if ui.json {
                    emit_piece_failed(&f, &urls);
                } else if !ui.quiet {
                    let by: Vec<String> = f.sources.iter().map(|&s| label(s)).collect();
                    let who = if by.is_empty() {
                        "kept bytes".to_owned()
                    } else {
                        by.join(" and ")
                    };
                    say(&bars, format!("hydra: warning: {who}: {f}"));
                }
            }
            EngineEvent::FetchFailed { source, error } => {
                if ui.json {
                    emit(
                        "fetch_failed",
                        json!({"source": source, "url": urls.get(source), "error": error}),
                    );
                }
                if ui.verbose {
                    say(
                        &bars,
                        format!("hydra: {}: fetch failed: {error}", label(source)),
                    );
                }
            }
            // A kind of event this version does not show.
            _ => {}
        }
    }
    if ui.json {
        for (s, c) in live {
            emit("conn_down", json!({"source": s, "conn": c}));
        }
    }
    if let Some(b) = bars {
        b.finish();
    }
    seen
}

/// The name people see for `url`: its name in `names`, or the URL itself.
fn label_of(names: &BTreeMap<String, String>, url: &str) -> String {
    names.get(url).cloned().unwrap_or_else(|| url.to_owned())
}

/// Keeps, for each source, the last limit reason it had while serving connections.
fn note_serving(seen: &mut [Option<LimitReason>], limits: &[LimitReason]) {
    for (i, r) in limits.iter().enumerate() {
        if serving(r) > 0 {
            if let Some(slot) = seen.get_mut(i) {
                *slot = Some(*r);
            }
        }
    }
}

/// The JSON events of one progress report: connections up and down since `live`, then the
/// progress itself, its rate since the last report (`last_done` at `last_t`).
fn emit_progress(
    p: &Progress,
    now: &BTreeSet<(usize, u16)>,
    live: &BTreeSet<(usize, u16)>,
    urls: &[String],
    last_done: u64,
    last_t: Duration,
) {
    for &(s, c) in now.difference(live) {
        emit(
            "conn_up",
            json!({"source": s, "conn": c, "url": urls.get(s)}),
        );
    }
    for &(s, c) in live.difference(now) {
        emit("conn_down", json!({"source": s, "conn": c}));
    }
    let dt = (p.elapsed.saturating_sub(last_t)).as_secs_f64();
    let rate = if dt > 0.0 {
        p.done.saturating_sub(last_done) as f64 / dt
    } else {
        0.0
    };
    emit(
        "progress",
        json!({
            "elapsed_s": p.elapsed.as_secs_f64(),
            "done": p.done,
            "size": p.size,
            "rate": rate.round(),
            "connections": p.fetches.iter().map(|f| json!({
                "source": f.source, "conn": f.conn,
                "lo": f.range.lo, "hi": f.range.hi,
                "rate": f.rate.round(), "grade": f.grade,
            })).collect::<Vec<_>>(),
        }),
    );
}

/// One `lines` progress line: time, percentage, and each connection's rate (and grade unless
/// healthy).
fn progress_line(p: &Progress, label: &dyn Fn(usize) -> String) -> String {
    let conns: Vec<String> = p
        .fetches
        .iter()
        .map(|f| {
            let g = if f.grade == "healthy" {
                String::new()
            } else {
                format!("({})", f.grade)
            };
            format!("{}:{:.1}MB/s{g}", short(&label(f.source)), f.rate / 1e6)
        })
        .collect();
    format!(
        "  {:5.1}s {:5.1}%  {}",
        p.elapsed.as_secs_f64(),
        100.0 * p.done as f64 / p.size.max(1) as f64,
        conns.join(" ")
    )
}

/// The JSON event of a piece that failed its check.
fn emit_piece_failed(f: &PieceFailure, urls: &[String]) {
    let urls: Vec<_> = f.sources.iter().map(|&s| urls.get(s)).collect();
    emit(
        "piece_failed",
        json!({"piece": f.index, "lo": f.range.lo, "hi": f.range.hi,
               "algorithm": f.algorithm, "sources": f.sources, "urls": urls}),
    );
}

/// How often `lines` prints a progress line, however often progress comes (`--timeline` asks
/// for it every [`crate::timeline::TICK`]).
const LINE_EVERY: Duration = Duration::from_millis(500);

/// Whether a progress line is due at `now`; if so, `now` becomes the last one.
fn line_due(last: &mut Option<Duration>, now: Duration) -> bool {
    let due = last.is_none_or(|l| now.saturating_sub(l) >= LINE_EVERY);
    if due {
        *last = Some(now);
    }
    due
}

/// The connection count a limit reason speaks of.
pub fn serving(r: &LimitReason) -> usize {
    match *r {
        LimitReason::None | LimitReason::Dead { .. } => 0,
        LimitReason::Measuring { level } => level,
        LimitReason::Measured { chosen, .. } => chosen,
        LimitReason::Ceiling { serving }
        | LimitReason::Diminishing { serving, .. }
        | LimitReason::PathChanged { serving, .. }
        | LimitReason::Refused { serving }
        | LimitReason::Remembered { serving }
        | LimitReason::Starved { serving } => serving,
        _ => 0,
    }
}

fn notice(
    n: &Notice,
    label: &dyn Fn(usize) -> String,
    urls: &[String],
) -> (&'static str, Value, String) {
    match n {
        Notice::Repair {
            victim: FetchId(v),
            taker,
            bytes,
            gain,
        } => (
            "repair",
            json!({"victim": v, "taker": taker.map(|ConnId(c)| c), "bytes": bytes,
                   "gain_s": gain.as_secs_f64()}),
            format!(
                "repair: moved {} from fetch {v}, projected gain {:.2} s",
                mb(*bytes as f64),
                gain.as_secs_f64()
            ),
        ),
        Notice::Grade {
            fetch: FetchId(f),
            grade,
        } => (
            "grade",
            json!({"fetch": f, "grade": grade.as_str()}),
            format!("fetch {f} is now {}", grade.as_str()),
        ),
        Notice::Limit {
            source: SourceId(s),
            reason,
        } => {
            let s = *s as usize;
            (
                "limit",
                json!({"source": s, "url": urls.get(s), "reason": reason.to_string()}),
                format!("{}: {reason}", label(s)),
            )
        }
        Notice::SourceDead {
            source: SourceId(s),
        } => {
            let s = *s as usize;
            (
                "source_dead",
                json!({"source": s, "url": urls.get(s)}),
                format!("{}: marked dead", label(s)),
            )
        }
        Notice::Stalled { fetch: FetchId(f) } => (
            "stalled",
            json!({"fetch": f}),
            format!("fetch {f} stalled and was reclaimed"),
        ),
        _ => (
            "notice",
            json!({}),
            "a scheduler notice this version cannot show".to_owned(),
        ),
    }
}

struct Bars {
    mp: MultiProgress,
    overall: ProgressBar,
    rows: Vec<ProgressBar>,
    row_style: ProgressStyle,
}

impl Bars {
    fn new(size: u64, already: u64) -> Self {
        let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let mp = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8));
        let template = if color {
            "{bar:40.cyan/blue} {percent:>3}% {decimal_bytes:>10}/{decimal_total_bytes:<10} {decimal_bytes_per_sec:>12}  ETA {eta}"
        } else {
            "{bar:40} {percent:>3}% {decimal_bytes:>10}/{decimal_total_bytes:<10} {decimal_bytes_per_sec:>12}  ETA {eta}"
        };
        let overall = mp.add(ProgressBar::new(size));
        overall.set_style(
            ProgressStyle::with_template(template)
                .expect("a valid template")
                .progress_chars("=> "),
        );
        overall.set_position(already);
        overall.reset_eta();
        Bars {
            mp,
            overall,
            rows: Vec::new(),
            row_style: ProgressStyle::with_template("{msg}").expect("a valid template"),
        }
    }

    fn update(&mut self, p: &hydra_scheme::engine::Progress, label: &dyn Fn(usize) -> String) {
        self.overall.set_position(p.done);
        let mut fetches = p.fetches.clone();
        fetches.sort_by_key(|f| (f.source, f.conn, f.range.lo));
        let mut lines: Vec<String> = fetches
            .iter()
            .map(|f| {
                format!(
                    "  {:<22} conn {:<2} [{:>11}, {:>11})  {:>9}/s  {}",
                    truncate(&label(f.source), 22),
                    f.conn,
                    f.range.lo,
                    f.range.hi,
                    mb(f.rate),
                    f.grade
                )
            })
            .collect();
        for (i, r) in p.limits.iter().enumerate() {
            lines.push(format!("  {}: {r}", truncate(&label(i), 40)));
        }
        while self.rows.len() < lines.len() {
            let pb = self.mp.add(ProgressBar::new(1));
            pb.set_style(self.row_style.clone());
            self.rows.push(pb);
        }
        while self.rows.len() > lines.len() {
            if let Some(pb) = self.rows.pop() {
                pb.finish_and_clear();
                self.mp.remove(&pb);
            }
        }
        for (pb, l) in self.rows.iter().zip(lines) {
            pb.set_message(l);
        }
    }

    fn finish(self) {
        for pb in &self.rows {
            pb.finish_and_clear();
        }
        self.overall.finish_and_clear();
        let _ = self.mp.clear();
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let t: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{t}…")
    }
}

/// The first word of a label (`mirror-a` of `mirror-a http ...`).
fn short(label: &str) -> &str {
    label.split_whitespace().next().unwrap_or(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_come_at_most_every_half_second_however_often_progress_does() {
        let mut last = None;
        let printed: Vec<u64> = (0..100u64)
            .map(|i| i * 20)
            .filter(|&ms| line_due(&mut last, Duration::from_millis(ms)))
            .collect();
        assert_eq!(printed, vec![0, 500, 1000, 1500]);
    }
}
