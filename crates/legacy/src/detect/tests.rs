//! The detector on synthetic event trains.

use super::*;
use crate::events::{Event, Kind};

/// A small deterministic generator (xorshift64*), uniform in [0, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn wake(tid: i32, t_s: f64) -> Event {
    Event {
        tid,
        t_ns: (1e9 + t_s * 1e9) as u64,
        kind: Kind::SysExit(230),
    }
}

fn train(fps: f64, jobs: usize) -> Vec<Event> {
    (0..jobs).map(|i| wake(1, i as f64 / fps)).collect()
}

fn assert_within(d: &Detection, fps: f64, tol: f64) {
    let f = d
        .freq_hz()
        .unwrap_or_else(|| panic!("not periodic, expected {fps} Hz: {d:?}"));
    assert!(
        (f - fps).abs() / fps <= tol,
        "found {f} Hz, expected {fps} Hz ± {}%: {:?}",
        tol * 100.0,
        d.overall.rule
    );
    let p = d.period_ns().unwrap() as f64;
    assert!((p - 1e9 / fps).abs() / (1e9 / fps) <= tol * 1.01);
}

#[test]
fn exact_trains_within_one_percent_from_five_jobs() {
    for fps in [25.0, 30.0, 50.0, 60.0, 23.976, 29.97, 44.0] {
        let d = detect(&train(fps, 5), &Params::default());
        assert_within(&d, fps, 0.01);
        assert_eq!(d.overall.jobs, 5);
        assert!(d.confidence() > 0.75, "{}", d.confidence());
    }
}

#[test]
fn long_exact_trains_are_very_precise() {
    for fps in [25.0, 30.0, 50.0, 60.0] {
        let d = detect(&train(fps, 100), &Params::default());
        assert_within(&d, fps, 0.0005);
    }
}

#[test]
fn jitter_of_ten_percent() {
    let mut r = Rng(7);
    for fps in [25.0, 30.0, 50.0, 60.0] {
        let p = 1.0 / fps;
        let ev: Vec<Event> = (0..60)
            .map(|i| wake(1, i as f64 * p + (r.next() - 0.5) * 0.2 * p))
            .collect();
        assert_within(&detect(&ev, &Params::default()), fps, 0.01);
    }
}

#[test]
fn twenty_percent_of_jobs_missing() {
    let mut r = Rng(11);
    for fps in [25.0, 30.0, 50.0, 60.0] {
        let ev: Vec<Event> = (0..80)
            .filter(|_| r.next() >= 0.2)
            .map(|i| wake(1, i as f64 / fps))
            .collect();
        assert_within(&detect(&ev, &Params::default()), fps, 0.01);
    }
}

#[test]
fn bursts_of_calls_per_job_give_the_fundamental() {
    // Each job wakes three times: at its start, 3 ms and 7 ms later.
    for fps in [25.0, 30.0, 50.0] {
        let ev: Vec<Event> = (0..40)
            .flat_map(|i| [0.0, 0.003, 0.007].map(|o| wake(1, i as f64 / fps + o)))
            .collect();
        assert_within(&detect(&ev, &Params::default()), fps, 0.01);
    }
}

#[test]
fn noise_events_do_not_hide_the_period() {
    let mut r = Rng(3);
    let fps = 25.0;
    let mut ev = train(fps, 50);
    let span = 50.0 / fps;
    ev.extend((0..25).map(|_| wake(1, r.next() * span)));
    assert_within(&detect(&ev, &Params::default()), fps, 0.01);
}

#[test]
fn aperiodic_input_is_not_periodic() {
    let mut r = Rng(5);
    for seed in 0..5 {
        r.0 ^= seed + 1;
        // Exponential inter-arrival times with a 25 ms mean.
        let mut t = 0.0;
        let ev: Vec<Event> = (0..150)
            .map(|_| {
                t += -0.025 * (1.0 - r.next()).ln();
                wake(1, t)
            })
            .collect();
        let d = detect(&ev, &Params::default());
        assert!(
            d.period_ns().is_none(),
            "random instants found periodic: {:?}",
            d.overall
        );
    }
}

#[test]
fn too_few_events_and_empty_input() {
    assert_eq!(
        detect(&[], &Params::default()).overall.rule,
        Rule::TooFewEvents
    );
    assert!(detect(&train(25.0, 2), &Params::default())
        .period_ns()
        .is_none());
}

#[test]
fn threads_with_different_rates_are_reported_apart() {
    let mut ev: Vec<Event> = (0..50).map(|i| wake(10, i as f64 / 25.0)).collect();
    ev.extend((0..60).map(|i| wake(11, 0.001 + i as f64 / 30.0)));
    let d = detect(&ev, &Params::default());
    assert!(d.threads_differ);
    let f = |tid| {
        d.threads
            .iter()
            .find(|t| t.tid == tid)
            .unwrap()
            .estimate
            .freq_hz
            .unwrap()
    };
    assert!(
        (f(10) - 25.0).abs() < 0.25 && (f(11) - 30.0).abs() < 0.3,
        "{} {}",
        f(10),
        f(11)
    );
    let same: Vec<Event> = (0..50)
        .flat_map(|i| [wake(1, i as f64 / 25.0), wake(2, 0.002 + i as f64 / 25.0)])
        .collect();
    assert!(!detect(&same, &Params::default()).threads_differ);
}

#[test]
fn selection_and_parameters() {
    let ev: Vec<Event> = (0..20)
        .flat_map(|i| {
            let t = (1e9 + i as f64 * 4e7) as u64;
            [
                Event {
                    tid: 1,
                    t_ns: t,
                    kind: Kind::SysExit(0),
                },
                Event {
                    tid: 1,
                    t_ns: t + 20_000_000,
                    kind: Kind::SysEnter(0),
                },
            ]
        })
        .collect();
    // Entries and exits half a period apart cancel at 25 Hz when mixed.
    let all = detect(
        &ev,
        &Params {
            select: Select::All,
            ..Params::default()
        },
    );
    assert_ne!(all.freq_hz().map(|f| f.round()), Some(25.0));
    assert_within(&detect(&ev, &Params::default()), 25.0, 0.01);
    assert_within(
        &detect(
            &ev,
            &Params {
                select: Select::Entries,
                ..Params::default()
            },
        ),
        25.0,
        0.01,
    );
    assert!(Params {
        m: 0,
        ..Params::default()
    }
    .validate()
    .is_err());
    assert!(Params {
        f_max: 5.0,
        ..Params::default()
    }
    .validate()
    .is_err());
    // Unrefined: on the 1 Hz grid.
    let d = detect(
        &train(23.976, 50),
        &Params {
            refine: false,
            ..Params::default()
        },
    );
    assert_eq!(d.freq_hz(), Some(24.0));
}
