//! One `hydra get` of a chaos run, as a child process of this very binary: started with the
//! mirrors' URLs, killed with SIGKILL at the scenario's moment or once past the run's bound.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with this code.
    Exited(i32),
    /// A signal the runner did not send ended it (a crash).
    Crashed,
    /// The runner killed it at the scenario's moment (kill -9).
    Killed,
    /// The runner killed it because it ran past the bound.
    PastBound,
}

impl Outcome {
    /// The code for the exit-code table: the exit code, or a name.
    pub fn label(self) -> String {
        match self {
            Outcome::Exited(c) => c.to_string(),
            Outcome::Crashed => "signal".into(),
            Outcome::Killed => "kill -9".into(),
            Outcome::PastBound => "past bound".into(),
        }
    }
}

/// What one child did.
#[derive(Debug, Clone)]
pub struct Ran {
    pub outcome: Outcome,
    pub elapsed: Duration,
    /// The last line it wrote to stderr (its error, with `-q`).
    pub said: String,
}

/// Everything a child is started with.
pub struct GetCommand<'a> {
    pub exe: &'a Path,
    pub urls: &'a [String],
    pub output: &'a Path,
    pub known_hosts: &'a Path,
    /// Its `HYDRA_STATE_DIR` (and where its stderr is kept).
    pub state: &'a Path,
    /// `--timeout`.
    pub timeout: Duration,
    /// `-c`.
    pub resume: bool,
}

impl GetCommand<'_> {
    fn command(&self, stderr: std::fs::File) -> Command {
        let mut c = Command::new(self.exe);
        c.arg("get")
            .args(self.urls)
            .arg("-o")
            .arg(self.output)
            .args(["-q", "--no-host-memory", "--timeout"])
            .arg(format!("{}", self.timeout.as_secs_f64()))
            .arg("--known-hosts")
            .arg(self.known_hosts);
        if self.resume {
            c.arg("-c");
        }
        c.env("HYDRA_STATE_DIR", self.state)
            .env("NO_COLOR", "1")
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true);
        c
    }

    /// Runs it: SIGKILL after `kill_after` (when given and it has not ended), or past
    /// `bound`.
    pub async fn run(&self, kill_after: Option<Duration>, bound: Duration) -> std::io::Result<Ran> {
        let log: PathBuf = self.state.join(if self.resume {
            "stderr-resume.txt"
        } else {
            "stderr.txt"
        });
        let mut child = self.command(std::fs::File::create(&log)?).spawn()?;
        let start = Instant::now();
        let (limit, on_limit) = match kill_after {
            Some(k) if k < bound => (k, Outcome::Killed),
            _ => (bound, Outcome::PastBound),
        };
        let outcome = match tokio::time::timeout(limit, child.wait()).await {
            Ok(status) => match status?.code() {
                Some(c) => Outcome::Exited(c),
                None => Outcome::Crashed,
            },
            Err(_) => {
                child.start_kill()?;
                child.wait().await?;
                on_limit
            }
        };
        let elapsed = start.elapsed();
        let said = last_word(&std::fs::read_to_string(&log).unwrap_or_default());
        Ok(Ran {
            outcome,
            elapsed,
            said,
        })
    }
}

/// What a child said last: its last `hydra...` line (its error, with `-q`), else its last
/// non-empty line (a log line, a panic).
fn last_word(stderr: &str) -> String {
    let lines = || stderr.lines().rev().filter(|l| !l.trim().is_empty());
    lines()
        .find(|l| l.starts_with("hydra"))
        .or_else(|| lines().next())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::last_word;

    #[test]
    fn the_last_word_is_hydras_own_line_before_any_later_log_line() {
        let err = "hydra: every source failed\n2026 WARN suppaftp: dropped\n";
        assert_eq!(last_word(err), "hydra: every source failed");
        assert_eq!(
            last_word("thread 'main' panicked\n\n"),
            "thread 'main' panicked"
        );
        assert_eq!(last_word(""), "");
    }
}
