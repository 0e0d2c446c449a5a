//! The controller's unit tests: feedback, bumps, clamps, periods, light shapes.

use super::*;

const P: u64 = 2_666_667;

fn run(c: &mut Controller, load: u64, cycles: usize) -> Vec<(usize, Reservation)> {
    (0..cycles)
        .filter_map(|i| c.cycle_begin(load).map(|r| (i, r)))
        .collect()
}

fn converged(load: u64) -> Controller {
    converged_with(ControllerConfig::default(), load)
}

fn converged_with(cfg: ControllerConfig, load: u64) -> Controller {
    let mut c = Controller::new(cfg);
    run(&mut c, load, 200);
    c
}

#[test]
fn initial_state() {
    let c = Controller::new(ControllerConfig::default());
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 266_667,
            deadline_ns: P,
            period_ns: P
        }
    );
    assert_eq!(c.predicted_ns(), 0);
    assert!(c.warming_up());
    assert_eq!(
        c.reservation().policy(true),
        Policy::Deadline {
            runtime_ns: 266_667,
            deadline_ns: P,
            period_ns: P,
            reclaim: true
        }
    );
    assert!((c.reservation().bandwidth() - 0.10).abs() < 1e-6);
}

#[test]
fn constant_load_converges_to_prediction_plus_overprovision() {
    let mut c = Controller::new(ControllerConfig {
        initial_pct: 25.0,
        ..ControllerConfig::default()
    });
    let changes = run(&mut c, 300_000, 300);
    // Held at an initial 25% while the window fills, then one change.
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].0, 99);
    assert_eq!(changes[0].1.runtime_ns, 330_000);
    assert_eq!(c.reservation().runtime_ns, 330_000);
    assert_eq!(c.predicted_ns(), 300_000);
    assert!(!c.warming_up());
}

#[test]
fn warm_up_follows_a_load_above_the_held_budget() {
    let mut c = Controller::new(ControllerConfig::default());
    let r = c.cycle_begin(1_000_000).expect("raised at once");
    assert_eq!(r.runtime_ns, 1_100_000);
}

#[test]
fn step_up_and_down_follow_within_the_window() {
    // Without light shapes: on the way down the median falls first,
    // and the thread would be light for half a window.
    let mut c = converged_with(implicit(), 300_000);
    // Up: 99th percentile of 100 reaches the new level after 2 samples.
    let up = run(&mut c, 600_000, 100);
    assert_eq!(up.len(), 1);
    assert!(up[0].0 < 100);
    assert_eq!(c.reservation().runtime_ns, 660_000);
    // Down: the old level leaves the window after at most `window` cycles.
    let down = run(&mut c, 200_000, 100);
    assert_eq!(down.len(), 1, "{down:?}");
    assert!(down[0].0 < 100);
    assert_eq!(c.reservation().runtime_ns, 220_000);
    assert_eq!(c.predicted_ns(), 200_000);
}

#[test]
fn a_small_cut_waits_for_the_larger_threshold_a_raise_does_not() {
    let mut c = converged(300_000);
    assert_eq!(c.reservation().runtime_ns, 330_000);
    // 10 % less: within the cut threshold (4 x 5 %), kept.
    assert!(run(&mut c, 270_000, 150).is_empty());
    assert_eq!(c.reservation().runtime_ns, 330_000);
    // 30 % less than the held budget: cut.
    assert_eq!(run(&mut c, 210_000, 150).len(), 1);
    assert_eq!(c.reservation().runtime_ns, 231_000);
    // 10 % more: raised at once.
    assert_eq!(run(&mut c, 231_000, 150).len(), 1);
    assert_eq!(c.reservation().runtime_ns, 254_100);
}

#[test]
fn a_single_spike_is_ignored_below_the_100th_percentile() {
    let mut c = converged(300_000);
    assert_eq!(c.cycle_begin(2_000_000), None);
    assert!(run(&mut c, 300_000, 150).is_empty());
    assert_eq!(c.reservation().runtime_ns, 330_000);

    let cfg = ControllerConfig {
        percentile: 100.0,
        ..Default::default()
    };
    let mut c = Controller::new(cfg);
    run(&mut c, 300_000, 200);
    assert_eq!(c.reservation().runtime_ns, 330_000);
    let r = c.cycle_begin(2_000_000).expect("spike moves the max");
    assert_eq!(r.runtime_ns, 2_200_000);
    // ... and leaves with the window.
    let back = run(&mut c, 300_000, 100);
    assert_eq!(back.last().map(|x| x.1.runtime_ns), Some(330_000));
}

#[test]
fn new_client_flushes_and_bumps_20_percent() {
    let mut c = converged(300_000);
    let r = c.on_activation().expect("bumped");
    assert_eq!(r.runtime_ns, 396_000);
    assert!(c.warming_up());
    // Held while the window refills (the lower prediction is not trusted yet) ...
    assert!(run(&mut c, 300_000, 99).is_empty());
    assert_eq!(c.reservation().runtime_ns, 396_000);
    // ... then back to the prediction once full.
    assert_eq!(c.cycle_begin(300_000).map(|r| r.runtime_ns), Some(330_000));
}

#[test]
fn new_client_bumps_10_percent_at_the_minimum() {
    let mut c = converged_with(implicit(), 10_000);
    let min = 133_333; // 5% of 2_666_667
    assert_eq!(c.reservation().runtime_ns, min);
    assert_eq!(c.on_activation().map(|r| r.runtime_ns), Some(146_666));
}

#[test]
fn xrun_bumps() {
    let mut c = converged(500_000);
    assert_eq!(c.reservation().runtime_ns, 550_000);
    assert_eq!(c.on_xrun().map(|r| r.runtime_ns), Some(660_000));
    assert_eq!(c.on_xrun().map(|r| r.runtime_ns), Some(792_000));
    assert!(c.warming_up());
}

#[test]
fn clamps_at_min_and_max() {
    let c = converged_with(implicit(), 1_000);
    assert_eq!(c.reservation().runtime_ns, 133_333);
    let mut c = converged(5_000_000);
    assert_eq!(c.reservation().runtime_ns, 2_400_000); // 90%
    assert_eq!(c.predicted_ns(), 5_000_000);
    assert_eq!(c.on_xrun(), None, "already at the maximum");
    assert_eq!(c.reservation().runtime_ns, 2_400_000);
}

#[test]
fn a_lowered_floor_lets_the_next_cut_through_and_never_rises_again() {
    let floor10 = ControllerConfig {
        min_pct: 10.0,
        ..implicit()
    };
    let mut c = converged_with(floor10, 1_000);
    assert_eq!(c.reservation().runtime_ns, 266_667, "10 % of P");
    assert!(!c.lower_floor(20.0), "a floor is only ever lowered");
    assert!(c.lower_floor(THESIS_MIN_BUDGET_PCT));
    assert!(!c.lower_floor(THESIS_MIN_BUDGET_PCT), "already there");
    assert_eq!(
        c.reservation().runtime_ns,
        266_667,
        "nothing applied at once"
    );
    let cut = run(&mut c, 1_000, 1);
    assert_eq!(
        cut.iter().map(|(_, r)| r.runtime_ns).collect::<Vec<_>>(),
        [133_333],
        "the next cycle cuts to the thesis' 5 %"
    );
}

#[test]
fn fixed_mode_ignores_the_trace() {
    let cfg = ControllerConfig {
        fixed_pct: Some(30.0),
        ..Default::default()
    };
    let mut c = Controller::new(cfg);
    assert_eq!(c.reservation().runtime_ns, 800_000);
    for load in [0, 10_000, 2_000_000, 9_000_000] {
        assert!(run(&mut c, load, 150).is_empty());
    }
    assert_eq!(c.on_activation(), None);
    assert_eq!(c.on_xrun(), None);
    assert_eq!(c.predicted_ns(), 0);
    assert_eq!(c.reservation().runtime_ns, 800_000);
    assert_eq!(c.set_audio_period(P), None);
    let r = c.set_audio_period(2 * P).expect("period changed");
    assert_eq!(
        r,
        Reservation {
            runtime_ns: 1_600_000,
            deadline_ns: 2 * P,
            period_ns: 2 * P
        }
    );
    // Capped at max_pct.
    let c = Controller::new(ControllerConfig {
        fixed_pct: Some(99.0),
        ..Default::default()
    });
    assert_eq!(c.reservation().runtime_ns, 2_400_000);
}

#[test]
fn small_moves_stay_below_the_threshold() {
    let mut c = converged(300_000);
    // 310 us -> 341 us: 3.3% of 330 us.
    assert!(run(&mut c, 310_000, 200).is_empty());
    assert_eq!(c.reservation().runtime_ns, 330_000);
    assert_eq!(c.predicted_ns(), 310_000);
    // 320 us -> 352 us: 6.7%.
    let moved = run(&mut c, 320_000, 10);
    assert_eq!(moved.len(), 1);
    assert_eq!(c.reservation().runtime_ns, 352_000);
}

#[test]
fn auto_multiplier_follows_the_audio_period() {
    let short = 666_666; // 32 frames at 48 kHz
    let mut c = Controller::new(ControllerConfig {
        audio_period_ns: short,
        auto_min_period_ns: crate::multiplier::DEFAULT_AUTO_MIN_PERIOD_NS,
        ..Default::default()
    });
    assert_eq!(c.config().effective_multiplier(), 2);
    assert_eq!(c.reservation().period_ns, 2 * short);
    run(&mut c, 100_000, 200);
    assert_eq!(c.predicted_ns(), 200_000, "per reservation period");
    // 128 frames: above the minimum, one audio period per reservation period.
    let r = c.set_audio_period(P).expect("changed");
    assert_eq!(c.config().effective_multiplier(), 1);
    assert_eq!(r.period_ns, P);
    // Back to 16 frames: four audio periods.
    let r = c.set_audio_period(333_333).expect("changed");
    assert_eq!(c.config().effective_multiplier(), 4);
    assert_eq!(r.period_ns, 4 * 333_333);
}

#[test]
fn multiplier_scales_period_and_budget() {
    let cfg = ControllerConfig {
        multiplier: 2,
        ..Default::default()
    };
    let mut c = Controller::new(cfg);
    assert_eq!(c.reservation().period_ns, 2 * P);
    run(&mut c, 300_000, 200);
    assert_eq!(c.predicted_ns(), 600_000);
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 660_000,
            deadline_ns: 2 * P,
            period_ns: 2 * P
        }
    );
}

/// Light threads on: a light deadline of half a 75 % period.
fn light() -> ControllerConfig {
    ControllerConfig {
        light_deadline_pct: 50.0,
        ..Default::default()
    }
}

/// Light threads on the full period with an implicit deadline, as
/// every thread was before light shapes.
fn implicit() -> ControllerConfig {
    ControllerConfig {
        light_period_pct: 100.0,
        light_deadline_pct: 100.0,
        ..Default::default()
    }
}

/// A thread at the full period's minimum budget (5 % of P) using much
/// less: 75 % of P, a deadline half of that.
const LIGHT: Reservation = Reservation {
    runtime_ns: 133_333,
    deadline_ns: 1_000_000,
    period_ns: 2_000_000,
};

#[test]
fn a_light_thread_gets_the_light_period_and_deadline() {
    let mut c = Controller::new(light());
    assert_eq!(c.reservation().period_ns, P, "unknown load: full period");
    // 30 us a cycle: 33 us with overprovisioning, under the minimum.
    let changes = run(&mut c, 30_000, 200);
    assert_eq!(changes.last().map(|x| x.1), Some(LIGHT), "{changes:?}");
    assert!(
        (c.reservation().bandwidth() - 0.05 / 0.75).abs() < 1e-6,
        "the same budget per cycle over a shorter period"
    );
    // Without light shapes: the minimum of the full period.
    let mut c = Controller::new(implicit());
    run(&mut c, 30_000, 200);
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 133_333,
            deadline_ns: P,
            period_ns: P
        }
    );
}

/// The one-cycle bridge into [`LIGHT`]: deadline = period = the light
/// deadline + half of P − the light period.
const BRIDGE: Reservation = Reservation {
    runtime_ns: 133_333,
    deadline_ns: 1_333_333,
    period_ns: 1_333_333,
};

#[test]
fn a_thread_enters_the_light_shape_through_one_cycle_on_the_bridge() {
    let mut c = Controller::new(light());
    let changes = run(&mut c, 30_000, 200);
    let shapes: Vec<Reservation> = changes.iter().map(|x| x.1).collect();
    let bridge = shapes.iter().position(|r| *r == BRIDGE).expect("bridged");
    assert_eq!(shapes.get(bridge + 1), Some(&LIGHT), "{changes:?}");
    assert_eq!(
        changes[bridge + 1].0,
        changes[bridge].0 + 1,
        "light at the very next cycle"
    );
    assert!(
        shapes[..bridge].iter().all(|r| r.period_ns == P),
        "full period before: {changes:?}"
    );
    assert_eq!(c.config().light_bridge_ns(), 1_333_333);
    assert_eq!(c.config().light_slack_ns(), 666_667);
}

#[test]
fn a_late_wake_up_takes_a_light_thread_off_its_shape_for_a_window() {
    let mut c = converged_with(light(), 30_000);
    assert_eq!(c.reservation(), LIGHT);
    let full = Reservation {
        deadline_ns: P,
        period_ns: P,
        ..LIGHT
    };
    assert_eq!(c.leave_light(), Some(full));
    assert_eq!(c.leave_light(), None, "already on the full period");
    // A pause on the full period, then back through the bridge.
    let changes = run(&mut c, 30_000, 200);
    assert_eq!(
        changes.iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![BRIDGE, LIGHT]
    );
    assert_eq!(changes[0].0, c.config().window - 1, "{changes:?}");
    // Off while on the bridge, too: its replenishment came late as well.
    let mut c = Controller::new(light());
    while c.reservation() != BRIDGE {
        c.cycle_begin(30_000);
    }
    assert_eq!(c.leave_light(), Some(full));
    // Without light shapes nothing moves.
    let mut c = converged_with(implicit(), 30_000);
    assert_eq!(c.leave_light(), None);
    assert!(run(&mut c, 30_000, 10).is_empty());
}

#[test]
fn a_refused_bridge_is_bridged_again_not_skipped() {
    let mut c = Controller::new(light());
    while c.reservation() != BRIDGE {
        c.cycle_begin(30_000);
    }
    let kept = Reservation {
        deadline_ns: P,
        period_ns: P,
        ..LIGHT
    };
    c.refused(kept);
    assert_eq!(c.reservation(), kept);
    assert_eq!(c.cycle_begin(30_000), Some(BRIDGE));
    assert_eq!(c.cycle_begin(30_000), Some(LIGHT));
}

#[test]
fn a_thread_above_the_minimum_keeps_the_full_period() {
    let mut c = converged_with(light(), 300_000);
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 330_000,
            deadline_ns: P,
            period_ns: P
        }
    );
    // Lighter: down to the light shape once the window has forgotten.
    run(&mut c, 30_000, 200);
    assert_eq!(c.reservation(), LIGHT);
    // A bump flushes the window: the full period until it is refilled.
    let r = c.on_xrun().expect("bumped");
    assert_eq!(
        r,
        Reservation {
            runtime_ns: 146_666,
            deadline_ns: P,
            period_ns: P
        }
    );
    // Heavier again: full period.
    run(&mut c, 300_000, 200);
    assert_eq!(c.reservation().period_ns, P);
}

#[test]
fn no_light_shape_when_a_reservation_period_spans_several_cycles() {
    let mut c = Controller::new(ControllerConfig {
        multiplier: 2,
        ..light()
    });
    run(&mut c, 30_000, 200);
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 266_667,
            deadline_ns: 2 * P,
            period_ns: 2 * P
        },
        "the second wake-up in a period would come after a short deadline"
    );
}

#[test]
fn a_spiky_light_thread_is_light_with_its_larger_budget() {
    let mut c = Controller::new(light());
    // 40 us a cycle, 150 us in every tenth: the 99th percentile is 150.
    for i in 0..300 {
        c.cycle_begin(if i % 10 == 0 { 150_000 } else { 40_000 });
    }
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 165_000,
            deadline_ns: 1_000_000,
            period_ns: 2_000_000
        }
    );
}

#[test]
fn light_shapes_follow_the_period_and_yield_to_set_deadline_and_fixed_mode() {
    let mut c = converged_with(light(), 30_000);
    assert_eq!(c.reservation(), LIGHT);
    // A new period flushes the window: the full period until it is refilled.
    let r = c.set_audio_period(2 * P).expect("changed");
    assert_eq!(
        r,
        Reservation {
            runtime_ns: 266_667,
            deadline_ns: 2 * P,
            period_ns: 2 * P
        }
    );
    run(&mut c, 60_000, 200);
    // 75 % of 2 x 2_666_667 ns and half of it (each rounded).
    assert_eq!(
        c.reservation(),
        Reservation {
            runtime_ns: 266_667,
            deadline_ns: 2_000_001,
            period_ns: 4_000_001
        }
    );
    let r = c.set_deadline(3_000_000).expect("changed");
    assert_eq!((r.period_ns, r.deadline_ns), (2 * P, 3_000_000));
    run(&mut c, 60_000, 200);
    assert_eq!(
        c.reservation().period_ns,
        2 * P,
        "explicit deadline: full period"
    );
    c.reset();
    run(&mut c, 60_000, 200);
    assert_eq!(c.reservation().period_ns, 4_000_001, "reset: light again");
    let mut c = Controller::new(ControllerConfig {
        fixed_pct: Some(5.0),
        ..light()
    });
    run(&mut c, 1_000, 200);
    assert_eq!(c.reservation().period_ns, P, "fixed mode: full period");
}

#[test]
fn deadline_clamps_the_runtime() {
    let mut c = converged(300_000);
    let r = c.set_deadline(200_000).expect("changed");
    assert_eq!((r.runtime_ns, r.deadline_ns), (200_000, 200_000));
    assert_eq!(c.set_deadline(200_000), None);
    let r = c.set_deadline(10 * P).expect("changed");
    assert_eq!((r.runtime_ns, r.deadline_ns), (330_000, P));
    let r = c.set_deadline(1_000_000).expect("changed");
    assert_eq!(
        (r.runtime_ns, r.deadline_ns, r.period_ns),
        (330_000, 1_000_000, P)
    );
}

#[test]
fn period_change_in_feedback_mode_scales_and_refills() {
    let mut c = converged(300_000);
    c.set_deadline(1_000_000);
    let r = c.set_audio_period(2 * P).expect("changed");
    assert_eq!(
        r,
        Reservation {
            runtime_ns: 660_000,
            deadline_ns: 2_000_000,
            period_ns: 2 * P
        }
    );
    assert!(c.warming_up());
    // The doubled load per (longer) cycle is what the scaled budget expected.
    assert!(run(&mut c, 600_000, 200).is_empty());
    assert_eq!(c.reservation().runtime_ns, 660_000);
}

#[test]
fn reset_restores_the_initial_state() {
    let mut c = converged(300_000);
    c.reset();
    assert_eq!(
        c.reservation(),
        Controller::new(ControllerConfig::default()).reservation()
    );
    assert!(c.warming_up());
}

/// A light thread whose median rises past half its budget stays light up to
/// three quarters of it (each exit and return costs three `sched_setattr`
/// calls, and on the full period it would arm the inactive timer at every
/// cycle anyway); past that it leaves, and comes back only under 45 %.
#[test]
fn a_light_thread_stays_light_up_to_three_quarters_of_its_budget() {
    let mut c = converged_with(light(), 30_000);
    assert_eq!(c.reservation(), LIGHT);
    // 80 µs a cycle: 60 % of the minimum budget, which stays the budget.
    assert_eq!(run(&mut c, 80_000, 200), vec![]);
    // 110 µs: 82 %.
    run(&mut c, 110_000, 200);
    let full = Reservation {
        runtime_ns: 133_333,
        deadline_ns: P,
        period_ns: P,
    };
    assert_eq!(c.reservation(), full);
    // 80 µs again: not light again at 60 %...
    assert_eq!(run(&mut c, 80_000, 200), vec![]);
    // ...but at 37.5 %, through the bridge.
    let back: Vec<Reservation> = run(&mut c, 50_000, 200).into_iter().map(|x| x.1).collect();
    assert_eq!(back, vec![BRIDGE, LIGHT]);
}
