//! How often the feedback controllers would change a reservation on a
//! recorded load: replays the CPU time every thread used per cycle, as
//! `resound profile --out DIR` wrote it (`cycles.csv`: the driver's
//! `driver_cpu_ns`; `clients.csv`: each client's `cpu_ns`), through one
//! [`Controller`] per thread with the server's default settings, and prints
//! per thread the changes it returns by kind: the budget raised, the budget
//! cut, or only the shape (period and deadline: a light thread entering,
//! through its bridge, or leaving). Each change is one `sched_setattr` on
//! the driver thread. Xrun bumps and light-shape exits after late wake-ups
//! come from the cycle's verdicts, not from the samples, and are not
//! replayed.
//!
//! `cargo run -p resound-sched --release --example controller_replay -- DIR [PERIOD_NS]`
//! (PERIOD_NS: the audio period, default 128 frames at 48 kHz)

use resound_sched::{Controller, ControllerConfig, Reservation};
use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

/// Per-cycle CPU samples (ns) per thread, in cycle order.
type Samples = BTreeMap<String, Vec<(u64, u64)>>;

/// Reads column `cpu` of `file` (with `cycle` and, when `who` is a
/// column, the thread's name from it; else the name `who`).
fn read(file: &Path, who: &str, cpu: &str, into: &mut Samples) -> Result<(), Box<dyn Error>> {
    let mut csv = csv::Reader::from_path(file)?;
    let head = csv.headers()?.clone();
    let col = |name: &str| head.iter().position(|h| h == name);
    let (cycle_at, cpu_at) = (
        col("cycle").ok_or("no cycle column")?,
        col(cpu).ok_or("no CPU column")?,
    );
    let name_at = col(who);
    for record in csv.records() {
        let record = record?;
        let number = |i: usize| record.get(i).and_then(|v| v.parse::<u64>().ok());
        let (Some(cycle), Some(used)) = (number(cycle_at), number(cpu_at)) else {
            continue;
        };
        let name = name_at.and_then(|i| record.get(i)).unwrap_or(who);
        into.entry(name.to_string())
            .or_default()
            .push((cycle, used));
    }
    Ok(())
}

/// Changes returned by a controller, by kind.
#[derive(Default)]
struct Changes {
    raised: u32,
    cut: u32,
    reshaped: u32,
}

impl Changes {
    fn note(&mut self, from: Reservation, to: Reservation) {
        if to.runtime_ns > from.runtime_ns {
            self.raised += 1;
        } else if to.runtime_ns < from.runtime_ns {
            self.cut += 1;
        } else {
            self.reshaped += 1;
        }
    }

    fn total(&self) -> u32 {
        self.raised + self.cut + self.reshaped
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .ok_or("usage: controller_replay DIR [PERIOD_NS]")?;
    let period_ns = match args.next() {
        Some(p) => p.parse()?,
        None => 2_666_667,
    };
    let dir = Path::new(&dir);
    let mut samples = Samples::new();
    read(
        &dir.join("cycles.csv"),
        "driver",
        "driver_cpu_ns",
        &mut samples,
    )?;
    read(&dir.join("clients.csv"), "client", "cpu_ns", &mut samples)?;
    let cfg = ControllerConfig {
        audio_period_ns: period_ns,
        ..Default::default()
    };
    println!("thread        cycles  raised     cut reshaped   total");
    let (mut all, mut cycles) = (Changes::default(), 0);
    for (name, mut v) in samples {
        v.sort_unstable();
        let mut c = Controller::new(cfg);
        let mut changes = Changes::default();
        for &(_, used) in &v {
            let before = c.reservation();
            if let Some(next) = c.cycle_begin(used) {
                changes.note(before, next);
            }
        }
        println!(
            "{name:<12} {:>7} {:>7} {:>7} {:>8} {:>7}",
            v.len(),
            changes.raised,
            changes.cut,
            changes.reshaped,
            changes.total()
        );
        cycles = cycles.max(v.len());
        all.raised += changes.raised;
        all.cut += changes.cut;
        all.reshaped += changes.reshaped;
    }
    println!(
        "all          {cycles:>7} {:>7} {:>7} {:>8} {:>7}  ({:.3} per cycle)",
        all.raised,
        all.cut,
        all.reshaped,
        all.total(),
        all.total() as f64 / cycles.max(1) as f64
    );
    Ok(())
}
