#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod batch;
#[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
mod chaos;
mod checksum;
mod config;
#[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
mod conformance;
mod control;
#[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
mod demo;
mod document;
mod download;
mod exit;
mod get;
mod logs;
mod man;
mod memory;
mod metalink;
mod runtime;
pub mod schemes;

pub use download::{
    Algo, Checksum, ChecksumError, Download, DownloadError, Event, Outcome, SourceOutcome,
};
pub use schemes::{NetOptions, Plugins};
mod sim;
mod timeline;
mod ui;

use clap::error::{ContextKind, ContextValue};
use clap::{CommandFactory, Parser, Subcommand};
use hydra_scheme::text::{redact_userinfo, sanitize};
use std::io::IsTerminal;
use std::process::ExitCode;

/// hydra: one object from many mirrors at once, with connection count and chunk size computed
/// from measurements rather than asked of you.
#[derive(Debug, Parser)]
#[command(name = "hydra", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once; the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Download one object from every mirror given, at once.
    Get(get::GetArgs),
    /// A whole multi-mirror download on this machine: origins, emulated links, verification.
    #[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
    Demo(demo::DemoArgs),
    /// Run the scheduler in virtual time against the fluid oracle and the baselines.
    Sim(sim::SimArgs),
    /// Run every registered scheme through the conformance suite.
    #[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
    Conformance(conformance::ConformanceArgs),
    /// The registered schemes and what each can do.
    Schemes(schemes::SchemesArgs),
    /// Print a manual page (roff), or write them all with --out DIR.
    Man(man::ManArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Runs the `hydra` command line over the built-in schemes (see [`main_with`]).
pub fn main() -> ExitCode {
    main_with(Plugins::default())
}

/// Runs the `hydra` command line with `plugins` registered beside the built-in schemes.
pub fn main_with(plugins: Plugins) -> ExitCode {
    schemes::install(plugins);
    let argv = match config::prepare(&Cli::command(), std::env::args_os().collect()) {
        config::Prepared::Run(argv) => argv,
        config::Prepared::Exit(code) => return code.into(),
    };
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => match config::env::bad_value(&Cli::command(), &e, &argv) {
            Some(line) => {
                eprintln!("hydra: {line}");
                return ExitCode::from(2);
            }
            None => return usage_error(e),
        },
    };
    logs::init(matches!(&cli.command, Command::Get(a) if a.quiet));
    match cli.command {
        Command::Sim(a) => sim::main(a),
        Command::Get(a) => runtime::for_get().block_on(get::main(a)).into(),
        #[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
        Command::Demo(a) => runtime::with_servers().block_on(demo::main(a)).into(),
        #[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
        Command::Conformance(a) => runtime::with_servers()
            .block_on(conformance::main(a))
            .into(),
        Command::Schemes(a) => schemes::main(a).into(),
        Command::Man(a) => man::main(a, Cli::command()).into(),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "hydra", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}

/// Prints clap's error (or help, or version) and exits as clap would, with the user info of
/// any URL in it redacted, a `--header` value not echoed (it may be a token), and control
/// characters in what the user typed escaped.
fn usage_error(e: clap::Error) -> ExitCode {
    if !e.use_stderr() {
        e.exit();
    }
    let styled = e.render();
    let mut text = if std::io::stderr().is_terminal() {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    let arg = e.get(ContextKind::InvalidArg);
    if let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) =
        (arg, e.get(ContextKind::InvalidValue))
    {
        if arg.contains("--header") && !value.is_empty() {
            let shown = match value.split_once(':') {
                Some((n, _)) if is_token(n.trim()) => format!("{}: ***", n.trim()),
                _ => "***".to_owned(),
            };
            text = text.replace(value.as_str(), &shown);
        }
    }
    for (_, value) in e.context() {
        let given: &[String] = match value {
            ContextValue::String(s) => std::slice::from_ref(s),
            ContextValue::Strings(v) => v,
            _ => &[],
        };
        for s in given {
            if let std::borrow::Cow::Owned(safe) = sanitize(s) {
                text = text.replace(s.as_str(), &safe);
            }
        }
    }
    eprint!("{}", redact_userinfo(&text));
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// An HTTP field name's characters (RFC 9110 token, less the rarer punctuation).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}
