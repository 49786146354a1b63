//! `--link-mirrors`: the mirrors and digest a server advertises (RFC 6249 `Link:
//! rel=duplicate`, RFC 3230 `Digest`) become the download's.
//!
//! Before the download, the first http(s) URL is asked once ([`Scheme::advertised`]). Each
//! advertised mirror (preferred ones first, then by `pri`, lowest first) is added after the
//! URLs given, unless already among them; it is then probed and must agree with the others
//! like any mirror. The strongest advertised digest becomes the checksum when neither
//! `--checksum` nor `--checksum-file` gives one: a mismatch exits 6 and leaves nothing at FILE.
//! A request that fails, or a header that cannot be read, is a warning; the download goes on
//! with the URLs given. `-v` says where each mirror and the checksum came from.
//!
//! [`Scheme::advertised`]: hydra_scheme::Scheme::advertised

use super::args::GetArgs;
use super::probe::warn;
use super::{job, Failure};
use crate::checksum::{Algo, Checksum};
use crate::exit::Exit;
use crate::ui::{emit, Ui};
use hydra_scheme::{Advertised, AdvertisedDigest, AdvertisedMirror, DigestAlgorithm, Endpoint};
use serde_json::json;
use std::time::Duration;

/// How long the request for advertised mirrors may take when `--timeout` gives no bound.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// With `--link-mirrors`, adds what the first http(s) URL's server advertises to `args`.
pub(super) async fn discover(args: &mut GetArgs, ui: Ui) -> Result<(), Failure> {
    if !args.link_mirrors {
        return Ok(());
    }
    let Some(first) = args.urls.iter().find(|u| is_http(u)).cloned() else {
        warn(
            ui,
            "--link-mirrors",
            "no http or https URL to ask; nothing added",
        );
        return Ok(());
    };
    let Some(found) = ask(args, &first, ui).await? else {
        return Ok(());
    };
    let shown = hydra_scheme::text::for_people(&first);
    for w in &found.warnings {
        warn(ui, &shown, w);
    }
    add_mirrors(args, &found.mirrors, &shown, ui);
    adopt_digest(args, &found.digests, &shown, ui);
    Ok(())
}

fn is_http(url: &str) -> bool {
    Endpoint::parse(url).is_ok_and(|e| matches!(e.url_scheme(), "http" | "https"))
}

/// What `url`'s server advertises, or `None` (with a warning) when it cannot be asked.
async fn ask(args: &GetArgs, url: &str, ui: Ui) -> Result<Option<Advertised>, Failure> {
    let net = job::net_options(args)?;
    let registry = crate::schemes::registry(&net).map_err(|e| (Exit::Internal, e))?;
    let input = job::source_input(&registry, &args.request_headers(), url)?;
    let limit = args.timeout.unwrap_or(ASK_TIMEOUT);
    let shown = input.endpoint.to_string();
    let why = match tokio::time::timeout(limit, input.scheme.advertised(&input.endpoint)).await {
        Ok(Ok(found)) => return Ok(Some(found)),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer after {:.1} s", limit.as_secs_f64()),
    };
    warn(
        ui,
        &shown,
        &format!("--link-mirrors: {why}; no mirror or digest added"),
    );
    Ok(None)
}

/// Adds the advertised mirrors not already given, preferred first, then by priority.
fn add_mirrors(args: &mut GetArgs, mirrors: &[AdvertisedMirror], from: &str, ui: Ui) {
    let mut ordered: Vec<&AdvertisedMirror> = mirrors.iter().collect();
    ordered.sort_by_key(|m| (!m.preferred, m.priority.unwrap_or(u32::MAX)));
    for m in ordered {
        if args.urls.iter().any(|u| same_url(u, &m.url)) {
            continue;
        }
        if let Err(e) = Endpoint::parse(&m.url) {
            warn(ui, from, &format!("Link mirror {} ignored: {e}", m.url));
            continue;
        }
        tell(
            ui,
            Taken::Mirror {
                url: &m.url,
                detail: describe(m),
            },
            from,
        );
        args.urls.push(m.url.clone());
    }
}

/// Whether two URLs name the same place once parsed (`http://h:80/x` is `http://h/x`).
fn same_url(a: &str, b: &str) -> bool {
    match (Endpoint::parse(a), Endpoint::parse(b)) {
        (Ok(a), Ok(b)) => a.url() == b.url(),
        _ => a == b,
    }
}

/// `pri 1, geo de, preferred`, or empty.
fn describe(m: &AdvertisedMirror) -> String {
    let mut parts = Vec::new();
    if let Some(p) = m.priority {
        parts.push(format!("pri {p}"));
    }
    if let Some(g) = &m.geo {
        parts.push(format!("geo {g}"));
    }
    if m.preferred {
        parts.push("preferred".to_owned());
    }
    parts.join(", ")
}

/// Takes the strongest advertised digest as the checksum, unless one was given.
fn adopt_digest(args: &mut GetArgs, digests: &[AdvertisedDigest], from: &str, ui: Ui) {
    let Some(best) = digests.iter().max_by_key(|d| d.algorithm) else {
        return;
    };
    if args.checksum.is_some() || args.checksum_file.is_some() {
        tell(ui, Taken::DigestUnused, from);
        return;
    }
    let hex: String = best.value.iter().map(|b| format!("{b:02x}")).collect();
    match Checksum::new(algo(best.algorithm), &hex) {
        Ok(c) => {
            tell(ui, Taken::Checksum(c.to_string()), from);
            args.checksum = Some(c);
        }
        Err(e) => warn(ui, from, &format!("Digest ignored: {e}")),
    }
}

fn algo(a: DigestAlgorithm) -> Algo {
    match a {
        DigestAlgorithm::Md5 => Algo::Md5,
        DigestAlgorithm::Sha1 => Algo::Sha1,
        DigestAlgorithm::Sha256 => Algo::Sha256,
        DigestAlgorithm::Sha512 => Algo::Sha512,
    }
}

/// What was taken from a server's headers, to be said.
enum Taken<'a> {
    /// A mirror, and its parameters in words.
    Mirror { url: &'a str, detail: String },
    /// The checksum, as `ALGO=HEX`.
    Checksum(String),
    /// A digest left unused: a checksum was given.
    DigestUnused,
}

/// Says (with `-v`, or as a `--json` event) what was taken from `from`'s headers.
fn tell(ui: Ui, taken: Taken, from: &str) {
    let line = match &taken {
        Taken::Mirror { url, detail } if detail.is_empty() => {
            format!("mirror {url} from the Link header of {from}")
        }
        Taken::Mirror { url, detail } => {
            format!("mirror {url} ({detail}) from the Link header of {from}")
        }
        Taken::Checksum(c) => format!("checksum {c} from the Digest header of {from}"),
        Taken::DigestUnused => {
            format!("the Digest header of {from} is not used: a checksum was given")
        }
    };
    if ui.json {
        let value = match &taken {
            Taken::Mirror { url, .. } => json!({"mirror": url}),
            Taken::Checksum(c) => json!({"checksum": c}),
            Taken::DigestUnused => json!({"digest_unused": true}),
        };
        emit(
            "advertised",
            json!({"from": from, "taken": value, "message": line}),
        );
    } else if ui.verbose && !ui.quiet {
        eprintln!("hydra: {line}");
    }
}
