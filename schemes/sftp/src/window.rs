//! [`Window`]: how many `SSH_FXP_READ`s a fetch keeps outstanding, and how many bytes.
//!
//! Two limits hold together: a count of reads, adapted to the bandwidth-delay product within
//! `[window_min, window_max]`, and a byte budget ([`SftpOptions::read_budget`]) on what the
//! fetch has asked for and not yet written — reads in flight (their replies can arrive at any
//! moment) plus replies held for reordering. The budget bounds a fetch's memory whatever the
//! window count and read size: one read is always admitted when none is outstanding, and a
//! read is never longer than the budget, so the bytes outstanding never exceed it.

use std::time::{Duration, Instant};

use crate::options::SftpOptions;

/// What a fetch has outstanding: reads in flight plus replies held for reordering.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outstanding {
    /// Reads in flight and replies held.
    pub reads: usize,
    /// Bytes asked for by the reads in flight, plus the bytes of the replies held.
    pub bytes: u64,
}

/// The window controller: estimates the bandwidth-delay product from the delivery rate and
/// the smallest read round trip seen, and steps the window (by one per reply) towards
/// `2 × BDP / read size + 2`, within `[min, max]`; and keeps the bytes outstanding within the
/// budget.
#[derive(Debug)]
pub(crate) struct Window {
    pub size: usize,
    min: usize,
    max: usize,
    budget: u64,
    since: Option<Instant>,
    delivered: u64,
    min_rtt: Option<Duration>,
}

impl Window {
    pub fn new(options: &SftpOptions) -> Self {
        let max = options.window_max.max(1);
        let min = options.window_min.clamp(1, max);
        Window {
            size: options.window_initial.clamp(min, max),
            min,
            max,
            budget: options.read_budget.max(1),
            since: None,
            delivered: 0,
            min_rtt: None,
        }
    }

    /// The longest read this window issues, given the session's largest: never above the
    /// budget.
    pub fn max_read(&self, session_max: u32) -> u32 {
        let budget = u32::try_from(self.budget).unwrap_or(u32::MAX);
        session_max.clamp(1, budget.max(1))
    }

    /// Whether a read of `len` bytes may be issued with `now` outstanding: the count is below
    /// the window and the bytes stay within the budget (or nothing is outstanding).
    pub fn admits(&self, now: Outstanding, len: u32) -> bool {
        now.reads < self.size && (now.reads == 0 || now.bytes + u64::from(len) <= self.budget)
    }

    pub fn on_reply(&mut self, bytes: usize, rtt: Duration, read_len: u32) {
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        let Some(since) = self.since else {
            // The rate is measured from the first reply on.
            self.since = Some(Instant::now());
            return;
        };
        self.delivered += bytes as u64;
        let elapsed = since.elapsed().as_secs_f64();
        let (Some(rtt), true) = (self.min_rtt, elapsed > 0.0) else {
            return;
        };
        let bdp = self.delivered as f64 / elapsed * rtt.as_secs_f64();
        let target = (2.0 * bdp / f64::from(read_len.max(1))).ceil() + 2.0;
        let target = (target.min(self.max as f64) as usize).clamp(self.min, self.max);
        if target > self.size {
            self.size += 1;
        } else if target < self.size {
            self.size -= 1;
        }
    }

    /// The bandwidth-delay product measured so far, bytes (`None` until a rate and a round
    /// trip are known). The round trip is the fastest reply seen, which includes the read's
    /// own transfer time: an over- rather than an underestimate.
    fn bdp(&self) -> Option<f64> {
        let since = self.since?;
        let rtt = self.min_rtt?;
        let elapsed = since.elapsed().as_secs_f64();
        (elapsed > 0.0 && self.delivered > 0)
            .then(|| self.delivered as f64 / elapsed * rtt.as_secs_f64())
    }

    /// The next read length after a full reply of `len` bytes. Reads double while the
    /// minimum window of them holds less than twice the bandwidth-delay product, and halve
    /// (not below `floor`) once it holds more than four times it: every byte in flight past
    /// a lowered bound is waste, and on a slow connection sixteen reads of 255 KiB are
    /// seconds of data that a shrink or a collapse would have to drain.
    pub fn next_read_len(&self, len: u32, floor: u32, max: u32) -> u32 {
        let grow = len.saturating_mul(2).min(max);
        let Some(bdp) = self.bdp() else {
            return grow;
        };
        let want = 2.0 * bdp / self.min as f64;
        if f64::from(len) < want {
            grow
        } else if f64::from(len) > 2.0 * want && len / 2 >= floor {
            len / 2
        } else {
            len
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(initial: usize, min: usize, max: usize, budget: u64) -> Window {
        Window::new(&SftpOptions {
            window_initial: initial,
            window_min: min,
            window_max: max,
            read_budget: budget,
            ..SftpOptions::default()
        })
    }

    /// Issues reads of `len` while the window admits them; returns what is outstanding.
    fn fill(w: &Window, len: u32) -> Outstanding {
        let mut now = Outstanding::default();
        while w.admits(now, len) && now.reads < 10_000 {
            now.reads += 1;
            now.bytes += u64::from(len);
        }
        now
    }

    #[test]
    fn the_default_budget_holds_the_minimum_window_of_the_largest_reads() {
        let o = SftpOptions::default();
        let w = Window::new(&o);
        assert_eq!(o.read_budget, 4 * 1024 * 1024);
        let full = fill(&w, o.max_read_size);
        assert_eq!(full.reads, o.window_min);
        assert!(full.bytes <= o.read_budget);
    }

    #[test]
    fn the_bytes_outstanding_never_exceed_the_budget_whatever_the_window_count() {
        let w = window(64, 64, 64, 4 * 1024 * 1024);
        let full = fill(&w, w.max_read(255 * 1024));
        assert_eq!(full.reads, 16, "the budget, not the count of 64, limits");
        assert!(full.bytes <= 4 * 1024 * 1024);
        let small = fill(&w, 32 * 1024);
        assert_eq!(small.reads, 64, "the count limits small reads");
    }

    #[test]
    fn a_budget_below_one_read_shortens_the_reads_and_still_admits_one() {
        let w = window(16, 16, 64, 10_000);
        let len = w.max_read(255 * 1024);
        assert_eq!(len, 10_000);
        let full = fill(&w, len);
        assert_eq!(
            full,
            Outstanding {
                reads: 1,
                bytes: 10_000
            }
        );
    }

    #[test]
    fn the_window_starts_within_its_limits() {
        assert_eq!(window(100, 4, 8, 1 << 20).size, 8);
        assert_eq!(window(1, 4, 8, 1 << 20).size, 4);
        assert_eq!(window(0, 0, 0, 0).size, 1);
        assert_eq!(window(0, 0, 0, 0).max_read(255 * 1024), 1);
    }
}
