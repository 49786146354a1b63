//! The output on the user's machine: which name it gets, how its part file is opened and
//! held, and how it is moved into place.
//!
//! * The name from a URL (`-O`, the default without `-o`) is refused when it holds a control
//!   character or a path separator, or starts with a dot (a hidden file such as `.bashrc`).
//! * `FILE.hydra-part` and `FILE.hydra-part.json` have predictable names, so neither is ever
//!   opened through a symbolic link: a link at either is an error naming it, and the file it
//!   points to is left untouched. The part file is created private (0600) and locked
//!   (`flock`, exclusive, non-blocking) for the whole run, so a second `hydra get` to the
//!   same FILE stops before it writes a byte.
//! * An existing FILE is replaced atomically (`rename`) once the new one is complete, as
//!   `curl -o` replaces it; with `--no-clobber` an existing FILE is never replaced. FILE
//!   gets the mode a newly created file would (0666 less the umask).
//! * `-c` when FILE is already complete (no part file, FILE of the sources' size, and the
//!   sources' probes match a leftover control file and `--checksum` when there are such)
//!   does nothing.

use super::{Done, Failure};
use crate::checksum::{digest_file, Checksum};
use crate::control::{sync_dir, Control};
use crate::exit::Exit;
use hydra_scheme::{
    engine::{Probed, Report},
    Endpoint, FileSink,
};
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the output could not be opened or moved into place (exit 8).
#[derive(Debug, thiserror::Error)]
pub(super) enum OutputError {
    /// A symbolic link where hydra keeps one of its own files.
    #[error("{}: is a symbolic link; hydra does not follow links on its own files (remove it)", .0.display())]
    Link(PathBuf),
    /// Another process holds the part file's lock.
    #[error("{}: another hydra holds it (downloading to {}); wait for it or stop it", .part.display(), .output.display())]
    Held {
        /// The part file.
        part: PathBuf,
        /// The output it is for.
        output: PathBuf,
    },
    /// `--no-clobber` and the output exists.
    #[error("{}: exists; not replaced (--no-clobber)", .0.display())]
    Exists(PathBuf),
    /// The output names a directory.
    #[error("{}: is a directory; name a file with -o FILE, or put the file in it with -P DIR", .0.display())]
    Directory(PathBuf),
    /// The part file at the path is no longer the file this run wrote.
    #[error("{}: was replaced while hydra wrote it; not moved into place", .0.display())]
    Replaced(PathBuf),
    /// The part file's file system cannot hold the rest of the object.
    #[error("{}: not enough space: the object needs {needed} more bytes, {available} are free on its file system", .path.display())]
    NoSpace {
        /// The part file.
        path: PathBuf,
        /// Bytes the object needs beyond what the part file already holds on disk.
        needed: u64,
        /// Bytes free for this user on the file system.
        available: u64,
    },
    /// A file system call failed.
    #[error("cannot {what} {}: {source}", .path.display())]
    Io {
        /// What hydra was doing.
        what: &'static str,
        /// On which file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

impl From<OutputError> for Failure {
    fn from(e: OutputError) -> Failure {
        (Exit::Disk, e.to_string())
    }
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> OutputError {
    let path = path.to_path_buf();
    move |source| {
        if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            OutputError::Link(path)
        } else {
            OutputError::Io { what, path, source }
        }
    }
}

/// The last path segment of a URL, percent-decoded, as a file name; or why it cannot be one
/// (one line, quoting the segment as the URL spells it).
pub(super) fn remote_name(e: &Endpoint) -> Result<String, String> {
    let seg = e
        .url()
        .path_segments()
        .and_then(|mut s| s.next_back())
        .unwrap_or_default();
    let name = crate::schemes::percent_decode(seg);
    let why = if name.is_empty() || name == "." || name == ".." {
        "is no file name"
    } else if name.chars().any(char::is_control) {
        "holds a control character"
    } else if name.contains(['/', '\\']) {
        "holds a path separator"
    } else if name.starts_with('.') {
        "starts with a dot (a hidden file)"
    } else {
        return Ok(name);
    };
    Err(format!(
        "the URL's last path segment \"{seg}\" {why}; give a name with -o FILE"
    ))
}

/// `--no-clobber`: refuses an existing output (a symbolic link there counts) before anything
/// is fetched.
pub(super) fn refuse_existing(output: &Path) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(output) {
        Ok(_) => Err(OutputError::Exists(output.to_path_buf())),
        Err(_) => Ok(()),
    }
}

/// Refuses an output that is a directory (or a link to one) before anything is fetched: the
/// download could never be moved into place.
pub(super) fn refuse_directory(output: &Path) -> Result<(), OutputError> {
    match std::fs::metadata(output) {
        Ok(m) if m.is_dir() => Err(OutputError::Directory(output.to_path_buf())),
        _ => Ok(()),
    }
}

/// Refuses a symbolic link at any of `paths` (hydra's own side files).
pub(super) fn refuse_links(paths: &[&Path]) -> Result<(), OutputError> {
    for p in paths {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(OutputError::Link(p.to_path_buf()));
        }
    }
    Ok(())
}

/// The part file this run writes.
#[derive(Debug)]
pub(super) struct Part {
    /// Its sink, holding the lock until dropped.
    pub(super) sink: FileSink,
    /// The previous run's bytes were kept (a resume).
    pub(super) kept: bool,
}

/// Opens the part file at `part` for an object of `size` bytes: never through a symbolic
/// link, created private, locked for as long as the returned sink lives. With `resume`, its
/// bytes are kept when it has the object's length; otherwise (or without `resume`) it is
/// emptied — only once the lock is held, so the part file of another hydra is never touched.
pub(super) fn open_part(
    part: &Path,
    output: &Path,
    size: u64,
    resume: bool,
) -> Result<Part, OutputError> {
    let existed = std::fs::symlink_metadata(part).is_ok();
    let file = FileSink::options()
        .create(true)
        .open(part)
        .map_err(io_error("open", part))?;
    lock(&file, part, output)?;
    // Locked: the file is this run's, and one it created is removed if it cannot be used.
    let kept = size_part(&file, part, size, resume).inspect_err(|_| {
        if !existed {
            let _ = std::fs::remove_file(part);
        }
    })?;
    Ok(Part {
        sink: FileSink::from_file(file, size),
        kept,
    })
}

/// Gives the locked part file `size` bytes, keeping its contents when `resume` and it
/// already has that length (returns whether it did), once its file system is known to hold
/// the rest of the object.
fn size_part(file: &File, part: &Path, size: u64, resume: bool) -> Result<bool, OutputError> {
    // A part file left by an older hydra may be readable by others; best effort, as the
    // file may belong to another user who let this one write it.
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    let meta = file.metadata().map_err(io_error("read", part))?;
    let kept = resume && meta.len() == size;
    // A kept file's blocks on disk hold part of the object already.
    let held = if kept {
        meta.blocks().saturating_mul(512)
    } else {
        0
    };
    check_space(file, part, size.saturating_sub(held))?;
    if !kept {
        file.set_len(0)
            .and_then(|()| file.set_len(size))
            .map_err(io_error("size", part))?;
    }
    Ok(kept)
}

/// Refuses a part file whose file system has fewer than `needed` bytes free, before a byte
/// is fetched: otherwise the download runs until a write fails. A file system that does not
/// report its space (an error, or no blocks at all) is not checked.
fn check_space(file: &File, part: &Path, needed: u64) -> Result<(), OutputError> {
    let Ok(fs) = rustix::fs::fstatvfs(file) else {
        return Ok(());
    };
    if fs.f_blocks == 0 {
        return Ok(());
    }
    let available = fs.f_bavail.saturating_mul(fs.f_frsize);
    if needed > available {
        return Err(OutputError::NoSpace {
            path: part.to_path_buf(),
            needed,
            available,
        });
    }
    Ok(())
}

fn lock(file: &File, part: &Path, output: &Path) -> Result<(), OutputError> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(OutputError::Held {
            part: part.to_path_buf(),
            output: output.to_path_buf(),
        }),
        Err(e) => Err(io_error("lock", part)(e.into())),
    }
}

/// Moves the finished part file (open as `file`) to `output`: only when the path still names
/// that file; with the mode a new file would get; replacing an existing output atomically,
/// or with `no_clobber` never replacing one.
pub(super) fn move_into_place(
    file: &File,
    part: &Path,
    output: &Path,
    no_clobber: bool,
) -> Result<(), OutputError> {
    let ours = file.metadata().map_err(io_error("read", part))?;
    let there = std::fs::symlink_metadata(part).map_err(io_error("read", part))?;
    if (ours.dev(), ours.ino()) != (there.dev(), there.ino()) {
        return Err(OutputError::Replaced(part.to_path_buf()));
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o666 & !umask()))
        .map_err(io_error("set the mode of", part))?;
    if no_clobber {
        link_new(part, output)?;
    } else {
        std::fs::rename(part, output).map_err(io_error("move into place", part))?;
    }
    let _ = sync_dir(output);
    Ok(())
}

/// Gives `part` the name `output` only if nothing has it (a hard link fails when the name
/// exists), then drops the name `part`. A file system without hard links falls back to a
/// check and a rename.
fn link_new(part: &Path, output: &Path) -> Result<(), OutputError> {
    match std::fs::hard_link(part, output) {
        Ok(()) => std::fs::remove_file(part).map_err(io_error("remove", part)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            Err(OutputError::Exists(output.to_path_buf()))
        }
        Err(_) => {
            refuse_existing(output)?;
            std::fs::rename(part, output).map_err(io_error("move into place", part))
        }
    }
}

/// The process's file creation mask. Reading it means setting it: the mask is set to the
/// strictest value for that instant, so a file another thread creates meanwhile is only
/// more private than asked.
fn umask() -> u32 {
    use rustix::fs::Mode;
    let old = rustix::process::umask(Mode::from_raw_mode(0o077));
    rustix::process::umask(old);
    old.as_raw_mode()
}

/// The files `-c` looks at when the download may have ended already.
pub(super) struct Finished<'a> {
    /// FILE.
    pub(super) output: &'a Path,
    /// FILE.hydra-part.
    pub(super) part: &'a Path,
    /// FILE.hydra-part.json.
    pub(super) control: &'a Path,
}

impl Finished<'_> {
    /// Whether `-c` finds nothing to do: no part file, FILE a regular file of the probed
    /// size, every source the control file (if one was left) recorded still describing that
    /// object, and FILE matching `checksum` when one is given. Validators are not kept for a
    /// finished file, so without a control file size (and the checksum) decide.
    pub(super) fn complete(&self, probed: &Probed, checksum: Option<&Checksum>) -> bool {
        if std::fs::symlink_metadata(self.part).is_ok() {
            return false;
        }
        let Ok(meta) = std::fs::symlink_metadata(self.output) else {
            return false;
        };
        if !meta.file_type().is_file() || meta.len() != probed.size {
            return false;
        }
        if let Ok(c) = Control::load(self.control) {
            let changed = probed.sources.iter().any(|s| {
                c.source(&s.input.endpoint.to_string())
                    .is_some_and(|r| !r.probe().same_object(&s.probe))
            });
            if c.size != probed.size || changed {
                return false;
            }
        }
        checksum.is_none_or(|c| digest_file(c.algo, self.output).is_ok_and(|got| got == c.hex))
    }

    /// What a `-c` that found nothing to do reports: no source used, every byte already
    /// here. A leftover control file is removed.
    pub(super) fn done(&self, probed: Probed) -> Done {
        let _ = std::fs::remove_file(self.control);
        let size = probed.size;
        Done {
            timeline: None,
            report: Report {
                size,
                elapsed: Duration::ZERO,
                requests: 0,
                repairs: 0,
                admissions: 0,
                waste_bytes: 0,
                overlap_bytes: 0,
                bytes_per_source: Vec::new(),
                limits: Vec::new(),
                learned: Vec::new(),
                failures: Vec::new(),
                joined: Vec::new(),
                dropped: Vec::new(),
                removed: Vec::new(),
                revoked_bytes: 0,
            },
            elapsed: Duration::ZERO,
            probed: Probed {
                size,
                sources: Vec::new(),
                dropped: probed.dropped,
            },
            fetched: 0,
            already: size,
            limits_seen: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(url: &str) -> Result<String, String> {
        remote_name(&Endpoint::parse(url).unwrap())
    }

    #[test]
    fn a_name_from_the_url_is_refused_with_control_characters_separators_or_a_leading_dot() {
        assert_eq!(name("http://h/d/f%20x.iso?t=1").unwrap(), "f x.iso");
        for bad in [
            "http://h/.bashrc",
            "http://h/%2Essh",
            "http://h/a%0Ab",
            "http://h/a%1Bb",
            "http://h/a%2Fb",
            "http://h/a%5Cb",
            "http://h/..",
            "http://h/",
        ] {
            let e = name(bad).unwrap_err();
            assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{bad}: {e}");
            assert!(e.contains("-o FILE"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_held_part_file_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let (part, out) = (dir.path().join("f.hydra-part"), dir.path().join("f"));
        std::fs::write(&part, b"theirs").unwrap();
        let held = open_part(&part, &out, 6, true).unwrap();
        assert!(held.kept);
        let e = open_part(&part, &out, 100, false).expect_err("refused");
        assert!(matches!(e, OutputError::Held { .. }), "{e}");
        assert_eq!(std::fs::read(&part).unwrap(), b"theirs");
        drop(held);
        let again = open_part(&part, &out, 3, false).unwrap();
        assert!(!again.kept);
        assert_eq!(std::fs::read(&part).unwrap(), [0; 3]);
        let mode = std::fs::metadata(&part).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "made private: {mode:o}");
    }

    /// More than any file system here holds: 4 EiB.
    const HUGE: u64 = 1 << 62;

    #[test]
    fn a_part_file_whose_file_system_cannot_hold_the_object_is_refused_and_not_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let (part, out) = (dir.path().join("f.hydra-part"), dir.path().join("f"));
        let e = open_part(&part, &out, HUGE, false).expect_err("refused");
        let OutputError::NoSpace { needed, .. } = e else {
            panic!("{e}");
        };
        assert_eq!(needed, HUGE);
        let line = e.to_string();
        assert!(
            line.contains("not enough space") && !line.contains('\n'),
            "{line}"
        );
        assert!(!part.exists(), "the part file this run created is removed");
    }

    #[test]
    fn a_part_file_kept_for_resume_is_left_untouched_when_the_rest_does_not_fit() {
        let dir = tempfile::tempdir().unwrap();
        let (part, out) = (dir.path().join("f.hydra-part"), dir.path().join("f"));
        std::fs::write(&part, b"earlier bytes").unwrap();
        let e = open_part(&part, &out, HUGE, true).expect_err("refused");
        assert!(matches!(e, OutputError::NoSpace { .. }), "{e}");
        assert_eq!(std::fs::read(&part).unwrap(), b"earlier bytes");
    }

    #[test]
    fn with_no_clobber_an_output_that_appeared_meanwhile_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (part, out) = (dir.path().join("f.hydra-part"), dir.path().join("f"));
        let p = open_part(&part, &out, 4, false).unwrap();
        std::fs::write(&out, b"mine").unwrap();
        let e = move_into_place(p.sink.file(), &part, &out, true).unwrap_err();
        assert!(matches!(e, OutputError::Exists(_)), "{e}");
        assert_eq!(std::fs::read(&out).unwrap(), b"mine");
        assert!(part.exists(), "the download is kept");
        move_into_place(p.sink.file(), &part, &out, false).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), [0; 4]);
        assert!(!part.exists());
    }

    #[test]
    fn a_part_file_replaced_under_hydra_is_not_moved_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let (part, out) = (dir.path().join("f.hydra-part"), dir.path().join("f"));
        let p = open_part(&part, &out, 4, false).unwrap();
        std::fs::remove_file(&part).unwrap();
        std::fs::write(&part, b"evil").unwrap();
        let e = move_into_place(p.sink.file(), &part, &out, false).unwrap_err();
        assert!(matches!(e, OutputError::Replaced(_)), "{e}");
        assert!(!out.exists());
    }
}
