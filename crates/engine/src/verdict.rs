//! The look-back verdict: what became of each node in the cycle that just
//! ended, read once from its activation record.
//!
//! At the start of cycle k the driver judges cycle k-1 for every node that
//! was active in it: finished, late with its inputs ready (it ran short, or
//! woke late), late still waiting for its inputs, or corrupt (an impossible
//! status word). Whether its inputs were ready, and when, comes from its
//! upstream nodes' records (each released k-1, and when), which the node
//! cannot misreport. The stamps and the CPU time (valid only for a finished
//! node, via `ActivationRecord::cpu_of(cycle)`) are copied here, never
//! followed. Every
//! consumer reads the verdicts and not the records: the reservation
//! controllers (xrun bumps, CPU samples), the profile ring rows, the xrun
//! events and the DSP load.
//!
//! Runs on the driver thread (real-time).

use resound_shm::cycle::{readiness, Readiness};
use resound_shm::profile::{node_flags, NodeData};
use resound_shm::sync::Ordering;
use resound_shm::{client_state, ActivationRecord, NodeStatus, Table, View};

/// What became of a node in the judged cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It finished the cycle.
    Finished,
    /// Late: its inputs were ready (every upstream node released the
    /// cycle) but it did not finish, so it ran short itself or woke late.
    Woken,
    /// Late: still waiting for its inputs (late because of its upstream).
    Waiting,
    /// Its record holds an impossible status word.
    Corrupt(u32),
}

/// One node's verdict on one cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Node slot.
    pub slot: u32,
    /// Client uuid (from the cycle's graph table).
    pub uuid: u64,
    /// The judged cycle.
    pub cycle: u64,
    /// What became of it.
    pub outcome: Outcome,
    /// Its inputs were ready for this cycle (every upstream node released it).
    pub signalled: bool,
    /// Its thread woke for this cycle (finished, or signalled and running).
    pub awake: bool,
    /// When its inputs were ready (ns; the latest release of its upstream
    /// nodes), 0 unless `signalled`.
    pub signal_ns: u64,
    /// When it woke (ns), 0 unless `awake`.
    pub awake_ns: u64,
    /// When it finished (ns), 0 unless finished.
    pub finish_ns: u64,
    /// CPU time it used in the cycle (ns); only for a finished node whose
    /// figure is already stored for this cycle.
    pub cpu_ns: Option<u64>,
    /// The last cycle it finished, whichever that was (its record's
    /// `finished_cycle`): a late node that finished nothing since its last
    /// xrun made no progress at all (stopped, hung), which more budget
    /// would not cure.
    pub last_finished: u64,
}

impl Verdict {
    /// Judges the node in `slot` on `cycle` from its record, `inputs` being
    /// when its inputs were ready (None: they were not). Real-time safe.
    pub fn judge(
        r: &ActivationRecord,
        slot: u32,
        uuid: u64,
        cycle: u64,
        inputs: Option<u64>,
    ) -> Verdict {
        let status = r.status.load(Ordering::Relaxed);
        let last_finished = r.finished_cycle.load(Ordering::Acquire);
        let finished = last_finished == cycle;
        let signalled = finished || inputs.is_some();
        let outcome = match NodeStatus::from_raw(status) {
            None => Outcome::Corrupt(status),
            Some(_) if finished => Outcome::Finished,
            Some(_) if signalled => Outcome::Woken,
            Some(_) => Outcome::Waiting,
        };
        let ran = r.cycle.load(Ordering::Relaxed) == cycle;
        let awake = finished || (ran && status == NodeStatus::Running as u32);
        let stamp = |valid: bool, a: &resound_shm::sync::AtomicU64| {
            if valid {
                a.load(Ordering::Relaxed)
            } else {
                0
            }
        };
        Verdict {
            slot,
            uuid,
            cycle,
            outcome,
            signalled,
            awake,
            signal_ns: inputs.unwrap_or_else(|| stamp(finished, &r.signal_ns)),
            awake_ns: stamp(awake, &r.awake_ns),
            finish_ns: stamp(finished, &r.finish_ns),
            cpu_ns: if finished { r.cpu_of(cycle) } else { None },
            last_finished,
        }
    }

    /// Sync mode: the driver gave up waiting for the graph of this
    /// verdict's cycle and took its playback at `cut_ns` (the clock's
    /// time). A node that finished at or after the cut was judged finished
    /// (the look-back comes later) but missed the playback: it was late,
    /// woken in time and short itself, or, when its inputs came only at or
    /// after the cut, waiting on a late upstream node. Real-time safe.
    pub fn missed_playback(&mut self, cut_ns: u64) {
        if self.outcome == Outcome::Finished && self.finish_ns >= cut_ns {
            self.outcome = if self.signal_ns >= cut_ns {
                Outcome::Waiting
            } else {
                Outcome::Woken
            };
        }
    }

    /// Late (an xrun of this node). Real-time safe.
    pub fn late(&self) -> bool {
        matches!(self.outcome, Outcome::Woken | Outcome::Waiting)
    }

    /// Finished its cycle. Real-time safe.
    pub fn finished(&self) -> bool {
        self.outcome == Outcome::Finished
    }

    /// Its profile row, with the slot's scheduling kind (`reserve::kind`),
    /// budget and prediction (ns). Real-time safe.
    pub fn profile_row(&self, kind: u32, budget_ns: u64, predicted_ns: u64) -> NodeData {
        let mut flags = if self.late() { node_flags::LATE } else { 0 };
        for (on, bit) in [
            (self.signalled, node_flags::SIGNALLED),
            (self.awake, node_flags::AWAKE),
            (self.finished(), node_flags::FINISHED),
        ] {
            if on {
                flags |= bit;
            }
        }
        flags |= (kind & 3) << node_flags::KIND_SHIFT;
        NodeData {
            uuid: self.uuid,
            slot: self.slot,
            flags,
            signal_ns: self.signal_ns,
            awake_ns: self.awake_ns,
            finish_ns: self.finish_ns,
            cpu_ns: self.cpu_ns.unwrap_or(0),
            budget_ns,
            predicted_ns,
        }
    }
}

/// When the inputs of `slot` were ready for `cycle`: the latest release
/// time of its upstream nodes in `table`, if every one of them released it
/// (the rule a process thread waits on, [`readiness`]; an upstream node
/// whose segment is not mapped counts as released at no particular time).
/// Real-time safe.
pub fn inputs_ready(view: &View, table: &Table<'_>, slot: u32, cycle: u64) -> Option<u64> {
    match readiness(view, table, slot, cycle as u32) {
        Readiness::Ready { signal_ns } => Some(signal_ns),
        Readiness::Behind(..) | Readiness::Ahead => None,
    }
}

/// Judges every client active in `table` on `cycle`, into `out` (cleared;
/// never grows past its capacity). Real-time safe.
pub fn judge_all(view: &View, table: Table<'_>, cycle: u64, out: &mut Vec<Verdict>) {
    out.clear();
    for slot in 1..table.client_hw() {
        if table.client_state(slot) != client_state::ACTIVE || out.len() == out.capacity() {
            continue;
        }
        if let Some(r) = view.record(slot) {
            let inputs = inputs_ready(view, &table, slot, cycle);
            out.push(Verdict::judge(
                r,
                slot,
                table.client_uuid(slot),
                cycle,
                inputs,
            ));
        }
    }
}
