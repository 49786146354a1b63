//! Checksum files: GNU (`HEX  name`, `HEX *name`, as `sha256sum` and `b3sum` write them) and
//! BSD (`SHA256 (name) = HEX`, as `shasum --tag` and `openssl dgst` write them) lines, mixed
//! freely; blank lines and `#` comments are skipped.
//!
//! A GNU line does not name its algorithm: it is the one asked for (`--checksum-algo`), else
//! the one the file's name names (`SHA512SUMS`, `B3SUMS`), else the one of the digest's
//! length (32 md5, 40 sha1, 64 sha256, 128 sha512).

use super::{Algo, Checksum};

/// One entry of a checksum file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// The file name as the line spells it (unescaped).
    pub(super) name: String,
    /// The expected digest.
    pub(super) checksum: Checksum,
    /// 1-based line number.
    pub(super) line: usize,
}

/// A line that is no checksum entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub(super) struct Malformed {
    /// 1-based line number.
    pub(super) line: usize,
    /// What is wrong, in words.
    pub(super) problem: String,
}

/// Every entry of `text`; `algo` is the algorithm of GNU lines when known.
pub(super) fn parse(text: &str, algo: Option<Algo>) -> Result<Vec<Entry>, Malformed> {
    let mut entries = Vec::new();
    for (i, raw) in hydra_scheme::text::without_bom(text).lines().enumerate() {
        let line = i + 1;
        let l = raw.strip_suffix('\r').unwrap_or(raw);
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        let parsed = match bsd(l) {
            Some(bsd) => bsd.and_then(|(a, name, hex)| entry(a, name, hex)),
            None => gnu(l, algo),
        };
        match parsed {
            Ok((name, checksum)) => entries.push(Entry {
                name,
                checksum,
                line,
            }),
            Err(problem) => return Err(Malformed { line, problem }),
        }
    }
    Ok(entries)
}

type Parsed = Result<(String, Checksum), String>;

fn entry(algo: Algo, name: &str, hex: &str) -> Parsed {
    if name.is_empty() {
        return Err("no file name".to_owned());
    }
    let sum = Checksum::new(algo, hex).map_err(|e| e.to_string())?;
    Ok((name.to_owned(), sum))
}

/// `ALGO (name) = HEX`: `None` when the line is not of that shape.
fn bsd(l: &str) -> Option<Result<(Algo, &str, &str), String>> {
    let (algo, rest) = l.split_once(" (")?;
    let (name, hex) = rest.rsplit_once(") = ")?;
    if algo.is_empty() || algo.contains(char::is_whitespace) {
        return None;
    }
    Some(match Algo::parse(algo) {
        Some(a) => Ok((a, name, hex)),
        None => Err(format!("unknown algorithm \"{algo}\" ({})", super::ALGOS)),
    })
}

/// `HEX  name` or `HEX *name`; a leading `\` marks a name with `\\` and `\n` escapes.
fn gnu(l: &str, algo: Option<Algo>) -> Parsed {
    let (escaped, l) = match l.strip_prefix('\\') {
        Some(rest) => (true, rest),
        None => (false, l),
    };
    let shape = || "expected \"HEX  NAME\", \"HEX *NAME\" or \"ALGO (NAME) = HEX\"".to_owned();
    let (hex, rest) = l.split_once(' ').ok_or_else(shape)?;
    let name = rest
        .strip_prefix(' ')
        .or_else(|| rest.strip_prefix('*'))
        .ok_or_else(shape)?;
    if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("\"{hex}\" is not a hex digest"));
    }
    let algo = match algo {
        Some(a) => a,
        None => by_length(hex.len()).ok_or_else(|| {
            format!(
                "a digest of {} hex digits is of no known algorithm; name it with --checksum-algo",
                hex.len()
            )
        })?,
    };
    let name = if escaped {
        unescape(name)?
    } else {
        name.to_owned()
    };
    entry(algo, &name, hex)
}

/// The algorithm a GNU line's digest of `n` hex digits is taken for (BLAKE3's 64 read as
/// SHA-256's).
pub(super) fn by_length(n: usize) -> Option<Algo> {
    [Algo::Md5, Algo::Sha1, Algo::Sha256, Algo::Sha512]
        .into_iter()
        .find(|a| a.hex_len() == n)
}

/// `coreutils`' escaping of a name: `\\` and `\n`.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            _ => return Err("a name escaped with \\ holds an unknown escape".to_owned()),
        }
    }
    Ok(out)
}

/// The algorithm a checksum file's name names (`SHA256SUMS`, `foo.iso.sha512`, `B3SUMS`).
pub(super) fn algo_of_name(file: &str) -> Option<Algo> {
    let f = file.to_ascii_lowercase();
    [
        ("sha512", Algo::Sha512),
        ("sha256", Algo::Sha256),
        ("sha1", Algo::Sha1),
        ("md5", Algo::Md5),
        ("blake3", Algo::Blake3),
        ("b3sum", Algo::Blake3),
    ]
    .into_iter()
    .find(|(n, _)| f.contains(n))
    .map(|(_, a)| a)
}

/// The entry for `name`: one whose name is `name`, else the one whose last path component
/// is (`sha256sum dist/*` writes `dist/name`). `Err` says why there is none.
pub(super) fn pick<'a>(entries: &'a [Entry], name: &str) -> Result<&'a Entry, String> {
    let exact: Vec<&Entry> = entries.iter().filter(|e| e.name == name).collect();
    let found = if exact.is_empty() {
        entries
            .iter()
            .filter(|e| e.name.rsplit('/').next() == Some(name))
            .collect()
    } else {
        exact
    };
    match found.as_slice() {
        [] => Err(format!("no entry for \"{name}\"")),
        [one] => Ok(one),
        [first, rest @ ..] if rest.iter().all(|e| e.checksum == first.checksum) => Ok(first),
        [first, second, ..] => Err(format!(
            "lines {} and {} give different digests for \"{name}\"",
            first.line, second.line
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABC256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    const ABC1: &str = "a9993e364706816aba3e25717850c26c9cd0d89d";

    #[test]
    fn gnu_and_bsd_lines_give_the_same_entries() {
        let text = format!(
            "# made by hand\n{ABC256}  a.iso\n{ABC256} *b.iso\r\n\nSHA1 (c d.iso) = {ABC1}\n"
        );
        let e = parse(&text, None).unwrap();
        let names: Vec<_> = e.iter().map(|e| (e.name.as_str(), e.line)).collect();
        assert_eq!(names, [("a.iso", 2), ("b.iso", 3), ("c d.iso", 5)]);
        assert_eq!(e[0].checksum.algo, Algo::Sha256);
        assert_eq!(e[2].checksum.algo, Algo::Sha1);
        assert_eq!(e[2].checksum.hex, ABC1);
    }

    #[test]
    fn a_byte_order_mark_before_the_first_line_is_not_part_of_its_digest() {
        let e = parse(&format!("\u{feff}{ABC256}  a.iso\r\n"), None).unwrap();
        assert_eq!(
            (e[0].name.as_str(), e[0].checksum.hex.as_str()),
            ("a.iso", ABC256)
        );
    }

    #[test]
    fn a_gnu_line_takes_the_algorithm_asked_for_over_its_length() {
        let e = parse(&format!("{ABC256}  a\n"), Some(Algo::Blake3)).unwrap();
        assert_eq!(e[0].checksum.algo, Algo::Blake3);
        let bad = parse(&format!("{ABC1}  a\n"), Some(Algo::Sha256)).unwrap_err();
        assert_eq!(bad.line, 1);
        assert!(bad.problem.contains("64 hex digits"), "{bad}");
    }

    #[test]
    fn a_malformed_line_is_named_by_its_number_and_problem() {
        for (text, line, want) in [
            (format!("{ABC256}  a\nnonsense\n"), 2, "expected"),
            (format!("\n{ABC256}\n"), 2, "expected"),
            ("zz  a\n".to_owned(), 1, "not a hex digest"),
            ("abcd  a\n".to_owned(), 1, "no known algorithm"),
            (format!("CRC32 (a) = {ABC1}\n"), 1, "unknown algorithm"),
            (format!("{ABC256}  \n"), 1, "no file name"),
        ] {
            let e = parse(&text, None).unwrap_err();
            assert_eq!(e.line, line, "{text:?}");
            assert!(e.problem.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn an_escaped_gnu_name_is_unescaped() {
        let e = parse(&format!("\\{ABC256}  a\\nb\\\\c\n"), None).unwrap();
        assert_eq!(e[0].name, "a\nb\\c");
    }

    #[test]
    fn the_entry_is_picked_by_name_then_by_last_component_and_never_ambiguously() {
        let text = format!("{ABC256}  dist/a.iso\n{ABC1}  b.iso\n");
        let e = parse(&text, None).unwrap();
        assert_eq!(pick(&e, "a.iso").unwrap().line, 1);
        assert_eq!(pick(&e, "b.iso").unwrap().line, 2);
        assert!(pick(&e, "c.iso")
            .unwrap_err()
            .contains("no entry for \"c.iso\""));
        let two = parse(&format!("{ABC256}  x/a\n{}  y/a\n", "0".repeat(64)), None).unwrap();
        assert!(pick(&two, "a").unwrap_err().contains("lines 1 and 2"));
    }

    #[test]
    fn a_checksum_file_name_names_its_algorithm() {
        assert_eq!(algo_of_name("SHA512SUMS"), Some(Algo::Sha512));
        assert_eq!(algo_of_name("B3SUMS"), Some(Algo::Blake3));
        assert_eq!(algo_of_name("x.iso.b3sum"), Some(Algo::Blake3));
        assert_eq!(algo_of_name("CHECKSUMS"), None);
    }
}
