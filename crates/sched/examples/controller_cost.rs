//! What the feedback controllers cost the driver thread per audio cycle:
//! eleven controllers (a driver and ten clients, the side-by-side bench's
//! chain) each fed one CPU sample, as `Reservations::cycle_begin` does, with
//! the light-shape figures the wake-up check reads. Printed as the median and
//! 99th percentile per cycle, hot (cycles back to back), cold (16 MiB swept
//! through the caches before each cycle, as when the driver comes back one
//! period later on a machine with other work) and cold with every window
//! prefetched before 10 µs of other work (as the driver does before its
//! look-back).
//!
//! `cargo run -p resound-sched --release --example controller_cost`

use resound_sched::{Controller, ControllerConfig};
use std::hint::black_box;
use std::time::Instant;

const THREADS: usize = 11;
const CYCLES: usize = 20_000;
const COLD_CYCLES: usize = 2_000;
/// 128 frames at 48 kHz.
const PERIOD_NS: u64 = 2_666_666;

/// A small deterministic generator (xorshift), so that runs compare.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A CPU sample around 1 % of the period, with a rare spike.
    fn sample(&mut self) -> u64 {
        let r = self.next();
        let base = 25_000 + r % 8_000;
        if r.is_multiple_of(97) {
            base * 6
        } else {
            base
        }
    }
}

/// One cycle's controller work; returns how many reservations moved.
fn cycle(controllers: &mut [Controller], noise: &mut Noise) -> usize {
    let mut moved = 0;
    for c in controllers.iter_mut() {
        black_box((c.light_slack_ns(), c.reservation_period_ns()));
        moved += c.cycle_begin(noise.sample()).is_some() as usize;
    }
    moved
}

fn per_cycle_ns(mut v: Vec<u64>) -> (u64, u64) {
    v.sort_unstable();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

fn main() {
    let cfg = ControllerConfig {
        audio_period_ns: PERIOD_NS,
        ..Default::default()
    };
    let mut controllers: Vec<Controller> = (0..THREADS).map(|_| Controller::new(cfg)).collect();
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut moved = 0;
    let mut hot = Vec::with_capacity(CYCLES);
    for _ in 0..CYCLES {
        let t0 = Instant::now();
        moved += cycle(&mut controllers, &mut noise);
        hot.push(t0.elapsed().as_nanos() as u64);
    }
    let mut sweep = vec![0u64; 2 << 20];
    // Cold, then cold with every window prefetched before other work of
    // the driver's (a stand-in for the look-back: 10 µs of its own
    // memory traffic), alternated cycle by cycle.
    let mut cold = Vec::with_capacity(COLD_CYCLES);
    let mut prefetched = Vec::with_capacity(COLD_CYCLES);
    let mut other = vec![0u64; 4096];
    for k in 0..2 * COLD_CYCLES as u64 {
        for (i, x) in sweep.iter_mut().enumerate().step_by(8) {
            *x = x.wrapping_add(i as u64 ^ k);
        }
        black_box(&sweep);
        let prefetch = k % 2 == 1;
        if prefetch {
            controllers.iter().for_each(Controller::prefetch);
        }
        let t_other = Instant::now();
        while t_other.elapsed().as_nanos() < 10_000 {
            for (i, x) in other.iter_mut().enumerate() {
                *x = x.wrapping_add(i as u64);
            }
            black_box(&other);
        }
        let t0 = Instant::now();
        moved += cycle(&mut controllers, &mut noise);
        let ns = t0.elapsed().as_nanos() as u64;
        if prefetch {
            prefetched.push(ns);
        } else {
            cold.push(ns);
        }
    }
    let (hot, cold, prefetched) = (
        per_cycle_ns(hot),
        per_cycle_ns(cold),
        per_cycle_ns(prefetched),
    );
    println!("{THREADS} controllers per cycle      median      p99");
    println!("hot (back to back)        {:>8} ns {:>8} ns", hot.0, hot.1);
    println!(
        "cold (caches swept)       {:>8} ns {:>8} ns",
        cold.0, cold.1
    );
    println!(
        "cold, windows prefetched  {:>8} ns {:>8} ns",
        prefetched.0, prefetched.1
    );
    println!(
        "reservations moved: {moved} in {} cycles",
        CYCLES + 2 * COLD_CYCLES
    );
}
