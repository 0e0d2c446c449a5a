//! Cache warming at the driver's wake-up: the lines the cycle is about to
//! read and write, fetched all at once before it starts.
//!
//! After its 2.7 ms asleep, while the clients ran on both CPUs, nearly
//! every line the driver touches is out of its caches: each client's
//! activation record (the look-back) and mailbox (the transport's request
//! words), and the
//! profile ring's next slots. Read one after another, those misses cost
//! more than the work on them; fetched together first, they overlap (the
//! stage timings are in docs/architecture.md). The addresses of the
//! records and mailboxes are kept from the last look-back, in the engine's
//! own memory, so that finding them costs no miss of its own; a stale one
//! (a client that left) only fetches a useless line: a prefetch never
//! faults.
//!
//! Runs on the driver thread (real-time): the list is preallocated.

use crate::verdict::Verdict;
use resound_sched::prefetch_bytes;
use resound_shm::profile::ProfileSegment;
use resound_shm::{ActivationRecord, Mailbox, View};

/// The spans (address, bytes) to fetch at the next wake-up.
pub(crate) struct Warm {
    spans: Vec<(usize, usize)>,
}

impl Warm {
    /// Room for `max_clients` nodes' record and mailbox.
    pub(crate) fn new(max_clients: usize) -> Self {
        Warm {
            spans: Vec::with_capacity(2 * max_clients),
        }
    }

    /// Keeps the record and mailbox of every judged node. Real-time safe
    /// (never grows past its capacity).
    pub(crate) fn note(&mut self, view: &View, verdicts: &[Verdict]) {
        self.spans.clear();
        for v in verdicts {
            if self.spans.len() + 2 > self.spans.capacity() {
                break;
            }
            if let Some(r) = view.record(v.slot) {
                let bytes = std::mem::size_of::<ActivationRecord>();
                self.spans.push((std::ptr::from_ref(r) as usize, bytes));
            }
            if let Some(m) = view.mailbox(v.slot) {
                // The line of the words the transport reads every cycle.
                let bytes = std::mem::offset_of!(Mailbox, locate_pos).min(64);
                self.spans.push((std::ptr::from_ref(m) as usize, bytes));
            }
        }
    }

    /// Fetches the kept spans and the profile ring's next `rows` rows.
    /// Real-time safe.
    pub(crate) fn fetch(&self, profile: Option<&ProfileSegment>, rows: usize) {
        for &(at, bytes) in &self.spans {
            prefetch_bytes(at as *const i8, bytes);
        }
        if let Some(p) = profile {
            p.ring()
                .next_write_spans(rows as u32, |at, bytes| prefetch_bytes(at.cast(), bytes));
        }
    }

    /// The spans kept (for tests).
    #[cfg(test)]
    pub(crate) fn spans(&self) -> &[(usize, usize)] {
        &self.spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Outcome;
    use resound_shm::Capacities;

    fn verdict(slot: u32) -> Verdict {
        Verdict {
            slot,
            uuid: 0,
            cycle: 1,
            outcome: Outcome::Finished,
            signalled: true,
            awake: true,
            signal_ns: 0,
            awake_ns: 0,
            finish_ns: 0,
            cpu_ns: None,
            last_finished: 1,
        }
    }

    #[test]
    fn the_judged_nodes_records_and_mailbox_lines_are_kept_within_capacity() {
        let caps = Capacities {
            max_clients: 4,
            max_ports: 4,
            max_connections: 4,
            max_frames: 256,
        };
        let v = resound_shm::fixture::view_with_active_clients(caps, 128, 0);
        let mut w = Warm::new(1);
        w.note(&v, &[verdict(2)]);
        let rec = std::ptr::from_ref(v.record(2).unwrap()) as usize;
        let mb = std::ptr::from_ref(v.mailbox(2).unwrap()) as usize;
        assert_eq!(w.spans(), &[(rec, 128), (mb, 16)]);
        // Room for one node: of three, the first only.
        w.note(&v, &[verdict(1), verdict(2), verdict(3)]);
        assert_eq!(w.spans().len(), 2);
        w.fetch(None, 3);
    }
}
