//! Defaults set once: the config file, `HYDRA_*` and the command line, in that order of
//! strength; `--print-config` says where each value came from; a bad file stops hydra.

mod common;

use common::*;
use std::path::Path;
use std::process::Output;

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// hydra with `XDG_CONFIG_HOME` at `home` and the given `HYDRA_*` variables (every other
/// `HYDRA_*` option variable removed).
async fn with_env(a: &[&str], home: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = hydra_cmd(&args(a));
    for (k, _) in std::env::vars() {
        if k.starts_with("HYDRA_") && k != "HYDRA_STATE_DIR" && k != "HYDRA_TEST_BIN" {
            c.env_remove(k);
        }
    }
    c.env("XDG_CONFIG_HOME", home);
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::time::timeout(BOUND, c.output())
        .await
        .expect("bounded")
        .unwrap()
}

fn line(o: &Output, key: &str) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_default()
        .to_owned()
}

fn write_config(home: &Path, text: &str) -> std::path::PathBuf {
    let p = home.join("hydra").join("config.toml");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let home = tempfile::tempdir().unwrap();
    let file = write_config(
        home.path(),
        "# mine\nper-host = 8\nretries = 9\ntimeout = 12\n",
    );
    let f = path(&file);
    let o = with_env(
        &["get", "--print-config", "--per-host", "2"],
        home.path(),
        &[("HYDRA_PER_HOST", "3"), ("HYDRA_RETRIES", "7")],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(line(&o, "per-host"), "per-host = 2  # command line");
    assert_eq!(line(&o, "retries"), "retries = 7  # env HYDRA_RETRIES");
    assert_eq!(line(&o, "timeout"), format!("timeout = 12  # config {f}:4"));
    assert_eq!(
        line(&o, "max-connections"),
        "max-connections = 16  # default"
    );

    let none = with_env(&["get", "--print-config", "--no-config"], home.path(), &[]).await;
    assert_eq!(line(&none, "timeout"), "timeout = (none)  # default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_config_shows_no_proxy_password_and_no_header_value() {
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        "proxy = \"socks5h://me:s3cret@127.0.0.1:1080\"\nheader = [\"X-Token: t0ken\"]\n",
    );
    let o = with_env(&["get", "--print-config"], home.path(), &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(line(&o, "proxy").contains("127.0.0.1:1080"), "{out}");
    assert!(line(&o, "header").contains("X-Token"), "{out}");
    assert!(!out.contains("s3cret") && !out.contains("t0ken"), "{out}");
}

/// `text` as the config file: hydra exits 2 with one line holding each of `want`, before
/// any connection (the source's port is closed: a download would exit 3).
async fn refused(text: &str, want: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let file = write_config(home.path(), text);
    let url = format!("http://127.0.0.1:{}/f.bin", closed_port().await);
    let out = home.path().join("f.bin");
    let o = with_env(&["get", &url, "-o", &path(&out)], home.path(), &[]).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&path(&file)), "{err}");
    for w in want {
        assert!(err.contains(w), "{w}: {err}");
    }
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_key_is_refused_naming_file_line_and_key() {
    refused(
        "per-host = 2\nper-hots = 3\n",
        &[":2: per-hots: unknown key"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_value_is_refused_by_the_option_own_rule() {
    refused("\ntimeout = 0\n", &[":2: timeout:", "more than zero"]).await;
    refused("insecure = \"yes\"\n", &[":1: insecure:", "true or false"]).await;
    refused("proxy = [\"a\", \"b\"]\n", &[":1: proxy:", "one value"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_value_from_the_environment_is_refused_in_one_line_naming_the_variable() {
    let home = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/x";
    let o = with_env(&["get", url], home.path(), &[("HYDRA_PER_HOST", "abc")]).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("hydra: HYDRA_PER_HOST=\"abc\": ") && err.contains("--per-host"),
        "{err}"
    );
    // No colon: not a header; its value may be a token and is never echoed.
    let o = with_env(
        &["get", url],
        home.path(),
        &[("HYDRA_HEADER", "Authorization Bearer s3cret")],
    )
    .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("hydra: HYDRA_HEADER: "), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    let o = with_env(&["get", url, "--per-host", "x"], home.path(), &[]).await;
    assert!(
        !stderr(&o).contains("HYDRA_"),
        "the command line is named as clap names it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_toml_is_refused_in_one_line() {
    refused("per-host = \n", &[":1:"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_algorithm_from_the_file_takes_effect() {
    // B3SUMS is read as blake3 by its name; with `checksum-algo = "sha256"` in the file its
    // digest is read as sha256 and refuses the object (exit 6).
    let size = 100_000;
    let home = tempfile::tempdir().unwrap();
    let o = http_origin(size, 4).await;
    let digest = blake3::hash(&object(4, size)).to_hex().to_string();
    let sums = home.path().join("B3SUMS");
    std::fs::write(&sums, format!("{digest}  f.bin\n")).unwrap();
    let out = home.path().join("f.bin");
    let a = [
        "get",
        &o.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum-file",
        &path(&sums),
        "--no-host-memory",
    ];
    let plain = with_env(&a, home.path(), &[]).await;
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    write_config(home.path(), "checksum-algo = \"sha256\"\n");
    let set = with_env(&a, home.path(), &[]).await;
    assert_eq!(set.status.code(), Some(6), "{}", stderr(&set));
}
