//! From arguments to a [`Job`]: the sources and their schemes, the output path, the engine's
//! options, and the per-host memory of connection counts.

use super::args::GetArgs;
use super::credentials::Credentials;
use super::{output, Done, Failure, Job};
use crate::exit::Exit;
use crate::memory::{self, HostMemory};
use crate::schemes::{parse_proxy, registry, NetOptions};
use crate::ui::Ui;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{EngineOptions, SourceInput},
    Endpoint, ResolveError,
};
use std::collections::BTreeMap;
use std::time::SystemTime;

/// The job `args` ask for, and the per-host memory it uses (none with `--no-host-memory` or
/// `--fixed-connections`).
pub(super) fn job(args: &GetArgs, ui: Ui) -> Result<(Job, Option<Memory>), Failure> {
    let usage = |m: String| (Exit::Usage, m);
    let timeout = args.timeout;
    let net = net_options(args)?;
    let headers = args.request_headers();
    let registry = registry(&net).map_err(|e| (Exit::Internal, e))?;
    let credentials = credentials(args, ui)?;
    let mut inputs = Vec::new();
    for u in &args.urls {
        let mut input = source_input(&registry, &headers, u)?;
        input.endpoint = credentials.fill(input.endpoint);
        inputs.push(input);
    }
    if ui.verbose {
        let endpoints: Vec<_> = inputs.iter().map(|i| &i.endpoint).collect();
        crate::schemes::explain_sftp(&net, &endpoints);
    }
    let proxies = net.proxy_rules();
    let relay = |ep: &hydra_scheme::Endpoint| crate::schemes::sftp_relay(&net, ep);
    crate::schemes::explain_proxies(&proxies, &inputs, relay, ui);
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
    if !super::stream::wanted(args) {
        output::refuse_directory(&output)?;
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
                let route = crate::schemes::route_of(&proxies, &input.endpoint);
                let k = memory::key(&input.endpoint, route.proxy());
                input.remembered = hosts.recall(&k, now);
                keys.insert(input.endpoint.to_string(), k);
            }
            Some(Memory { hosts, keys, dir })
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
    if args.timeline.is_some() {
        engine.progress_every = crate::timeline::TICK;
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
        timeline: args.timeline.is_some(),
    };
    Ok((job, memory))
}

/// The credentials `-u`, `--netrc` and `--netrc-file` give.
fn credentials(args: &GetArgs, ui: Ui) -> Result<Credentials, Failure> {
    let needed = args
        .urls
        .iter()
        .any(|u| Endpoint::parse(u).is_ok_and(|e| e.credentials().is_none()));
    Credentials::gather(
        args.user.as_ref(),
        args.netrc,
        args.netrc_file.as_deref(),
        needed,
        ui,
    )
    .map_err(|m| (Exit::Usage, m))
}

/// The network options `args` give every scheme.
pub(super) fn net_options(args: &GetArgs) -> Result<NetOptions, Failure> {
    Ok(NetOptions {
        proxy: args
            .proxy
            .as_deref()
            .map(parse_proxy)
            .transpose()
            .map_err(|m| (Exit::Usage, m))?,
        noproxy: args.noproxy.clone(),
        insecure: args.insecure,
        extra_roots: match &args.cacert {
            Some(path) => hydra_scheme::tls::load_pem_certificates(path)
                .map_err(|e| (Exit::Usage, format!("--cacert {e}")))?,
            None => Vec::new(),
        },
        known_hosts: args.known_hosts.clone(),
        identity: args.identity.clone(),
        accept_new_host_key: args.accept_new_host_key,
        ssh_config: crate::schemes::load_ssh_config(args.ssh_config.as_deref(), args.quiet)
            .map_err(|m| (Exit::Usage, m))?,
        openssh_defaults: true,
        timeout: args.timeout,
        per_host: Some(args.per_host.max(1)),
    })
}

/// The source at `u`, with its registered scheme and (HTTP) the extra request headers.
pub(super) fn source_input(
    registry: &hydra_scheme::Registry,
    headers: &[(String, String)],
    u: &str,
) -> Result<SourceInput, Failure> {
    let usage = |m: String| (Exit::Usage, m);
    let mut endpoint = Endpoint::parse(u).map_err(|e| usage(format!("{u}: {e}")))?;
    let scheme = registry.resolve(&endpoint).cloned().map_err(|e| match e {
        ResolveError::UnknownScheme(_) => usage(format!(
            "{endpoint}: {e} (hydra schemes lists the registered ones)"
        )),
        _ => usage(format!("{endpoint}: {e}")),
    })?;
    if matches!(endpoint.url_scheme(), "http" | "https") {
        for (n, v) in headers {
            endpoint = endpoint.with_header(n, v);
        }
    }
    Ok(SourceInput::new(endpoint, scheme))
}

/// `--checksum-file SPEC`: the digest of the entry for `name`, read, or fetched with the
/// schemes and options of the download (one source, into memory), before it starts.
pub(super) async fn checksum_file(
    args: &GetArgs,
    spec: &str,
    name: &str,
    engine: EngineOptions,
) -> Result<crate::checksum::Checksum, Failure> {
    use crate::checksum::{from_file, SumsAt};
    let at = if spec.contains("://") {
        let registry = registry(&net_options(args)?).map_err(|e| (Exit::Internal, e))?;
        SumsAt::Url(source_input(&registry, &args.request_headers(), spec)?)
    } else {
        SumsAt::Path(spec.into())
    };
    from_file(spec, at, engine, name, args.checksum_algo).await
}

/// The per-host memory and each input's key in it.
pub(super) struct Memory {
    hosts: HostMemory,
    /// Endpoint (as a string) to its key.
    keys: BTreeMap<String, String>,
    /// Where the memory is kept.
    dir: std::path::PathBuf,
}

impl Memory {
    /// Records what `done` learned about each source's host; a failure to save is a warning.
    /// What was saved since this job loaded the memory (another object of a batch, another
    /// process) is read again first and kept.
    pub(super) fn learn(mut self, done: &Done, ui: Ui) {
        // Objects of one batch end on several threads: one reads, merges and saves at a time.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(fresh) = HostMemory::load(&self.dir) {
            self.hosts = fresh;
        }
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
