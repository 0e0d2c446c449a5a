//! Machine stalls, as `cyclictest` (rt-tests, the field's latency probe)
//! sees them: one SCHED_FIFO 99 thread pinned to each CPU wakes every
//! 500 us; a wake-up later than the trigger is a spike, printed at the end
//! with its length and when it ended (CLOCK_MONOTONIC). Nothing of the audio
//! graph runs above SCHED_FIFO 99 except SCHED_DEADLINE reservations, whose
//! budgets are a few tens of microseconds here; so a spike of hundreds of
//! microseconds means the CPU itself was not available (the hypervisor ran
//! something else, a long interrupt or a non-preemptible kernel section).
//! The long runs use it to tell a chain's lost cycle that the machine
//! caused from one that resound caused.
//!
//! cyclictest holds `/dev/cpu_dma_latency` at 0 while it runs (its
//! default, and the usual real-time tuning): idle CPUs poll instead of
//! halting, for the run it watches too. Without that, on a virtual machine
//! every wake-up of a halted CPU waits for the hypervisor, and those
//! wake-ups, not stalls of a running CPU, dominate what it sees (on the
//! development VM: 148 wake-ups of 500 us or more per second with
//! `--laptop`, 14 without).
//!
//! Runs on the caller's thread; cyclictest is its own process, stopped with
//! SIGINT (it then prints its summary and spikes), and killed by the drop
//! guard on error paths.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Microseconds between two wake-ups of each probe thread.
pub const PROBE_INTERVAL_US: u32 = 500;
/// Spikes remembered at most (cyclictest's `--spike-nodes`).
const MAX_SPIKES: u32 = 200_000;

/// One stall: a probe thread woke `len_ns` late, at `end_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// The probe thread (= the CPU it is pinned to).
    pub cpu: u32,
    /// When it woke (CLOCK_MONOTONIC ns).
    pub end_ns: u64,
    /// How late it woke (ns).
    pub len_ns: u64,
}

impl Stall {
    /// When the CPU stopped being available (CLOCK_MONOTONIC ns).
    pub fn start_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.len_ns)
    }
}

/// What cyclictest saw over a run.
#[derive(Debug, Clone, Default)]
pub struct Stalls {
    /// Every spike above the trigger, by the time it ended.
    pub spikes: Vec<Stall>,
    /// Per probe thread: (wake-ups, worst latency in us).
    pub per_cpu: Vec<(u64, u64)>,
    /// The trigger (us).
    pub trigger_us: u32,
}

impl Stalls {
    /// Parses cyclictest's `-q --spike` output: summary lines
    /// `T: 0 ( 123) P:99 I:500 C:   3707 Min: 15 Act: 28 Avg: 77 Max: 30387`
    /// and spike lines `T: 0 Spike:     250: TS:   2282728593` (us).
    pub fn parse(text: &str, trigger_us: u32) -> Stalls {
        let mut out = Stalls {
            trigger_us,
            ..Stalls::default()
        };
        for line in text.lines() {
            if let Some(s) = parse_spike(line) {
                out.spikes.push(s);
            } else if let Some((cpu, wakeups, max)) = parse_summary(line) {
                let cpu = cpu as usize;
                if out.per_cpu.len() <= cpu {
                    out.per_cpu.resize(cpu + 1, (0, 0));
                }
                out.per_cpu[cpu] = (wakeups, max);
            }
        }
        out.spikes.sort_by_key(|s| s.end_ns);
        out
    }

    /// Whether some CPU stalled for at least `min_ns` at a time that
    /// overlaps `[from_ns, to_ns]`.
    pub fn stalled_within(&self, from_ns: u64, to_ns: u64, min_ns: u64) -> bool {
        // Sorted by end: skip those that ended before the window; none that
        // ends later than the window's end plus the longest stall can
        // begin inside it.
        let longest = self.spikes.iter().map(|s| s.len_ns).max().unwrap_or(0);
        let first = self.spikes.partition_point(|s| s.end_ns < from_ns);
        self.spikes[first..]
            .iter()
            .take_while(|s| s.end_ns <= to_ns.saturating_add(longest))
            .any(|s| s.len_ns >= min_ns && s.start_ns() <= to_ns)
    }

    /// The worst stall (us) over every CPU.
    pub fn worst_us(&self) -> u64 {
        self.per_cpu.iter().map(|c| c.1).max().unwrap_or(0)
    }
}

/// `T: 0 Spike:     250: TS:   2282728593` → the stall.
fn parse_spike(line: &str) -> Option<Stall> {
    let rest = line.trim().strip_prefix("T:")?;
    let (cpu, rest) = rest.split_once("Spike:")?;
    let (len, rest) = rest.split_once(':')?;
    let ts = rest.trim().strip_prefix("TS:")?;
    let us = |s: &str| s.trim().parse::<u64>().ok();
    Some(Stall {
        cpu: cpu.trim().parse().ok()?,
        len_ns: us(len)? * 1000,
        end_ns: us(ts)? * 1000,
    })
}

/// `T: 0 (11653) P:99 I:500 C:   3707 Min: 15 Act: 28 Avg: 77 Max: 30387`
/// → (thread, wake-ups, worst us).
fn parse_summary(line: &str) -> Option<(u32, u64, u64)> {
    let rest = line.trim().strip_prefix("T:")?;
    let (cpu, rest) = rest.split_once('(')?;
    let field = |name: &str| -> Option<u64> {
        let after = rest.split_once(name)?.1.trim_start();
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    Some((cpu.trim().parse().ok()?, field("C:")?, field("Max:")?))
}

/// A running cyclictest; [`StallWatch::stop`] ends it and returns what it saw.
pub struct StallWatch {
    child: Option<std::process::Child>,
    trigger_us: u32,
}

impl StallWatch {
    /// Starts cyclictest on every CPU at SCHED_FIFO 99, remembering spikes
    /// longer than `trigger_us`, for at most `max_run` (it is stopped
    /// earlier by [`StallWatch::stop`]). Errors: cyclictest missing, or it
    /// could not set its scheduling (it then exits at once).
    pub fn start(trigger_us: u32, max_run: Duration) -> Result<StallWatch, String> {
        let secs = max_run.as_secs().max(1);
        let child = Command::new("cyclictest")
            // As cyclictest runs by default: it holds /dev/cpu_dma_latency
            // at 0, so idle CPUs poll instead of halting while it runs (see
            // the module's documentation).
            .args(["-q", "-m", "-p", "99", "-a", "-t", "-d", "0"])
            .arg(format!("-i{PROBE_INTERVAL_US}"))
            .arg(format!("--spike={trigger_us}"))
            .arg(format!("--spike-nodes={MAX_SPIKES}"))
            .arg(format!("-D{secs}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cyclictest (Debian package rt-tests): {e}"))?;
        let mut watch = StallWatch {
            child: Some(child),
            trigger_us,
        };
        // A cyclictest that cannot run says so and exits at once.
        std::thread::sleep(Duration::from_millis(300));
        if let Some(child) = watch.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                watch.child = None;
                return Err(format!("cyclictest exited ({status}): {}", err.trim()));
            }
        }
        Ok(watch)
    }

    /// Stops cyclictest (SIGINT, as a user's Ctrl-C) and parses its output.
    pub fn stop(mut self) -> Result<Stalls, String> {
        let child = self.child.take().ok_or("cyclictest is not running")?;
        // SAFETY: kill(2) with a pid we spawned and have not reaped (the
        // Child is still owned here), so it cannot name another process.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let t0 = Instant::now();
        let out = child
            .wait_with_output()
            .map_err(|e| format!("cyclictest: {e}"))?;
        if t0.elapsed() > Duration::from_secs(10) {
            eprintln!("cyclictest took {:?} to stop", t0.elapsed());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let stalls = Stalls::parse(&text, self.trigger_us);
        if stalls.per_cpu.is_empty() {
            return Err(format!(
                "cyclictest printed no summary ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(stalls)
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "# /dev/cpu_dma_latency set to 0us
T: 0 (11653) P:99 I:500 C:   3707 Min:     15 Act:   28 Avg:   77 Max:   30387
T: 1 (11654) P:99 I:500 C:   3790 Min:     12 Act:   50 Avg:   64 Max:   29014

T: 1 Spike:     113: TS:   2345722120
T: 0 Spike:   30387: TS:   2345826395
";

    #[test]
    fn parses_summaries_and_spikes() {
        let s = Stalls::parse(OUTPUT, 100);
        assert_eq!(s.per_cpu, vec![(3707, 30387), (3790, 29014)]);
        assert_eq!(s.worst_us(), 30387);
        assert_eq!(
            s.spikes,
            vec![
                Stall {
                    cpu: 1,
                    end_ns: 2_345_722_120_000,
                    len_ns: 113_000
                },
                Stall {
                    cpu: 0,
                    end_ns: 2_345_826_395_000,
                    len_ns: 30_387_000
                },
            ]
        );
    }

    #[test]
    fn a_window_overlapping_a_long_enough_stall_is_stalled() {
        let s = Stalls::parse(OUTPUT, 100);
        let big_start = 2_345_826_395_000 - 30_387_000;
        // Inside, just touching either end, and not at all.
        assert!(s.stalled_within(big_start + 1000, big_start + 2000, 500_000));
        assert!(s.stalled_within(big_start - 5000, big_start, 500_000));
        assert!(s.stalled_within(2_345_826_395_000, 2_345_826_400_000, 500_000));
        assert!(!s.stalled_within(2_345_826_395_001, 2_345_826_400_000, 500_000));
        // The 113 us stall is too short to count at 500 us, and counts at 100.
        let short = 2_345_722_120_000 - 50_000;
        assert!(!s.stalled_within(short, short + 1, 500_000));
        assert!(s.stalled_within(short, short + 1, 100_000));
    }

    #[test]
    fn lines_of_other_shapes_are_ignored() {
        let s = Stalls::parse("T: x Spike: y: TS: z\nT: 0 (1) nonsense\nrandom\n", 1);
        assert!(s.spikes.is_empty());
        assert!(s.per_cpu.is_empty());
    }
}
