//! `hydra get --input-file FILE`: many objects in one run, `-j` at a time, under one
//! connection budget (see "Batches" in docs/cli.md).
//!
//! The whole file is read and every object checked (URLs, schemes, output paths, no two
//! objects writing one file) before anything starts: a problem is one line naming the file,
//! the line and the problem, exit 2, and nothing is fetched. Each object then runs as
//! `hydra get` runs one ([`crate::get::download`]), its NDJSON events tagged with `object`,
//! its connection ceilings granted by the batch's [`budget::Budget`].

mod budget;
mod input;
mod report;
mod run;
pub mod tag;

use crate::exit::Exit;
use crate::get::{plan, GetArgs};
use crate::ui::{self, emit, Ui};
use input::{Entry, InputError};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Runs the batch `args.input_file` lists.
pub async fn main(args: GetArgs) -> Exit {
    ui::start_clock();
    let ui = Ui::new(args.quiet, args.verbose, args.json);
    let objects = match prepare(&args, ui) {
        Ok(o) => o,
        Err((code, msg)) => {
            let msg = hydra_scheme::text::for_people(&msg);
            eprintln!("hydra: {msg}");
            if ui.json {
                emit(
                    "error",
                    json!({"code": code as u8, "kind": code.name(), "message": msg}),
                );
            }
            return code;
        }
    };
    let budget = budget::Budget::new(args.per_host, args.max_connections);
    let rows = run::run(&objects, budget, args.jobs, ui).await;
    report::show(ui, &rows);
    report::worst(rows.iter().map(|r| r.outcome.exit()))
}

/// Reads and checks every object of the input file.
fn prepare(args: &GetArgs, ui: Ui) -> Result<Vec<run::Object>, (Exit, String)> {
    let path = args.input_file.as_deref().unwrap_or(Path::new("-"));
    let (name, text) = read(path)?;
    let parsed = input::parse(&name, &text).map_err(|e| (Exit::Usage, e.to_string()))?;
    if !ui.quiet {
        for w in &parsed.warnings {
            eprintln!("hydra: warning: {w}");
        }
    }
    let mut objects: Vec<run::Object> = Vec::new();
    let mut lines: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for entry in &parsed.entries {
        let at = |why: String| InputError {
            file: name.clone(),
            line: entry.line,
            why,
        };
        let object = object(args, entry, ui).map_err(|(code, why)| (code, at(why).to_string()))?;
        if let Some(other) = lines.insert(one_file(&object.output), entry.line) {
            let why = format!(
                "{} is also the output of line {other}",
                object.output.display()
            );
            return Err((Exit::Usage, at(why).to_string()));
        }
        objects.push(object);
    }
    Ok(objects)
}

/// `output` as one name however it is spelled: its directory resolved (`.`, `..`, links)
/// when it exists, else the path made absolute.
fn one_file(output: &Path) -> PathBuf {
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (std::fs::canonicalize(parent), output.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf()),
    }
}

/// The input file's name for messages and its text.
fn read(path: &Path) -> Result<(String, String), (Exit, String)> {
    let (name, bytes) = if path == Path::new("-") {
        let mut b = Vec::new();
        let r = std::io::stdin().read_to_end(&mut b);
        ("standard input".to_owned(), r.map(|_| b))
    } else {
        (path.display().to_string(), std::fs::read(path))
    };
    let bytes = bytes.map_err(|e| (Exit::Usage, format!("{name}: cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        (
            Exit::Usage,
            format!("{name}: not UTF-8 text (a compressed input file is not read)"),
        )
    })?;
    Ok((name, text))
}

/// The object `entry` describes, checked as `hydra get` would check it.
fn object(args: &GetArgs, entry: &Entry, ui: Ui) -> Result<run::Object, (Exit, String)> {
    let mut a = args.clone();
    a.input_file = None;
    a.urls = entry.uris.clone();
    if let Some(d) = &entry.dir {
        a.directory = Some(d.clone());
    }
    a.output = entry.out.clone();
    a.checksum = entry.checksum.clone();
    a.header.extend(entry.headers.iter().cloned());
    let plan = plan(&a, ui)?;
    a.output = Some(plan.output.clone());
    a.directory = None;
    let mut hosts = BTreeMap::new();
    for e in &plan.endpoints {
        *hosts.entry(host_key(e)).or_insert(0) += 1;
    }
    Ok(run::Object {
        args: a,
        output: plan.output,
        hosts,
    })
}

/// The host a budget is kept for: name (or address) and port.
fn host_key(e: &hydra_scheme::Endpoint) -> String {
    let port = e.port().or(match e.url_scheme() {
        "sftp" => Some(22),
        _ => None,
    });
    match port {
        Some(p) => format!("{}:{p}", e.host()),
        None => format!("{}:{}", e.host(), e.url_scheme()),
    }
}
