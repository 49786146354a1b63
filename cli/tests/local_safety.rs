//! `hydra get` on the user's machine: links planted on hydra's predictable file names, a
//! second hydra on the same output, an existing output, names taken from URLs, damaged
//! control files, and what the control file keeps of a URL.

mod common;

use common::*;
use hydra_scheme_http::origin::Misbehaviour;
use std::path::Path;

const SIZE: u64 = 300_000;

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// A file the test owns that a link points to; it must come out unchanged.
fn precious(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("precious");
    std::fs::write(&p, b"the user's own file").unwrap();
    p
}

fn untouched(p: &Path) -> bool {
    std::fs::read(p).unwrap() == b"the user's own file"
}

fn one_line(o: &std::process::Output) -> String {
    let err = stderr(o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_part_file_is_refused_and_its_target_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 1).await;
    let target = precious(dir.path());
    let out = dir.path().join("f.bin");
    let part = dir.path().join("f.bin.hydra-part");
    std::os::unix::fs::symlink(&target, &part).unwrap();
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = one_line(&o);
    assert!(
        err.contains(&path(&part)) && err.contains("symbolic link"),
        "{err}"
    );
    assert!(untouched(&target));
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_refuses_a_symlinked_part_file_and_leaves_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 2).await;
    let url = h.url("/f.bin");
    let out = dir.path().join("f.bin");
    // A genuine control file for the object, and the part file swapped for a link.
    let ctl = dir.path().join("f.bin.hydra-part.json");
    std::fs::write(&ctl, control(&url, &h.etag(), "null", "[[0,1000]]")).unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, vec![7u8; SIZE as usize]).unwrap();
    let part = dir.path().join("f.bin.hydra-part");
    std::os::unix::fs::symlink(&target, &part).unwrap();
    let o = hydra(&args(&["get", &url, "-o", &path(&out), "-c"])).await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&path(&part)) && err.contains("symbolic link"),
        "{err}"
    );
    assert!(std::fs::read(&target).unwrap() == vec![7u8; SIZE as usize]);
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_control_file_is_refused_and_its_target_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 3).await;
    let target = precious(dir.path());
    let out = dir.path().join("f.bin");
    let ctl = dir.path().join("f.bin.hydra-part.json");
    std::os::unix::fs::symlink(&target, &ctl).unwrap();
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = one_line(&o);
    assert!(
        err.contains(&path(&ctl)) && err.contains("symbolic link"),
        "{err}"
    );
    assert!(untouched(&target));
    assert!(std::fs::symlink_metadata(&ctl).unwrap().is_symlink());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_on_the_control_files_old_temporary_name_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 4).await;
    let target = precious(dir.path());
    let out = dir.path().join("f.bin");
    std::os::unix::fs::symlink(&target, dir.path().join("f.bin.hydra-part.json.tmp")).unwrap();
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(untouched(&target));
    assert!(std::fs::read(&out).unwrap() == object(4, SIZE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_part_and_control_files_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(4_000_000, 5).await;
    h.set(Misbehaviour {
        rate_limit: Some(400_000),
        ..Misbehaviour::default()
    });
    let out = dir.path().join("f.bin");
    kill_at(
        &args(&["get", &h.url("/f.bin"), "-o", &path(&out), "--json"]),
        0.1,
        4,
    )
    .await;
    for name in ["f.bin.hydra-part", "f.bin.hydra-part.json"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{name}: {mode:o}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_hydra_on_a_held_part_file_exits_8_and_leaves_it_alone() {
    use rustix::fs::{flock, FlockOperation};
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 6).await;
    let out = dir.path().join("f.bin");
    let part = dir.path().join("f.bin.hydra-part");
    std::fs::write(&part, b"another hydra's bytes").unwrap();
    let held = std::fs::File::open(&part).unwrap();
    flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = one_line(&o);
    assert!(err.contains("another hydra holds it"), "{err}");
    assert!(err.contains(&path(&part)), "{err}");
    assert_eq!(std::fs::read(&part).unwrap(), b"another hydra's bytes");
    assert!(!out.exists());
    drop(held);
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(0), "once released: {}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_output_is_replaced_by_default_and_kept_with_no_clobber() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 7).await;
    let out = dir.path().join("f.bin");
    std::fs::write(&out, b"older").unwrap();
    let o = hydra(&args(&[
        "get",
        &h.url("/f.bin"),
        "-o",
        &path(&out),
        "--no-clobber",
    ]))
    .await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = one_line(&o);
    assert!(
        err.contains(&path(&out)) && err.contains("--no-clobber"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"older");
    assert_eq!(h.requests_served(), 0, "refused before fetching");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read(&out).unwrap() == object(7, SIZE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_that_is_a_directory_is_refused_before_anything_is_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 7).await;
    let out = dir.path().join("d");
    std::fs::create_dir(&out).unwrap();
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = one_line(&o);
    assert!(
        err.contains(&path(&out)) && err.contains("is a directory"),
        "{err}"
    );
    assert_eq!(h.requests_served(), 0, "refused before fetching");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no part file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_on_a_complete_output_fetches_nothing_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 8).await;
    let url = h.url("/f.bin");
    let out = dir.path().join("f.bin");
    let o = hydra(&args(&["get", &url, "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&out);
    let o = hydra(&args(&["get", &url, "-o", &path(&out), "-c", "--json"])).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = events(&o);
    let done = event(&evs, "done").expect("a done event");
    assert_eq!(done["fetched"], 0, "{done}");
    assert_eq!(done["already"], SIZE, "{done}");
    assert!(std::fs::read(&out).unwrap() == object(8, SIZE));
    assert_eq!(inode(&out), before, "FILE was not replaced");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_on_an_output_of_another_size_downloads_the_object_again() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 9).await;
    let out = dir.path().join("f.bin");
    std::fs::write(&out, b"short").unwrap();
    let o = hydra(&args(&[
        "get",
        &h.url("/f.bin"),
        "-o",
        &path(&out),
        "-c",
        "--json",
    ]))
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(event(&events(&o), "done").unwrap()["fetched"], SIZE);
    assert!(std::fs::read(&out).unwrap() == object(9, SIZE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_from_the_url_that_is_hidden_or_holds_a_control_character_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 10).await;
    for (p, shown) in [
        ("/.bashrc?token=s3cret", ".bashrc"),
        ("/a%0Ab.bin", "a%0Ab.bin"),
        ("/a%2F..%2Fb", "a%2F..%2Fb"),
    ] {
        let o = hydra(&args(&["get", &h.url(p), "-O", "-P", &path(dir.path())])).await;
        assert_eq!(o.status.code(), Some(2), "{p}: {}", stderr(&o));
        let err = one_line(&o);
        assert!(err.contains(shown) && err.contains("-o FILE"), "{p}: {err}");
        assert!(!err.contains("s3cret"), "{p}: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(h.requests_served(), 0);
}

/// A control file recording `url` with the strong validator `etag`, the modification time
/// `last_modified` and the ranges `written` (both as JSON).
fn control(url: &str, etag: &str, last_modified: &str, written: &str) -> String {
    let etag = serde_json::to_string(etag).unwrap();
    format!(
        r#"{{"version":1,"size":{SIZE},"sources":[{{"url":"{url}","size":{SIZE},"ranged":true,
        "validator":{{"strong":{etag}}},"last_modified":{last_modified}}}],"written":{written}}}"#
    )
}

/// [`control`] beside a part file of the object's length.
fn plant(dir: &Path, url: &str, etag: &str, last_modified: &str, written: &str) {
    let text = control(url, etag, last_modified, written);
    std::fs::write(dir.join("f.bin.hydra-part.json"), text).unwrap();
    std::fs::write(dir.join("f.bin.hydra-part"), vec![0u8; SIZE as usize]).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_file_with_impossible_values_is_a_warning_and_a_fresh_start_never_a_panic() {
    let h = http_origin(SIZE, 11).await;
    let url = h.url("/f.bin");
    let cases = [
        ("[18446744073709551615,0]", "[[0,1000]]"),
        ("[9223372036854775808,0]", "[[0,1000]]"),
        ("null", "[[0,400000]]"),
        ("null", "[[5000,6000],[0,1000]]"),
        ("null", "[[0,1000],[500,2000]]"),
    ];
    for (lm, written) in cases {
        let dir = tempfile::tempdir().unwrap();
        plant(dir.path(), &url, &h.etag(), lm, written);
        let out = dir.path().join("f.bin");
        let o = hydra(&args(&["get", &url, "-o", &path(&out), "-c", "--json"])).await;
        assert_eq!(o.status.code(), Some(0), "{lm} {written}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        assert!(
            std::fs::read(&out).unwrap() == object(11, SIZE),
            "{lm} {written}"
        );
        let done = event(&events(&o), "done").unwrap().clone();
        assert_eq!(done["already"], 0, "{lm} {written}: a fresh start");
    }
    // A truncated file too.
    let dir = tempfile::tempdir().unwrap();
    plant(dir.path(), &url, &h.etag(), "null", "[[0,1000]]");
    let ctl = dir.path().join("f.bin.hydra-part.json");
    let text = std::fs::read(&ctl).unwrap();
    std::fs::write(&ctl, &text[..text.len() / 2]).unwrap();
    let out = dir.path().join("f.bin");
    let o = hydra(&args(&["get", &url, "-o", &path(&out), "-c"])).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("starting over"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_file_keeps_no_token_or_credentials_and_a_renewed_token_still_resumes() {
    let size = 4_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 12).await;
    h.set(Misbehaviour {
        rate_limit: Some(400_000),
        ..Misbehaviour::default()
    });
    let signed = |t: &str| {
        format!(
            "http://alice:pa55word@{}/obj.bin?X-Signature={t}&user=alice",
            h.addr()
        )
    };
    let out = dir.path().join("obj.bin");
    let ctl = dir.path().join("obj.bin.hydra-part.json");
    kill_at(
        &args(&["get", &signed("T0KEN1"), "-o", &path(&out), "--json"]),
        0.3,
        12,
    )
    .await;
    let text = std::fs::read_to_string(&ctl).unwrap();
    for secret in ["T0KEN1", "alice", "pa55word", "X-Signature"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let rec = recorded(&ctl);
    assert!(rec > 0 && rec < size, "recorded {rec}");
    h.set(Misbehaviour::default());
    let o = hydra(&args(&[
        "get",
        &signed("T0KEN2"),
        "-o",
        &path(&out),
        "-c",
        "--json",
    ]))
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(event(&events(&o), "done").unwrap()["already"], rec);
    assert!(std::fs::read(&out).unwrap() == object(12, size));
}

/// Reads the FIFO at `p` to its end: opened without waiting for a writer, then read until
/// bytes came and the writer closed, or 30 s passed.
fn drain_fifo(p: std::path::PathBuf) -> std::thread::JoinHandle<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&p)
            .unwrap();
        let (mut got, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            match f.read(&mut buf) {
                Ok(0) if !got.is_empty() => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("reading the FIFO: {e}"),
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        got
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_named_as_the_output_gets_the_object_in_order_and_stays_a_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 9).await;
    let fifo = dir.path().join("pipe");
    make_fifo(&fifo);
    let reader = drain_fifo(fifo.clone());
    let o = hydra(&args(&["get", &h.url("/f.bin"), "-o", &path(&fifo)])).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        reader.join().unwrap() == object(9, SIZE),
        "the object, in order, through the FIFO"
    );
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "still a FIFO, not replaced: {kind:?}");
    assert!(!dir.path().join("pipe.hydra-part").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_is_refused_for_an_output_that_is_not_a_regular_file() {
    // A FIFO in a scratch directory stands for /dev/null: were the refusal gone, nothing of
    // the system's would be replaced.
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, 10).await;
    let fifo = dir.path().join("sink");
    make_fifo(&fifo);
    let o = hydra(&args(&["get", "-c", &h.url("/f.bin"), "-o", &path(&fifo)])).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = one_line(&o);
    assert!(
        err.contains(&format!("{}, which is not a regular file", path(&fifo))),
        "{err}"
    );
}

fn make_fifo(p: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}
