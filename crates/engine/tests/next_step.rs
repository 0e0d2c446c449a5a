//! The rule a client's process thread follows to pick its next cycle
//! (`resound_shm::cycle::next_step`), on the chain
//! system:capture_1 -> a -> b -> c -> system:playback_1, with the done
//! words and statuses set by hand: on time, already ran, catching up on a
//! cycle it woke too late for, and the cases where catching up would read
//! data that is gone.

mod common;

use common::{Rig, Setup};
use resound_shm::cycle::{next_step, Step};
use resound_shm::sync::Ordering;
use resound_shm::{NodeStatus, View};

/// The chain, after one cycle (which switches to its published graph).
fn chain() -> Rig {
    let mut rig = Rig::new(Setup {
        chain: vec!["a", "b", "c"],
        ..Default::default()
    });
    rig.run(1);
    rig
}

/// Sets a node's done word, status and running cycle, as its thread would.
fn node(view: &View, slot: u32, done: u32, status: NodeStatus, cycle: u64) {
    let r = view.record(slot).expect("record");
    r.done.store(done, Ordering::Release);
    r.status.store(status as u32, Ordering::Release);
    r.cycle.store(cycle, Ordering::Release);
}

/// The step of `slot` when the driver started `started` and the node last ran `last`.
fn step(rig: &Rig, slot: u32, started: u32, last: Option<u32>) -> String {
    step_in(rig, slot, started, last, true)
}

/// As [`step`], saying whether the node is early enough in the cycle to catch up.
fn step_in(rig: &Rig, slot: u32, started: u32, last: Option<u32>, early: bool) -> String {
    let view = &rig.view;
    let driver = view.record(0).expect("driver record");
    driver.done.store(started, Ordering::Release);
    let table = view.table(view.current_index());
    match next_step(view, &table, slot, &driver.done, started, last, || early) {
        Step::Run { tag, .. } => format!("run {tag}"),
        Step::Sleep(word, seen) => {
            let whose = (0..8)
                .find(|&s| view.record(s).is_some_and(|r| std::ptr::eq(&r.done, word)))
                .expect("a done word");
            format!("sleep on {whose} at {seen}")
        }
    }
}

#[test]
fn a_node_runs_the_started_cycle_once_its_upstream_released_it() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&rig, c, 10, Some(9)), "run 10");
    // Not yet released: sleep on b's word.
    node(&rig.view, b, 9, NodeStatus::Running, 10);
    assert_eq!(step(&rig, c, 10, Some(9)), format!("sleep on {b} at 9"));
    // Already ran it: the next cycle, which b has not released.
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&rig, c, 10, Some(10)), format!("sleep on {b} at 10"));
}

#[test]
fn a_node_that_woke_after_the_next_cycle_began_first_runs_the_one_it_missed() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    // The driver began 11; c ran 9 and b released 10 and has not begun 11.
    for status in [NodeStatus::Finished, NodeStatus::Waiting] {
        node(&rig.view, b, 10, status, 10);
        assert_eq!(step(&rig, c, 11, Some(9)), "run 10", "b {status:?}");
    }
    // Then 11, once b releases it.
    assert_eq!(step(&rig, c, 11, Some(10)), format!("sleep on {b} at 10"));
    node(&rig.view, b, 11, NodeStatus::Finished, 11);
    assert_eq!(step(&rig, c, 11, Some(10)), "run 11");
}

#[test]
fn a_node_that_wakes_late_in_the_next_cycle_drops_the_one_it_missed() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    // Too late in cycle 11 to run 10 and 11: c waits for 11.
    assert_eq!(
        step_in(&rig, c, 11, Some(9), false),
        format!("sleep on {b} at 10")
    );
}

#[test]
fn a_node_does_not_catch_up_on_data_its_upstream_is_rewriting() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    // b released 10 but already runs 11, writing over 10's outputs: c skips
    // 10 and waits for 11.
    node(&rig.view, b, 10, NodeStatus::Running, 11);
    assert_eq!(step(&rig, c, 11, Some(9)), format!("sleep on {b} at 10"));
    // b released 11 already: 10's data is gone.
    node(&rig.view, b, 11, NodeStatus::Finished, 11);
    assert_eq!(step(&rig, c, 11, Some(9)), "run 11");
}

#[test]
fn a_node_fed_by_the_driver_never_catches_up() {
    let rig = chain();
    let a = rig.slot("a");
    // The capture buffers already hold cycle 11's input.
    assert_eq!(step(&rig, a, 11, Some(9)), "run 11");
}

#[test]
fn a_node_two_cycles_behind_runs_the_previous_cycle_when_its_upstream_releases_it() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    // c ran 8, the driver began 11, b is still on 9: nothing to run yet.
    node(&rig.view, b, 9, NodeStatus::Running, 10);
    assert_eq!(step(&rig, c, 11, Some(8)), format!("sleep on {b} at 9"));
    // b releases 10 (cycle 9's block is gone): c runs 10, not 9.
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&rig, c, 11, Some(8)), "run 10");
}

#[test]
fn a_node_never_catches_up_on_its_first_cycle() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&rig, c, 11, None), format!("sleep on {b} at 10"));
}

#[test]
fn an_upstream_ahead_of_the_driver_sends_the_node_to_the_drivers_word() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    node(&rig.view, b, 12, NodeStatus::Finished, 12);
    assert_eq!(step(&rig, c, 11, Some(10)), "sleep on 0 at 11");
}
