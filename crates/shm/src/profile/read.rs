//! The readers of the profile ring (any thread of any process holding the
//! segment): one cycle without allocating ([`ProfileRing::read_cycle`],
//! real-time safe), or batches and the name list (allocating).

use super::{CycleData, NodeData, ProfileRing, ReadError, MAX_ROWS_PER_CYCLE};
use crate::seqlock::read_numbered;
use crate::sync::{fence_acquire, Ordering};

impl ProfileRing {
    /// Reads record `n` into `rows` (no allocation: real-time safe). Returns
    /// the cycle and the number of rows copied.
    pub fn read_cycle(
        &self,
        n: u64,
        rows: &mut [NodeData],
    ) -> Result<(CycleData, usize), ReadError> {
        let rec = self.cycle_slot(n);
        let (c, first, count) = read_numbered(&rec.seq, n, || {
            let c = CycleData {
                cycle: rec.cycle.load(Ordering::Relaxed),
                start_ns: rec.start_ns.load(Ordering::Relaxed),
                awake_ns: rec.awake_ns.load(Ordering::Relaxed),
                end_ns: rec.end_ns.load(Ordering::Relaxed),
                cpu_ns: rec.cpu_ns.load(Ordering::Relaxed),
                period_ns: rec.period_ns.load(Ordering::Relaxed),
                frames: rec.frames.load(Ordering::Relaxed),
                flags: rec.flags.load(Ordering::Relaxed),
                budget_ns: rec.budget_ns.load(Ordering::Relaxed),
                predicted_ns: rec.predicted_ns.load(Ordering::Relaxed),
            };
            let first = rec.node_first.load(Ordering::Relaxed);
            (c, first, rec.node_count.load(Ordering::Relaxed))
        })?;
        let count = count.min(MAX_ROWS_PER_CYCLE).min(self.layout.node_capacity);
        if count as usize > rows.len() {
            return Err(ReadError::RowsDontFit(count));
        }
        for (i, d) in rows.iter_mut().take(count as usize).enumerate() {
            let r = self.node_slot(first.wrapping_add(i as u64));
            *d = NodeData {
                uuid: r.uuid.load(Ordering::Relaxed),
                slot: r.slot.load(Ordering::Relaxed),
                flags: r.flags.load(Ordering::Relaxed),
                signal_ns: r.signal_ns.load(Ordering::Relaxed),
                awake_ns: r.awake_ns.load(Ordering::Relaxed),
                finish_ns: r.finish_ns.load(Ordering::Relaxed),
                cpu_ns: r.cpu_ns.load(Ordering::Relaxed),
                budget_ns: r.budget_ns.load(Ordering::Relaxed),
                predicted_ns: r.predicted_ns.load(Ordering::Relaxed),
            };
        }
        fence_acquire();
        let announced = self.header().nodes_written.load(Ordering::Relaxed);
        if announced > first.saturating_add(self.layout.node_capacity as u64) {
            return Err(ReadError::Overwritten);
        }
        Ok((c, count as usize))
    }

    /// Every name record still in the ring: (uuid, slot, pid, name), oldest first.
    /// Not real-time (allocates).
    pub fn names(&self) -> Vec<(u64, u32, u32, String)> {
        let written = self.header().names_written.load(Ordering::Acquire);
        let cap = self.layout.name_capacity as u64;
        let mut out = Vec::new();
        for n in written.saturating_sub(cap)..written {
            let rec = self.name_slot(n);
            let copy = read_numbered(&rec.seq, n, || {
                let mut bytes = [0u8; 64];
                for (chunk, w) in bytes.chunks_exact_mut(8).zip(&rec.name) {
                    chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
                }
                (
                    rec.uuid.load(Ordering::Relaxed),
                    rec.slot.load(Ordering::Relaxed),
                    rec.pid.load(Ordering::Relaxed),
                    bytes,
                )
            });
            if let Ok((uuid, slot, pid, bytes)) = copy {
                out.push((uuid, slot, pid, crate::get_name(&bytes)));
            }
        }
        out
    }

    /// Reads up to the newest `max` records starting at record `from`
    /// (clamped to what the ring still holds). Returns the cycles with their
    /// rows, and how many records from `from` on were lost (overwritten
    /// before they could be read). Not real-time (allocates).
    pub fn read_from(&self, from: u64, max: usize) -> (Vec<(CycleData, Vec<NodeData>)>, u64) {
        let written = self.cycles_written();
        let cap = self.layout.cycle_capacity as u64;
        let oldest = written.saturating_sub(cap);
        let mut start = from.max(oldest).max(written.saturating_sub(max as u64));
        let mut lost = start.saturating_sub(from).min(oldest.saturating_sub(from));
        let mut out = Vec::with_capacity((written - start.min(written)) as usize);
        let mut rows = vec![NodeData::default(); MAX_ROWS_PER_CYCLE as usize];
        while start < written {
            match self.read_cycle(start, &mut rows) {
                Ok((c, k)) => out.push((c, rows[..k].to_vec())),
                Err(ReadError::NotYet) => break,
                Err(_) => lost += 1,
            }
            start += 1;
        }
        (out, lost)
    }
}
