//! The look-back verdict of one node, from its activation record and
//! whether (and when) its inputs were ready: one rule for late / woken /
//! corrupt, the stamps, and the CPU time's validity.

use resound_engine::verdict::{Outcome, Verdict};
use resound_shm::profile::node_flags;
use resound_shm::sync::Ordering;
use resound_shm::{ActivationRecord, Capacities, NodeStatus, View};

fn view() -> View {
    let caps = Capacities {
        max_clients: 4,
        max_ports: 8,
        max_connections: 8,
        max_frames: 256,
    };
    let v = View::create(caps, 48_000, 128, true, 0).expect("view");
    v.own_nodes(1..4).expect("node segments");
    v
}

/// Writes a record as a client at `status` in `cycle` would leave it.
fn set(r: &ActivationRecord, cycle: u64, status: NodeStatus, finished: bool) {
    r.cycle.store(cycle, Ordering::Relaxed);
    r.status.store(status as u32, Ordering::Relaxed);
    r.signal_ns.store(100, Ordering::Relaxed);
    r.awake_ns.store(150, Ordering::Relaxed);
    r.finish_ns.store(400, Ordering::Relaxed);
    r.finished_cycle
        .store(if finished { cycle } else { cycle - 1 }, Ordering::Relaxed);
}

#[test]
fn a_finished_node_has_every_stamp_and_its_cpu_once_stored() {
    let v = view();
    let r = v.record(1).unwrap();
    set(r, 7, NodeStatus::Finished, true);
    r.store_cpu(6, 999);
    let j = Verdict::judge(r, 1, 42, 7, Some(100));
    assert_eq!(j.outcome, Outcome::Finished);
    assert_eq!((j.signal_ns, j.awake_ns, j.finish_ns), (100, 150, 400));
    // Finished, but the CPU figure stored is the previous cycle's: unknown.
    assert_eq!(j.cpu_ns, None);
    r.store_cpu(7, 1_234);
    let j = Verdict::judge(r, 1, 42, 7, Some(100));
    assert_eq!(j.cpu_ns, Some(1_234));
    let row = j.profile_row(3, 10, 20);
    assert_eq!(
        row.flags,
        node_flags::SIGNALLED
            | node_flags::AWAKE
            | node_flags::FINISHED
            | 3 << node_flags::KIND_SHIFT
    );
    assert_eq!(
        (row.uuid, row.slot, row.cpu_ns, row.budget_ns),
        (42, 1, 1_234, 10)
    );
}

#[test]
fn late_nodes_are_woken_or_waiting_and_carry_only_valid_stamps() {
    let v = view();
    let r = v.record(2).unwrap();
    set(r, 7, NodeStatus::Running, false);
    r.store_cpu(7, 5);
    let j = Verdict::judge(r, 2, 1, 7, Some(100));
    assert_eq!(j.outcome, Outcome::Woken);
    assert!(j.late() && j.signalled && j.awake);
    assert_eq!(
        (j.signal_ns, j.awake_ns, j.finish_ns, j.cpu_ns),
        (100, 150, 0, None)
    );
    assert_eq!(
        j.profile_row(0, 0, 0).flags,
        node_flags::LATE | node_flags::SIGNALLED | node_flags::AWAKE
    );
    // Inputs ready, thread not yet awake for the cycle: woken late, not awake.
    set(r, 6, NodeStatus::Waiting, false);
    let j = Verdict::judge(r, 2, 1, 7, Some(100));
    assert_eq!(j.outcome, Outcome::Woken);
    assert!(j.signalled && !j.awake);
    // Still waiting for its inputs.
    set(r, 6, NodeStatus::Waiting, false);
    let j = Verdict::judge(r, 2, 1, 7, None);
    assert_eq!(j.outcome, Outcome::Waiting);
    assert_eq!(j.profile_row(0, 0, 0).flags, node_flags::LATE);
    assert_eq!((j.signal_ns, j.awake_ns), (0, 0));
}

#[test]
fn an_impossible_status_is_corrupt_even_if_finished() {
    let v = view();
    let r = v.record(3).unwrap();
    set(r, 7, NodeStatus::Finished, true);
    r.status.store(0xdead, Ordering::Relaxed);
    let j = Verdict::judge(r, 3, 1, 7, Some(100));
    assert_eq!(j.outcome, Outcome::Corrupt(0xdead));
    assert!(!j.late() && !j.finished());
}

/// Sync mode: the driver took the playback at a cut with the graph
/// unfinished. A node that finished before the cut made it; one that
/// finished at or after it is late: short itself if its inputs came before
/// the cut, waiting on its upstream if they came after.
#[test]
fn a_node_finishing_after_the_playback_cut_is_late() {
    let v = view();
    let r = v.record(1).unwrap();
    set(r, 7, NodeStatus::Finished, true);
    let judged = |signal_ns: u64, cut_ns: u64| {
        let mut j = Verdict::judge(r, 1, 42, 7, Some(signal_ns));
        j.missed_playback(cut_ns);
        (j.outcome, j.late())
    };
    // Finished at 400.
    assert_eq!(judged(100, 401), (Outcome::Finished, false));
    assert_eq!(judged(100, 400), (Outcome::Woken, true));
    assert_eq!(judged(100, 300), (Outcome::Woken, true));
    assert_eq!(judged(350, 300), (Outcome::Waiting, true));
    // A node already late stays as it was.
    set(r, 7, NodeStatus::Running, false);
    let mut j = Verdict::judge(r, 1, 42, 7, Some(100));
    j.missed_playback(50);
    assert_eq!(j.outcome, Outcome::Woken);
}
