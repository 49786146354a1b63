//! hydra as a library: [`Download`], one object from many mirrors with the guarantees of
//! `hydra get` — `hydra get` is a thin layer over it.

mod defaults;
mod error;
pub(crate) mod events;
mod outcome;

pub use crate::checksum::{Algo, Checksum, ChecksumError};
pub use error::DownloadError;
pub use events::Event;
pub use outcome::{Outcome, SourceOutcome};

use crate::get::{self, Done, GetArgs};
use crate::schemes::{NetOptions, Plugins};
use crate::ui::{emit, Ui};
use hydra_scheme::Registry;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One object from every mirror given, at once, as `hydra get` downloads it.
///
/// The object is written to `FILE.hydra-part` (with its control file
/// `FILE.hydra-part.json`) and renamed to `FILE` only when every byte is held, synced and,
/// when a [`checksum`](Self::checksum) is given, verified: a file at `FILE` is always
/// complete. With [`resume`](Self::resume) the part file is continued and an object that
/// changed on the server is refused ([`DownloadError::Changed`]) unless
/// [`restart_on_change`](Self::restart_on_change). The per-host memory of connection counts,
/// the proxy environment (`https_proxy`, `NO_PROXY`, ...) and `~/.ssh/config` are used as
/// `hydra get` uses them; the `HYDRA_*` variables and hydra's config file are not (they are
/// the command line's). Nothing is printed unless [`quiet(false)`](Self::quiet).
///
/// [`run`](Self::run) needs a tokio runtime. See the crate documentation for an example.
#[must_use = "a Download does nothing until run"]
pub struct Download {
    args: GetArgs,
    quiet: bool,
    events: Option<events::Sink>,
    plugins: Plugins,
    /// The command line's display, when `hydra get` runs it.
    cli: Option<Ui>,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("mirrors", &self.args.urls.len())
            .field("output", &self.args.output)
            .finish_non_exhaustive()
    }
}

impl Download {
    /// A download of the object every URL in `mirrors` serves (`http(s)://`, `ftp(s)://`,
    /// `sftp://`, or a scheme a plugin registers), every option at `hydra get`'s default.
    pub fn new(mirrors: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let urls = mirrors.into_iter().map(Into::into).collect();
        Download {
            args: defaults::get_args(urls),
            quiet: true,
            events: None,
            plugins: Plugins::new(),
            cli: None,
        }
    }

    /// `hydra get`'s download, shown as the command line asks.
    pub(crate) fn from_cli(args: GetArgs, ui: Ui) -> Self {
        Download {
            quiet: args.quiet,
            args,
            events: None,
            plugins: Plugins::new(),
            cli: Some(ui),
        }
    }

    /// Where the object goes (default: the first URL's last path segment, in the current
    /// directory). `-o`.
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.args.output = Some(path.into());
        self
    }

    /// Continue the partial download at the output path, when there is one. `-c`.
    pub fn resume(mut self, yes: bool) -> Self {
        self.args.resume = yes;
        self
    }

    /// With [`resume`](Self::resume): when the object changed, start over instead of
    /// failing with [`DownloadError::Changed`]. `--restart-on-change`.
    pub fn restart_on_change(mut self, yes: bool) -> Self {
        self.args.restart_on_change = yes;
        self
    }

    /// Verify the object before it is moved into place; a mismatch is
    /// [`DownloadError::Checksum`] and leaves nothing at the output path. `--checksum`.
    pub fn checksum(mut self, sum: Checksum) -> Self {
        self.args.checksum = Some(sum);
        self
    }

    /// Never replace an existing output ([`DownloadError::Io`] before anything is fetched).
    /// `--no-clobber`.
    pub fn no_clobber(mut self, yes: bool) -> Self {
        self.args.no_clobber = yes;
        self
    }

    /// Route every connection through this proxy: `socks5h://`, `http://` or `https://`
    /// `[user:pass@]host[:port]`; the proxy environment is then not read. A malformed proxy
    /// is [`DownloadError::Usage`] when the download runs. `--proxy`.
    pub fn proxy(mut self, url: impl Into<String>) -> Self {
        self.args.proxy = Some(url.into());
        self
    }

    /// Hosts reached directly (comma-separated: host, .domain, IP, CIDR, host:port, or `*`);
    /// replaces `NO_PROXY`. `--noproxy`.
    pub fn noproxy(mut self, list: impl Into<String>) -> Self {
        self.args.noproxy = Some(list.into());
        self
    }

    /// Ceiling on connections over all mirrors (default 16). `--max-connections`.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.args.max_connections = n;
        self
    }

    /// Ceiling on connections per mirror (default 4). `--per-host`.
    pub fn per_host(mut self, n: usize) -> Self {
        self.args.per_host = n;
        self
    }

    /// Use and update the per-host memory of connection counts (default yes).
    /// `--no-host-memory` is `host_memory(false)`.
    pub fn host_memory(mut self, yes: bool) -> Self {
        self.args.no_host_memory = !yes;
        self
    }

    /// Connect, reply and idle-read deadline per protocol step (also the probe's).
    /// `--timeout`.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.args.timeout = Some(t).filter(|t| !t.is_zero());
        self
    }

    /// Consecutive failures after which a mirror is given up (default 5). `--retries`.
    pub fn retries(mut self, n: u32) -> Self {
        self.args.retries = n;
        self
    }

    /// At most this many bytes per second over all connections. `--limit-rate`.
    pub fn limit_rate(mut self, bytes_per_second: u64) -> Self {
        self.args.limit_rate = Some(bytes_per_second).filter(|&r| r > 0);
        self
    }

    /// Print warnings and the closing line on stderr, and progress bars when it is a
    /// terminal, as `hydra get` does (default: print nothing).
    pub fn quiet(mut self, yes: bool) -> Self {
        self.quiet = yes;
        self.args.quiet = yes;
        self
    }

    /// Hands every event of the download to `callback` (the events `hydra get --json`
    /// prints, in the same order), from the download's tasks: it should return quickly.
    pub fn events(mut self, callback: impl Fn(Event) + Send + Sync + 'static) -> Self {
        self.events = Some(Arc::new(callback));
        self
    }

    /// Registers a scheme for this download: `builder` is called with the network options
    /// whenever the download builds its registry, and a scheme it registers under a
    /// built-in URL scheme replaces it (see [`Plugins::with`]).
    pub fn register(
        mut self,
        builder: impl Fn(&NetOptions, &mut Registry) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.plugins = self.plugins.with(builder);
        self
    }

    /// Registers every scheme of `plugins` for this download (beside those already given).
    pub fn plugins(mut self, plugins: Plugins) -> Self {
        self.plugins = self.plugins.merge(plugins);
        self
    }

    /// Downloads the object: probes every mirror, fetches from all of them at once, verifies
    /// and moves the result into place.
    pub async fn run(self) -> Result<Outcome, DownloadError> {
        let (done, path) = self.fetch().await?;
        Ok(Outcome::new(&done, path))
    }

    /// [`run`](Self::run), with what the engine reported. The error, when there is one, is
    /// also an `error` event.
    pub(crate) async fn fetch(self) -> Result<(Done, PathBuf), DownloadError> {
        let Download {
            mut args,
            quiet,
            events,
            plugins,
            cli,
        } = self;
        let ui = cli.unwrap_or_else(|| Ui::new(quiet, false, events.is_some()));
        crate::ui::start_clock();
        let work = async move {
            let result = if args.urls.is_empty() && args.metalink.is_none() {
                Err((crate::exit::Exit::Usage, "no mirror given".to_owned()))
            } else {
                get::fetch(&mut args, ui).await
            };
            result.map_err(|(code, msg)| failed(ui, code, &msg))
        };
        let work = crate::schemes::scope(plugins, work);
        match events {
            Some(sink) => events::scope(sink, work).await,
            None => work.await,
        }
    }
}

/// The error of exit class `code`, as an `error` event too (not for a closed stdout).
fn failed(ui: Ui, code: crate::exit::Exit, msg: &str) -> DownloadError {
    let e = DownloadError::new(code, msg);
    if ui.json && !matches!(e, DownloadError::BrokenPipe(_)) {
        emit(
            "error",
            serde_json::json!({"code": e.exit_code(), "kind": e.kind(), "message": e.to_string()}),
        );
    }
    e
}
