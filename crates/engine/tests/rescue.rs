//! The throttle rescue: a client thread held by its reservation's throttle
//! (woken, late, runnable, not running for a whole cycle) runs SCHED_FIFO
//! until its 0-lag time has passed (at most the configured hold), then
//! under its reservation again. Fake `sched_setattr` and
//! procfs, simulated clock.

mod common;

use common::{Play, Rig, Setup, PERIOD_NS};
use resound_engine::reserve::{
    debt_hold_cycles, Applier, DriverEntity, EntityReader, HeldEntity, ThreadReader,
};
use resound_engine::{kind, Command, RtEvent};
use resound_sched::thread_run::{DeadlineEntity, ThreadRun};
use resound_sched::Policy;
use resound_shm::sync::Ordering;
use std::cell::{Cell, RefCell};

/// Client "a"'s fake thread id.
const TID: i32 = 1001;

thread_local! {
    /// Policies the fake `sched_setattr` applied to [`TID`], on this test's
    /// thread (the engine steps on it).
    static APPLIED: RefCell<Vec<Policy>> = const { RefCell::new(Vec::new()) };
    /// What the fake procfs shows for [`TID`]: runnable, and CPU time that
    /// moves by the second field at each read.
    static SHOWN: Cell<(bool, u64)> = const { Cell::new((true, 0)) };
    static CPU_NS: Cell<u64> = const { Cell::new(0) };
    /// The kernel's deadlines the fake `/proc/TID/sched` shows: "a"'s, and
    /// every other thread's (the driver's).
    static DEADLINES: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

fn entities(tid: i32) -> Option<DeadlineEntity> {
    let (held, driver) = DEADLINES.with(Cell::get);
    let deadline_ns = if tid == TID { held } else { driver };
    Some(DeadlineEntity {
        runtime_ns: 0,
        deadline_ns,
    })
}

fn recording(tid: i32, p: &Policy) -> Result<(), i32> {
    if tid == TID {
        APPLIED.with(|v| v.borrow_mut().push(*p));
    }
    Ok(())
}

fn shown(tid: i32) -> Option<ThreadRun> {
    if tid != TID {
        return None;
    }
    let (runnable, step) = SHOWN.with(Cell::get);
    let cpu_ns = CPU_NS.with(|c| {
        c.set(c.get() + step);
        c.get()
    });
    Some(ThreadRun { runnable, cpu_ns })
}

/// What procfs shows for "a" from now on.
fn show(runnable: bool, cpu_step_ns: u64) {
    SHOWN.with(|s| s.set((runnable, cpu_step_ns)));
}

/// Policies applied to "a" since the last look.
fn applied() -> Vec<Policy> {
    APPLIED.with(|v| v.borrow_mut().drain(..).collect())
}

/// Chain "a" -> "b" under reservations, "a"'s thread attached, with the
/// given seams and hold; 30 cycles run, so that budgets are settled.
fn chain_rig(applier: Applier, reader: ThreadReader, hold: u32) -> (Rig, u32) {
    chain_rig_reading(applier, reader, common::no_entity, hold)
}

/// [`chain_rig`] with a reader of the kernel's deadline entities.
fn chain_rig_reading(
    applier: Applier,
    reader: ThreadReader,
    entity_reader: EntityReader,
    hold: u32,
) -> (Rig, u32) {
    let mut rig = Rig::new(Setup {
        chain: vec!["a", "b"],
        mode: common::deadline_mode(),
        applier,
        thread_reader: reader,
        entity_reader,
        rescue_cycles: hold,
        ..Default::default()
    });
    let a = rig.slot("a");
    rig.commands
        .push(Command::Attach { slot: a, tid: TID })
        .expect("command ring");
    rig.run(30);
    applied();
    rig.drain();
    (rig, a)
}

fn kind_of(rig: &Rig, slot: u32) -> u32 {
    rig.shared.res[slot as usize].kind.load(Ordering::Relaxed)
}

fn rescues(rig: &Rig, slot: u32) -> u64 {
    rig.shared.res[slot as usize]
        .rescues
        .load(Ordering::Relaxed)
}

fn ledger_ppm(rig: &Rig) -> u64 {
    rig.shared.ledger_ppm.load(Ordering::Relaxed)
}

#[test]
fn a_held_thread_runs_fifo_for_the_hold_then_under_its_reservation_again() {
    show(true, 0);
    let (mut rig, a) = chain_rig(recording, shown, 20);
    let ledger = ledger_ppm(&rig);
    rig.play("a", Play::Stuck);
    // Judged late at the next cycle (bumped, first look), then late again
    // without progress: the second look finds it runnable and idle.
    rig.run(3);
    let fifo = applied();
    assert!(
        fifo.contains(&Policy::Fifo { priority: 9 }),
        "rescued onto SCHED_FIFO one below the driver's fallback: {fifo:?}"
    );
    assert_eq!(kind_of(&rig, a), kind::FIFO);
    assert_eq!(rescues(&rig, a), 1);
    assert!(
        ledger_ppm(&rig) >= ledger,
        "its bandwidth stays booked (and its bump with it): {} < {ledger}",
        ledger_ppm(&rig)
    );
    assert!(rig
        .drain()
        .iter()
        .any(|e| matches!(e, RtEvent::Rescued { slot, tid: TID, hold_cycles: 20 } if *slot == a)));
    // It finishes again; during the hold nothing else is applied to it,
    // even as its controller moves.
    rig.play("a", Play::OnTime);
    rig.run(15);
    assert_eq!(applied(), Vec::new(), "no sched_setattr during the hold");
    rig.run(5);
    let back = applied();
    assert!(
        matches!(back.as_slice(), [Policy::Deadline { .. }]),
        "its reservation again when the hold ends: {back:?}"
    );
    assert_eq!(kind_of(&rig, a), kind::DEADLINE);
    assert!(rig
        .drain()
        .iter()
        .any(|e| matches!(e, RtEvent::RescueEnded { slot } if *slot == a)));
}

#[test]
fn a_late_thread_that_sleeps_or_works_is_not_rescued() {
    for (runnable, step, what) in [
        (false, 0, "asleep or stopped"),
        (true, 10_000_000, "using CPU time"),
    ] {
        show(runnable, step);
        let (mut rig, a) = chain_rig(recording, shown, 20);
        rig.play("a", Play::Stuck);
        rig.run(10);
        let calls = applied();
        assert!(
            !calls.iter().any(|p| matches!(p, Policy::Fifo { .. })),
            "{what}: {calls:?}"
        );
        assert_eq!(kind_of(&rig, a), kind::DEADLINE, "{what}");
        assert_eq!(rescues(&rig, a), 0, "{what}");
    }
}

#[test]
fn no_rescue_when_turned_off_and_at_most_one_per_cooldown() {
    show(true, 0);
    let (mut rig, a) = chain_rig(recording, shown, 0);
    rig.play("a", Play::Stuck);
    rig.run(10);
    assert_eq!(rescues(&rig, a), 0, "--throttle-rescue 0");
    assert_eq!(kind_of(&rig, a), kind::DEADLINE);

    let hold = 5;
    let (mut rig, a) = chain_rig(recording, shown, hold);
    rig.play("a", Play::Stuck);
    rig.run(3);
    assert_eq!(rescues(&rig, a), 1);
    // Held again and again: no new rescue until the cooldown has passed.
    let cooldown = resound_engine::reserve::COOLDOWN_HOLDS as usize * hold as usize;
    for _ in 0..3 {
        rig.play("a", Play::OnTime);
        rig.run(1);
        rig.play("a", Play::Stuck);
        rig.run(hold as usize + 3);
    }
    assert_eq!(rescues(&rig, a), 1, "within the cooldown");
    rig.play("a", Play::OnTime);
    rig.run(cooldown);
    rig.play("a", Play::Stuck);
    rig.run(3);
    assert_eq!(rescues(&rig, a), 2, "after the cooldown");
}

#[test]
fn a_thread_leaving_during_the_hold_gives_its_bandwidth_back() {
    show(true, 0);
    let (mut rig, a) = chain_rig(recording, shown, 50);
    let before = ledger_ppm(&rig);
    rig.play("a", Play::Stuck);
    rig.run(3);
    assert_eq!(kind_of(&rig, a), kind::FIFO);
    applied();
    rig.commands
        .push(Command::Detach { slot: a })
        .expect("command ring");
    rig.run(60);
    assert!(
        ledger_ppm(&rig) < before,
        "its entry let go ({} of {before} ppm left)",
        ledger_ppm(&rig)
    );
    assert_eq!(kind_of(&rig, a), kind::NONE);
    assert!(
        !applied()
            .iter()
            .any(|p| matches!(p, Policy::Deadline { .. })),
        "no reservation for a thread that left"
    );
}

/// Accepts every policy but a change of "a"'s reservation after the first,
/// as a kernel with no bandwidth left does (EBUSY); records the rest.
fn refusing_raises(tid: i32, p: &Policy) -> Result<(), i32> {
    thread_local! {
        static GRANTED: Cell<bool> = const { Cell::new(false) };
    }
    if tid == TID && matches!(p, Policy::Deadline { .. }) && GRANTED.with(|g| g.replace(true)) {
        return Err(libc::EBUSY);
    }
    recording(tid, p)
}

/// A thread whose raise was just refused is short of budget, not held for
/// a debt: on SCHED_FIFO it would run below every reserved thread of a
/// full machine, so it is left alone.
#[test]
fn a_thread_whose_raise_was_refused_is_not_rescued() {
    show(true, 0);
    let (mut rig, a) = chain_rig(refusing_raises, shown, 20);
    rig.play("a", Play::Stuck);
    rig.run(10);
    assert!(
        rig.drain()
            .iter()
            .any(|e| matches!(e, RtEvent::Refused { slot, .. } if *slot == a)),
        "its bump was refused"
    );
    assert_eq!(rescues(&rig, a), 0);
    assert_eq!(kind_of(&rig, a), kind::DEADLINE);
}

/// Chain "a" -> "b" with a hold of at most 40 cycles, "a" held (runnable,
/// idle) and stuck, its kernel deadline `after_ns` after the driver's
/// wake-up (run-queue time 10^12, its deadline that plus its relative
/// deadline, as the kernel shows a driver that starts a period at each
/// wake-up).
fn stuck_with_deadline_after_wake(after_ns: u64) -> (Rig, u32) {
    show(true, 0);
    let (rig, a) = chain_rig_reading(recording, shown, entities, 40);
    let driver_relative = rig.shared.res[0].deadline_ns.load(Ordering::Relaxed);
    assert!(driver_relative > 0, "the driver is reserved");
    let woke = 1_000_000_000_000;
    DEADLINES.with(|d| d.set((woke + after_ns, woke + driver_relative)));
    rig.play("a", Play::Stuck);
    (rig, a)
}

/// The hold lasts until the kernel's deadline for the held thread has
/// passed: read against the driver's own deadline, which is its wake-up
/// plus its relative deadline.
#[test]
fn a_held_thread_is_held_until_the_kernels_deadline_for_it_has_passed() {
    // 7.5 periods after the driver's wake-up: 8 cycles until it has
    // passed, and one more.
    let (mut rig, a) = stuck_with_deadline_after_wake(7 * PERIOD_NS + PERIOD_NS / 2);
    rig.run(3);
    assert!(rig
        .drain()
        .iter()
        .any(|e| matches!(e, RtEvent::Rescued { slot, hold_cycles: 9, .. } if *slot == a)));
    assert!(applied().contains(&Policy::Fifo { priority: 9 }));
    rig.play("a", Play::OnTime);
    rig.run(8);
    assert_eq!(applied(), Vec::new(), "held for 9 cycles");
    rig.run(1);
    let back = applied();
    assert!(
        matches!(back.as_slice(), [Policy::Deadline { .. }]),
        "its reservation again once the deadline has passed: {back:?}"
    );
    assert_eq!(kind_of(&rig, a), kind::DEADLINE);
}

/// A held thread whose deadline passes within the cycle is about to be let
/// go by the kernel: it stays under its reservation.
#[test]
fn a_held_thread_the_kernel_lets_go_within_the_cycle_is_not_rescued() {
    let (mut rig, a) = stuck_with_deadline_after_wake(PERIOD_NS / 2);
    rig.run(10);
    assert_eq!(rescues(&rig, a), 0);
    assert_eq!(kind_of(&rig, a), kind::DEADLINE);
    assert!(!applied().iter().any(|p| matches!(p, Policy::Fifo { .. })));
}

#[test]
fn the_hold_runs_to_the_zero_lag_time_in_cycles_and_is_bounded() {
    let (p, woke, rel) = (PERIOD_NS, 5_000_000_000_000, 3_000_000);
    let held = |deadline_ns, runtime_ns| {
        Some(HeldEntity {
            entity: DeadlineEntity {
                runtime_ns,
                deadline_ns,
            },
            budget_ns: p / 10,
            period_ns: p,
        })
    };
    let driver = |since_wake_ns| {
        Some(DriverEntity {
            entity: DeadlineEntity {
                runtime_ns: 1,
                deadline_ns: woke + rel,
            },
            deadline_ns: rel,
            since_wake_ns,
        })
    };
    // Its deadline 2.5 periods after the driver woke, 1 period since:
    // 2 cycles, and one more.
    assert_eq!(
        debt_hold_cycles(held(woke + 5 * p / 2, 0), driver(p), p, 100),
        Some(3)
    );
    // Owing a tenth of a period at a 10 % budget: a period later.
    let owing = -((p / 10) as i64);
    assert_eq!(
        debt_hold_cycles(held(woke + 5 * p / 2, owing), driver(p), p, 100),
        Some(4)
    );
    // A deadline passed already, or within the next period: no rescue.
    assert_eq!(debt_hold_cycles(held(woke, 0), driver(0), p, 100), None);
    assert_eq!(debt_hold_cycles(held(woke + p, 0), driver(0), p, 100), None);
    // Far ahead: the configured longest.
    assert_eq!(
        debt_hold_cycles(held(woke + 1000 * p, 0), driver(0), p, 100),
        Some(100)
    );
    // Unknown entities, period or budget: the longest.
    assert_eq!(debt_hold_cycles(None, driver(0), p, 100), Some(100));
    assert_eq!(debt_hold_cycles(held(woke, 0), None, p, 100), Some(100));
    assert_eq!(
        debt_hold_cycles(held(woke + p, 0), driver(0), 0, 100),
        Some(100)
    );
    let no_budget = held(woke, -1).map(|h| HeldEntity { budget_ns: 0, ..h });
    assert_eq!(debt_hold_cycles(no_budget, driver(0), p, 100), Some(100));
}
