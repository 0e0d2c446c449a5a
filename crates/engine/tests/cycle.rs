//! The cycle under a simulated clock: deadlines, xruns, freewheel, buffer
//! size, playback timing. Deterministic: no sleeping, no processes.

mod common;

use common::{Play, Rig, Setup, FRAMES, PERIOD_NS};
use resound_engine::{Clock, RtEvent, SimPoint, FREEWHEEL_WAIT_NS};
use resound_shm::sync::Ordering;
use resound_shm::time::frames_to_ns;

#[test]
fn clients_on_time_make_no_xrun() {
    let mut rig = Rig::new(Setup {
        chain: vec!["a", "b"],
        ..Default::default()
    });
    rig.run(50);
    assert_eq!(rig.xruns(), 0);
    assert!(rig.drain().is_empty());
    let (cycle, start, next, frame_time) = rig.timer();
    assert_eq!(cycle, 50);
    assert_eq!(next - start, PERIOD_NS);
    assert_eq!(frame_time, 49 * FRAMES as u64);
    // Cycles start on the clock, one period apart.
    assert_eq!(start, 1_000_000_000 + 49 * PERIOD_NS);
}

#[test]
fn a_late_client_is_one_xrun_per_cycle_with_its_slot() {
    let mut rig = Rig::new(Setup {
        chain: vec!["a", "b"],
        ..Default::default()
    });
    rig.run(5);
    assert_eq!(rig.xruns(), 0);
    rig.play("a", Play::Stuck);
    rig.run(3);
    // Cycles 5, 6 and 7 were late; 7 is judged at cycle 8's start.
    assert_eq!(rig.xruns(), 2);
    let (a, b) = (rig.slot("a"), rig.slot("b"));
    let ev = rig.drain();
    // The lateness figures are checked apart below; here, who and in what order.
    let for_cycle = |c: u64| -> Vec<RtEvent> {
        ev.iter()
            .copied()
            .filter(|e| match e {
                RtEvent::Late { cycle, .. } | RtEvent::CycleChecked { cycle } => *cycle == c,
                _ => false,
            })
            .map(|e| match e {
                RtEvent::Late {
                    cycle, slot, woken, ..
                } => RtEvent::Late {
                    cycle,
                    slot,
                    woken,
                    signal_us: 0,
                    wake_delay_us: 0,
                },
                e => e,
            })
            .collect()
    };
    // The stuck node was signalled and never woke; the one behind it was
    // never signalled.
    for e in &ev {
        if let RtEvent::Late {
            slot,
            signal_us,
            wake_delay_us,
            ..
        } = *e
        {
            if slot == a {
                assert!(signal_us < u32::MAX, "a was signalled: {e:?}");
            } else {
                assert_eq!((signal_us, wake_delay_us), (u32::MAX, u32::MAX), "{e:?}");
            }
        }
    }
    for c in [6, 7] {
        assert_eq!(
            for_cycle(c),
            vec![
                RtEvent::Late {
                    cycle: c,
                    slot: a,
                    woken: true,
                    signal_us: 0,
                    wake_delay_us: 0
                },
                RtEvent::Late {
                    cycle: c,
                    slot: b,
                    woken: false,
                    signal_us: 0,
                    wake_delay_us: 0
                },
                RtEvent::CycleChecked { cycle: c },
            ],
            "cycle {c}: one Late per late node (the stuck one woken, the one behind it waiting), one CycleChecked"
        );
    }
    // The stuck client's slot and the one waiting behind it are counted.
    assert_eq!(rig.shared.res[a as usize].xruns.load(Ordering::Relaxed), 2);
    assert_eq!(rig.shared.res[b as usize].xruns.load(Ordering::Relaxed), 2);
}

/// Sync mode: a node that finishes after the driver stopped waiting for
/// the graph and took the playback, but before the next look-back, missed
/// that playback. The look-back finds it finished, and it is still an
/// xrun, of that node. (Whether it counts as short itself or as waiting
/// on its upstream compares the cut with when its inputs were released,
/// which libjack stamps on CLOCK_MONOTONIC, not on the simulated clock:
/// `verdict.rs` tests that rule.)
#[test]
fn in_sync_mode_a_node_finishing_after_the_playback_was_taken_is_late() {
    let mut rig = chain_whose_end_misses_the_wait(true);
    rig.run(1);
    rig.play("b", Play::OnTime);
    rig.run(3);
    let b = rig.slot("b");
    let late: Vec<u32> = rig
        .drain()
        .into_iter()
        .filter_map(|e| match e {
            RtEvent::Late { slot, .. } => Some(slot),
            _ => None,
        })
        .collect();
    assert_eq!(late, [b]);
    assert_eq!(rig.xruns(), 1);
}

/// In async mode the playback of a cycle is taken at the next cycle's
/// look-back, so a node that finished before that look-back made it.
#[test]
fn in_async_mode_a_node_finishing_before_the_look_back_is_on_time() {
    let mut rig = chain_whose_end_misses_the_wait(false);
    rig.run(3);
    assert_eq!(rig.xruns(), 0);
}

/// Chain "a" -> "b" in sync or async mode, five cycles on time, then "b"
/// finishing each cycle only after the driver's wait ([`Play::MissesTheWait`]).
fn chain_whose_end_misses_the_wait(sync: bool) -> Rig {
    let mut rig = Rig::new(Setup {
        chain: vec!["a", "b"],
        sync,
        ..Default::default()
    });
    rig.run(5);
    assert_eq!(rig.xruns(), 0);
    rig.drain();
    rig.play("b", Play::MissesTheWait);
    rig
}

#[test]
fn a_driver_waking_more_than_a_period_late_resyncs() {
    let mut rig = Rig::new(Setup::default());
    rig.run(10);
    let (_, start0, _, ft0) = rig.timer();
    rig.clock.oversleep(3 * PERIOD_NS + PERIOD_NS / 2);
    rig.run(1);
    let (cycle, start, next, ft) = rig.timer();
    // Skipped three periods: the cycle starts on the grid, frames follow.
    assert_eq!(start, start0 + 4 * PERIOD_NS);
    assert_eq!(next, start + PERIOD_NS);
    assert_eq!(ft, ft0 + 4 * FRAMES as u64);
    assert_eq!(rig.xruns(), 1);
    let ev = rig.drain();
    assert_eq!(
        ev,
        vec![RtEvent::DriverLate {
            cycle,
            // How late it woke after the start it was due at.
            late_ns: 3 * PERIOD_NS + PERIOD_NS / 2
        }]
    );
    assert_eq!(rig.shared.res[0].xruns.load(Ordering::Relaxed), 1);
    // And then back on the grid.
    rig.run(1);
    assert_eq!(rig.timer().1, start + PERIOD_NS);
    assert!(rig.drain().is_empty());
}

#[test]
fn freewheel_runs_back_to_back_and_waits_for_the_graph() {
    let mut rig = Rig::new(Setup {
        sync: false,
        ..Default::default()
    });
    rig.run(3);
    let in_effect = |rig: &Rig| {
        rig.view
            .header()
            .freewheel_in_effect
            .load(Ordering::Acquire)
    };
    rig.view.header().freewheel.store(1, Ordering::Release);
    // Client threads follow the driver's word, set at its next cycle start.
    assert_eq!(in_effect(&rig), 0);
    rig.run(2); // the first freewheeling cycle still starts on the clock
    assert_eq!(in_effect(&rig), 1);
    rig.clients.borrow_mut().points.clear();
    let t0 = rig.clock.now_ns();
    rig.run(20);
    // No sleeping: the simulated time did not move; every cycle waited for
    // the graph (even in async mode), bounded by FREEWHEEL_WAIT_NS.
    assert_eq!(rig.clock.now_ns(), t0);
    let points = rig.clients.borrow().points.clone();
    assert_eq!(points.len(), 20);
    for (p, _) in &points {
        assert_eq!(
            *p,
            SimPoint::Wait {
                deadline_ns: Some(t0 + FREEWHEEL_WAIT_NS)
            }
        );
    }
    assert_eq!(rig.xruns(), 0);
    // A stuck client costs one wait bound, then an xrun.
    rig.play("a", Play::Stuck);
    rig.run(2);
    assert_eq!(rig.clock.now_ns(), t0 + 2 * FREEWHEEL_WAIT_NS);
    assert_eq!(rig.xruns(), 1);
    // Leaving freewheel: the clock restarts now.
    rig.play("a", Play::OnTime);
    rig.view.header().freewheel.store(0, Ordering::Release);
    assert_eq!(in_effect(&rig), 1);
    rig.run(2);
    assert_eq!(in_effect(&rig), 0);
    let (_, start, _, _) = rig.timer();
    assert_eq!(start, t0 + 2 * FREEWHEEL_WAIT_NS + PERIOD_NS);
}

#[test]
fn the_period_follows_buffer_frames() {
    let mut rig = Rig::new(Setup::default());
    rig.run(3);
    let view = rig.view.clone();
    let h = view.header();
    h.buffer_frames.store(2 * FRAMES, Ordering::Relaxed);
    rig.run(1);
    // The cycle planned with the old period starts on time, then is as long
    // as the new one.
    let (_, start, next, _) = rig.timer();
    assert_eq!(next - start, frames_to_ns(2 * FRAMES as u64, common::RATE));
    assert_eq!(h.cycle_frames.load(Ordering::Relaxed), 2 * FRAMES);
    rig.run(1);
    let (_, start2, next2, _) = rig.timer();
    assert_eq!(start2, next);
    assert_eq!(next2 - start2, 2 * PERIOD_NS);
    assert_eq!(rig.xruns(), 0);
}

/// The cycle whose output "a" heard back at its capture input: lag in cycles.
fn loopback_lag(sync: bool) -> u64 {
    let mut rig = Rig::new(Setup {
        sync,
        loopback: true,
        ..Default::default()
    });
    rig.run(12);
    let heard = rig.clients.borrow().heard.clone();
    let lags: Vec<u64> = heard
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|&(c, v)| c - v as u64)
        .collect();
    assert!(lags.len() >= 8, "heard {heard:?}");
    assert!(lags.iter().all(|&l| l == lags[0]), "lags {lags:?}");
    lags[0]
}

#[test]
fn loopback_comes_back_two_cycles_later_in_sync_three_in_async() {
    assert_eq!(loopback_lag(true), 2);
    assert_eq!(loopback_lag(false), 3);
}

#[test]
fn the_dsp_load_is_the_worst_busy_time_of_a_window_smoothed() {
    let mut rig = Rig::new(Setup::default());
    rig.play("a", Play::Busy(4 * PERIOD_NS / 10));
    let load = |rig: &Rig| f32::from_bits(rig.view.header().cpu_load.load(Ordering::Relaxed));
    rig.run(33); // 32 judged cycles: one window
    assert!((load(&rig) - 20.0).abs() < 0.01, "{}", load(&rig));
    rig.run(32);
    assert!((load(&rig) - 30.0).abs() < 0.01, "{}", load(&rig));
    assert_eq!(rig.xruns(), 0);
}

#[test]
fn the_drivers_record_shows_the_cpu_it_woke_on() {
    let mut rig = Rig::new(Setup {
        chain: vec!["a"],
        ..Default::default()
    });
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let before = rustix::thread::sched_getaffinity(None).unwrap();
    // The last CPU first, so that with two CPUs or more a header never
    // written (0) cannot pass.
    for cpu in [cpus - 1, 0] {
        let mut only = rustix::thread::CpuSet::new();
        only.set(cpu);
        rustix::thread::sched_setaffinity(None, &only).unwrap();
        rig.run(1);
        assert_eq!(rig.view.record(0).unwrap().run_cpu(), cpu as u32);
    }
    rustix::thread::sched_setaffinity(None, &before).unwrap();
}
