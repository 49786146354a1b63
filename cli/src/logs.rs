//! The log subscriber: `HYDRA_LOG` (an `EnvFilter`) under fixed caps, on stderr, with every
//! URL's user info redacted on the way out.
//!
//! The caps hold at every `HYDRA_LOG` level: suppaftp logs each command it sends at trace
//! (`PASS` with the password) and the user name at debug; russh logs keys and packets at
//! debug. Neither gets past `info`.

use hydra_scheme::text::redact_userinfo;
use std::io::{IsTerminal, Write};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// The most a library that handles secrets may log, whatever `HYDRA_LOG` asks.
const CAPPED: [&str; 3] = ["suppaftp", "russh", "russh_sftp"];

/// Without `HYDRA_LOG`. `hydra demo` runs its FTP origin (libunftp) in process: its warnings
/// about a client that hung up mid-command (hydra drops sessions and checks it no longer
/// needs) are the origin's business, not the user's. Likewise russh-sftp's (the SFTP origin of
/// `hydra conformance --chaos`) about a client gone mid-request, and suppaftp's about a
/// transfer stream hydra dropped on purpose.
const DEFAULT: &str = "warn,libunftp=error,russh_sftp=error,suppaftp=error";

/// Installs the subscriber. `quiet` (`-q`): errors only, unless `HYDRA_LOG` says otherwise.
pub fn init(quiet: bool) {
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let hydra_log = std::env::var("HYDRA_LOG").ok();
    let layer = layer(quiet, hydra_log.as_deref(), colour, || {
        Redacting(std::io::stderr().lock())
    });
    tracing_subscriber::registry().with(layer).init();
}

/// The fmt layer writing through `make_writer`, filtered by `hydra_log` (else the default)
/// under the caps.
fn layer<S, W>(quiet: bool, hydra_log: Option<&str>, colour: bool, make_writer: W) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let wanted = hydra_log
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(if quiet { "error" } else { DEFAULT }));
    let cap = CAPPED.iter().fold(
        Targets::new().with_default(LevelFilter::TRACE),
        |t, name| t.with_target(*name, LevelFilter::INFO),
    );
    tracing_subscriber::fmt::layer()
        .with_writer(make_writer)
        .with_ansi(colour)
        .with_filter(wanted)
        .with_filter(cap)
}

/// A writer that passes text on through [`redact_userinfo`]. The fmt layer writes each event
/// with one call, so a URL is never split between two.
struct Redacting<W: Write>(W);

impl<W: Write> Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(redact_userinfo(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the subscriber prints of suppaftp's and russh's events (their `log` records
    /// arrive with the module path as target), and of a hydra warning naming a URL.
    fn printed(quiet: bool, hydra_log: Option<&str>) -> String {
        let out = Shared::default();
        let w = out.clone();
        let subscriber =
            tracing_subscriber::registry()
                .with(layer(quiet, hydra_log, false, move || Redacting(w.clone())));
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "suppaftp::async_ftp::tokio_ftp::control", "CC OUT: PASS pw-1");
            tracing::debug!(target: "suppaftp::async_ftp::tokio_ftp", "Signin in with user 'usr-1'");
            tracing::debug!(target: "russh::client", "key pw-2");
            tracing::warn!(
                target: "suppaftp::async_ftp::tokio_ftp::transfer_stream",
                "transfer stream dropped without finish(); its reply is read by the next command"
            );
            tracing::warn!(target: "hydra_scheme::engine", "ftp://usr-3:pw-3@h/f: slow");
        });
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn no_hydra_log_level_prints_what_suppaftp_or_russh_log_below_info() {
        for level in [
            None,
            Some("trace"),
            Some("suppaftp=trace,russh=trace"),
            Some("debug"),
        ] {
            let shown = printed(false, level);
            for secret in ["pw-1", "usr-1", "pw-2", "pw-3", "usr-3"] {
                assert!(!shown.contains(secret), "{level:?}: {shown}");
            }
        }
        assert!(printed(false, Some("warn")).contains("ftp://***@h/f"));
    }

    #[test]
    fn suppaftps_dropped_stream_warning_is_not_printed_by_default_nor_with_q() {
        for quiet in [false, true] {
            let shown = printed(quiet, None);
            assert!(!shown.contains("transfer stream"), "quiet {quiet}: {shown}");
        }
        assert!(printed(true, None).is_empty(), "-q prints warnings");
        assert!(
            !printed(false, None).is_empty(),
            "hydra's own warnings are shown"
        );
    }
}
