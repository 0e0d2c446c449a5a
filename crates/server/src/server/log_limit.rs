//! Log lines a peer can cause at will (a refused connection or client, a
//! malformed message, a session dropped for a bad frame, a refused
//! internal-client load): at most one line of each kind per [`LOG_EVERY`],
//! the others counted and reported with the next line, so that a hostile
//! client sending millions of messages writes a few lines a second, never
//! one per message.
//!
//! Threads: session threads (each limit behind its own small lock).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one line of a kind per this interval.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(1);

/// One kind of line: when the last was written, how many were not since.
#[derive(Debug, Default)]
pub(super) struct LogLimit {
    last: Option<Instant>,
    skipped: u64,
}

impl LogLimit {
    /// Whether to write a line at `now`: Some(lines skipped since the last
    /// one written), or None (this one is counted instead).
    pub(super) fn allow(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            self.skipped += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.skipped))
    }
}

/// A [`LogLimit`] shared by threads.
#[derive(Debug, Default)]
pub(super) struct SharedLogLimit(Mutex<LogLimit>);

impl SharedLogLimit {
    /// [`LogLimit::allow`] now.
    pub(super) fn allow(&self) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allow(Instant::now())
    }
}

/// The limits of the lines peers can cause, one per kind.
#[derive(Debug, Default)]
pub(super) struct PeerLogs {
    /// Malformed messages (the session is kept).
    pub(super) malformed: SharedLogLimit,
    /// Sessions dropped for a frame over the limit or cut short, or whose
    /// welcome could not be sent.
    pub(super) dropped: SharedLogLimit,
    /// Clients refused at the handshake (a bad or taken name, capacity).
    pub(super) refused: SharedLogLimit,
    /// Internal-client loads refused.
    pub(super) loads: SharedLogLimit,
}

/// The end of a line that follows `skipped` unwritten ones: "" or
/// " (N more WHAT since the last line)".
pub(super) fn more(skipped: u64, what: &str) -> String {
    if skipped == 0 {
        String::new()
    } else {
        format!(" ({skipped} more {what} since the last line)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_limited_and_counted() {
        let mut l = LogLimit::default();
        let t0 = Instant::now();
        assert_eq!(l.allow(t0), Some(0));
        for i in 1..=5 {
            assert_eq!(l.allow(t0 + Duration::from_millis(100 * i)), None);
        }
        assert_eq!(l.allow(t0 + LOG_EVERY), Some(5));
        assert_eq!(l.allow(t0 + LOG_EVERY + Duration::from_millis(1)), None);
        assert_eq!(l.allow(t0 + 3 * LOG_EVERY), Some(1));
    }

    #[test]
    fn a_flood_writes_one_line_a_second() {
        let l = SharedLogLimit::default();
        let written = (0..100_000).filter(|_| l.allow().is_some()).count();
        assert!(written <= 2, "{written} lines for 100000 events");
        assert_eq!(more(0, "x"), "");
        assert_eq!(more(3, "x"), " (3 more x since the last line)");
    }
}
