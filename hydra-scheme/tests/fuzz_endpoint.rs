//! Property-based fuzzing of URL → [`Endpoint`] parsing: arbitrary and near-valid URLs never
//! panic, credentials never reach `Display`, `Debug` or an error, and what parses reads back
//! from its own `Display`.
//!
//! Cases per property: the default below, or `HYDRA_FUZZ_CASES` for a longer run.

use hydra_scheme::{Endpoint, Url};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use proptest::prelude::*;

fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("HYDRA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(n)
}

/// A password no URL part generated below can contain by chance.
const SECRET: &str = "Zq9secretQz";

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{1,12}(\\.[a-z0-9-]{1,8}){0,3}",
        Just("127.0.0.1".to_owned()),
        Just("[::1]".to_owned()),
        Just("[fe80::1%25eth0]".to_owned()),
        "[0-9]{1,4}\\.[0-9]{1,4}\\.[0-9]{1,4}\\.[0-9]{1,4}",
        Just("xn--nxasmq6b.example".to_owned()),
        Just("bücher.example".to_owned()),
        // Anything but the characters that end a host or start user info.
        "[\\PC&&[^@/?#\\\\]]{0,8}",
        Just(String::new()),
    ]
}

/// A URL built from parts, each valid or a little off.
fn near_valid() -> impl Strategy<Value = (String, String, String)> {
    let scheme = prop::sample::select(vec![
        "http", "https", "ftp", "ftps", "sftp", "HTTP", "file", "data", "mailto", "h t",
    ]);
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70_000).prop_map(|p| format!(":{p}")),
        Just(":".to_owned()),
        "[:][a-z0-9]{1,3}",
    ];
    let path = "(/[\\PC&&[^/?#]]{0,6}){0,4}(\\?[\\PC]{0,6})?(#[\\PC]{0,4})?";
    (scheme, "\\PC{0,6}", host(), port, path, any::<bool>()).prop_map(
        |(scheme, user, host, port, path, with_password)| {
            let user_enc = utf8_percent_encode(&user, NON_ALPHANUMERIC).to_string();
            let info = match (user.is_empty(), with_password) {
                (true, false) => String::new(),
                (_, true) => format!("{user_enc}:{SECRET}@"),
                (false, false) => format!("{user_enc}@"),
            };
            (format!("{scheme}://{info}{host}{port}{path}"), user, info)
        },
    )
}

/// The checks every parse result must pass.
fn check(input: &str) -> Result<(), TestCaseError> {
    match Endpoint::parse(input) {
        Err(e) => {
            prop_assert!(
                !e.to_string().contains(SECRET),
                "error {e} shows the password"
            );
        }
        Ok(ep) => {
            let shown = ep.to_string();
            let debug = format!("{ep:?}");
            prop_assert!(!shown.contains(SECRET), "{shown}");
            prop_assert!(!debug.contains(SECRET), "{debug}");
            // A host-less URL parses (a local transport may take it); the host is then empty.
            prop_assert_eq!(ep.has_host(), !ep.host().is_empty());
            let _ = (ep.decoded_path(), ep.port(), ep.url_scheme());
            // Display is the URL without user info, and reads back as the same place.
            let again = Endpoint::parse(&shown);
            prop_assert!(
                again.is_ok(),
                "{shown} does not read back: {:?}",
                again.err()
            );
            let again = again.unwrap();
            prop_assert_eq!(again.url(), ep.url());
            prop_assert!(again.credentials().is_none());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn any_text_read_as_an_endpoint_is_one_or_an_error_never_a_panic(s in "\\PC{0,60}") {
        check(&s)?;
    }

    #[test]
    fn any_bytes_read_lossily_as_an_endpoint_never_panic(b in prop::collection::vec(any::<u8>(), 0..80)) {
        check(&String::from_utf8_lossy(&b))?;
    }

    #[test]
    fn a_near_valid_url_parses_or_fails_and_its_credentials_come_out_decoded(
        (url, user, info) in near_valid()
    ) {
        check(&url)?;
        if let Ok(ep) = Endpoint::parse(&url) {
            if info.is_empty() {
                prop_assert!(ep.credentials().is_none());
            } else if let Some(c) = ep.credentials() {
                prop_assert_eq!(&c.username, &user);
                if info.contains(SECRET) {
                    prop_assert_eq!(&c.password, SECRET);
                }
            }
        }
    }

    #[test]
    fn a_redirect_to_any_url_never_panics_and_keeps_credentials_only_on_the_same_origin(
        (url, _, _) in near_valid()
    ) {
        let from = Endpoint::parse(&format!("http://u:{SECRET}@a.example/x")).unwrap();
        if let Ok(to) = Url::parse(&url) {
            let r = from.redirected(to.clone());
            let same = to.scheme() == "http" && to.host_str() == Some("a.example")
                && to.port_or_known_default() == Some(80);
            if r.credentials().is_some() {
                prop_assert!(same || to.password().is_some() || !to.username().is_empty(), "{url}");
            }
            prop_assert!(!r.to_string().contains(SECRET));
        }
    }
}
