//! `.netrc` files, read as curl reads them.
//!
//! Grammar: whitespace-separated words; a word may be a double-quoted string (on one line,
//! with `\"`, `\\`, `\n`, `\r` and `\t` escapes); a `#` where a word would start comments out
//! the rest of the line. `machine NAME` starts an entry for host NAME, `default` one for every
//! host; inside an entry `login`, `password` and `account` each take one word (`account` is
//! read and unused). `macdef NAME` skips every line up to the next empty one.
//!
//! Lookup: the first entry, in file order, for the host (a `machine` named like it, case
//! aside, or `default`) — and, when a user name is already known, the first such entry whose
//! login is that user or that has no login.
//!
//! A file that breaks the grammar is an error naming its line and the fault, never a word of
//! the file (a misplaced word may be a password).

use std::fmt;

/// A parsed `.netrc`: its entries in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Netrc {
    /// The entries, in file order.
    pub entries: Vec<Entry>,
}

/// One `machine` or `default` entry. `Debug` never shows the password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Entry {
    /// The host, or `None` for `default`.
    pub machine: Option<String>,
    /// `login`, if given.
    pub login: Option<String>,
    /// `password`, if given.
    pub password: Option<String>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("machine", &self.machine)
            .field("login", &self.login)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Where and why a `.netrc` breaks the grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {fault}")]
pub struct NetrcError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong there.
    pub fault: Fault,
}

/// A grammar fault in a `.netrc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// `machine`, `login`, `password` or `account` at the end of the file.
    #[error("'{0}' has no value")]
    MissingValue(&'static str),
    /// A double-quoted word without its closing quote on the same line.
    #[error("a quoted word has no closing quote")]
    UnclosedQuote,
    /// `login`, `password` or `account` before any `machine` or `default`.
    #[error("'{0}' comes before any 'machine' or 'default'")]
    OutsideEntry(&'static str),
    /// A word that is not a keyword where a keyword was expected.
    #[error(
        "a word that is not a netrc keyword (machine, default, login, password, account, macdef)"
    )]
    UnknownWord,
}

impl Netrc {
    /// The entry for `host` (see the module doc), given the user name already known, if any.
    pub fn find(&self, host: &str, user: Option<&str>) -> Option<&Entry> {
        self.entries.iter().find(|e| {
            let host_fits = e
                .machine
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(host));
            let user_fits = match (user, e.login.as_deref()) {
                (Some(u), Some(l)) => u == l,
                _ => true,
            };
            host_fits && user_fits
        })
    }
}

/// One word and the line it is on.
struct Word {
    text: String,
    line: usize,
    quoted: bool,
}

/// Splits `text` into words (comments dropped, `macdef` bodies skipped).
fn words(text: &str) -> Result<Vec<Word>, NetrcError> {
    let mut out = Vec::new();
    let mut in_macdef = false;
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if in_macdef {
            in_macdef = !raw.is_empty();
            continue;
        }
        let mut rest = raw;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() || rest.starts_with('#') {
                break;
            }
            let quoted_word = rest.starts_with('"');
            let (text, after) = if let Some(q) = rest.strip_prefix('"') {
                quoted(q).ok_or(NetrcError {
                    line,
                    fault: Fault::UnclosedQuote,
                })?
            } else {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (rest[..end].to_owned(), &rest[end..])
            };
            rest = after;
            let word = Word {
                text,
                line,
                quoted: quoted_word,
            };
            if keyword(&word) == Some("macdef") {
                // The macro's name (the rest of this line) and its body, up to the next
                // empty line, are skipped.
                in_macdef = true;
                out.push(word);
                out.push(Word {
                    text: rest.trim().to_owned(),
                    line,
                    quoted: true,
                });
                break;
            }
            out.push(word);
        }
    }
    Ok(out)
}

/// The quoted word that `s` (just past the opening quote) starts, and what follows its
/// closing quote; `None` without a closing quote.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut word = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((word, &s[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                word.push(match e {
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    other => other,
                });
            }
            other => word.push(other),
        }
    }
    None
}

/// Parses a `.netrc` (see the module doc).
pub fn parse(text: &str) -> Result<Netrc, NetrcError> {
    let mut netrc = Netrc::default();
    let mut it = words(hydra_scheme::text::without_bom(text))?.into_iter();
    while let Some(w) = it.next() {
        let line = w.line;
        let key = keyword(&w).ok_or(NetrcError {
            line,
            fault: Fault::UnknownWord,
        })?;
        if key == "default" {
            netrc.entries.push(Entry::default());
            continue;
        }
        let value = it.next().map(|v| v.text).ok_or(NetrcError {
            line,
            fault: Fault::MissingValue(key),
        })?;
        if key == "machine" {
            netrc.entries.push(Entry {
                machine: Some(value),
                ..Entry::default()
            });
            continue;
        }
        if key == "macdef" {
            continue;
        }
        let entry = netrc.entries.last_mut().ok_or(NetrcError {
            line,
            fault: Fault::OutsideEntry(key),
        })?;
        match key {
            "login" => entry.login = Some(value),
            "password" => entry.password = Some(value),
            _ => {} // account: read, unused.
        }
    }
    Ok(netrc)
}

/// The keyword `w` is, if it is one (a quoted word never is).
fn keyword(w: &Word) -> Option<&'static str> {
    if w.quoted {
        return None;
    }
    [
        "machine", "default", "login", "password", "account", "macdef",
    ]
    .into_iter()
    .find(|k| *k == w.text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn machines_default_and_macdef_read_as_curl_reads_them() {
        let n = parse(
            "# comment\nmachine a.example login alice password \"p w\\\"x\"\n\
             macdef init\ncd /pub\nlogin ignored\n\n\
             machine b.example\n  login bob # trailing comment\n  password s3\n\
             default login anon password guest\n",
        )
        .unwrap();
        assert_eq!(n.entries.len(), 3);
        let a = n.find("A.EXAMPLE", None).unwrap();
        assert_eq!(a.login.as_deref(), Some("alice"));
        assert_eq!(a.password.as_deref(), Some("p w\"x"));
        assert_eq!(
            n.find("b.example", None).unwrap().password.as_deref(),
            Some("s3")
        );
        assert_eq!(
            n.find("c.example", None).unwrap().login.as_deref(),
            Some("anon")
        );
    }

    #[test]
    fn a_byte_order_mark_before_the_first_keyword_is_ignored() {
        let n = parse("\u{feff}machine h login alice password pa\r\n").unwrap();
        assert_eq!(n.find("h", None).unwrap().password.as_deref(), Some("pa"));
    }

    #[test]
    fn a_known_user_picks_the_entry_with_that_login() {
        let n =
            parse("machine h login alice password pa\nmachine h login bob password pb\n").unwrap();
        assert_eq!(
            n.find("h", Some("bob")).unwrap().password.as_deref(),
            Some("pb")
        );
        assert_eq!(n.find("h", None).unwrap().password.as_deref(), Some("pa"));
        assert!(n.find("h", Some("carol")).is_none());
    }

    #[test]
    fn a_malformed_file_names_the_line_and_never_a_word_of_it() {
        let cases = [
            (
                "machine h login u password \"secret-1\n",
                1,
                Fault::UnclosedQuote,
            ),
            (
                "\nlogin u password secret-2\n",
                2,
                Fault::OutsideEntry("login"),
            ),
            (
                "machine h\nlogin u\npassword my secret-3\n",
                3,
                Fault::UnknownWord,
            ),
            (
                "machine h login u password",
                1,
                Fault::MissingValue("password"),
            ),
        ];
        for (text, line, fault) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e, NetrcError { line, fault }, "{text:?}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }

    /// A word as a `.netrc` writes it: bare when it can be, quoted otherwise.
    fn render(w: &str) -> String {
        let bare = !w.is_empty()
            && !w.starts_with(['"', '#'])
            && !w.contains(char::is_whitespace)
            && !matches!(
                w,
                "machine" | "default" | "login" | "password" | "account" | "macdef"
            );
        if bare {
            return w.to_owned();
        }
        let mut q = String::from("\"");
        for c in w.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\r' => q.push_str("\\r"),
                '\t' => q.push_str("\\t"),
                c => q.push(c),
            }
        }
        q.push('"');
        q
    }

    fn entry() -> impl Strategy<Value = Entry> {
        let word = "[ -~\t\n]{1,12}";
        (
            proptest::option::of(word),
            proptest::option::of(word),
            proptest::option::of(word),
        )
            .prop_map(|(machine, login, password)| Entry {
                machine,
                login,
                password,
            })
    }

    proptest! {
        #[test]
        fn rendered_entries_parse_back_to_themselves(entries in proptest::collection::vec(entry(), 0..6)) {
            let mut text = String::new();
            for e in &entries {
                match &e.machine {
                    Some(m) => text.push_str(&format!("machine {}\n", render(m))),
                    None => text.push_str("default\n"),
                }
                if let Some(l) = &e.login {
                    text.push_str(&format!("  login {}\n", render(l)));
                }
                if let Some(p) = &e.password {
                    text.push_str(&format!("  password {}\n", render(p)));
                }
            }
            prop_assert_eq!(parse(&text).unwrap().entries, entries);
        }

        #[test]
        fn any_text_parses_or_names_a_line_within_it(text in "[a-z \"\\\\#\n\t]{0,200}") {
            if let Err(e) = parse(&text) {
                prop_assert!(e.line >= 1 && e.line <= text.split('\n').count(), "{e}");
            }
        }
    }
}
