//! Progress of `resound experiment run` on stderr: on a terminal, one bar
//! over all configurations with the current one, its seconds left and the
//! time left in all (indicatif); otherwise (CI logs, pipes) a line when a
//! configuration starts and ends and every ten seconds. Main thread only.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Seconds each configuration is expected to take beyond its duration
/// (server and clients starting, records read), for the time-left estimate.
pub const OVERHEAD_S: f64 = 4.0;

/// The progress of a whole experiment (or of `--all`).
pub struct Progress {
    bar: Option<ProgressBar>,
    total_s: f64,
    done_s: f64,
    started: Instant,
    last_line: Instant,
    current: String,
}

impl Progress {
    /// A progress display for `total_s` seconds of runs.
    pub fn new(total_s: f64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(
                Some((total_s * 1000.0) as u64),
                ProgressDrawTarget::stderr(),
            );
            b.set_style(
                ProgressStyle::with_template(
                    "[experiment] {wide_msg} [{bar:25}] {percent:>3}% ({eta} left)",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            b
        });
        Progress {
            bar,
            total_s,
            done_s: 0.0,
            started: Instant::now(),
            last_line: Instant::now(),
            current: String::new(),
        }
    }

    /// Prints a line (above the bar on a terminal).
    pub fn line(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(format!("[experiment] {msg}")),
            None => eprintln!("[experiment] {msg}"),
        }
    }

    /// A configuration starts; it is expected to take `expected_s`.
    pub fn begin(&mut self, what: &str) {
        self.current = what.to_string();
        self.line(&format!("{what}: starting"));
    }

    /// Time in the current configuration: `elapsed_s` of `duration_s`.
    pub fn tick(&mut self, elapsed_s: f64, duration_s: f64, note: &str) {
        let left = (duration_s - elapsed_s).max(0.0);
        let msg = format!("{} · {left:.0} s left · {note}", self.current);
        match &self.bar {
            Some(b) => {
                b.set_message(msg);
                b.set_position(((self.done_s + elapsed_s) * 1000.0) as u64);
            }
            None => {
                if self.last_line.elapsed() >= Duration::from_secs(10) {
                    self.last_line = Instant::now();
                    let all_left = self.eta_s(elapsed_s);
                    eprintln!("[experiment] {msg} · about {all_left:.0} s left in all");
                }
            }
        }
    }

    /// The current configuration ended; it was planned as `planned_s`.
    pub fn end(&mut self, planned_s: f64, summary: &str) {
        self.done_s += planned_s;
        self.line(&format!("{}: {summary}", self.current));
        if let Some(b) = &self.bar {
            b.set_position((self.done_s * 1000.0) as u64);
        }
    }

    /// Seconds left in all, from the rate so far.
    fn eta_s(&self, elapsed_in_current: f64) -> f64 {
        let done = self.done_s + elapsed_in_current;
        let rate = self.started.elapsed().as_secs_f64() / done.max(1.0);
        (self.total_s - done).max(0.0) * rate
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
