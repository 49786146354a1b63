//! `--metalink`: the Metalink's mirrors, output name and hashes become the download's.

use super::args::GetArgs;
use super::{Failure, Job};
use crate::exit::Exit;
use crate::metalink;
use crate::ui::Ui;

/// Reads the Metalink `args` name (`--metalink` FILE or URL, or a lone positional path ending
/// in .meta4 or .metalink) into `args`: its mirrors become the URLs; its file name the output
/// (unless -o); its strongest hash the checksum (unless --checksum); its size and piece
/// hashes go to the engine. What it gives and hydra does not use is a warning.
pub(super) async fn rewrite(args: &mut GetArgs, ui: Ui) -> Result<(), Failure> {
    if args.metalink.is_none() {
        match &args.urls[..] {
            [one] if metalink::is_metalink_arg(one) => args.metalink = Some(one.clone()),
            many if many.iter().any(|u| metalink::is_metalink_arg(u)) => {
                return Err((
                    Exit::Usage,
                    "a Metalink file is given alone (or with --metalink), not beside URLs"
                        .to_owned(),
                ))
            }
            _ => return Ok(()),
        }
    }
    let Some(spec) = args.metalink.clone() else {
        return Ok(());
    };
    let (plan, path) = if spec.contains("://") {
        let shown = crate::control::redact(&spec);
        let bytes = fetch(args, &spec)
            .await
            .map_err(|(code, e)| (code, format!("--metalink {shown}: {e}")))?;
        let plan = metalink::from_bytes(&shown, bytes).map_err(|m| (Exit::Usage, m))?;
        (plan, shown)
    } else {
        (metalink::load(&spec).map_err(|m| (Exit::Usage, m))?, spec)
    };
    let path = &path;
    if !ui.quiet {
        for w in &plan.warnings {
            let w = hydra_scheme::text::for_people(w);
            eprintln!("hydra: warning: {path}: {w}");
        }
    }
    args.urls = servable(plan.urls, args, path, ui)?;
    if args.output.is_none() {
        args.output = Some(plan.name.into());
    }
    if args.checksum.is_none() {
        args.checksum = plan.checksum;
    }
    args.pieces = plan.pieces;
    Ok(())
}

/// The Metalink at `url`, fetched with the download's schemes, proxies, credentials and
/// headers, and its timeout when one is set.
async fn fetch(args: &GetArgs, url: &str) -> Result<Vec<u8>, Failure> {
    let registry = crate::schemes::registry(&super::job::net_options(args)?)
        .map_err(|e| (Exit::Internal, e))?;
    let input = super::job::source_input(&registry, &args.request_headers(), url)?;
    let mut engine = hydra_scheme::engine::EngineOptions::default();
    if let Some(t) = args.timeout {
        engine.probe_timeout = t;
    }
    crate::document::fetch(input, engine, metalink::MAX_DOCUMENT, "a Metalink").await
}

/// The Metalink's URLs that a registered plugin serves, in order. Those of other schemes
/// (the `rsync://` mirrors MirrorBrain lists) are named in one warning; none left is a usage
/// error naming the file. A URL that does not parse is kept, to be refused by name.
fn servable(urls: Vec<String>, args: &GetArgs, path: &str, ui: Ui) -> Result<Vec<String>, Failure> {
    let registry = crate::schemes::registry(&super::job::net_options(args)?)
        .map_err(|e| (Exit::Internal, e))?;
    let (kept, skipped): (Vec<String>, Vec<String>) = urls.into_iter().partition(|u| {
        hydra_scheme::Endpoint::parse(u).map_or(true, |e| registry.for_endpoint(&e).is_some())
    });
    let named = || hydra_scheme::text::for_people(&skipped.join(", "));
    if kept.is_empty() {
        return Err((
            Exit::Usage,
            format!("{path}: no <url> of a scheme hydra serves ({})", named()),
        ));
    }
    if !skipped.is_empty() && !ui.quiet {
        eprintln!(
            "hydra: warning: {path}: {} mirror(s) of schemes no plugin serves skipped: {}",
            skipped.len(),
            named()
        );
    }
    Ok(kept)
}

/// Gives the engine the Metalink's checks, and names each mirror by its rank
/// (`mirror 2 (URL)`).
pub(super) fn fit(args: &GetArgs, job: &mut Job) {
    if args.metalink.is_none() {
        return;
    }
    job.engine.pieces = args.pieces.clone();
    for (k, label) in job.labels.iter_mut().enumerate() {
        *label = format!("mirror {} ({label})", k + 1);
    }
}
