//! From arguments to a [`Job`]: the sources and their schemes, the output path, the engine's
//! options, and the per-host memory of connection counts.

use super::args::GetArgs;
use super::{output, Done, Failure, Job};
use crate::exit::Exit;
use crate::memory::{self, HostMemory};
use crate::schemes::{parse_proxy, registry, NetOptions};
use crate::ui::Ui;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{Endpoint, EngineOptions, SourceInput};
use std::collections::BTreeMap;
use std::time::SystemTime;

/// The job `args` ask for, and the per-host memory it uses (none with `--no-host-memory` or
/// `--fixed-connections`).
pub(super) fn job(args: &GetArgs, ui: Ui) -> Result<(Job, Option<Memory>), Failure> {
    let usage = |m: String| (Exit::Usage, m);
    let timeout = args.timeout;
    let net = NetOptions {
        proxy: args
            .proxy
            .as_deref()
            .map(parse_proxy)
            .transpose()
            .map_err(usage)?,
        insecure: args.insecure,
        known_hosts: args.known_hosts.clone(),
        identity: args.identity.clone(),
        accept_new_host_key: args.accept_new_host_key,
        timeout,
        per_host: Some(args.per_host.max(1)),
    };
    let headers = args.request_headers();
    let registry = registry(&net).map_err(|e| (Exit::Internal, e))?;
    let mut inputs = Vec::new();
    for u in &args.urls {
        let mut endpoint = Endpoint::parse(u).map_err(|e| usage(format!("{u}: {e}")))?;
        let scheme = registry.for_endpoint(&endpoint).cloned().ok_or_else(|| {
            usage(format!(
                "{endpoint}: no scheme registered for {:?} (hydra schemes lists them)",
                endpoint.url_scheme()
            ))
        })?;
        if matches!(endpoint.url_scheme(), "http" | "https") {
            for (n, v) in &headers {
                endpoint = endpoint.with_header(n, v);
            }
        }
        inputs.push(SourceInput::new(endpoint, scheme));
    }
    let output = match &args.output {
        Some(o) => match &args.directory {
            Some(d) if o.is_relative() => d.join(o),
            _ => o.clone(),
        },
        None => {
            let first = &inputs[0].endpoint;
            let name = output::remote_name(first).map_err(|why| {
                usage(format!(
                    "{}: {why}",
                    crate::control::redact(&first.to_string())
                ))
            })?;
            args.directory.clone().unwrap_or_default().join(name)
        }
    };
    if args.no_clobber {
        output::refuse_existing(&output)?;
    }
    let concurrency = match args.fixed_connections {
        Some(n) => Concurrency::Fixed(n.max(1)),
        None => Concurrency::Search { start: 1 },
    };
    let memory = match HostMemory::default_dir() {
        Some(dir) if !args.no_host_memory && args.fixed_connections.is_none() => {
            let hosts = HostMemory::load(&dir).unwrap_or_else(|e| {
                if !ui.quiet {
                    eprintln!("hydra: warning: host memory ignored: {e}");
                }
                HostMemory::empty(&dir)
            });
            let now = SystemTime::now();
            let mut keys = BTreeMap::new();
            for input in &mut inputs {
                let k = memory::key(&input.endpoint, net.proxy.as_ref().map(|p| &p.target));
                input.remembered = hosts.recall(&k, now);
                keys.insert(input.endpoint.to_string(), k);
            }
            Some(Memory { hosts, keys })
        }
        _ => None,
    };
    let mut engine = EngineOptions {
        config: Config {
            per_host: args.per_host.max(1),
            total: args.max_connections.max(1),
            concurrency,
            max_failures: args.retries.max(1),
            ..Config::default()
        },
        ..EngineOptions::default()
    };
    if let Some(t) = timeout {
        engine.probe_timeout = t;
    }
    let job = Job {
        labels: inputs.iter().map(|i| i.endpoint.to_string()).collect(),
        inputs,
        output,
        engine,
        resume: args.resume,
        restart_on_change: args.restart_on_change,
        no_clobber: args.no_clobber,
        checksum: args.checksum.clone(),
        limit_rate: args.limit_rate,
        floors: super::limits::Floors {
            max_time: args.max_time,
            speed: args.speed_limit.map(|rate| super::limits::SpeedFloor {
                rate,
                over: args.speed_time,
            }),
        },
        ui,
    };
    Ok((job, memory))
}

/// The per-host memory and each input's key in it.
pub(super) struct Memory {
    hosts: HostMemory,
    /// Endpoint (as a string) to its key.
    keys: BTreeMap<String, String>,
}

impl Memory {
    /// Records what `done` learned about each source's host; a failure to save is a warning.
    pub(super) fn learn(mut self, done: &Done, ui: Ui) {
        let now = SystemTime::now();
        let mut changed = false;
        // `probed.sources` lists those that joined in flight too, in the report's order.
        for (s, learned) in done.probed.sources.iter().zip(&done.report.learned) {
            let key = self.keys.get(&s.input.endpoint.to_string());
            if let (Some(key), Some(r)) = (key, learned) {
                self.hosts.learn(key, *r, now);
                changed = true;
            }
        }
        if changed {
            if let Err(e) = self.hosts.save() {
                if !ui.quiet {
                    eprintln!("hydra: warning: host memory not saved: {e}");
                }
            }
        }
    }
}
