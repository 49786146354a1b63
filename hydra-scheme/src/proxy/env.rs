//! Which proxy a source uses: the command line's, else the environment's, with curl's rules.
//!
//! For a source `scheme://host:port`, in order (the first that applies decides):
//!
//! 1. `host:port` matches the `--noproxy` list (when given), else `no_proxy`, else
//!    `NO_PROXY`: direct.
//! 2. The command line's proxy (`--proxy`), when set.
//! 3. `<scheme>_proxy` (lower case: `http_proxy`, `https_proxy`, `ftp_proxy`, `ftps_proxy`,
//!    `sftp_proxy`), then `<SCHEME>_PROXY` — except `HTTP_PROXY`, never read (curl's rule:
//!    CGI servers set it from a request's `Proxy:` header).
//! 4. `all_proxy`, then `ALL_PROXY`.
//! 5. Direct.
//!
//! An empty variable counts as unset. A variable holding a malformed proxy URL is skipped with
//! a warning naming it (without its user info).

use std::collections::BTreeMap;
use std::fmt;

use super::no_proxy::NoProxy;
use super::Proxy;

/// The proxy choice for every source of a run. Built once; [`ProxyRules::route`] answers per
/// source.
#[derive(Debug, Clone, Default)]
pub struct ProxyRules {
    command_line: Option<Proxy>,
    /// Parsed proxy variables, by exact name.
    vars: BTreeMap<String, Proxy>,
    no_proxy: NoProxy,
    warnings: Vec<String>,
}

/// Why a source goes direct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Direct {
    /// No proxy applies to its scheme.
    NoProxySet,
    /// It matches an entry of a no-proxy list.
    Excluded {
        /// The list's origin (`NO_PROXY`, `--noproxy`).
        var: String,
        /// The entry, as written.
        entry: String,
        /// The host it matched.
        host: String,
    },
}

/// How one source is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Without a proxy.
    Direct(Direct),
    /// Through `proxy`, chosen by `from` (`--proxy`, `ALL_PROXY`, ...).
    Proxy {
        /// The proxy.
        proxy: Proxy,
        /// What chose it.
        from: String,
    },
}

impl Route {
    /// The proxy, if any.
    pub fn proxy(&self) -> Option<&Proxy> {
        match self {
            Route::Proxy { proxy, .. } => Some(proxy),
            Route::Direct(_) => None,
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Proxy { proxy, from } => write!(f, "proxy {proxy} from {from}"),
            Route::Direct(Direct::NoProxySet) => write!(f, "direct: no proxy set"),
            Route::Direct(Direct::Excluded { var, entry, host }) => write!(
                f,
                "direct: {} matches {var} entry {}",
                crate::text::sanitize(host),
                crate::text::sanitize(entry)
            ),
        }
    }
}

impl ProxyRules {
    /// Every source direct.
    pub fn direct() -> Self {
        Self::default()
    }

    /// Every source through `proxy` (no environment, no exclusions): what a scheme's options
    /// hold when a program names one proxy.
    pub fn fixed(proxy: Proxy) -> Self {
        ProxyRules {
            command_line: Some(proxy),
            ..Self::default()
        }
    }

    /// The rules from the command line's `proxy` and `noproxy` and the environment `vars`
    /// (`std::env::vars()`; only names ending in `_proxy`, any case, are read).
    pub fn new(
        proxy: Option<Proxy>,
        noproxy: Option<&str>,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        let mut rules = ProxyRules {
            command_line: proxy,
            ..Self::default()
        };
        let mut env = BTreeMap::new();
        for (name, value) in vars {
            if name.to_ascii_lowercase().ends_with("_proxy") && !value.is_empty() {
                env.insert(name, value);
            }
        }
        let (list_var, list) = match noproxy {
            Some(v) => ("--noproxy", Some(v)),
            None => match env.get("no_proxy") {
                Some(v) => ("no_proxy", Some(v.as_str())),
                None => ("NO_PROXY", env.get("NO_PROXY").map(String::as_str)),
            },
        };
        if let Some(value) = list {
            let (parsed, warnings) = NoProxy::parse(list_var, value);
            rules.no_proxy = parsed;
            rules.warnings.extend(warnings);
        }
        for (name, value) in &env {
            if name.eq_ignore_ascii_case("no_proxy") || name == "HTTP_PROXY" {
                continue;
            }
            match Proxy::parse(value) {
                Ok(p) => {
                    rules.vars.insert(name.clone(), p);
                }
                Err(e) => rules
                    .warnings
                    .push(format!("{name}: {e}; variable ignored")),
            }
        }
        rules
    }

    /// Warnings found while reading the lists and variables (malformed entries), one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How a source of `url_scheme` at `host:port` is reached.
    pub fn route(&self, url_scheme: &str, host: &str, port: u16) -> Route {
        if let Some(entry) = self.no_proxy.matching(host, port) {
            return Route::Direct(Direct::Excluded {
                var: self.no_proxy.var.clone(),
                entry: entry.to_owned(),
                host: host.to_owned(),
            });
        }
        if let Some(p) = &self.command_line {
            return Route::Proxy {
                proxy: p.clone(),
                from: "--proxy".to_owned(),
            };
        }
        let lower = format!("{}_proxy", url_scheme.to_ascii_lowercase());
        let upper = lower.to_ascii_uppercase();
        [lower, upper, "all_proxy".to_owned(), "ALL_PROXY".to_owned()]
            .into_iter()
            .find_map(|var| {
                let proxy = self.vars.get(&var)?.clone();
                Some(Route::Proxy { proxy, from: var })
            })
            .unwrap_or(Route::Direct(Direct::NoProxySet))
    }
}

#[cfg(test)]
mod tests {
    //! One test per row of the precedence table in docs/cli.md ("Proxies").
    use super::*;

    fn rules(cli: Option<&str>, noproxy: Option<&str>, env: &[(&str, &str)]) -> ProxyRules {
        let vars = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        ProxyRules::new(cli.map(|p| Proxy::parse(p).unwrap()), noproxy, vars)
    }

    fn from(r: &Route) -> &str {
        match r {
            Route::Proxy { from, .. } => from,
            Route::Direct(Direct::NoProxySet) => "direct",
            Route::Direct(Direct::Excluded { .. }) => "excluded",
        }
    }

    #[test]
    fn row1_a_source_matching_no_proxy_goes_direct_even_with_a_command_line_proxy() {
        let r = rules(Some("http://p:3128"), None, &[("NO_PROXY", ".example.com")]);
        let route = r.route("https", "h.example.com", 443);
        assert_eq!(
            route.to_string(),
            "direct: h.example.com matches NO_PROXY entry .example.com"
        );
        assert_eq!(from(&r.route("https", "other.org", 443)), "--proxy");
    }

    #[test]
    fn row2_the_noproxy_argument_replaces_the_no_proxy_variables() {
        let r = rules(
            None,
            Some("a.example"),
            &[("no_proxy", "b.example"), ("ALL_PROXY", "http://p:1")],
        );
        assert_eq!(from(&r.route("ftp", "a.example", 21)), "excluded");
        assert_eq!(from(&r.route("ftp", "b.example", 21)), "ALL_PROXY");
    }

    #[test]
    fn row3_lower_case_no_proxy_wins_over_upper_case() {
        let r = rules(
            None,
            None,
            &[
                ("no_proxy", "a.example"),
                ("NO_PROXY", "b.example"),
                ("all_proxy", "http://p:1"),
            ],
        );
        assert_eq!(from(&r.route("ftp", "a.example", 21)), "excluded");
        assert_eq!(from(&r.route("ftp", "b.example", 21)), "all_proxy");
    }

    #[test]
    fn row4_the_command_line_proxy_overrides_every_proxy_variable() {
        let r = rules(
            Some("socks5h://s:1080"),
            None,
            &[("https_proxy", "http://p:1"), ("ALL_PROXY", "http://q:1")],
        );
        let route = r.route("https", "h", 443);
        assert_eq!(route.to_string(), "proxy socks5h://s:1080 from --proxy");
    }

    #[test]
    fn row5_the_scheme_variable_lower_case_wins_over_upper_case() {
        let r = rules(
            None,
            None,
            &[("https_proxy", "http://a:1"), ("HTTPS_PROXY", "http://b:1")],
        );
        assert_eq!(from(&r.route("https", "h", 443)), "https_proxy");
        let r = rules(None, None, &[("FTP_PROXY", "http://b:1")]);
        assert_eq!(from(&r.route("ftp", "h", 21)), "FTP_PROXY");
    }

    #[test]
    fn row6_upper_case_http_proxy_is_never_read() {
        let r = rules(None, None, &[("HTTP_PROXY", "http://evil:1")]);
        assert_eq!(from(&r.route("http", "h", 80)), "direct");
        let r = rules(None, None, &[("http_proxy", "http://p:1")]);
        assert_eq!(from(&r.route("http", "h", 80)), "http_proxy");
    }

    #[test]
    fn row7_all_proxy_serves_schemes_without_their_own_variable_lower_case_first() {
        let r = rules(
            None,
            None,
            &[
                ("all_proxy", "http://a:1"),
                ("ALL_PROXY", "http://b:1"),
                ("https_proxy", "http://c:1"),
            ],
        );
        assert_eq!(from(&r.route("sftp", "h", 22)), "all_proxy");
        assert_eq!(from(&r.route("https", "h", 443)), "https_proxy");
        let r = rules(None, None, &[("ALL_PROXY", "http://b:1")]);
        assert_eq!(
            r.route("sftp", "h", 22).to_string(),
            "proxy http://b:1 from ALL_PROXY"
        );
    }

    #[test]
    fn row8_with_nothing_set_every_source_goes_direct() {
        let r = rules(None, None, &[("PATH", "/bin"), ("http_proxy", "")]);
        assert_eq!(r.route("http", "h", 80).to_string(), "direct: no proxy set");
    }

    #[test]
    fn row9_a_scheme_variable_serves_only_sources_of_its_own_url_scheme() {
        let r = rules(
            None,
            None,
            &[("http_proxy", "http://a:1"), ("ftp_proxy", "http://b:1")],
        );
        assert_eq!(from(&r.route("http", "h", 80)), "http_proxy");
        assert_eq!(from(&r.route("https", "h", 443)), "direct");
        assert_eq!(from(&r.route("ftp", "h", 21)), "ftp_proxy");
        assert_eq!(from(&r.route("ftps", "h", 21)), "direct");
        let r = rules(None, None, &[("sftp_proxy", "socks5h://s:1")]);
        assert_eq!(
            r.route("sftp", "h", 22).to_string(),
            "proxy socks5h://s:1 from sftp_proxy"
        );
        assert_eq!(from(&r.route("http", "h", 80)), "direct");
    }

    #[test]
    fn row10_an_empty_variable_counts_as_unset() {
        let r = rules(
            None,
            None,
            &[
                ("https_proxy", ""),
                ("ALL_PROXY", "http://p:1"),
                ("no_proxy", ""),
                ("NO_PROXY", "a.example"),
            ],
        );
        assert!(r.warnings().is_empty(), "{:?}", r.warnings());
        assert_eq!(from(&r.route("https", "b.example", 443)), "ALL_PROXY");
        assert_eq!(
            r.route("https", "a.example", 443).to_string(),
            "direct: a.example matches NO_PROXY entry a.example"
        );
    }

    #[test]
    fn row11_a_malformed_proxy_variable_is_skipped_with_a_warning_without_its_password() {
        let r = rules(
            None,
            None,
            &[
                ("ftp_proxy", "gopher://u:s3cret@p:1"),
                ("all_proxy", "http://p:1"),
            ],
        );
        assert_eq!(from(&r.route("ftp", "h", 21)), "all_proxy");
        assert_eq!(r.warnings().len(), 1);
        assert!(
            r.warnings()[0].starts_with("ftp_proxy: "),
            "{:?}",
            r.warnings()
        );
        assert!(!r.warnings()[0].contains("s3cret"));
    }

    #[test]
    fn row12_a_malformed_no_proxy_entry_warns_naming_the_variable() {
        let r = rules(None, None, &[("no_proxy", "ok.example,bad..entry")]);
        assert_eq!(r.warnings().len(), 1);
        assert!(r.warnings()[0].contains("no_proxy: entry bad..entry"));
    }
}
