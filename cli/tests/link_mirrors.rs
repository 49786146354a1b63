//! `hydra get --link-mirrors`: RFC 6249 `Link: rel=duplicate` headers add mirrors and an RFC
//! 3230 `Digest` header becomes the checksum, only when asked; hostile headers are warnings.
//!
//! The server asked is a wiremock origin that serves ranges of the object and the headers
//! under test; the advertised mirrors are reference HTTP origins of the same object.

mod common;

use base64::Engine as _;
use common::{args, closed_port, event, events, http_origin, hydra, object, stderr};
use sha2::{Digest, Sha256};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SIZE: u64 = 1 << 20;
const SEED: u64 = 21;

/// Serves `body` with ranges (`bytes=a-b`, `bytes=a-`), and `headers` on every answer.
struct Ranged {
    body: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl Respond for Ranged {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let len = self.body.len() as u64;
        let range = req
            .headers
            .get("range")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("bytes="))
            .and_then(|v| v.split_once('-'))
            .and_then(|(a, b)| {
                let lo: u64 = a.parse().ok()?;
                let hi: u64 = if b.is_empty() {
                    len - 1
                } else {
                    b.parse().ok()?
                };
                Some((lo, hi.min(len - 1)))
            });
        let mut t = match range {
            Some((lo, hi)) if lo <= hi => ResponseTemplate::new(206)
                .insert_header("content-range", format!("bytes {lo}-{hi}/{len}").as_str())
                .set_body_bytes(&self.body[lo as usize..=hi as usize]),
            _ => ResponseTemplate::new(200).set_body_bytes(self.body.clone()),
        };
        for (n, v) in &self.headers {
            t = t.append_header(n.as_str(), v.as_str());
        }
        t
    }
}

/// A server of the object that sends `headers` with every answer.
async fn front(headers: Vec<(String, String)>) -> MockServer {
    let s = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .respond_with(Ranged {
            body: object(SEED, SIZE),
            headers,
        })
        .mount(&s)
        .await;
    s
}

fn sha256_b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(b))
}

fn h(name: &str, value: &str) -> (String, String) {
    (name.to_owned(), value.to_owned())
}

/// The URLs of the `start` event: the sources the download began with.
fn started_with(out: &std::process::Output) -> Vec<String> {
    let evs = events(out);
    event(&evs, "start").expect("a start event")["urls"]
        .as_array()
        .expect("urls")
        .iter()
        .map(|u| u.as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn advertised_mirrors_join_the_download_and_the_advertised_digest_is_checked() {
    let (a, b) = (http_origin(SIZE, SEED).await, http_origin(SIZE, SEED).await);
    let (ua, ub) = (a.url("/object"), b.url("/object"));
    let link = format!("<{ub}>; rel=duplicate; pri=2, <{ua}>; rel=duplicate; pri=1; geo=de");
    let digest = format!("SHA-256={}", sha256_b64(&object(SEED, SIZE)));
    let s = front(vec![h("link", &link), h("digest", &digest)]).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let url = format!("{}/f.bin", s.uri());
    let o = hydra(&args(&[
        "get",
        "--link-mirrors",
        "--json",
        &url,
        "-o",
        &out.display().to_string(),
    ]))
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), object(SEED, SIZE));
    assert_eq!(started_with(&o), vec![url, ua.clone(), ub]);
    let evs = events(&o);
    let taken: Vec<_> = evs.iter().filter(|e| e["event"] == "advertised").collect();
    assert_eq!(taken.len(), 3, "{taken:?}");
    assert_eq!(taken[0]["taken"]["mirror"], ua.as_str());
    let checksum = taken[2]["taken"]["checksum"].as_str().unwrap();
    assert!(checksum.starts_with("sha256="), "{checksum}");
}

#[tokio::test]
async fn the_verbose_lines_say_which_mirror_and_checksum_came_from_which_url() {
    let a = http_origin(SIZE, SEED).await;
    let ua = a.url("/object");
    let link = format!("<{ua}>; rel=duplicate; pri=3; geo=FR; pref");
    let digest = format!("SHA-256={}", sha256_b64(&object(SEED, SIZE)));
    let s = front(vec![h("link", &link), h("digest", &digest)]).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let url = format!("{}/f.bin", s.uri());
    let o = hydra(&args(&[
        "get",
        "--link-mirrors",
        "-v",
        &url,
        "-o",
        &out.display().to_string(),
    ]))
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "hydra: mirror {ua} (pri 3, geo fr, preferred) from the Link header of {url}"
        )),
        "{err}"
    );
    assert!(err.contains("from the Digest header of"), "{err}");
}

#[tokio::test]
async fn an_advertised_digest_that_does_not_match_exits_6_and_leaves_no_file() {
    let wrong = base64::engine::general_purpose::STANDARD.encode([0u8; 32]);
    let s = front(vec![h("digest", &format!("sha-256={wrong}"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let url = format!("{}/f.bin", s.uri());
    let o = hydra(&args(&[
        "get",
        "--link-mirrors",
        &url,
        "-o",
        &out.display().to_string(),
    ]))
    .await;
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(!out.exists());
    assert!(stderr(&o).contains("checksum mismatch"), "{}", stderr(&o));
}

#[tokio::test]
async fn a_given_checksum_wins_over_an_advertised_digest() {
    let wrong = base64::engine::general_purpose::STANDARD.encode([0u8; 32]);
    let s = front(vec![h("digest", &format!("SHA-256={wrong}"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let url = format!("{}/f.bin", s.uri());
    let right: String = Sha256::digest(object(SEED, SIZE))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let o = hydra(&args(&[
        "get",
        "--link-mirrors",
        "--checksum",
        &format!("sha256={right}"),
        &url,
        "-o",
        &out.display().to_string(),
    ]))
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), object(SEED, SIZE));
}

#[tokio::test]
async fn without_the_flag_link_and_digest_headers_are_ignored() {
    let a = http_origin(SIZE, SEED).await;
    let wrong = base64::engine::general_purpose::STANDARD.encode([0u8; 32]);
    let link = format!("<{}>; rel=duplicate", a.url("/object"));
    let s = front(vec![
        h("link", &link),
        h("digest", &format!("SHA-256={wrong}")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let url = format!("{}/f.bin", s.uri());
    let o = hydra(&args(&[
        "get",
        "--json",
        &url,
        "-o",
        &out.display().to_string(),
    ]))
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(started_with(&o), vec![url]);
    assert!(events(&o).iter().all(|e| e["event"] != "advertised"));
    assert_eq!(std::fs::read(&out).unwrap(), object(SEED, SIZE));
}

#[tokio::test]
async fn hostile_link_and_digest_headers_are_warnings_and_the_download_goes_on() {
    let closed = closed_port().await;
    let many: Vec<String> = (0..1000)
        .map(|i| format!("<http://127.0.0.1:{closed}/m{i}>; rel=duplicate"))
        .collect();
    let cases = [
        vec![
            h("link", "<<<>>>;;;,,, garbage"),
            h("digest", "SHA-256=!!!not base64"),
        ],
        vec![h("link", &many.join(", "))],
        vec![
            h("link", "<file:///etc/passwd>; rel=duplicate"),
            h("digest", "FOO=abc"),
        ],
    ];
    for (k, headers) in cases.into_iter().enumerate() {
        let s = front(headers).await;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f.bin");
        let url = format!("{}/f.bin", s.uri());
        let o = hydra(&args(&[
            "get",
            "--link-mirrors",
            &url,
            "-o",
            &out.display().to_string(),
        ]))
        .await;
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "case {k}: {err}");
        assert!(err.contains("hydra: warning:"), "case {k}: {err}");
        // 1000 links: 16 are taken (to a closed port) and dropped at their
        // probe; the download completes from the server asked.
        assert!(o.status.success(), "case {k}: {err}");
        assert_eq!(std::fs::read(&out).unwrap(), object(SEED, SIZE), "case {k}");
        if k == 1 {
            assert!(err.contains("984 more mirrors"), "{err}");
        }
        if k == 2 {
            assert!(err.contains("only http and https"), "{err}");
        }
    }
}
