//! The OpenSSH client configuration (`~/.ssh/config`, `ssh_config(5)`), the part hydra uses.
//!
//! * Blocks: `Host PATTERN...` and `Match` (criteria `all`, `host`, `originalhost`, `user`,
//!   `localuser`, `canonical`, `final`, each negatable with `!`). A `Match` with another
//!   criterion (`exec`, `localnetwork`, `tagged`) is never taken, with a warning: its options
//!   never leak into the block before it.
//! * Options: `HostName` (`%h`, `%%`), `User`, `Port`, `IdentityFile` (every matching one, in
//!   order; `~` and `%d %h %u %r %p %%` expanded), `IdentitiesOnly`, `IdentityAgent`,
//!   `UserKnownHostsFile` (the first path), `HostKeyAlias`, `StrictHostKeyChecking`
//!   (`yes`/`ask`, `accept-new`, `no`/`off`), and `ProxyCommand` (the rest of its line, as
//!   written) or `ProxyJump` (the first of either, `none` turning it off; see [`Relay`]).
//!   Other keywords are read and ignored.
//! * `Include FILE...` (relative to `~/.ssh`; `*` and `?` in the file name), at most 16 deep.
//! * For each option the first value obtained wins, as in OpenSSH.
//!
//! A line that cannot be read is skipped with a [`ConfigWarning`] naming the file and line;
//! nothing here panics on any input (see the property tests).

mod pattern;
mod resolve;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use pattern::{list_matches, wildcard, Pattern};
pub use resolve::{Query, Resolution, Sourced};

/// Includes nest at most this deep (OpenSSH's limit).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Files one `Include` line may read.
const MAX_INCLUDED_FILES: usize = 256;

/// Where a value was read: a file and a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: Arc<Path>,
    /// Its line, from 1.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A line skipped or a block never taken, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Where.
    pub at: Origin,
    /// Why, in `ssh_config(5)`'s words.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// `StrictHostKeyChecking`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictHostKeyChecking {
    /// `yes` or `ask` (hydra never asks): a host not in known_hosts is refused.
    Yes,
    /// `accept-new`: a host with no recorded key is learned.
    AcceptNew,
    /// `no` or `off`: as `accept-new` (a changed key is still refused).
    No,
}

/// One option line this module uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Setting {
    HostName(String),
    User(String),
    Port(u16),
    IdentityFile(String),
    IdentitiesOnly(bool),
    UserKnownHostsFile(String),
    HostKeyAlias(String),
    IdentityAgent(String),
    StrictHostKeyChecking(StrictHostKeyChecking),
    /// `ProxyCommand` or `ProxyJump`.
    Relay(Relay),
}

/// How a host is reached when it is not dialled directly: the first `ProxyCommand` or
/// `ProxyJump` that applies, as OpenSSH takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relay {
    /// `ProxyCommand`: a shell command line whose standard input and output carry the
    /// connection, `%` tokens not yet expanded.
    Command(String),
    /// `ProxyJump`: one or more `[user@]host[:port]` hops (or `ssh://` URIs), comma-separated,
    /// as written.
    Jump(String),
    /// `none`: the host is dialled directly.
    Direct,
}

/// One `Match` criterion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Criterion {
    All,
    /// `canonical`, `final`: hydra's single pass is the final one.
    Always,
    Host(Vec<Pattern>),
    OriginalHost(Vec<Pattern>),
    User(Vec<Pattern>),
    LocalUser(Vec<Pattern>),
}

/// A `Match` criterion with its `!`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Condition {
    pub negated: bool,
    pub criterion: Criterion,
}

/// A line of the configuration, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// `Host`: the block it opens applies when the pattern list matches.
    Host(Vec<Pattern>),
    /// `Match`: applies when every condition holds; `None` = never (unsupported criterion).
    Match(Option<Vec<Condition>>),
    /// An option, applied when its block applies.
    Set(Setting, Origin),
    /// The items of included files, applied under the including block.
    Include(Vec<Item>),
}

/// A parsed configuration: its items and the warnings parsing gave.
#[derive(Debug, Clone, Default)]
pub struct SshConfig {
    pub(crate) items: Vec<Item>,
    warnings: Vec<ConfigWarning>,
    /// The file it was read from, when one.
    file: Option<PathBuf>,
}

impl SshConfig {
    /// Reads `path`. `home` expands `~` and locates relative `Include`s (`home/.ssh/...`).
    /// Only an unreadable `path` is an error; everything in it is a warning at worst.
    pub fn load(path: &Path, home: Option<&Path>) -> std::io::Result<SshConfig> {
        let text = std::fs::read_to_string(path)?;
        let mut c = SshConfig::parse(&text, path, home);
        c.file = Some(path.to_owned());
        Ok(c)
    }

    /// Parses `text` as if read from `file`.
    pub fn parse(text: &str, file: &Path, home: Option<&Path>) -> SshConfig {
        let mut p = Parser {
            home,
            warnings: Vec::new(),
        };
        let items = p.file_items(text, file, 0);
        SshConfig {
            items,
            warnings: p.warnings,
            file: Some(file.to_owned()),
        }
    }

    /// What parsing skipped, in order.
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }

    /// The file it was read from.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

struct Parser<'h> {
    home: Option<&'h Path>,
    warnings: Vec<ConfigWarning>,
}

impl Parser<'_> {
    fn warn(&mut self, at: &Origin, message: impl Into<String>) {
        self.warnings.push(ConfigWarning {
            at: at.clone(),
            message: message.into(),
        });
    }

    fn file_items(&mut self, text: &str, file: &Path, depth: usize) -> Vec<Item> {
        let file: Arc<Path> = Arc::from(file);
        let mut items = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let at = Origin {
                file: file.clone(),
                line: i + 1,
            };
            if let Some(command) = proxy_command(line) {
                match command {
                    Ok(relay) => items.push(Item::Set(Setting::Relay(relay), at)),
                    Err(why) => self.warn(&at, format!("ProxyCommand: {why}")),
                }
                continue;
            }
            let (keyword, args) = match split_line(line) {
                Ok(Some(kv)) => kv,
                Ok(None) => continue,
                Err(why) => {
                    self.warn(&at, why);
                    continue;
                }
            };
            match self.item(&keyword, &args, &at, depth) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => {}
                Err(why) => self.warn(&at, format!("{keyword}: {why}")),
            }
        }
        items
    }

    /// The item of one line; `Ok(None)` for a keyword hydra does not use.
    fn item(
        &mut self,
        keyword: &str,
        args: &[String],
        at: &Origin,
        depth: usize,
    ) -> Result<Option<Item>, String> {
        let one = || match args {
            [v] => Ok(v.clone()),
            [] => Err("missing argument".to_owned()),
            _ => Err(format!("expected one argument, got {}", args.len())),
        };
        let set = |s: Setting| Ok(Some(Item::Set(s, at.clone())));
        match keyword.to_ascii_lowercase().as_str() {
            "host" => {
                if args.is_empty() {
                    return Err("missing host pattern".into());
                }
                Ok(Some(Item::Host(
                    args.iter().map(|a| Pattern::parse(a)).collect(),
                )))
            }
            "match" => self.match_item(args, at).map(Some),
            "include" => Ok(Some(self.include(args, at, depth)?)),
            "hostname" => set(Setting::HostName(one()?)),
            "user" => set(Setting::User(one()?)),
            "port" => {
                let v = one()?;
                match v.parse::<u16>() {
                    Ok(p) if p > 0 => set(Setting::Port(p)),
                    _ => Err(format!("{v:?} is not a port number (1-65535)")),
                }
            }
            "identityfile" => set(Setting::IdentityFile(one()?)),
            "identitiesonly" => set(Setting::IdentitiesOnly(yes_no(&one()?)?)),
            "hostkeyalias" => set(Setting::HostKeyAlias(one()?)),
            "identityagent" => set(Setting::IdentityAgent(one()?)),
            "userknownhostsfile" => match args.first() {
                Some(f) => set(Setting::UserKnownHostsFile(f.clone())),
                None => Err("missing argument".into()),
            },
            "stricthostkeychecking" => {
                let v = one()?;
                let s = match v.to_ascii_lowercase().as_str() {
                    "yes" | "ask" => StrictHostKeyChecking::Yes,
                    "accept-new" => StrictHostKeyChecking::AcceptNew,
                    "no" | "off" => StrictHostKeyChecking::No,
                    _ => return Err(format!("{v:?}: expected yes, accept-new, no or ask")),
                };
                set(Setting::StrictHostKeyChecking(s))
            }
            "proxyjump" => match args {
                [] => Err("missing argument".into()),
                [v] if v.eq_ignore_ascii_case("none") => set(Setting::Relay(Relay::Direct)),
                [v] => set(Setting::Relay(Relay::Jump(v.clone()))),
                _ => Err(format!("expected one argument, got {}", args.len())),
            },
            _ => Ok(None),
        }
    }

    fn match_item(&mut self, args: &[String], at: &Origin) -> Result<Item, String> {
        let mut conds = Vec::new();
        let mut it = args.iter();
        let mut unsupported = None;
        while let Some(word) = it.next() {
            let (negated, name) = match word.strip_prefix('!') {
                Some(n) => (true, n.to_ascii_lowercase()),
                None => (false, word.to_ascii_lowercase()),
            };
            let mut list = || {
                it.next()
                    .map(|l| l.split(',').map(Pattern::parse).collect::<Vec<_>>())
                    .ok_or_else(|| format!("Match {name} needs an argument"))
            };
            let criterion = match name.as_str() {
                "all" => Criterion::All,
                "canonical" | "final" => Criterion::Always,
                "host" => Criterion::Host(list()?),
                "originalhost" => Criterion::OriginalHost(list()?),
                "user" => Criterion::User(list()?),
                "localuser" => Criterion::LocalUser(list()?),
                "exec" | "localnetwork" | "tagged" => {
                    list()?;
                    unsupported.get_or_insert(name.clone());
                    continue;
                }
                _ => return Err(format!("unknown criterion {word:?}")),
            };
            conds.push(Condition { negated, criterion });
        }
        if conds.is_empty() && unsupported.is_none() {
            return Err("missing criteria".into());
        }
        if let Some(name) = unsupported {
            self.warn(
                at,
                format!("Match {name} is not supported by hydra: this block is not applied"),
            );
            return Ok(Item::Match(None));
        }
        Ok(Item::Match(Some(conds)))
    }

    fn include(&mut self, args: &[String], at: &Origin, depth: usize) -> Result<Item, String> {
        if args.is_empty() {
            return Err("missing argument".into());
        }
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(format!("nested more than {MAX_INCLUDE_DEPTH} deep"));
        }
        let mut items = Vec::new();
        for arg in args {
            let path = match self.include_path(arg) {
                Ok(p) => p,
                Err(why) => {
                    self.warn(at, format!("Include {arg}: {why}"));
                    continue;
                }
            };
            for file in expand_file_glob(&path) {
                match std::fs::read_to_string(&file) {
                    Ok(text) => items.extend(self.file_items(&text, &file, depth + 1)),
                    Err(e) => self.warn(at, format!("Include {}: {e}", file.display())),
                }
            }
        }
        Ok(Item::Include(items))
    }

    /// `~/x` and `x` (relative: under `~/.ssh`) to a path.
    fn include_path(&self, arg: &str) -> Result<PathBuf, String> {
        if Path::new(arg).is_absolute() {
            return Ok(PathBuf::from(arg));
        }
        let home = self.home.ok_or("HOME is not set")?;
        Ok(match arg.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => home.join(".ssh").join(arg),
        })
    }
}

/// The files `path` names: itself, or (with `*`/`?` in its last component) the matching
/// entries of its directory in name order. A pattern matching nothing is no file.
fn expand_file_glob(path: &Path) -> Vec<PathBuf> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !name.contains(['*', '?']) {
        return vec![path.to_owned()];
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| !n.starts_with('.') && wildcard(name, n))
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .take(MAX_INCLUDED_FILES)
        .collect();
    files.sort();
    files
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err(format!("{v:?}: expected yes or no")),
    }
}

/// A line as `keyword` and its arguments: `Keyword args`, `Keyword=args` or `Keyword = args`;
/// arguments split on white space, `"..."` keeping spaces, `#` starting a comment outside
/// quotes. `Ok(None)` for a blank or comment line.
pub(crate) fn split_line(line: &str) -> Result<Option<(String, Vec<String>)>, String> {
    let Some((keyword, rest)) = keyword_and_rest(line) else {
        return Ok(None);
    };
    if keyword.is_empty() {
        return Err("no keyword before '='".into());
    }
    Ok(Some((keyword.to_owned(), split_args(rest)?)))
}

/// A line's keyword and the rest of it after the separator (blanks, or one `=` among
/// blanks); `None` for a blank line or a comment.
fn keyword_and_rest(line: &str) -> Option<(&str, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let mut rest = line[end..].trim_start();
    if let Some(r) = rest.strip_prefix('=') {
        rest = r.trim_start();
    }
    Some((&line[..end], rest))
}

/// A `ProxyCommand` line's relay: the rest of the line as written, quotes and `#` included,
/// as OpenSSH hands it to the shell. `None` for any other line.
fn proxy_command(line: &str) -> Option<Result<Relay, String>> {
    let (keyword, rest) = keyword_and_rest(line)?;
    if !keyword.eq_ignore_ascii_case("proxycommand") {
        return None;
    }
    Some(match rest {
        "" => Err("missing argument".into()),
        r if r.eq_ignore_ascii_case("none") => Ok(Relay::Direct),
        r => Ok(Relay::Command(r.to_owned())),
    })
}

fn split_args(s: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_token = false;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(q), '\\') => match chars.next() {
                Some(n) if n == q || n == '\\' => cur.push(n),
                Some(n) => {
                    cur.push('\\');
                    cur.push(n);
                }
                None => cur.push('\\'),
            },
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_token = true;
            }
            (None, '#') if !in_token => break,
            (None, c) if c.is_whitespace() => {
                if in_token {
                    args.push(std::mem::take(&mut cur));
                    in_token = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_token = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_token {
        args.push(cur);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> SshConfig {
        SshConfig::parse(text, Path::new("/cfg"), Some(Path::new("/home/u")))
    }

    #[test]
    fn keyword_and_arguments_split_on_space_equals_and_quotes() {
        let s = |l: &str| split_line(l).unwrap().unwrap();
        assert_eq!(s("Port 2222"), ("Port".into(), vec!["2222".into()]));
        assert_eq!(s("  Port=2222"), ("Port".into(), vec!["2222".into()]));
        assert_eq!(s("Port = 2222 # c"), ("Port".into(), vec!["2222".into()]));
        assert_eq!(
            s("IdentityFile \"/a b/k\""),
            ("IdentityFile".into(), vec!["/a b/k".into()])
        );
        assert_eq!(split_line("   # comment").unwrap(), None);
        assert!(split_line("IdentityFile \"/a").is_err());
    }

    #[test]
    fn a_malformed_line_is_a_warning_naming_file_and_line_and_the_rest_still_applies() {
        let c = parse("Host a\n  Port nope\n  User bob\nMatch bogus x\n");
        let w: Vec<String> = c.warnings().iter().map(|w| w.to_string()).collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("/cfg:2: Port: \"nope\" is not a port"),
            "{w:?}"
        );
        assert!(
            w[1].starts_with("/cfg:4: Match: unknown criterion"),
            "{w:?}"
        );
        assert_eq!(
            c.items[1],
            Item::Set(
                Setting::User("bob".into()),
                Origin {
                    file: Arc::from(Path::new("/cfg")),
                    line: 3
                }
            )
        );
    }

    #[test]
    fn an_unsupported_match_criterion_is_a_block_never_taken_with_a_warning() {
        let c = parse("Match exec \"true\"\n  User x\n");
        assert_eq!(c.items[0], Item::Match(None));
        assert!(c.warnings()[0]
            .message
            .contains("Match exec is not supported"));
    }

    #[test]
    fn include_reads_files_by_wildcard_in_name_order_relative_to_dot_ssh() {
        let home = tempfile::tempdir().unwrap();
        let d = home.path().join(".ssh/conf.d");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("b.conf"), "User b\n").unwrap();
        std::fs::write(d.join("a.conf"), "User a\n").unwrap();
        std::fs::write(d.join("skip"), "User skip\n").unwrap();
        let c = SshConfig::parse(
            "Include conf.d/*.conf\n",
            Path::new("/c"),
            Some(home.path()),
        );
        let Item::Include(items) = &c.items[0] else {
            panic!("{:?}", c.items)
        };
        let users: Vec<_> = items
            .iter()
            .map(|i| match i {
                Item::Set(Setting::User(u), _) => u.as_str(),
                _ => "?",
            })
            .collect();
        assert_eq!(users, ["a", "b"]);
    }

    #[test]
    fn an_include_cycle_stops_at_the_depth_limit_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("loop");
        std::fs::write(&f, format!("Include {}\n", f.display())).unwrap();
        let c = SshConfig::load(&f, Some(dir.path())).unwrap();
        assert!(
            c.warnings()
                .iter()
                .any(|w| w.message.contains("nested more than 16 deep")),
            "{:?}",
            c.warnings()
        );
    }

    proptest! {
        #[test]
        fn any_text_parses_to_items_and_warnings_without_panicking(
            lines in prop::collection::vec(
                "(Host|Match|Port|User|HostName|IdentityFile|IdentitiesOnly|StrictHostKeyChecking|UserKnownHostsFile|HostKeyAlias|IdentityAgent|ProxyJump|ProxyCommand|Include|X)?[ =\t]{0,2}[!a-z0-9*?,\"'#= \\\\]{0,16}",
                0..12,
            )
        ) {
            let text = lines.join("\n");
            let c = parse(&text);
            for w in c.warnings() {
                prop_assert!(w.at.line >= 1 && w.at.line <= lines.len().max(1));
                prop_assert!(!w.message.chars().any(char::is_control), "{:?}", w.message);
            }
        }
    }
}
