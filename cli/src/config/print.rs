//! `hydra get --print-config`: each settable option's effective value and where it came
//! from (command line, env HYDRA_X, config FILE:LINE, default). A proxy's password and a
//! header's value are not printed.

use super::{settable, FromFile};
use crate::exit::Exit;
use clap::parser::ValueSource;
use clap::{Arg, Command};
use std::ffi::OsString;
use std::path::Path;

/// Prints the table for the command line `argv` (the config already applied).
pub(super) fn main(
    cmd: &Command,
    argv: &[OsString],
    file: Option<&Path>,
    from_file: &[FromFile],
) -> Exit {
    let matches = match cmd.clone().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return Exit::Usage;
        }
    };
    let Some(("get", gm)) = matches.subcommand() else {
        return Exit::Internal;
    };
    let Some(get) = cmd.find_subcommand("get") else {
        return Exit::Internal;
    };
    match file {
        Some(p) => println!("# config file: {}", p.display()),
        None => println!("# config file: none"),
    }
    for arg in settable(get) {
        let id = arg.get_id().as_str();
        let shown: Vec<String> = gm
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| safe(id, &v.to_string_lossy()))
            .collect();
        let value = if shown.is_empty() {
            "(none)".to_owned()
        } else {
            shown.join(", ")
        };
        let origin = origin(arg, gm.value_source(id), from_file);
        let long = arg.get_long().unwrap_or(id);
        println!("{long} = {value}  # {origin}");
    }
    Exit::Ok
}

fn origin(arg: &Arg, source: Option<ValueSource>, from_file: &[FromFile]) -> String {
    if let Some(f) = from_file.iter().find(|f| f.id == arg.get_id().as_str()) {
        return format!("config {}:{}", f.path.display(), f.line);
    }
    match source {
        Some(ValueSource::CommandLine) => "command line".to_owned(),
        Some(ValueSource::EnvVariable) => format!(
            "env {}",
            arg.get_env()
                .map(|e| e.to_string_lossy())
                .unwrap_or_default()
        ),
        _ => "default".to_owned(),
    }
}

/// A value as it may be shown: a proxy without its user info, a header without its value,
/// control characters escaped.
fn safe(id: &str, v: &str) -> String {
    let v = match id {
        "proxy" => hydra_scheme::text::redact_userinfo(v).into_owned(),
        "header" => match v.split_once(':') {
            Some((name, _)) => format!("{}: ***", name.trim()),
            None => "***".to_owned(),
        },
        _ => v.to_owned(),
    };
    hydra_scheme::text::sanitize(&v).into_owned()
}
