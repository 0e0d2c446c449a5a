//! The writers of the profile ring: the driver thread appends one cycle
//! record and its node rows per cycle (real-time), the server's control
//! thread appends a name record per client that opens.

use super::{CycleData, NodeData, ProfileRing, MAX_ROWS_PER_CYCLE};
use crate::seqlock::write_numbered;
use crate::sync::{fence_release, Ordering};

impl ProfileRing {
    /// Driver thread only (single writer): appends one cycle and its node
    /// rows. Real-time safe: atomic stores into preallocated memory.
    pub fn write_cycle(&self, c: &CycleData, rows: impl ExactSizeIterator<Item = NodeData>) {
        let h = self.header();
        let n = h.cycles_written.load(Ordering::Relaxed);
        let count = (rows.len() as u32)
            .min(MAX_ROWS_PER_CYCLE)
            .min(self.layout.node_capacity);
        let first = h.nodes_written.load(Ordering::Relaxed);
        // Announce the rows before overwriting the slots they reuse.
        h.nodes_written
            .store(first + count as u64, Ordering::Relaxed);
        fence_release();
        for (i, d) in rows.take(count as usize).enumerate() {
            let r = self.node_slot(first + i as u64);
            r.uuid.store(d.uuid, Ordering::Relaxed);
            r.signal_ns.store(d.signal_ns, Ordering::Relaxed);
            r.awake_ns.store(d.awake_ns, Ordering::Relaxed);
            r.finish_ns.store(d.finish_ns, Ordering::Relaxed);
            r.cpu_ns.store(d.cpu_ns, Ordering::Relaxed);
            r.budget_ns.store(d.budget_ns, Ordering::Relaxed);
            r.predicted_ns.store(d.predicted_ns, Ordering::Relaxed);
            r.slot.store(d.slot, Ordering::Relaxed);
            r.flags.store(d.flags, Ordering::Relaxed);
        }
        let rec = self.cycle_slot(n);
        write_numbered(&rec.seq, n, || {
            rec.cycle.store(c.cycle, Ordering::Relaxed);
            rec.start_ns.store(c.start_ns, Ordering::Relaxed);
            rec.awake_ns.store(c.awake_ns, Ordering::Relaxed);
            rec.end_ns.store(c.end_ns, Ordering::Relaxed);
            rec.cpu_ns.store(c.cpu_ns, Ordering::Relaxed);
            rec.period_ns.store(c.period_ns, Ordering::Relaxed);
            rec.frames.store(c.frames, Ordering::Relaxed);
            rec.flags.store(c.flags, Ordering::Relaxed);
            rec.node_first.store(first, Ordering::Relaxed);
            rec.node_count.store(count, Ordering::Relaxed);
            rec.budget_ns.store(c.budget_ns, Ordering::Relaxed);
            rec.predicted_ns.store(c.predicted_ns, Ordering::Relaxed);
        });
        h.cycles_written.store(n + 1, Ordering::Release);
    }

    /// Driver thread: calls `f` with each span of the ring (address,
    /// bytes) that the next [`Self::write_cycle`] of `rows` rows writes, so
    /// that the driver can have them fetched into its cache ahead of the
    /// writes. Real-time safe.
    pub fn next_write_spans(&self, rows: u32, mut f: impl FnMut(*const u8, usize)) {
        let h = self.header();
        let n = h.cycles_written.load(Ordering::Relaxed);
        let first = h.nodes_written.load(Ordering::Relaxed);
        let row = std::mem::size_of::<super::records::NodeRecord>();
        let cycle = std::mem::size_of::<super::records::CycleRecord>();
        f(std::ptr::from_ref(self.cycle_slot(n)).cast(), cycle);
        let rows = rows.min(MAX_ROWS_PER_CYCLE).min(self.layout.node_capacity);
        for i in 0..u64::from(rows) {
            f(std::ptr::from_ref(self.node_slot(first + i)).cast(), row);
        }
    }

    /// Control thread only (single writer): records a client's name.
    pub fn write_name(&self, uuid: u64, slot: u32, pid: u32, name: &str) {
        let h = self.header();
        let n = h.names_written.load(Ordering::Relaxed);
        let rec = self.name_slot(n);
        write_numbered(&rec.seq, n, || {
            rec.uuid.store(uuid, Ordering::Relaxed);
            rec.slot.store(slot, Ordering::Relaxed);
            rec.pid.store(pid, Ordering::Relaxed);
            let b = name.as_bytes();
            for (w, word) in rec.name.iter().enumerate() {
                let mut bytes = [0u8; 8];
                for (j, x) in bytes.iter_mut().enumerate() {
                    let k = w * 8 + j;
                    // The last byte stays NUL: at most 63 bytes of name.
                    if k < b.len() && k < 63 {
                        *x = b[k];
                    }
                }
                word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            }
        });
        h.names_written.store(n + 1, Ordering::Release);
    }
}
