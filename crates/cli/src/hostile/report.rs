//! What `resound hostile` counts, its progress line (stderr, every two
//! seconds) and its final tables (stdout).
//!
//! Runs on the command's main thread.

use super::messages::Kind;
use super::pages::Pages;
use std::time::Duration;

/// Segments listed one per row in the final table; the rest are summed.
const SEGMENT_ROWS: usize = 20;

/// The run's counts.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Frames sent, per [`Kind`] (in [`Kind::ALL`] order).
    pub sent: [u64; 5],
    /// Sessions opened.
    pub opened: u64,
    /// Sessions the server closed on its own (refused at the handshake,
    /// an oversized frame, or anything else it would not take).
    pub dropped: u64,
    /// Of which refused at the handshake.
    pub refused: u64,
    /// Sessions the server had not closed 5 s after an oversized frame or a
    /// wrong opening.
    pub kept_open: u64,
    /// Sessions that registered ports and activated.
    pub nodes: u64,
    /// Sessions whose requests the server had not all answered within 10 s.
    pub slow: u64,
    /// Writes the server did not take within the write timeout.
    pub stalled: u64,
    /// Writes that failed otherwise.
    pub write_errors: u64,
    /// The first of those errors.
    pub first_write_error: Option<String>,
    /// Frames received from the server.
    pub received: u64,
}

impl Tally {
    /// Frames sent in all.
    pub fn messages(&self) -> u64 {
        self.sent.iter().sum()
    }
}

/// Messages per second.
fn rate(messages: u64, elapsed: Duration) -> f64 {
    messages as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// The progress line.
pub fn progress(t: &Tally, pages: &Pages, elapsed: Duration, total: u64) {
    eprintln!(
        "hostile: {:>9}/{total} messages ({:>7.0}/s), {} sessions opened, {} dropped by the server, {} pages scribbled",
        t.messages(),
        rate(t.messages(), elapsed),
        t.opened,
        t.dropped,
        pages.pages_written
    );
}

/// The final tables: messages by kind, sessions, segments.
pub fn summary(t: &Tally, pages: &Pages, elapsed: Duration) {
    println!(
        "== sent {} messages in {:.1} s: {:.0} messages/s",
        t.messages(),
        elapsed.as_secs_f64(),
        rate(t.messages(), elapsed)
    );
    println!("   {:<24} {:>10}", "kind", "sent");
    for k in Kind::ALL {
        println!("   {:<24} {:>10}", k.label(), t.sent[k as usize]);
    }
    println!(
        "== sessions: {} opened, {} dropped by the server ({} refused at the handshake), {} with a graph node; {} frames received",
        t.opened, t.dropped, t.refused, t.nodes, t.received
    );
    if t.kept_open > 0 || t.slow > 0 || t.stalled > 0 || t.write_errors > 0 {
        println!(
            "== WARNING: {} session(s) still open 5 s after an oversized frame or a wrong opening; {} session(s) not answered within 10 s; {} write(s) not taken within 10 s; {} write(s) failed (first: {})",
            t.kept_open,
            t.slow,
            t.stalled,
            t.write_errors,
            t.first_write_error.as_deref().unwrap_or("-")
        );
    }
    segments(pages);
}

/// The segments table.
fn segments(pages: &Pages) {
    let all = pages.segments();
    let writable = all
        .iter()
        .filter(|s| s.access == super::pages::Access::Writable)
        .count();
    println!(
        "== shared memory: {} segment(s) received, {} writable, {} not; {} pages scribbled",
        all.len(),
        writable,
        all.len() - writable,
        pages.pages_written
    );
    println!(
        "   {:<32} {:>12} {:<36} {:>9} {:>9}",
        "segment", "size", "access", "received", "scribbled"
    );
    for s in all.iter().take(SEGMENT_ROWS) {
        println!(
            "   {:<32} {:>12} {:<36} {:>9} {:>9}",
            s.label,
            s.size,
            s.access.describe(),
            s.received,
            s.scribbled
        );
    }
    if all.len() > SEGMENT_ROWS {
        let rest = &all[SEGMENT_ROWS..];
        println!(
            "   ... and {} more ({} writable), scribbled {} times in all",
            rest.len(),
            rest.iter()
                .filter(|s| s.access == super::pages::Access::Writable)
                .count(),
            rest.iter().map(|s| s.scribbled).sum::<u64>()
        );
    }
}
