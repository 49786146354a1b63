//! `hydra conformance --chaos N --seed S`: N seeded downloads through hostile mirrors, each
//! checked against the invariants of [`check`].
//!
//! Run `i` draws its scenario from seed `S + i` ([`scenario::Scenario::draw`]): an object of
//! 64 KiB–4 MiB, 1–4 mirrors over HTTP, FTP and SFTP (the in-process reference origins, each
//! behind its own faultnet link), at most one fault per mirror, and sometimes a `kill -9` at
//! a random moment followed by `hydra get -c` with the same mirrors. The downloads are child
//! processes of this binary (`hydra get URL... -o FILE -q --no-host-memory`), killed once past
//! the bound the scenario implies. A seed replays its scenario; the timing of a live network
//! does not replay exactly.

mod check;
mod child;
mod dice;
mod report;
mod rig;
mod scenario;

use crate::exit::Exit;
use check::{Step, StepFacts};
use child::{GetCommand, Outcome};
use hydra_scheme::{content::object_bytes, ByteRange};
use report::{RunRecord, StepRecord};
use rig::Rig;
use scenario::{Limits, Scenario};
use std::path::{Path, PathBuf};

/// A violation the runner plants on purpose, to show its checker can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Plant {
    /// Expect a copy of the object with its first byte flipped: every exit 0 is then a
    /// silent corruption.
    Corruption,
}

/// What `--chaos` was asked for.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    pub runs: u64,
    pub first_seed: u64,
    pub json: Option<PathBuf>,
    pub plant: Option<Plant>,
}

/// Runs the chaos runs; non-zero when any invariant broke.
pub async fn main(o: ChaosOptions) -> Exit {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("hydra conformance --chaos: cannot find this binary to run it: {e}");
            return Exit::Internal;
        }
    };
    let limits = Limits::default();
    eprintln!(
        "hydra conformance --chaos {} --seed {}: child `{} get ... --timeout {}`, stall timeout {} s",
        o.runs,
        o.first_seed,
        exe.display(),
        limits.timeout.as_secs_f64(),
        limits.stall.as_secs_f64()
    );
    let mut records = Vec::new();
    for i in 0..o.runs {
        let seed = o.first_seed.wrapping_add(i);
        let r = one(seed, &exe, &limits, o.plant).await;
        eprintln!("{}  [{}]", r.line(), r.scenario);
        records.push(r);
    }
    print!("{}", report::table(&records));
    let failing: Vec<&RunRecord> = records.iter().filter(|r| r.failed()).collect();
    for r in &failing {
        println!("{}", r.failure_line());
    }
    if let Some(p) = &o.json {
        let text = report::json(o.first_seed, &records).to_string();
        if let Err(e) = std::fs::write(p, text) {
            eprintln!(
                "hydra conformance --chaos: cannot write {}: {e}",
                p.display()
            );
            return Exit::Disk;
        }
    }
    if failing.is_empty() {
        Exit::Ok
    } else {
        eprintln!(
            "hydra conformance --chaos: {} of {} runs broke an invariant (seeds listed above)",
            failing.len(),
            records.len()
        );
        Exit::Internal
    }
}

/// One run: its mirrors, its download (and resume), its verdict. The run's directory is
/// removed afterwards.
async fn one(seed: u64, exe: &Path, limits: &Limits, plant: Option<Plant>) -> RunRecord {
    let s = Scenario::draw(seed);
    let mut record = RunRecord {
        seed,
        scenario: s.describe(),
        steps: Vec::new(),
        violations: Vec::new(),
        setup_error: None,
    };
    let dir = std::env::temp_dir().join(format!("hydra-chaos-{}-{seed}", std::process::id()));
    let result = run_in(&s, &dir, exe, limits, plant, &mut record).await;
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        record.setup_error = Some(e);
    }
    record
}

async fn run_in(
    s: &Scenario,
    dir: &Path,
    exe: &Path,
    limits: &Limits,
    plant: Option<Plant>,
    record: &mut RunRecord,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let known_hosts = dir.join("known_hosts");
    let rig = Rig::start(s, &known_hosts)
        .await
        .map_err(|e| e.to_string())?;
    let output = dir.join("object.bin");
    let bound = s.bound(limits);
    let mut get = GetCommand {
        exe,
        urls: &rig.urls,
        output: &output,
        known_hosts: &known_hosts,
        state: dir,
        timeout: limits.timeout,
        resume: false,
    };
    let mut facts = Vec::new();
    let mut accepted = vec![objects(s, &vec![false; s.mirrors.len()], plant)];
    let ran = get
        .run(s.kill_after, bound)
        .await
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    facts.push(step_facts(Step::Get, &ran, bound, &output));
    record.steps.push(StepRecord {
        step: Step::Get,
        ran: ran.clone(),
        bound,
    });
    // Resumed only when the kill landed before the download finished.
    if ran.outcome == Outcome::Killed && !output.exists() {
        get.resume = true;
        accepted.push(objects(s, &rig.replaced(), plant));
        let again = get
            .run(None, bound)
            .await
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        facts.push(step_facts(Step::Resume, &again, bound, &output));
        record.steps.push(StepRecord {
            step: Step::Resume,
            ran: again,
            bound,
        });
    }
    drop(rig);
    record.violations = facts
        .iter()
        .zip(&accepted)
        .flat_map(|(f, a)| check::check(std::slice::from_ref(f), a))
        .collect();
    Ok(())
}

/// The bytes of every object a download of `s` may leave, when it starts with the mirrors
/// flagged in `replaced` serving the replacement (see [`Scenario::accepted`]).
fn objects(s: &Scenario, replaced: &[bool], plant: Option<Plant>) -> Vec<Vec<u8>> {
    s.accepted(replaced)
        .iter()
        .map(|o| {
            let mut bytes = object_bytes(o.seed, ByteRange::new(0, o.size));
            if plant == Some(Plant::Corruption) {
                if let Some(b) = bytes.first_mut() {
                    *b ^= 0xff;
                }
            }
            bytes
        })
        .collect()
}

fn step_facts(
    step: Step,
    ran: &child::Ran,
    bound: std::time::Duration,
    output: &Path,
) -> StepFacts {
    StepFacts {
        step,
        outcome: ran.outcome,
        bound,
        file: std::fs::read(output).ok(),
        said: ran.said.clone(),
    }
}
