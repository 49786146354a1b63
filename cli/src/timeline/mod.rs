//! `--timeline FILE.svg`: every connection's fetches over time, coloured by mirror, with the
//! scheduler's decisions marked, drawn from the events `--json` prints.

pub mod model;
pub mod record;
pub mod render;

pub use model::Timeline;

use std::path::Path;
use std::time::Duration;

/// How often the engine sends progress while a timeline is recorded (the default, 500 ms,
/// is too coarse to see the first second).
pub const TICK: Duration = Duration::from_millis(20);

/// Draws `t` and writes it to `path`; the error is one line naming the file and the cause.
pub fn write(t: &Timeline, path: &Path) -> Result<(), String> {
    let shown = path.display();
    let svg = render::svg(t).map_err(|e| format!("{shown}: {e}"))?;
    std::fs::write(path, svg).map_err(|e| format!("cannot write the timeline to {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeline_that_cannot_be_written_is_one_line_naming_the_file_and_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("t.svg");
        let err = write(&Timeline::default(), &path).unwrap_err();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("No such file or directory"), "{err}");
    }

    #[test]
    fn a_written_timeline_is_the_drawing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.svg");
        write(&Timeline::default(), &path).unwrap();
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert_eq!(on_disk, render::svg(&Timeline::default()).unwrap());
    }
}
