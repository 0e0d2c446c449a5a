//! The rule a client's process thread follows to pick its next cycle
//! (`resound_shm::cycle::next_step`), on the chain
//! system:capture_1 -> a -> b -> c -> system:playback_1, with the done
//! words and statuses set by hand: on time, already ran, catching up on a
//! cycle it or its upstream ran too late for (however late in the next
//! cycle, and cycles behind), and the cases where catching up would read
//! data that is gone.

mod common;

use common::{Rig, Setup};
use resound_shm::cycle::{next_step, Step, MAX_CATCH_UP_CYCLES};
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
    let view = &rig.view;
    let driver = view.record(0).expect("driver record");
    driver.done.store(started, Ordering::Release);
    let table = view.table(view.current_index());
    match next_step(view, &table, slot, &driver.done, started, last) {
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
fn a_node_several_cycles_behind_runs_the_one_its_upstream_released_last() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    // A stall: c ran 8, b released 10 late and the driver is at 13 already.
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&rig, c, 13, Some(8)), "run 10");
    // Then nothing until b releases a later one.
    assert_eq!(step(&rig, c, 13, Some(10)), format!("sleep on {b} at 10"));
    node(&rig.view, b, 13, NodeStatus::Finished, 13);
    assert_eq!(step(&rig, c, 13, Some(10)), "run 13");
}

#[test]
fn catching_up_reaches_back_a_bounded_number_of_cycles_across_the_tag_wrap() {
    let rig = chain();
    let (b, c) = (rig.slot("b"), rig.slot("c"));
    // The tags wrap: c ran u32::MAX - 1, b released u32::MAX, the driver is at 1.
    node(
        &rig.view,
        b,
        u32::MAX,
        NodeStatus::Finished,
        u64::from(u32::MAX),
    );
    assert_eq!(
        step(&rig, c, 1, Some(u32::MAX - 1)),
        format!("run {}", u32::MAX)
    );
    // A cycle further back than the bound is not run (an upstream node
    // scribbling its done word cannot draw runs from far back).
    let far = 100;
    node(&rig.view, b, far, NodeStatus::Finished, u64::from(far));
    let started = far + MAX_CATCH_UP_CYCLES + 1;
    assert_eq!(
        step(&rig, c, started, Some(far - 1)),
        format!("sleep on {b} at {far}")
    );
    assert_eq!(
        step(&rig, c, started - 1, Some(far - 1)),
        format!("run {far}")
    );
}

#[test]
fn a_join_whose_inputs_hold_different_cycles_waits_for_the_late_one() {
    let mut rig = Rig::new(Setup {
        chain: vec!["a", "b", "c"],
        links: vec![("a:out", "c:in")],
        ..Default::default()
    });
    rig.run(1);
    let (a, b, c) = (rig.slot("a"), rig.slot("b"), rig.slot("c"));
    // a is on time at 11, b released only 10: no cycle both hold.
    node(&rig.view, a, 11, NodeStatus::Finished, 11);
    node(&rig.view, b, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&rig, c, 11, Some(9)), format!("sleep on {b} at 10"));
    node(&rig.view, b, 11, NodeStatus::Finished, 11);
    assert_eq!(step(&rig, c, 11, Some(9)), "run 11");
}

#[test]
fn a_late_branch_does_not_catch_up_on_a_block_its_join_can_no_longer_use() {
    // a -> b -> c -> d, and a -> d: d joins the late branch b, c with a.
    let rig = |links| {
        let mut rig = Rig::new(Setup {
            chain: vec!["a", "b", "c", "d"],
            links,
            ..Default::default()
        });
        rig.run(1);
        rig
    };
    let joined = rig(vec![("a:out", "d:in")]);
    let (a, b, c) = (joined.slot("a"), joined.slot("b"), joined.slot("c"));
    // b released 10 late; a is on time at 11, so d can never run 10: c
    // waits for 11 instead of running 10 and being late for 11 too.
    node(&joined.view, b, 10, NodeStatus::Finished, 10);
    node(&joined.view, a, 11, NodeStatus::Finished, 11);
    assert_eq!(step(&joined, c, 11, Some(9)), format!("sleep on {b} at 10"));
    // a late as well: d can still join 10, so c catches up on it.
    node(&joined.view, a, 10, NodeStatus::Finished, 10);
    assert_eq!(step(&joined, c, 11, Some(9)), "run 10");
    // Without the join, c catches up whatever a does.
    let chain = rig(Vec::new());
    let (a, b, c) = (chain.slot("a"), chain.slot("b"), chain.slot("c"));
    node(&chain.view, b, 10, NodeStatus::Finished, 10);
    node(&chain.view, a, 11, NodeStatus::Finished, 11);
    assert_eq!(step(&chain, c, 11, Some(9)), "run 10");
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
