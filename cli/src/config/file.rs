//! The config file: a flat TOML table of `get` options by their long names
//! (`per-host = 8`, `proxy = "socks5h://127.0.0.1:1080"`, `identity = ["~/.ssh/a"]`), each
//! with the line it is on.

use std::fmt;
use std::path::{Path, PathBuf};

/// One `key = value` of the file.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The option's long name.
    pub key: String,
    /// Its value as written.
    pub value: toml::Value,
    /// 1-based line of the key.
    pub line: usize,
}

/// A config file that cannot be used: its path, the line and key when known, the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when the problem is on one.
    pub line: Option<usize>,
    /// The key, when the problem is its.
    pub key: Option<String>,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(k) = &self.key {
            write!(f, ": {}", hydra_scheme::text::sanitize(k))?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// The settings of the file at `path`, in the file's order.
pub fn read(path: &Path) -> Result<Vec<Setting>, ConfigError> {
    let fail = |line, problem: String| ConfigError {
        path: path.to_path_buf(),
        line,
        key: None,
        problem,
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| fail(None, format!("cannot read: {e}")))?;
    parse(&text).map_err(|(line, key, problem)| ConfigError {
        path: path.to_path_buf(),
        line,
        key,
        problem,
    })
}

type Spanned<T> = toml::Spanned<T>;

/// The settings of `text`, or the line, key and problem of the first error.
fn parse(text: &str) -> Result<Vec<Setting>, (Option<usize>, Option<String>, String)> {
    let table: std::collections::BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            let words: Vec<&str> = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            (line, None, words.join("; "))
        })?;
    let mut out: Vec<Setting> = table
        .into_iter()
        .map(|(k, v)| Setting {
            line: line_of(text, k.span().start),
            key: k.into_inner(),
            value: v.into_inner(),
        })
        .collect();
    out.sort_by_key(|s| s.line);
    Ok(out)
}

fn line_of(text: &str, at: usize) -> usize {
    1 + text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_carries_the_line_of_its_key() {
        let s = parse(
            "# defaults\nper-host = 8\n\nproxy = \"socks5h://h:1\"\nidentity = [\"a\", \"b\"]\n",
        )
        .unwrap();
        let got: Vec<_> = s.iter().map(|s| (s.key.as_str(), s.line)).collect();
        assert_eq!(got, [("per-host", 2), ("proxy", 4), ("identity", 5)]);
        assert_eq!(s[0].value, toml::Value::Integer(8));
    }

    #[test]
    fn a_syntax_error_is_one_line_with_its_line_number() {
        let (line, key, problem) = parse("per-host = 8\nproxy = \n").unwrap_err();
        assert_eq!(line, Some(2));
        assert_eq!(key, None);
        assert!(!problem.contains('\n'), "{problem}");
        let (line, ..) = parse("a = 1\na = 2\n").unwrap_err();
        assert_eq!(line, Some(2), "a key given twice");
    }
}
