//! Requests sent ahead of the transfer ([`Scheme::request_ahead`]): the fetch from the offset
//! asked continues the response, waits for it while it is coming, and never continues one that
//! describes another object; the engine asks a mirror still probing for the range its first
//! split gives it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{bounded, fetch, scheme};
use hydra_core::{ByteRange, Capabilities, Concurrency, Config, Remembered};
use hydra_scheme::engine::{Engine, EngineOptions, SourceInput};
use hydra_scheme::{
    Endpoint, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme, SchemeError,
};
use hydra_scheme_http::origin::{object_bytes, Misbehaviour, Origin, OriginConfig};
use hydra_scheme_http::HttpScheme;

const SIZE: u64 = 1 << 20;

async fn origin(seed: u64, mis: Misbehaviour) -> Origin {
    Origin::start(OriginConfig {
        size: SIZE,
        seed,
        misbehaviour: mis,
    })
    .await
    .expect("origin")
}

fn endpoint(o: &Origin) -> Endpoint {
    Endpoint::parse(&o.url("/object")).expect("url")
}

/// The ranges `o` was asked for that start at `offset`.
fn asked_from(o: &Origin, offset: u64) -> Vec<String> {
    let from = format!("bytes={offset}-");
    o.ranges_asked()
        .into_iter()
        .flatten()
        .filter(|r| r.starts_with(&from))
        .collect()
}

/// An origin, a scheme that has probed it, and the probe's answer.
struct Asked {
    o: Origin,
    s: Arc<HttpScheme>,
    probe: Probe,
}

/// Probes a new origin of the object of seed 7, then asks it ahead from `offset`.
async fn probed_then_asked_ahead(offset: u64) -> Asked {
    let o = origin(7, Misbehaviour::default()).await;
    let s = scheme();
    let ep = endpoint(&o);
    let probe = bounded(s.probe(&ep)).await.expect("probe");
    bounded(s.request_ahead(&ep, offset, SIZE))
        .await
        .expect("request ahead");
    Asked { o, s, probe }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_from_the_offset_asked_ahead_continues_that_response_without_a_request() {
    let Asked { o, s, probe } = probed_then_asked_ahead(4096).await;
    let range = ByteRange::new(4096, 65536);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let outcome = fetch(&s, &o.url("/object"), &probe, range, &sink).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(&sink.contents()[4096..65536], &object_bytes(7, range)[..]);
    // The probe and the request ahead; the fetch sent none.
    assert_eq!(o.requests_served(), 2);
    assert_eq!(asked_from(&o, 4096), ["bytes=4096-"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_waits_for_the_response_asked_ahead_while_it_is_coming() {
    let o = far_origin(7, 300).await;
    let s = scheme();
    let ep = endpoint(&o);
    let probe = bounded(s.probe(&ep)).await.expect("probe");
    let range = ByteRange::new(8192, 65536);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let url = o.url("/object");
    // `join!` polls the request ahead first: its place is held before the fetch looks.
    let (ahead, outcome) = bounded(async {
        tokio::join!(
            s.request_ahead(&ep, 8192, SIZE),
            fetch(&s, &url, &probe, range, &sink)
        )
    })
    .await;
    ahead.expect("request ahead");
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(&sink.contents()[8192..65536], &object_bytes(7, range)[..]);
    assert_eq!(o.requests_served(), 2);
    assert_eq!(asked_from(&o, 8192), ["bytes=8192-"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_gives_up_on_a_response_asked_ahead_that_is_held_up_and_asks_itself() {
    // The request ahead is answered 1 s late (a server that holds a second connection in its
    // backlog); the probe and the fetch's own request at once.
    let held_up = Misbehaviour {
        open_range_delay: Some(Duration::from_secs(1)),
        ..Misbehaviour::default()
    };
    let o = origin(7, held_up).await;
    let s = scheme();
    let ep = endpoint(&o);
    let probe = bounded(s.probe(&ep)).await.expect("probe");
    let range = ByteRange::new(8192, 65536);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let url = o.url("/object");
    let ahead = s.request_ahead(&ep, 8192, SIZE);
    let fetched = async {
        let outcome = fetch(&s, &url, &probe, range, &sink).await;
        // Seen as the fetch ends, before the request ahead is answered.
        (outcome, asked_from(&o, 8192))
    };
    let (_, (outcome, asked)) = bounded(async { tokio::join!(ahead, fetched) }).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(&sink.contents()[8192..65536], &object_bytes(7, range)[..]);
    // Its own request was answered; the one ahead was still held (an origin records a
    // range as it answers it).
    assert_eq!(asked, ["bytes=8192-65535"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_asked_ahead_that_describes_another_object_is_never_continued() {
    let o = origin(7, Misbehaviour::default()).await;
    let s = scheme();
    let ep = endpoint(&o);
    bounded(s.request_ahead(&ep, 4096, SIZE))
        .await
        .expect("request ahead");
    // The object is replaced after the request ahead was answered and before the probe.
    o.replace_object(99);
    let probe = bounded(s.probe(&ep)).await.expect("probe");
    let range = ByteRange::new(4096, 65536);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let outcome = fetch(&s, &o.url("/object"), &probe, range, &sink).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(&sink.contents()[4096..65536], &object_bytes(99, range)[..]);
    // The fetch asked for its range itself.
    assert_eq!(asked_from(&o, 4096), ["bytes=4096-", "bytes=4096-65535"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_asked_ahead_is_dropped_once_the_source_s_fetch_starts_elsewhere() {
    let Asked { o, s, probe } = probed_then_asked_ahead(4096).await;
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let url = o.url("/object");
    // The split made is not the one predicted: the fetch starts elsewhere.
    let elsewhere = ByteRange::new(8192, 65536);
    let outcome = fetch(&s, &url, &probe, elsewhere, &sink).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    // A later fetch from the offset asked ahead no longer finds it.
    let later = ByteRange::new(4096, 8192);
    let outcome = fetch(&s, &url, &probe, later, &sink).await;
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(
        &sink.contents()[4096..65536],
        &object_bytes(7, ByteRange::new(4096, 65536))[..]
    );
    assert_eq!(asked_from(&o, 4096), ["bytes=4096-", "bytes=4096-8191"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_asked_ahead_past_the_end_of_the_object_is_refused() {
    let o = origin(7, Misbehaviour::default()).await;
    let s = scheme();
    let err = bounded(s.request_ahead(&endpoint(&o), SIZE, SIZE))
        .await
        .expect_err("nothing to ask for");
    assert!(err.to_string().contains("past the object"), "{err}");
    assert_eq!(o.requests_served(), 0);
}

/// One connection per source, and a transfer that waits for every probe (the first split then
/// has every source in it, whichever answers last).
fn engine(per_host: usize) -> Engine {
    engine_opening(per_host, 1)
}

/// [`engine`], each source opening `n` connections.
fn engine_opening(per_host: usize, n: usize) -> Engine {
    Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(n),
            per_host,
            ..Config::default()
        },
        probe_grace: 1e6,
        ..EngineOptions::default()
    })
}

/// Probes `origins` with [`Engine::probe_first`], runs the transfer with the sources that join
/// late, and returns the bytes.
async fn transfer(origins: &[&Origin]) -> Vec<u8> {
    transfer_with(engine(4), scheme(), origins, None).await
}

/// [`transfer`] by `e` through `s`, every source with `remembered` as what an earlier
/// transfer learned.
async fn transfer_with(
    e: Engine,
    s: Arc<dyn Scheme>,
    origins: &[&Origin],
    remembered: Option<Remembered>,
) -> Vec<u8> {
    let inputs: Vec<SourceInput> = origins
        .iter()
        .map(|o| SourceInput {
            remembered,
            ..SourceInput::new(endpoint(o), s.clone())
        })
        .collect();
    bounded(async {
        let (probed, joining) = e.probe_first(inputs).await.expect("probe");
        let sink = Arc::new(MemorySink::new(probed.size as usize));
        e.run_joining(&probed, sink.clone(), &RangeSet::new(), None, joining)
            .await
            .expect("transfer");
        sink.contents()
    })
    .await
}

/// Transfers from a near mirror and a far one (still probing when the near one answers) by
/// `e` through `s`, both with `remembered`; checks the bytes and that the far mirror was asked
/// nothing ahead (no `bytes=N-` range). Returns the far mirror.
async fn not_asked_ahead(e: Engine, s: Arc<dyn Scheme>, remembered: Option<Remembered>) -> Origin {
    let fast = origin(7, Misbehaviour::default()).await;
    let far = far_origin(7, 150).await;
    let bytes = transfer_with(e, s, &[&fast, &far], remembered).await;
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, SIZE)));
    let open_ended = far
        .ranges_asked()
        .into_iter()
        .flatten()
        .filter(|r| r.ends_with('-'))
        .count();
    assert_eq!(open_ended, 0, "{:?}", far.ranges_asked());
    far
}

/// Where the engine's first split starts the second of two mirrors of equal priors: half
/// way, less the bytes a stream asks for to prove its offset.
const SECOND_HALF_ASKED: u64 = SIZE / 2 - 64;

/// An origin of the object of `seed` that answers every request `ms` late: a mirror whose
/// probe is still out when a near one answers.
async fn far_origin(seed: u64, ms: u64) -> Origin {
    let late = Misbehaviour {
        head_delay: Some(Duration::from_millis(ms)),
        ..Misbehaviour::default()
    };
    origin(seed, late).await
}

/// Asserts that the only request `o` saw from `from` is the request ahead (`bytes=FROM-`):
/// its first fetch continued that response.
fn assert_continued(o: &Origin, from: u64) {
    assert_eq!(
        asked_from(o, from),
        [format!("bytes={from}-")],
        "{:?}",
        o.ranges_asked()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_still_probing_when_the_first_answers_is_asked_for_its_first_range_at_once() {
    let fast = origin(7, Misbehaviour::default()).await;
    let far = far_origin(7, 150).await;
    let bytes = transfer(&[&fast, &far]).await;
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, SIZE)));
    // Its first range was asked once, open-ended, before its probe answered.
    assert_continued(&far, SECOND_HALF_ASKED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_of_another_object_leaves_its_response_asked_ahead_untaken() {
    let fast = origin(7, Misbehaviour::default()).await;
    let other = far_origin(8, 150).await;
    let bytes = transfer(&[&fast, &other]).await;
    // A tie keeps the first answer's object: every byte is the fast mirror's.
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, SIZE)));
    // The case is reached: the other mirror was asked ahead.
    assert_eq!(
        asked_from(&other, SECOND_HALF_ASKED),
        [format!("bytes={SECOND_HALF_ASKED}-")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_answering_out_of_the_order_given_still_continue_their_responses_asked_ahead() {
    let fast = origin(7, Misbehaviour::default()).await;
    // Given second, answers last.
    let farther = far_origin(7, 250).await;
    let far = far_origin(7, 120).await;
    let bytes = transfer(&[&fast, &farther, &far]).await;
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, SIZE)));
    // The first split of three equal priors, in the order given: a third each, the second and
    // third asked from 64 bytes early.
    let third = SIZE.div_ceil(3);
    let starts = [third - 64, 2 * third - 64];
    for (o, from) in [(&farther, starts[0]), (&far, starts[1])] {
        assert_continued(o, from);
        // Nor was it asked for the other's first range: the split followed the order given.
        let other = starts.iter().find(|&&s| s != from).copied().unwrap_or(0);
        assert_eq!(asked_from(o, other), Vec::<String>::new());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_is_sent_ahead_to_a_host_allowed_one_connection() {
    let far = not_asked_ahead(engine(1), scheme(), None).await;
    // Its first fetch asked for its range itself, closed at the end of its share.
    assert_eq!(
        asked_from(&far, SECOND_HALF_ASKED),
        [format!("bytes={SECOND_HALF_ASKED}-{}", SIZE - 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_asked_ahead_when_remembered_rates_make_the_split_hang_on_the_round_trips() {
    // Each source's first share is then what it can do by the fluid end after its setup,
    // which the probes still out have not told.
    let remembered = Remembered {
        connections: 1,
        at_ceiling: false,
        additivity: None,
        conn_rate: Some(4e6),
    };
    not_asked_ahead(engine(4), scheme(), Some(remembered)).await;
}

/// HTTP under a protocol ceiling of one connection per host.
struct OnePerHost(Arc<HttpScheme>);

#[async_trait::async_trait]
impl Scheme for OnePerHost {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn url_schemes(&self) -> &[&'static str] {
        self.0.url_schemes()
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities().with_max_connections_per_host(Some(1))
    }
    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.0.probe(endpoint).await
    }
    async fn request_ahead(
        &self,
        endpoint: &Endpoint,
        offset: u64,
        size: u64,
    ) -> Result<(), SchemeError> {
        self.0.request_ahead(endpoint, offset, size).await
    }
    async fn fetch(&self, request: FetchRequest) -> FetchOutcome {
        self.0.fetch(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_is_sent_ahead_through_a_scheme_that_allows_one_connection_per_host() {
    let s: Arc<dyn Scheme> = Arc::new(OnePerHost(scheme()));
    let far = not_asked_ahead(engine(4), s, None).await;
    assert_eq!(
        asked_from(&far, SECOND_HALF_ASKED),
        [format!("bytes={SECOND_HALF_ASKED}-{}", SIZE - 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_is_sent_ahead_to_a_source_whose_first_split_opens_several_fetches() {
    // Its fetches are sent at once, and the one from another offset could drop the response.
    not_asked_ahead(engine_opening(4, 2), scheme(), None).await;
}
