//! Defaults set once: `hydra get` options from `HYDRA_*` environment variables (clap's `env`)
//! and from a config file, `$XDG_CONFIG_HOME/hydra/config.toml` (else
//! `~/.config/hydra/config.toml`; `--config FILE`, `--no-config`).
//!
//! Precedence: command line, then `HYDRA_*`, then the config file, then the built-in default.
//! The options that can be set so are exactly those of `get` that have an environment
//! variable (see `get/args.rs`); the file names them by their long names. A setting is
//! applied by adding `--key=value` to the command line just after `get` when neither the
//! command line nor the environment gave the option, so it is parsed (and refused) exactly
//! as the option is; every setting is checked first, and a bad one is one error naming the
//! file, line and key (exit 2).

pub mod env;
mod file;
mod print;

use crate::exit::Exit;
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};
pub use file::{ConfigError, Setting};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What to do with a command line once the config is applied.
pub enum Prepared {
    /// Parse and run this command line.
    Run(Vec<OsString>),
    /// Exit now with this status (`--print-config`, or a bad config file).
    Exit(Exit),
}

/// Where a setting came from, for `--print-config`.
#[derive(Debug, Clone)]
pub struct FromFile {
    /// The option's argument id.
    pub id: String,
    /// The config file.
    pub path: PathBuf,
    /// Its line.
    pub line: usize,
}

/// `argv` with the config file's settings applied (see the module doc); for a command other
/// than `get`, or a command line clap refuses, `argv` as it is.
pub fn prepare(cmd: &Command, argv: Vec<OsString>) -> Prepared {
    let Ok(matches) = cmd.clone().try_get_matches_from(&argv) else {
        return Prepared::Run(argv);
    };
    let (Some(("get", gm)), Some(get)) = (matches.subcommand(), cmd.find_subcommand("get")) else {
        return Prepared::Run(argv);
    };
    let applied = match path(gm) {
        Ok(Some(p)) => file::read(&p).and_then(|s| apply(get, gm, &p, &s)),
        Ok(None) => Ok(Applied::default()),
        Err(e) => Err(e),
    };
    let applied = match applied {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hydra: {e}");
            return Prepared::Exit(Exit::Usage);
        }
    };
    let argv = with_args(argv, applied.args);
    if gm.get_flag("print_config") {
        return Prepared::Exit(print::main(
            cmd,
            &argv,
            applied.path.as_deref(),
            &applied.origins,
        ));
    }
    Prepared::Run(argv)
}

/// The config file to read: `--config` (or `HYDRA_CONFIG`), which must exist; else the
/// default one when it exists; none with `--no-config`.
fn path(gm: &ArgMatches) -> Result<Option<PathBuf>, ConfigError> {
    if gm.get_flag("no_config") {
        return Ok(None);
    }
    if let Some(p) = gm.get_one::<PathBuf>("config") {
        return Ok(Some(p.clone()));
    }
    Ok(default_path().filter(|p| p.exists()))
}

/// `$XDG_CONFIG_HOME/hydra/config.toml`, else `~/.config/hydra/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    let nonempty = |v: OsString| (!v.is_empty()).then(|| PathBuf::from(v));
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .and_then(nonempty)
        .or_else(|| Some(std::env::var_os("HOME").and_then(nonempty)?.join(".config")))?;
    Some(base.join("hydra").join("config.toml"))
}

/// The settings to add to the command line and where each came from.
#[derive(Default)]
struct Applied {
    path: Option<PathBuf>,
    args: Vec<OsString>,
    origins: Vec<FromFile>,
}

/// The options the config file may set: `get`'s options with an environment variable,
/// except the choice of the file itself.
pub fn settable(get: &Command) -> impl Iterator<Item = &Arg> {
    get.get_arguments()
        .filter(|a| a.get_env().is_some() && a.get_id() != "config" && a.get_long().is_some())
}

fn apply(
    get: &Command,
    gm: &ArgMatches,
    path: &Path,
    settings: &[Setting],
) -> Result<Applied, ConfigError> {
    let mut out = Applied {
        path: Some(path.to_path_buf()),
        ..Applied::default()
    };
    for s in settings {
        let fail = |problem: String| ConfigError {
            path: path.to_path_buf(),
            line: Some(s.line),
            key: Some(s.key.clone()),
            problem,
        };
        let arg = settable(get)
            .find(|a| a.get_long() == Some(s.key.as_str()))
            .ok_or_else(|| {
                let known: Vec<&str> = settable(get).filter_map(Arg::get_long).collect();
                fail(format!("unknown key (known: {})", known.join(", ")))
            })?;
        let values = values(get, arg, &s.value).map_err(fail)?;
        let given = matches!(
            gm.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if given {
            continue;
        }
        let long = s.key.as_str();
        for v in values {
            out.args.push(match v {
                Some(v) => format!("--{long}={v}").into(),
                None => format!("--{long}").into(),
            });
        }
        out.origins.push(FromFile {
            id: arg.get_id().to_string(),
            path: path.to_path_buf(),
            line: s.line,
        });
    }
    Ok(out)
}

/// The command-line values a setting stands for, each checked by the option's own parser: a
/// flag set true is `None` (the bare flag), set false nothing.
fn values(get: &Command, arg: &Arg, v: &toml::Value) -> Result<Vec<Option<String>>, String> {
    let flag = !arg.get_action().takes_values();
    let many = matches!(arg.get_action(), clap::ArgAction::Append);
    let items: Vec<&toml::Value> = match v {
        toml::Value::Array(a) if many => a.iter().collect(),
        toml::Value::Array(_) => return Err("takes one value, not a list".to_owned()),
        one => vec![one],
    };
    let mut out = Vec::new();
    for item in items {
        let text = match item {
            toml::Value::Boolean(b) if flag => {
                if *b {
                    out.push(None);
                }
                continue;
            }
            _ if flag => return Err("expected true or false".to_owned()),
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => {
                return Err(format!(
                    "expected a string or a number, not {}",
                    other.type_str()
                ))
            }
        };
        check(get, arg, &text)?;
        out.push(Some(text));
    }
    Ok(out)
}

/// `text` parsed as the option's value on a command line of its own: the cause in words
/// when it is refused.
fn check(get: &Command, arg: &Arg, text: &str) -> Result<(), String> {
    let long = arg.get_long().unwrap_or_default();
    get.clone()
        .no_binary_name(true)
        .try_get_matches_from(["--print-config".to_owned(), format!("--{long}={text}")])
        .map(drop)
        .map_err(|e| {
            use std::error::Error as _;
            match e.source() {
                Some(cause) => cause.to_string(),
                None => {
                    let rendered = e.render().to_string();
                    let first = rendered.lines().next().unwrap_or_default();
                    first.trim_start_matches("error: ").to_owned()
                }
            }
        })
}

/// `argv` with `extra` inserted just after the `get` subcommand.
fn with_args(argv: Vec<OsString>, extra: Vec<OsString>) -> Vec<OsString> {
    if extra.is_empty() {
        return argv;
    }
    let at = argv
        .iter()
        .skip(1)
        .position(|a| a == "get")
        .map_or(argv.len(), |i| i + 2);
    let mut out = argv;
    out.splice(at..at, extra);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_go_right_after_the_subcommand() {
        let argv: Vec<OsString> = ["hydra", "get", "http://h/x", "--", "-o"]
            .iter()
            .map(OsString::from)
            .collect();
        let got = with_args(argv, vec!["--per-host=8".into()]);
        assert_eq!(got[1], "get");
        assert_eq!(got[2], "--per-host=8");
        assert_eq!(got[3], "http://h/x");
    }
}
