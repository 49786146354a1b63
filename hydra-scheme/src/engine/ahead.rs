//! Requests sent ahead of the transfer ([`Scheme::request_ahead`](crate::Scheme::request_ahead)).
//!
//! With several sources, the transfer waits for the probes of those slower than the first to
//! answer, and a source's first request goes out only then: its first byte comes one round
//! trip after the transfer starts. Once the first probe has answered, the object's size is
//! known, and so is the first split the transfer will make if the sources still probing
//! answer in time and agree, as long as that split does not hang on their round trips (no
//! rate is known, so shares follow the priors): the same scheduler, given the same sources in
//! the same order, carves the same ranges. Each such source is then asked for its first range
//! at once, and its first fetch continues that response, checked against its own probe. A
//! source that answers late or disagrees leaves its response untaken (dropped after
//! [`PRIMED_TTL`](crate::PRIMED_TTL)), one given another range drops it at its first fetch;
//! the transfer is what it would have been, less the bytes that response carried.

use super::integrity::PROOF_BYTES;
use super::source::spec_of;
use super::{EngineOptions, ProbedSource, SourceInput};
use hydra_core::{Action, Scheduler, SourceSpec};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Asks every source in `pending` (position given, source; still probing) for the range the
/// first split would give it, with `first` (the first probe that answered) taking part as the
/// transfer's reference and the pending sources after it in the order given. `given`: how
/// many sources the transfer was given.
///
/// A request ahead opens a second connection to a host whose probe is still out: none is sent
/// when the ceilings would not allow that ([`Config::per_host`](hydra_core::Config::per_host)
/// or the scheme's own `max_connections_per_host` under 2, or
/// [`Config::total`](hydra_core::Config::total) under the probes' connections and these),
/// nor when primed responses are off (a resume).
pub(super) fn send(
    opts: &EngineOptions,
    given: usize,
    first: &ProbedSource,
    pending: &[(usize, SourceInput)],
) {
    let size = first.probe.size;
    let cfg = &opts.config;
    let room = cfg.per_host >= 2 && given + pending.len() <= cfg.total;
    if !opts.prime_first_probe || !room || pending.is_empty() || size == 0 || !first.probe.ranged {
        return;
    }
    // The split must not hang on what is still to be learned: how long the first source's
    // primed response will have been arriving at the start, and the round trips of the probes
    // still out. It does not while no rate is known (shares follow the priors); with rates
    // remembered each source's cap depends on them, and nothing is asked ahead.
    let starts = first_starts(opts, first, pending, Duration::ZERO);
    if starts != first_starts(opts, first, pending, UNKNOWN) {
        return;
    }
    for (k, (_, input)) in pending.iter().enumerate() {
        // Source 0 is `first`; a source the split leaves out has no start.
        let Some(&offset) = starts.get(&(k + 1)) else {
            continue;
        };
        let cap = input.scheme.capabilities().max_connections_per_host;
        if cap.is_some_and(|m| m < 2) {
            continue;
        }
        let input = input.clone();
        tokio::spawn(async move {
            let ep = &input.endpoint;
            if let Err(e) = input.scheme.request_ahead(ep, offset, size).await {
                tracing::debug!(source = %ep, "request ahead from {offset}: {}", e.kind);
            }
        });
    }
}

/// A time the split is tried at for what is not known yet, besides zero: far from any real
/// one, so that a split that depends on it differs.
const UNKNOWN: Duration = Duration::from_secs(1);

/// Where the first split starts each source's first fetch, by its position in the transfer
/// (`first` at 0, then `pending` in order), with `unknown` for the primed response's head
/// start and the pending sources' setups and round trips. A source that the split gives
/// nothing is absent, and so is one it gives several fetches: they are sent at once, and the
/// one from another offset may reach the scheme first and drop the response.
fn first_starts(
    opts: &EngineOptions,
    first: &ProbedSource,
    pending: &[(usize, SourceInput)],
    unknown: Duration,
) -> BTreeMap<usize, u64> {
    let mut lead = spec_of(first, Instant::now());
    lead.primed = lead.primed.map(|_| unknown);
    let mut specs = vec![lead];
    for (_, input) in pending {
        let mut caps = input.scheme.capabilities();
        caps.ranged &= first.probe.ranged;
        specs.push(SourceSpec {
            remembered: input.remembered,
            setup: Some(unknown),
            rtt: Some(unknown),
            ..SourceSpec::new(caps)
        });
    }
    let mut sched = Scheduler::new(first.probe.size, specs, opts.config.clone());
    sched.tick(Duration::ZERO);
    let mut requests: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    while let Some(a) = sched.poll_action() {
        if let Action::Request { source, range, .. } = a {
            // A stream from a source with ranges is asked from a few bytes early, to prove
            // its offset (see `integrity`).
            let asked = range.lo - range.lo.min(PROOF_BYTES);
            requests
                .entry(usize::from(source.0))
                .or_default()
                .push(asked);
        }
    }
    requests
        .into_iter()
        .filter_map(|(src, asked)| match asked[..] {
            [one] => Some((src, one)),
            _ => None,
        })
        .collect()
}
