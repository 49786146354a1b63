//! `-H` against a real origin (wiremock): a header the user gives replaces hydra's own of that
//! name on the wire — one `User-Agent`, one `Authorization` — and a repeated name sends every
//! value.

mod common;

use common::*;
use hydra_scheme::{Endpoint, Scheme};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// An origin answering every GET with 100 bytes.
async fn origin() -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![7u8; 100]))
        .mount(&s)
        .await;
    s
}

/// The values of `name` in each request the origin received.
async fn values(s: &MockServer, name: &str) -> Vec<Vec<String>> {
    let reqs: Vec<Request> = s.received_requests().await.unwrap_or_default();
    reqs.iter()
        .map(|r| {
            r.headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap_or("").to_owned())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn a_user_agent_header_replaces_hydras_on_the_wire() {
    let s = origin().await;
    let ep = Endpoint::parse(&format!("{}/f", s.uri()))
        .unwrap()
        .with_header("User-Agent", "mine/1.0");
    bounded(scheme().probe(&ep)).await.unwrap();
    let seen = values(&s, "user-agent").await;
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|v| v == &["mine/1.0"]), "{seen:?}");
}

#[tokio::test]
async fn an_authorization_header_replaces_basic_auth_from_credentials() {
    let s = origin().await;
    let ep = Endpoint::parse(&format!("{}/f", s.uri()))
        .unwrap()
        .with_credentials("u", "p")
        .with_header("Authorization", "Bearer tok");
    bounded(scheme().probe(&ep)).await.unwrap();
    let seen = values(&s, "authorization").await;
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|v| v == &["Bearer tok"]), "{seen:?}");
}

#[tokio::test]
async fn a_repeated_extra_header_sends_every_value_once() {
    let s = origin().await;
    let ep = Endpoint::parse(&format!("{}/f", s.uri()))
        .unwrap()
        .with_header("X-Twice", "a")
        .with_header("X-Twice", "b");
    bounded(scheme().probe(&ep)).await.unwrap();
    let seen = values(&s, "x-twice").await;
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|v| v == &["a", "b"]), "{seen:?}");
}
