//! The transfer engine driving SFTP against the reference origin. Loopback only, every wait
//! bounded; assertions on bytes and counts.

use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::testing::download::download;
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    Endpoint,
};
use hydra_scheme_sftp::origin::{Misbehaviour, Origin, OriginConfig};
use hydra_scheme_sftp::{HostKeyPolicy, SftpOptions, SftpScheme};

const SIZE: u64 = 4 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_source_on_a_server_allowing_one_connection_is_probed_and_downloaded_whole() {
    // A lone source's second session is opened while its probe is out; a server that allows
    // one connection per client closes whichever arrives second. When that is the probe's,
    // the engine probes again on the session opened ahead; when it is a fetch's, the fetch
    // fails and the source goes on with the connection it has. Each round has its own origin
    // and scheme: which connection wins varies.
    for round in 0..4 {
        let origin = Origin::start(OriginConfig {
            size: SIZE,
            seed: 5,
            misbehaviour: Misbehaviour {
                one_session: true,
                ..Misbehaviour::default()
            },
            ..OriginConfig::default()
        })
        .await
        .expect("origin");
        let dir = tempfile::tempdir().expect("dir");
        let known_hosts = dir.path().join("known_hosts");
        std::fs::write(&known_hosts, format!("{}\n", origin.known_hosts_line())).expect("kh");
        let scheme = Arc::new(SftpScheme::new(SftpOptions {
            host_keys: HostKeyPolicy {
                known_hosts: Some(known_hosts),
                accept_new: false,
            },
            ..SftpOptions::default()
        }));
        let url = origin.url_with_password("/data.bin");
        let input = SourceInput::new(Endpoint::parse(&url).expect("url"), scheme);
        let engine = Engine::new(EngineOptions::default());
        let bytes = download(&engine, vec![input], Duration::from_secs(60))
            .await
            .bytes;
        assert!(
            bytes == origin.content(0, SIZE),
            "round {round}: not byte-exact"
        );
        assert!(
            origin.connections_accepted() >= 2,
            "round {round}: a session was opened ahead"
        );
    }
}
