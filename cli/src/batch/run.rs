//! Runs a batch's objects, at most `-j` at once, each started only when the budget grants it
//! room on every host it uses; objects start in file order.

use super::budget::{Budget, Claim, Grant};
use super::report::{Outcome, Row};
use super::tag;
use crate::exit::Exit;
use crate::get::{download, Done, Failure, GetArgs};
use crate::ui::{emit, Ui};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio::task::{Id, JoinSet};

/// One object, checked and ready to start.
pub struct Object {
    /// Its `get` arguments (the mirrors, the output, the checksum).
    pub args: GetArgs,
    /// Its output path.
    pub output: PathBuf,
    /// Per host (`host:port`), how many of its mirrors are there.
    pub hosts: BTreeMap<String, usize>,
}

impl Object {
    /// The `object` field of its events.
    fn tag(&self, index: usize) -> Value {
        json!({"index": index, "output": self.output})
    }
}

type Ended = (usize, Result<(Done, PathBuf), Failure>);

/// The running objects, their grants, and who has ended.
struct Running<'a> {
    objects: &'a [Object],
    budget: Budget,
    jobs: usize,
    ui: Ui,
    set: JoinSet<Ended>,
    tasks: BTreeMap<Id, usize>,
    grants: BTreeMap<usize, Grant>,
    ended: Vec<bool>,
    rows: Vec<Option<Row>>,
}

/// Runs `objects` under one budget, `jobs` at a time; a row per object, in file order.
pub async fn run(objects: &[Object], budget: Budget, jobs: usize, ui: Ui) -> Vec<Row> {
    let mut r = Running {
        objects,
        budget,
        jobs: jobs.max(1),
        ui,
        set: JoinSet::new(),
        tasks: BTreeMap::new(),
        grants: BTreeMap::new(),
        ended: vec![false; objects.len()],
        rows: vec![None; objects.len()],
    };
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut interrupted = false;
    for index in 0..objects.len() {
        let grant = loop {
            if interrupted {
                break None;
            }
            if r.set.len() < r.jobs {
                if let Some(g) = r.budget.grant(&r.claim(index)) {
                    break Some(g);
                }
            }
            tokio::select! {
                Some(e) = r.set.join_next_with_id() => r.end(e),
                _ = &mut ctrl_c, if !interrupted => interrupted = true,
            }
        };
        match grant {
            Some(g) => r.start(index, g),
            None => r.never_started(index),
        }
    }
    while let Some(e) = r.set.join_next_with_id().await {
        r.end(e);
    }
    r.rows.into_iter().flatten().collect()
}

impl Running<'_> {
    /// What object `index` asks of the budget: its hosts, and how many objects may share
    /// each (those not yet ended that use it, at most `-j`).
    fn claim(&self, index: usize) -> Claim {
        let unfinished = || {
            self.objects
                .iter()
                .zip(&self.ended)
                .filter(|(_, &ended)| !ended)
                .map(|(o, _)| o)
        };
        let sharing = self.objects[index]
            .hosts
            .keys()
            .map(|h| {
                let users = unfinished().filter(|o| o.hosts.contains_key(h)).count();
                (h.clone(), users.clamp(1, self.jobs))
            })
            .collect();
        Claim {
            hosts: self.objects[index].hosts.clone(),
            sharing,
            sharing_total: unfinished().count().clamp(1, self.jobs),
        }
    }

    /// Starts object `index` under `grant`, after the `budget` event that shows it.
    fn start(&mut self, index: usize, grant: Grant) {
        let o = &self.objects[index];
        let mut args = o.args.clone();
        args.per_host = grant.per_source;
        args.max_connections = grant.total;
        if self.ui.json {
            let hosts: Vec<Value> = grant
                .hosts
                .iter()
                .map(|(h, &c)| {
                    json!({"host": h, "granted": c, "held": self.budget.held(h),
                           "ceiling": self.budget.per_host()})
                })
                .collect();
            tag::sync_scope(o.tag(index), || {
                emit(
                    "budget",
                    json!({"per_source": grant.per_source, "total": grant.total,
                           "total_ceiling": self.budget.total(), "hosts": hosts}),
                )
            });
        }
        let ui = Ui {
            bars: false,
            ..self.ui
        };
        let job = tag::scope(o.tag(index), async move {
            let r = download(&args, ui).await;
            (index, r)
        });
        let id = self.set.spawn(job).id();
        self.tasks.insert(id, index);
        self.grants.insert(index, grant);
    }

    /// Records how a task ended and returns its grant to the budget (after the `released`
    /// event that shows it).
    fn end(&mut self, e: Result<(Id, Ended), tokio::task::JoinError>) {
        let (id, index, result) = match e {
            Ok((id, (index, r))) => (id, index, r),
            Err(e) => {
                let index = self.tasks.get(&e.id()).copied().unwrap_or_default();
                let why = format!("the download's task ended abnormally: {e}");
                (e.id(), index, Err((Exit::Internal, why)))
            }
        };
        self.tasks.remove(&id);
        let o = &self.objects[index];
        let outcome = match result {
            Ok((done, _)) => Outcome::Done {
                size: done.report.size,
                elapsed: done.elapsed,
                used: done.probed.sources.len(),
                fetched: done.fetched,
            },
            Err((code, why)) => Outcome::Failed(code, why),
        };
        if self.ui.json {
            tag::sync_scope(o.tag(index), || {
                if let Outcome::Failed(code, why) = &outcome {
                    emit(
                        "error",
                        json!({"code": *code as u8, "kind": code.name(),
                               "message": hydra_scheme::text::for_people(why)}),
                    );
                }
                emit("released", json!({"status": outcome.exit().name()}));
            });
        }
        if let Some(g) = self.grants.remove(&index) {
            self.budget.release(&g);
        }
        self.ended[index] = true;
        self.rows[index] = Some(Row {
            index,
            output: o.output.clone(),
            given: o.args.urls.len(),
            outcome,
        });
    }

    fn never_started(&mut self, index: usize) {
        let o = &self.objects[index];
        self.ended[index] = true;
        self.rows[index] = Some(Row {
            index,
            output: o.output.clone(),
            given: o.args.urls.len(),
            outcome: Outcome::NotStarted,
        });
    }
}
