//! `--checksum-file FILE|URL`: the checksum file read (or fetched into memory with the
//! download's own schemes and options), checked whole, and the output's entry picked, before
//! the download starts.

use super::sums::{self, Malformed};
use super::{Algo, Checksum};
use crate::exit::Exit;
use hydra_scheme::engine::{EngineOptions, SourceInput};

/// The largest checksum file read (a list of digests, not an object).
pub const MAX_SUMS_BYTES: u64 = 16 * 1024 * 1024;

/// Where a checksum file is.
pub enum SumsAt {
    /// A local file.
    Path(std::path::PathBuf),
    /// A URL, resolved to a source of the download's registry.
    Url(SourceInput),
}

/// The digest `at` (spelt `spec` on the command line) gives for the file `name`. A file that
/// cannot be read, a malformed line and a missing entry are usage errors (exit 2); a URL
/// that cannot be fetched exits as the download would.
pub async fn from_file(
    spec: &str,
    at: SumsAt,
    engine: EngineOptions,
    name: &str,
    algo: Option<Algo>,
) -> Result<Checksum, (Exit, String)> {
    let shown = crate::control::redact(spec);
    let shown = if spec.contains("://") {
        shown
    } else {
        spec.to_owned()
    };
    let here = |e: String| (Exit::Usage, format!("--checksum-file {shown}: {e}"));
    let bytes = match at {
        SumsAt::Path(p) => read(&p).map_err(here)?,
        SumsAt::Url(input) => {
            crate::document::fetch(input, engine, MAX_SUMS_BYTES, "a checksum file")
                .await
                .map_err(|(code, e)| (code, format!("--checksum-file {shown}: {e}")))?
        }
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        here(
            Malformed {
                line,
                problem: "is not UTF-8 text".to_owned(),
            }
            .to_string(),
        )
    })?;
    let file_name = spec.rsplit('/').next().unwrap_or(spec);
    let algo = algo.or_else(|| sums::algo_of_name(file_name));
    let entries = sums::parse(&text, algo).map_err(|m| here(m.to_string()))?;
    let e = sums::pick(&entries, name).map_err(here)?;
    Ok(e.checksum.clone())
}

fn read(p: &std::path::Path) -> Result<Vec<u8>, String> {
    let len = std::fs::metadata(p)
        .map_err(|e| format!("cannot read: {e}"))?
        .len();
    if len > MAX_SUMS_BYTES {
        return Err(format!(
            "{len} bytes; a checksum file is at most {MAX_SUMS_BYTES}"
        ));
    }
    std::fs::read(p).map_err(|e| format!("cannot read: {e}"))
}
