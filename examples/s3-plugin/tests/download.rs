//! The `hydra-s3` binary (hydra's command line plus this crate's scheme, no fork) downloads
//! one object from an S3 bucket and an HTTP mirror at once, byte-exact.

mod support;

use std::path::PathBuf;
use std::process::Command;

use hydra_scheme::ByteRange;
use hydra_scheme_http::origin::{Misbehaviour, Origin, OriginConfig, Trickle};
use sha2::{Digest, Sha256};

const SIZE: u64 = 4 << 20;

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("hydra-s3-download-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_from_an_s3_bucket_and_an_http_mirror_is_byte_exact_and_both_deliver() {
    let moto = match support::Moto::start() {
        Ok(m) => m,
        Err(why) if std::env::var_os("HYDRA_S3_REQUIRE_MOTO").is_none() => {
            eprintln!("skipped: moto is not available: {why}");
            return;
        }
        Err(why) => panic!("moto is required (HYDRA_S3_REQUIRE_MOTO) and {why}"),
    };
    // The HTTP mirror trickles after its first 256 KiB, so the S3 source must carry most of
    // the object: both sources deliver.
    let http = Origin::start(OriginConfig {
        size: SIZE,
        seed: 7,
        misbehaviour: Misbehaviour {
            trickle: Some(Trickle {
                after: 256 << 10,
                rate: 512 << 10,
            }),
            ..Misbehaviour::default()
        },
    })
    .await
    .unwrap();
    let bytes = http.content(ByteRange::new(0, SIZE));
    moto.put("release.iso", &bytes).unwrap();

    let dir = scratch();
    let out = dir.join("release.iso");
    let summary = dir.join("summary.json");
    let run = Command::new(env!("CARGO_BIN_EXE_hydra-s3"))
        .args(["get", "--quiet", "-o"])
        .arg(&out)
        .arg("--summary-json")
        .arg(&summary)
        .arg(format!("s3://{}/release.iso", support::BUCKET))
        .arg(format!("http://{}/object", http.addr()))
        .env("AWS_ENDPOINT_URL", moto.endpoint().as_str())
        .env("AWS_ACCESS_KEY_ID", "AKIDHYDRATEST")
        .env("AWS_SECRET_ACCESS_KEY", "hydra-test-secret")
        .env("AWS_REGION", support::REGION)
        .env("HYDRA_STATE_DIR", &dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "hydra-s3 failed: {stderr}");
    assert!(!stderr.contains("hydra-test-secret"), "{stderr}");

    let got = std::fs::read(&out).unwrap();
    assert_eq!(
        Sha256::digest(&got)[..],
        Sha256::digest(&bytes)[..],
        "the file is not the object"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let delivered: Vec<(String, u64)> = doc["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["url"].as_str().unwrap().to_owned(),
                s["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(
        delivered.iter().all(|(_, b)| *b > 0) && delivered.len() == 2,
        "both sources deliver: {delivered:?}, dropped: {}",
        doc["dropped"]
    );
    assert!(
        delivered
            .iter()
            .all(|(u, _)| !u.contains("X-Amz-Signature")),
        "the summary names the s3:// URL: {delivered:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
