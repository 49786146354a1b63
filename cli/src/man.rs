//! `hydra man`: manual pages (roff) generated from the command-line definition, so they
//! list exactly the options the binary takes.

use crate::exit::Exit;
use clap::Args;
use std::path::{Path, PathBuf};

/// Arguments of `hydra man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The page of this command (get, demo, ...); the page of hydra itself by default.
    #[arg(value_name = "COMMAND", conflicts_with = "out")]
    pub command: Option<String>,
    /// Write every page (hydra.1, hydra-get.1, ...) into DIR instead of printing one.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The pages of `cmd` and of each of its subcommands, by file name (`hydra.1` first).
pub fn pages(cmd: clap::Command) -> Vec<(String, Vec<u8>)> {
    let mut cmd = cmd;
    cmd.build();
    let name = cmd.get_name().to_owned();
    let mut out = vec![(format!("{name}.1"), render(cmd.clone()))];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let page = format!("{name}-{}", sub.get_name());
        out.push((format!("{page}.1"), render(sub.clone().name(page))));
    }
    out
}

fn render(cmd: clap::Command) -> Vec<u8> {
    let mut buf = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = clap_mangen::Man::new(cmd).render(&mut buf);
    buf
}

/// Runs `hydra man` over the command line `cmd`.
pub fn main(args: ManArgs, cmd: clap::Command) -> Exit {
    let pages = pages(cmd);
    if let Some(dir) = &args.out {
        return match write_all(dir, &pages) {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!("hydra: {e}");
                Exit::Disk
            }
        };
    }
    let want = match &args.command {
        Some(c) => format!("hydra-{c}.1"),
        None => "hydra.1".to_owned(),
    };
    match pages.iter().find(|(n, _)| *n == want) {
        Some((_, page)) => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(page);
            Exit::Ok
        }
        None => {
            let names: Vec<&str> = pages
                .iter()
                .skip(1)
                .filter_map(|(n, _)| n.strip_prefix("hydra-")?.strip_suffix(".1"))
                .collect();
            let asked = args.command.as_deref().unwrap_or_default();
            eprintln!(
                "hydra: man: no command \"{}\" (one of {})",
                hydra_scheme::text::sanitize(asked),
                names.join(", ")
            );
            Exit::Usage
        }
    }
}

fn write_all(dir: &Path, pages: &[(String, Vec<u8>)]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, page) in pages {
        let p = dir.join(name);
        std::fs::write(&p, page).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_get_page_names_every_get_flag() {
        let cmd = crate::Cli::command();
        let pages = pages(cmd.clone());
        let (_, page) = pages
            .iter()
            .find(|(n, _)| n == "hydra-get.1")
            .expect("a page for get");
        let page = String::from_utf8_lossy(page);
        let get = cmd.find_subcommand("get").unwrap();
        let mut longs = 0;
        for arg in get.get_arguments() {
            if let Some(long) = arg.get_long() {
                // roff escapes each '-' of a flag.
                let spelt = format!("\\-\\-{}", long.replace('-', "\\-"));
                assert!(page.contains(&spelt), "--{long} is missing");
                longs += 1;
            }
        }
        assert!(longs > 20, "only {longs} flags looked at");
    }

    #[test]
    fn there_is_a_page_for_hydra_and_one_for_each_command() {
        let names: Vec<String> = pages(crate::Cli::command())
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        for want in ["hydra.1", "hydra-get.1", "hydra-man.1"] {
            assert!(names.iter().any(|n| n == want), "{want}: {names:?}");
        }
    }
}
