//! The reservation controllers driven by the look-back verdicts, with a
//! fake `sched_setattr` (no privileges needed) under a simulated clock.

mod common;

use common::{Play, Rig, Setup, PERIOD_NS};
use resound_engine::reserve::Applier;
use resound_engine::{kind, Command, RtEvent};
use resound_sched::ControllerConfig;
use resound_shm::sync::Ordering;

fn deadline_rig() -> Rig {
    deadline_rig_with(ControllerConfig {
        audio_period_ns: PERIOD_NS,
        ..Default::default()
    })
}

/// Chain "a" -> "b" under reservations with `cfg`, both threads attached.
fn deadline_rig_with(cfg: ControllerConfig) -> Rig {
    rig_all_attached(Setup {
        chain: vec!["a", "b"],
        mode: common::deadline_mode_with(cfg),
        ..Default::default()
    })
}

/// A rig of `setup` with every client of its chain asking for its
/// reservation, the i-th client's thread being tid 1001 + i.
fn rig_all_attached(setup: Setup) -> Rig {
    let chain = setup.chain.clone();
    let mut rig = Rig::new(setup);
    for (tid, name) in (1001..).zip(chain) {
        let slot = rig.slot(name);
        rig.commands
            .push(Command::Attach { slot, tid })
            .expect("command ring");
    }
    rig
}

/// Client "a" alone under reservations with `applier` as `sched_setattr`,
/// its thread (tid 1001) attached; with its slot.
fn rig_attaching_a(applier: Applier) -> (Rig, u32) {
    let mut rig = Rig::new(Setup {
        mode: common::deadline_mode(),
        applier,
        ..Default::default()
    });
    let a = rig.slot("a");
    rig.commands
        .push(Command::Attach { slot: a, tid: 1001 })
        .expect("command ring");
    (rig, a)
}

fn budget(rig: &Rig, slot: u32) -> u64 {
    rig.shared.res[slot as usize]
        .budget_ns
        .load(Ordering::Relaxed)
}

#[test]
fn every_thread_gets_a_reservation_and_cpu_samples() {
    let mut rig = deadline_rig();
    rig.run(30);
    let (a, b) = (rig.slot("a"), rig.slot("b"));
    for slot in [0, a, b] {
        let s = &rig.shared.res[slot as usize];
        assert_eq!(
            s.kind.load(Ordering::Relaxed),
            kind::DEADLINE,
            "slot {slot}"
        );
        assert!(budget(&rig, slot) > 0);
    }
    // The clients' CPU figure comes from their verdicts (1 µs per cycle).
    assert_eq!(
        rig.shared.res[a as usize].used_ns.load(Ordering::Relaxed),
        1_000
    );
    let reserved: Vec<u32> = rig
        .drain()
        .into_iter()
        .filter_map(|e| match e {
            RtEvent::Reserved { slot, .. } => Some(slot),
            _ => None,
        })
        .collect();
    assert_eq!(&reserved[..3], &[0, a, b]);
    assert_eq!(rig.xruns(), 0);
}

#[test]
fn a_late_woken_client_is_bumped_a_late_waiting_one_is_not() {
    let mut rig = deadline_rig();
    rig.run(30);
    let (a, b) = (rig.slot("a"), rig.slot("b"));
    let (ba, bb) = (budget(&rig, a), budget(&rig, b));
    let updates_b = rig.shared.res[b as usize].updates.load(Ordering::Relaxed);
    rig.play("a", Play::Stuck);
    rig.run(2);
    assert_eq!(rig.xruns(), 1);
    // "a" was woken and did not finish: short of budget, bumped.
    assert!(budget(&rig, a) > ba, "{} <= {ba}", budget(&rig, a));
    // "b" still waited for "a": late because of its upstream, not bumped.
    assert_eq!(budget(&rig, b), bb);
    assert_eq!(
        rig.shared.res[b as usize].updates.load(Ordering::Relaxed),
        updates_b
    );
    for slot in [a, b] {
        assert_eq!(
            rig.shared.res[slot as usize].xruns.load(Ordering::Relaxed),
            1
        );
    }
}

/// A client stopped or hung inside its callback is late cycle after cycle
/// without finishing anything: bumped once, not at every cycle (which
/// would pile its budget up to the maximum); once it finished a cycle
/// again, its next late cycle bumps it again.
#[test]
fn a_client_late_without_progress_is_bumped_once() {
    let mut rig = deadline_rig();
    rig.run(30);
    let a = rig.slot("a");
    let updates = |rig: &Rig| rig.shared.res[a as usize].updates.load(Ordering::Relaxed);
    let (before, ba) = (updates(&rig), budget(&rig, a));
    rig.play("a", Play::Stuck);
    rig.run(21);
    assert_eq!(
        rig.shared.res[a as usize].xruns.load(Ordering::Relaxed),
        20,
        "every late cycle is still its xrun"
    );
    assert_eq!(updates(&rig), before + 1, "one bump for the whole stall");
    let once = budget(&rig, a);
    assert!(once > ba, "{once} <= {ba}");
    // It finishes a cycle, then is late again: that is a new shortfall.
    rig.play("a", Play::OnTime);
    rig.run(1);
    rig.play("a", Play::Stuck);
    rig.run(2);
    assert!(budget(&rig, a) > once, "{} <= {once}", budget(&rig, a));
}

/// Accepts every policy but refuses a change of an admitted SCHED_DEADLINE
/// thread, as the kernel does when its bandwidth is used up (EBUSY), and
/// counts the SCHED_DEADLINE calls per thread id 1001.
fn refuse_raises(tid: i32, p: &resound_sched::Policy) -> Result<(), i32> {
    use std::sync::atomic::AtomicU32;
    static CALLS_1001: AtomicU32 = AtomicU32::new(0);
    if !matches!(p, resound_sched::Policy::Deadline { .. }) || tid != 1001 {
        return Ok(());
    }
    if CALLS_1001.fetch_add(1, Ordering::Relaxed) == 0 {
        Ok(())
    } else {
        Err(libc::EBUSY)
    }
}

/// A refused raise is not asked again at every cycle: the thread keeps
/// what it has, and the next raise is asked after a pause.
#[test]
fn a_refused_raise_is_not_asked_again_every_cycle() {
    let (mut rig, a) = rig_attaching_a(refuse_raises);
    rig.run(30);
    let granted = budget(&rig, a);
    assert!(granted > 0);
    rig.drain();
    // Late after finishing the cycle before, 20 times: 20 bumps wanted.
    // Stuck through the look-back that finds it late, then on time: as
    // a real client, it finishes the cycle it was stuck in, late, before
    // the next look-back (a client stuck for one cycle only would finish
    // it before the driver judges it, and never be late).
    for _ in 0..20 {
        rig.play("a", Play::Stuck);
        rig.run(2);
        rig.play("a", Play::OnTime);
        rig.run(1);
    }
    let refused = rig
        .drain()
        .into_iter()
        .filter(|e| matches!(e, RtEvent::Refused { slot, errno, .. } if *slot == a && *errno == libc::EBUSY))
        .count();
    assert_eq!(
        refused,
        2,
        "one refusal, then one after the {} cycles' pause",
        resound_engine::reserve::REFUSED_RAISE_PAUSE
    );
    assert_eq!(budget(&rig, a), granted, "it keeps what it had");
    let s = &rig.shared.res[a as usize];
    assert_eq!(s.kind.load(Ordering::Relaxed), kind::DEADLINE);
}

/// With budget floors of 30 % (`--min-budget 30`) a ledger of one CPU
/// holds the driver and two clients: the third is refused, every floor
/// goes down to the thesis' 5 % (said once), the light clients' budgets
/// follow at the next feedback cuts, and the third gets its reservation
/// when it is retried.
#[test]
fn a_full_ledger_lowers_every_floor_and_the_refused_client_gets_in() {
    let mut rig = rig_all_attached(Setup {
        chain: vec!["a", "b", "c"],
        mode: common::deadline_mode_with(ControllerConfig {
            audio_period_ns: PERIOD_NS,
            min_pct: 30.0,
            window: 20,
            light_period_pct: 100.0,
            light_deadline_pct: 100.0,
            ..Default::default()
        }),
        ledger_cpus: 1.0,
        ..Default::default()
    });
    rig.run(5);
    let (a, c) = (rig.slot("a"), rig.slot("c"));
    let early = rig.drain();
    let refused_c =
        |e: &RtEvent| matches!(e, RtEvent::Refused { slot, errno: 0, .. } if *slot == c);
    assert!(early.iter().any(refused_c), "{early:?}");
    assert_eq!(
        early
            .iter()
            .filter(|e| matches!(e, RtEvent::FloorsLowered))
            .count(),
        1,
        "{early:?}"
    );
    assert!(
        budget(&rig, a) * 100 >= PERIOD_NS * 30,
        "a at its 30 % floor"
    );
    let kind_of = |rig: &Rig, slot: u32| rig.shared.res[slot as usize].kind.load(Ordering::Relaxed);
    assert_ne!(kind_of(&rig, c), kind::DEADLINE);
    rig.run(resound_engine::reserve::RETRY_CYCLES as usize + 10);
    let later = rig.drain();
    assert!(
        !later.iter().any(|e| matches!(e, RtEvent::FloorsLowered)),
        "said once: {later:?}"
    );
    assert!(
        budget(&rig, a) * 100 < PERIOD_NS * 30,
        "a cut below the old floor"
    );
    assert_eq!(
        kind_of(&rig, c),
        kind::DEADLINE,
        "c admitted on retry: {later:?}"
    );
}

/// At the default floor, the thesis' 5 %, a full ledger lowers nothing.
#[test]
fn at_the_default_floor_a_full_ledger_lowers_nothing() {
    let mut rig = rig_all_attached(Setup {
        chain: vec!["a", "b", "c"],
        mode: common::deadline_mode(),
        ledger_cpus: 0.3,
        ..Default::default()
    });
    rig.run(resound_engine::reserve::RETRY_CYCLES as usize + 10);
    let events = rig.drain();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RtEvent::Refused { errno: 0, .. })),
        "the ledger refused someone: {events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, RtEvent::FloorsLowered)));
}

#[test]
fn a_refusing_kernel_leaves_the_client_on_the_fallback() {
    fn refuse_deadline(_tid: i32, p: &resound_sched::Policy) -> Result<(), i32> {
        match p {
            resound_sched::Policy::Deadline { .. } => Err(libc::EPERM),
            _ => Ok(()),
        }
    }
    let (mut rig, a) = rig_attaching_a(refuse_deadline);
    rig.run(3);
    let s = &rig.shared.res[a as usize];
    assert_eq!(s.kind.load(Ordering::Relaxed), kind::FIFO);
    let ev = rig.drain();
    assert!(
        ev.contains(&RtEvent::Fallback {
            slot: a,
            fifo: true
        }),
        "{ev:?}"
    );
    assert!(ev.iter().any(|e| matches!(
        e,
        RtEvent::Refused { slot, errno, .. } if *slot == a && *errno == libc::EPERM
    )));
}

/// Each client thread sees its budget per audio cycle in the header (it
/// bounds its early wake-up spin by it): as applied, and 0 once detached
/// or on the SCHED_FIFO fallback.
#[test]
fn the_header_shows_each_slot_its_budget_per_cycle() {
    let mut rig = deadline_rig();
    rig.run(30);
    let (a, b) = (rig.slot("a"), rig.slot("b"));
    let shown = |rig: &Rig, slot: u32| u64::from(rig.view.header().cycle_budget_us(slot));
    for slot in [a, b] {
        assert!(shown(&rig, slot) > 0);
        assert_eq!(shown(&rig, slot), budget(&rig, slot) / 1000, "slot {slot}");
    }
    rig.commands.push(Command::Detach { slot: a }).unwrap();
    rig.run(2);
    assert_eq!(shown(&rig, a), 0, "detached");
    assert_eq!(
        shown(&rig, b),
        budget(&rig, b) / 1000,
        "the neighbour keeps its own"
    );
}

/// Period of each slot's reservation as published.
fn period(rig: &Rig, slot: u32) -> u64 {
    rig.shared.res[slot as usize]
        .period_ns
        .load(Ordering::Relaxed)
}

#[test]
fn a_light_client_woken_late_goes_to_the_full_period_before_its_next_wake_up() {
    let light = ControllerConfig {
        audio_period_ns: PERIOD_NS,
        light_deadline_pct: 50.0,
        ..Default::default()
    };
    let mut rig = deadline_rig_with(light);
    let (a, b) = (rig.slot("a"), rig.slot("b"));
    // 1 µs a cycle: light once the window is full.
    rig.run(250);
    let light_period = light.light_period_ns();
    assert_eq!(
        (period(&rig, a), period(&rig, b)),
        (light_period, light_period)
    );
    // "a" runs 40 % of the period once: "b" wakes that much later than
    // ever, past 7/8 of the 25 % slack. Before the next cycle wakes it, "b"
    // is on the full period; "a", which woke on time, stays light.
    rig.play("a", Play::Busy(PERIOD_NS * 4 / 10));
    rig.run(1);
    rig.play("a", Play::OnTime);
    rig.run(1);
    assert_eq!(period(&rig, b), PERIOD_NS, "b left the light shape");
    assert_eq!(period(&rig, a), light_period, "a stays light");
    assert_eq!(rig.xruns(), 0);
    // For a pause; then back, through the bridge.
    let pause = light.window;
    rig.run(pause - 4);
    assert_eq!(period(&rig, b), PERIOD_NS);
    rig.run(6);
    assert_eq!(period(&rig, b), light_period);
    // A delay within 7/8 of the slack changes nothing.
    let updates = rig.shared.res[b as usize].updates.load(Ordering::Relaxed);
    rig.play("a", Play::Busy(PERIOD_NS / 10));
    rig.run(1);
    rig.play("a", Play::OnTime);
    rig.run(3);
    assert_eq!(period(&rig, b), light_period);
    assert_eq!(
        rig.shared.res[b as usize].updates.load(Ordering::Relaxed),
        updates
    );
}

/// A fake kernel for thread 3001: remembers the reservation last applied
/// to it, and reports it back while the thread is "stopped" (it cannot
/// drop it), SCHED_OTHER once it ran and dropped it.
mod stopped_thread {
    use resound_sched::Policy;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    pub const TID: i32 = 3001;
    pub static STOPPED: AtomicBool = AtomicBool::new(false);
    static RUNTIME: AtomicU64 = AtomicU64::new(0);
    static PERIOD: AtomicU64 = AtomicU64::new(0);

    pub fn apply(tid: i32, p: &Policy) -> Result<(), i32> {
        if let (
            TID,
            Policy::Deadline {
                runtime_ns,
                period_ns,
                ..
            },
        ) = (tid, p)
        {
            RUNTIME.store(*runtime_ns, Ordering::Relaxed);
            PERIOD.store(*period_ns, Ordering::Relaxed);
        }
        Ok(())
    }

    pub fn probe(tid: i32) -> Result<Policy, i32> {
        match tid {
            TID if STOPPED.load(Ordering::Relaxed) => Ok(Policy::Deadline {
                runtime_ns: RUNTIME.load(Ordering::Relaxed),
                deadline_ns: PERIOD.load(Ordering::Relaxed),
                period_ns: PERIOD.load(Ordering::Relaxed),
                reclaim: true,
            }),
            TID => Ok(Policy::Other),
            _ => Err(libc::ESRCH),
        }
    }
}

/// Slot `slot`'s reservation in millionths of a CPU.
fn held_ppm(rig: &Rig, slot: u32) -> u64 {
    let s = &rig.shared.res[slot as usize];
    let period = s.period_ns.load(Ordering::Relaxed);
    if period == 0 {
        return 0;
    }
    (s.budget_ns.load(Ordering::Relaxed) as f64 / period as f64 * 1e6) as u64
}

fn load(of: &std::sync::atomic::AtomicU64) -> u64 {
    of.load(Ordering::Relaxed)
}

/// A thread stopped when it leaves the graph keeps its reservation in the
/// kernel (only the thread itself can drop it): the ledger keeps its
/// bandwidth, and says so, until the kernel shows it let go.
#[test]
fn a_stopped_thread_keeps_its_bandwidth_in_the_ledger_until_it_lets_go() {
    let mut rig = Rig::new(Setup {
        mode: common::deadline_mode(),
        applier: stopped_thread::apply,
        prober: stopped_thread::probe,
        ..Default::default()
    });
    let a = rig.slot("a");
    let tid = stopped_thread::TID;
    rig.commands
        .push(Command::Attach { slot: a, tid })
        .expect("command ring");
    rig.run(30);
    let held = held_ppm(&rig, a);
    assert!(held > 0);
    rig.drain();

    stopped_thread::STOPPED.store(true, std::sync::atomic::Ordering::Relaxed);
    rig.commands
        .push(Command::Detach { slot: a })
        .expect("command ring");
    rig.run(100);
    assert_eq!(
        rig.shared.res[a as usize].kind.load(Ordering::Relaxed),
        kind::NONE,
        "the slot is free"
    );
    let departed = load(&rig.shared.departed_ppm);
    assert!(
        departed.abs_diff(held) <= 1,
        "held {departed}, a had {held}"
    );
    let ledger = load(&rig.shared.ledger_ppm);
    let driver = held_ppm(&rig, 0);
    assert!(
        ledger.abs_diff(driver + held) <= 2,
        "the ledger still counts a: {ledger} = driver {driver} + a {held}"
    );
    let ev = rig.drain();
    assert!(
        ev.iter().any(
            |e| matches!(e, RtEvent::StillReserved { slot, tid: t, .. } if *slot == a && *t == tid)
        ),
        "{ev:?}"
    );
    assert!(
        !ev.iter().any(|e| matches!(e, RtEvent::LetGo { .. })),
        "{ev:?}"
    );

    // The thread runs again and drops its reservation.
    stopped_thread::STOPPED.store(false, std::sync::atomic::Ordering::Relaxed);
    rig.run(resound_engine::departed::CHECK_CYCLES as usize + 1);
    assert_eq!(load(&rig.shared.departed_ppm), 0);
    let (ledger, driver) = (load(&rig.shared.ledger_ppm), held_ppm(&rig, 0));
    assert!(
        ledger.abs_diff(driver) <= 1,
        "a's bandwidth is back: the ledger {ledger} holds the driver's {driver} only"
    );
    let ev = rig.drain();
    assert!(
        ev.iter().any(|e| matches!(e, RtEvent::LetGo { tid: t, ppm, .. } if *t == tid && (*ppm as u64).abs_diff(held) <= 1)),
        "{ev:?}"
    );
}

/// A thread already gone when it leaves the graph (its client died) gives
/// its bandwidth back at once.
#[test]
fn a_thread_gone_when_it_leaves_gives_its_bandwidth_back_at_once() {
    let mut rig = deadline_rig();
    rig.run(30);
    let (a, b) = (rig.slot("a"), rig.slot("b"));
    rig.drain();
    rig.commands
        .push(Command::Detach { slot: a })
        .expect("command ring");
    rig.run(1);
    let (ledger, others) = (
        load(&rig.shared.ledger_ppm),
        held_ppm(&rig, 0) + held_ppm(&rig, b),
    );
    assert!(
        ledger.abs_diff(others) <= 2,
        "ledger {ledger}, driver and b {others}"
    );
    assert_eq!(load(&rig.shared.departed_ppm), 0);
    assert!(!rig
        .drain()
        .iter()
        .any(|e| matches!(e, RtEvent::StillReserved { .. })));
}

thread_local! {
    /// Thread ids the counting fake `sched_setattr` was called for, on this
    /// test's thread (the engine steps on it).
    static APPLIED_FOR: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A fake `sched_setattr` that accepts everything and remembers the thread.
fn counting(tid: i32, _p: &resound_sched::Policy) -> Result<(), i32> {
    APPLIED_FOR.with(|v| v.borrow_mut().push(tid));
    Ok(())
}

/// Client `sched_setattr` calls since the last look (the driver's own left
/// out: the calling thread, as 0 or by its id).
fn client_calls_since_last_look(rig: &Rig) -> usize {
    let driver = rig.shared.res[0].tid.load(Ordering::Relaxed);
    APPLIED_FOR.with(|v| {
        v.borrow_mut()
            .drain(..)
            .filter(|&t| t != 0 && t != driver)
            .count()
    })
}

/// The buffer size as the server's request sets it.
fn set_frames(rig: &Rig, frames: u32) {
    let h = rig.view.header();
    let period = PERIOD_NS * u64::from(frames) / u64::from(common::FRAMES);
    h.period_ns.store(period, Ordering::Relaxed);
    h.buffer_frames.store(frames, Ordering::Release);
}

/// Cycles until every slot's reservation period differs from `before`
/// (the driver's first), at most 10; asserts that no cycle made more than
/// `most` client reservation changes.
fn cycles_until_every_period_moved(rig: &mut Rig, slots: &[u32], most: usize) -> Option<usize> {
    let before: Vec<u64> = slots.iter().map(|&s| period(rig, s)).collect();
    client_calls_since_last_look(rig);
    for cycle in 1..=10 {
        rig.run(1);
        let calls = client_calls_since_last_look(rig);
        assert!(
            calls <= most,
            "{calls} client reservation changes in cycle {cycle}"
        );
        let moved = slots
            .iter()
            .zip(&before)
            .filter(|&(&s, &b)| period(rig, s) != b)
            .count();
        if moved == slots.len() {
            return Some(cycle);
        }
    }
    None
}

/// A change every thread needs at once that gives them less (here a
/// shorter buffer size: every reservation period and budget follow down)
/// is spread over cycles: the driver's own at once, at most
/// `CHANGES_PER_CYCLE` clients' per cycle, every client's within a few
/// cycles. Before, all of them came in one cycle, and on a real machine the
/// driver then overran its own budget and was throttled with the whole
/// graph behind it. One that gives them more (the longer buffer size again)
/// is never held back: a thread kept short of budget would be throttled.
#[test]
fn a_change_of_every_threads_reservation_is_spread_over_cycles_unless_it_gives_more() {
    use resound_engine::reserve::CHANGES_PER_CYCLE;
    let names = ["a", "b", "c", "d", "e", "f"];
    let mut rig = Rig::new(Setup {
        chain: names.to_vec(),
        // On the full period: a flush (a period change) takes a light
        // thread to it, a longer deadline, which is never held back.
        mode: common::deadline_mode_with(ControllerConfig {
            audio_period_ns: PERIOD_NS,
            light_deadline_pct: 100.0,
            ..Default::default()
        }),
        applier: counting,
        ..Default::default()
    });
    let mut slots: Vec<u32> = names.iter().map(|n| rig.slot(n)).collect();
    for (i, &slot) in slots.iter().enumerate() {
        let tid = 1001 + i as i32;
        rig.commands.push(Command::Attach { slot, tid }).unwrap();
    }
    // Attached, windows full, shapes settled.
    rig.run(300);
    slots.insert(0, 0);

    set_frames(&rig, common::FRAMES / 2);
    let most = CHANGES_PER_CYCLE as usize;
    let down = cycles_until_every_period_moved(&mut rig, &slots, most)
        .expect("every reservation followed the shorter period");
    assert!(
        down > 1,
        "six clients followed in one cycle of {most} changes"
    );

    set_frames(&rig, common::FRAMES);
    let up = cycles_until_every_period_moved(&mut rig, &slots, names.len());
    assert_eq!(
        up,
        Some(1),
        "every reservation followed the longer period at once"
    );
    assert_eq!(rig.xruns(), 0);
}
