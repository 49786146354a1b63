//! aria2c's input-file format, as `--input-file` reads it:
//!
//! * a line that starts with neither white space nor `#` is one object: its mirrors'
//!   URIs, separated by TABs;
//! * the lines after it that start with white space (SPACE or TAB) are its options, one
//!   `NAME=VALUE` a line: `out=` (file name, under `dir=`), `dir=` (directory), `checksum=`
//!   (`TYPE=HEX` in aria2c's spelling: `sha-1`, `sha-256`, `sha-512`, `md5`; hydra's `sha256`
//!   and `blake3` are read too), `header=` (`Name: value`, repeatable: sent with that
//!   object's HTTP requests after `-H`'s, as aria2c does; a malformed one is named by its
//!   line, never its value); any other aria2c option is ignored with one warning naming its
//!   file and line;
//! * lines starting with `#` are comments, blank lines are skipped.
//! * lines may end in CRLF, and a UTF-8 byte order mark before the first line is ignored.
//!
//! The whole file is read before anything starts; the first problem is one [`InputError`]
//! naming the file, the line and the problem. Gzip-compressed files (which aria2c reads)
//! are not.

use crate::checksum::{Algo, Checksum};
use crate::schemes::ExtraHeader;
use std::path::PathBuf;

/// One object of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The line of its URIs (1-based).
    pub line: usize,
    /// Its mirrors, in the order given.
    pub uris: Vec<String>,
    /// `out=`.
    pub out: Option<PathBuf>,
    /// `dir=`.
    pub dir: Option<PathBuf>,
    /// `checksum=`.
    pub checksum: Option<Checksum>,
    /// Every `header=`, in order.
    pub headers: Vec<ExtraHeader>,
}

/// What the file holds.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The objects, in file order.
    pub entries: Vec<Entry>,
    /// One line per ignored option, naming its file and line.
    pub warnings: Vec<String>,
}

/// A problem in the file: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {why}")]
pub struct InputError {
    /// The file as named on the command line (`standard input` for `-`).
    pub file: String,
    /// 1-based; 0 for the file as a whole.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// Parses `text`, the contents of the input file called `file` in messages.
pub fn parse(file: &str, text: &str) -> Result<Parsed, InputError> {
    let mut parsed = Parsed::default();
    for (i, raw) in hydra_scheme::text::without_bom(text).lines().enumerate() {
        let line = i + 1;
        let err = |why: String| InputError {
            file: file.to_owned(),
            line,
            why,
        };
        if raw.trim().is_empty() || raw.starts_with('#') {
            continue;
        }
        if raw.starts_with([' ', '\t']) {
            let Some(entry) = parsed.entries.last_mut() else {
                return Err(err("an option line before any line of URIs".into()));
            };
            if let Some(w) = option(entry, raw.trim()).map_err(err)? {
                parsed.warnings.push(format!("{file}:{line}: {w}"));
            }
            continue;
        }
        let uris: Vec<String> = raw
            .split('\t')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        if let Some(u) = uris.iter().find(|u| u.contains(char::is_whitespace)) {
            return Err(err(format!(
                "{u:?}: mirrors are separated by TABs, and a URI holds no space"
            )));
        }
        parsed.entries.push(Entry {
            line,
            uris,
            out: None,
            dir: None,
            checksum: None,
            headers: Vec::new(),
        });
    }
    if parsed.entries.is_empty() {
        return Err(InputError {
            file: file.to_owned(),
            line: 0,
            why: "no line of URIs (nothing to download)".into(),
        });
    }
    Ok(parsed)
}

/// Applies the option `text` (`NAME=VALUE`) to `entry`; a warning when it is ignored.
fn option(entry: &mut Entry, text: &str) -> Result<Option<String>, String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected an option NAME=VALUE"))?;
    let (name, value) = (name.trim(), value.trim());
    if value.is_empty() {
        return Err(format!("{name}= has no value"));
    }
    let twice = |given: bool| {
        if given {
            Err(format!("{name}= given twice for one object"))
        } else {
            Ok(())
        }
    };
    match name {
        "out" => {
            twice(entry.out.is_some())?;
            entry.out = Some(PathBuf::from(value));
        }
        "dir" => {
            twice(entry.dir.is_some())?;
            entry.dir = Some(PathBuf::from(value));
        }
        "checksum" => {
            twice(entry.checksum.is_some())?;
            entry.checksum = Some(checksum(value)?);
        }
        "header" => {
            let h = crate::schemes::parse_header(value).map_err(|why| format!("header=: {why}"))?;
            entry.headers.push(h);
        }
        _ => {
            return Ok(Some(format!(
                "aria2c option {name}= ignored (hydra reads out=, dir=, checksum= and header=)"
            )))
        }
    }
    Ok(None)
}

/// aria2c's `TYPE=DIGEST`.
fn checksum(value: &str) -> Result<Checksum, String> {
    let (algo, hex) = value
        .split_once('=')
        .ok_or_else(|| format!("checksum={value}: expected TYPE=DIGEST such as sha-256=HEX"))?;
    let algo = Algo::parse(algo).ok_or_else(|| {
        format!("checksum={algo}=...: hydra checks md5, sha-1, sha-256, sha-512 and blake3")
    })?;
    Checksum::new(algo, hex).map_err(|why| format!("checksum: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# two objects\n\
        http://a/x.bin\tftp://b/x.bin\n  out=y.bin\n\tdir=d\n  max-connection-per-server=4\n\
        \n\
        sftp://c/z.bin\n  checksum=sha-256=\
        0000000000000000000000000000000000000000000000000000000000000000\n";

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_read_as_the_plain_file_does() {
        let windows = format!("\u{feff}{}", GOOD.replace('\n', "\r\n"));
        let (a, b) = (parse("l", GOOD).unwrap(), parse("l", &windows).unwrap());
        assert_eq!(a.entries, b.entries);
        assert_eq!(a.entries[0].uris[0], "http://a/x.bin");
    }

    #[test]
    fn objects_take_their_mirrors_and_options_and_unknown_options_are_warned_by_line() {
        let p = parse("list.txt", GOOD).unwrap();
        assert_eq!(p.entries.len(), 2);
        let a = &p.entries[0];
        assert_eq!((a.line, a.uris.len()), (2, 2));
        assert_eq!(a.out.as_deref(), Some(std::path::Path::new("y.bin")));
        assert_eq!(a.dir.as_deref(), Some(std::path::Path::new("d")));
        assert_eq!(p.entries[1].line, 7);
        assert_eq!(
            p.entries[1].checksum.as_ref().map(|c| c.algo),
            Some(Algo::Sha256)
        );
        assert_eq!(p.warnings.len(), 1);
        assert!(
            p.warnings[0].starts_with("list.txt:5: aria2c option max-connection-per-server="),
            "{}",
            p.warnings[0]
        );
    }

    #[test]
    fn header_options_are_kept_in_order_and_a_bad_one_is_named_without_its_value() {
        let p = parse(
            "l",
            "http://a/x\n  header=Authorization: Bearer t0ken\n  header=X-B: 2\n",
        )
        .unwrap();
        let names: Vec<&str> = p.entries[0]
            .headers
            .iter()
            .map(|h| h.name.as_str())
            .collect();
        assert_eq!(names, ["Authorization", "X-B"]);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let e = parse("l", "http://a/x\n  header=Bad Name s3cret\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.why.starts_with("header=: "), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    #[test]
    fn a_malformed_line_is_one_error_naming_file_and_line() {
        let cases = [
            ("  out=x\nhttp://a/x\n", 1, "before any line of URIs"),
            ("http://a/x\n  out\n", 2, "NAME=VALUE"),
            ("http://a/x\n  out=\n", 2, "no value"),
            ("http://a/x\n  out=a\n  out=b\n", 3, "twice"),
            ("http://a/x\n  checksum=sha-224=00\n", 2, "hydra checks"),
            ("http://a/x\n  checksum=sha-256=zz\n", 2, "checksum"),
            ("http://a/x http://b/x\n", 1, "TABs"),
            ("# nothing\n\n", 0, "no line of URIs"),
        ];
        for (text, line, what) in cases {
            let e = parse("f", text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("f:{line}: ")), "{e}");
            assert!(e.why.contains(what), "{text:?}: {e}");
        }
    }
}
