//! `hydra get --metalink FILE|URL`: the mirrors, size, whole-file hash and piece hashes of one
//! object from a Metalink document (RFC 5854 `.meta4`, or Metalink 3.0 `.metalink`).
//!
//! The first `<file>` is downloaded; further entries are named in a warning and not fetched.
//! Mirrors are tried in rank order (RFC 5854 `priority`, 3.0 `preference`); the strongest
//! whole-file hash hydra knows is checked as `--checksum` would be; the strongest `<pieces>`
//! (sha-512, sha-256, sha-1 or md5) is checked piece by piece as the download runs (see
//! [`hydra_scheme::engine::pieces`]).

mod hashes;
mod parse;

pub use hashes::PieceHashes;
use parse::{parse, Hash, Metalink};

use crate::checksum::Checksum;
use hydra_scheme::engine::PieceCheck;
use std::io::Read;
use std::sync::Arc;

/// Hash algorithms, strongest first, by their names in [`Hash::algo`] and [`parse::PieceList::algo`].
const STRENGTH: [&str; 4] = ["sha512", "sha256", "sha1", "md5"];

/// Largest Metalink document read.
pub const MAX_DOCUMENT: u64 = 16 << 20;

/// What a Metalink asks of one download.
#[derive(Debug)]
pub struct Plan {
    /// The mirrors' URLs, best first.
    pub urls: Vec<String>,
    /// The file's name (a single path segment).
    pub name: String,
    /// The strongest whole-file hash hydra checks.
    pub checksum: Option<Checksum>,
    /// The size and piece hashes, when given (piece hashes only when checkable).
    pub pieces: Option<Arc<dyn PieceCheck>>,
    /// What was given and is not used, one line each.
    pub warnings: Vec<String>,
}

/// Whether a positional argument names a local Metalink file (`.meta4` or `.metalink`, not a
/// URL).
pub fn is_metalink_arg(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    !s.contains("://") && (lower.ends_with(".meta4") || lower.ends_with(".metalink"))
}

/// Reads the Metalink at `path` (`-`: standard input) and plans the download of its first
/// file. The error is one line naming the document.
pub fn load(path: &str) -> Result<Plan, String> {
    let shown = if path == "-" { "<stdin>" } else { path };
    let fail = |why: String| format!("{shown}: {why}");
    let mut text = String::new();
    let read = if path == "-" {
        std::io::stdin()
            .take(MAX_DOCUMENT)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_DOCUMENT).read_to_string(&mut text))
    };
    read.map_err(|e| fail(format!("cannot read the Metalink: {e}")))?;
    from_text(shown, &text)
}

/// Plans the download of the first file of the Metalink `bytes` fetched from `shown` (a
/// URL without its credentials). The error is one line naming it.
pub fn from_bytes(shown: &str, bytes: Vec<u8>) -> Result<Plan, String> {
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{shown}: Metalink refused: the document is not UTF-8 text"))?;
    from_text(shown, &text)
}

fn from_text(shown: &str, text: &str) -> Result<Plan, String> {
    let fail = |why: String| format!("{shown}: {why}");
    let doc = parse(text).map_err(|e| fail(format!("Metalink refused: {e}")))?;
    plan(doc).map_err(fail)
}

/// The download of `doc`'s first file.
pub fn plan(doc: Metalink) -> Result<Plan, String> {
    let mut files = doc.files.into_iter();
    let Some(file) = files.next() else {
        return Err("Metalink refused: no <file> entry".to_owned());
    };
    let mut warnings = Vec::new();
    let rest: Vec<String> = files.map(|f| f.name).collect();
    if !rest.is_empty() {
        warnings.push(format!(
            "{} more <file> entries not downloaded (one object per hydra get): {}",
            rest.len(),
            rest.join(", ")
        ));
    }
    let name = safe_name(&file.name)?;
    if file.mirrors.is_empty() {
        return Err(format!("<file name=\"{name}\"> lists no <url>"));
    }
    let checksum = strongest(&file.hashes);
    // Of several <pieces> (one per algorithm), the strongest; else the first, whose unknown
    // algorithm the warning names.
    let list = STRENGTH
        .iter()
        .find_map(|a| file.pieces.iter().find(|p| p.algo == *a))
        .or(file.pieces.first());
    let hashed = list.and_then(|list| {
        PieceHashes::new(list, file.size)
            .map_err(|why| warnings.push(why))
            .ok()
    });
    let pieces = hashed
        .or_else(|| file.size.map(PieceHashes::size_only))
        .map(|p| Arc::new(p) as Arc<dyn PieceCheck>);
    Ok(Plan {
        urls: file.mirrors.into_iter().map(|m| m.url).collect(),
        name,
        checksum,
        pieces,
        warnings,
    })
}

/// The strongest hash that `--checksum` checks.
fn strongest(hashes: &[Hash]) -> Option<Checksum> {
    STRENGTH.iter().find_map(|algo| {
        hashes
            .iter()
            .filter(|h| h.algo == *algo)
            .find_map(|h| format!("{}={}", h.algo, h.hex).parse().ok())
    })
}

/// A file name from a Metalink, used as the output name: one path segment, no leading dot,
/// no control characters.
fn safe_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control);
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "<file name={:?}> is not a plain file name (use -o FILE)",
            hydra_scheme::text::for_people(name)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::parse::{MetaFile, Mirror};
    use super::*;

    fn file(name: &str) -> MetaFile {
        MetaFile {
            name: name.into(),
            size: Some(3),
            hashes: vec![
                Hash {
                    algo: "md5".into(),
                    hex: "900150983cd24fb0d6963f7d28e17f72".into(),
                },
                Hash {
                    algo: "sha256".into(),
                    hex: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into(),
                },
            ],
            pieces: Vec::new(),
            mirrors: vec![Mirror {
                url: "http://a.example/abc".into(),
                rank: 1,
                location: None,
            }],
        }
    }

    #[test]
    fn the_strongest_whole_file_hash_is_checked_and_further_files_are_named() {
        let p = plan(Metalink {
            files: vec![file("abc"), file("def")],
        })
        .unwrap();
        assert_eq!(
            p.checksum.unwrap().to_string().split('=').next(),
            Some("sha256")
        );
        assert_eq!(p.name, "abc");
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].contains("def"), "{}", p.warnings[0]);
    }

    #[test]
    fn of_several_piece_lists_the_strongest_known_one_is_checked() {
        let list = |algo: &str, hex: &str| parse::PieceList {
            length: 3,
            algo: algo.into(),
            hashes: vec![hex.into()],
        };
        let mut f = file("abc");
        f.pieces = vec![
            list("tiger", "00"),
            list("md5", "900150983cd24fb0d6963f7d28e17f72"),
            list("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ];
        let p = plan(Metalink { files: vec![f] }).unwrap();
        let pieces = p.pieces.expect("pieces checked");
        assert_eq!(pieces.algorithm(), "sha-1");
        assert!(pieces.matches(0, b"abc"));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }

    #[test]
    fn a_file_name_that_leaves_the_directory_is_refused() {
        for bad in ["../etc/passwd", "/etc/passwd", ".hidden", "a\nb", ""] {
            let e = plan(Metalink {
                files: vec![file(bad)],
            })
            .unwrap_err();
            assert!(e.contains("not a plain file name"), "{bad}: {e}");
        }
    }

    #[test]
    fn positional_metalink_paths_are_recognised_but_urls_are_not() {
        assert!(is_metalink_arg("x/file.meta4"));
        assert!(is_metalink_arg("file.METALINK"));
        assert!(!is_metalink_arg("http://a.example/file.meta4"));
        assert!(!is_metalink_arg("file.iso"));
    }
}
