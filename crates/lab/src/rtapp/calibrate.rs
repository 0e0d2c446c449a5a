//! [`Calibration`]: rt-app's "ns per loop", the cost of one iteration of the
//! busy loop its `"run"` events repeat. rt-app measures it itself when its
//! JSON says `"calibration": "CPU0"` and prints `pLoad = 31ns`; we run that
//! once, read the number, and pass it back as an integer so later runs skip
//! the measurement (which takes a few seconds).
//!
//! rt-app times its calibration loops on CLOCK_MONOTONIC and stops when two
//! consecutive samples agree within 2 %, so a preempted sample inflates the
//! value (later jobs then do less work than asked) and a busy CPU can keep
//! it from ending. We therefore run it at SCHED_FIFO 1 when that is
//! permitted (above every SCHED_OTHER load, below every real-time thread)
//! and callers measure before they start their own load (the experiment
//! runner does it before the audio graph). Runs on the caller's thread.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// rt-app's ns per loop, measured by rt-app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    ns_per_loop: u32,
}

impl Calibration {
    /// A known value (from an earlier measurement).
    pub fn from_ns_per_loop(ns_per_loop: u32) -> Result<Calibration, String> {
        if ns_per_loop == 0 {
            return Err("rt-app's ns per loop must be > 0".into());
        }
        Ok(Calibration { ns_per_loop })
    }

    /// The value rt-app gets as `"calibration"`.
    pub fn ns_per_loop(&self) -> u32 {
        self.ns_per_loop
    }

    /// Runs rt-app's own calibration on CPU0 (a one-job SCHED_OTHER task, its
    /// files in `work_dir`) and reads the `pLoad = Nns` it prints.
    pub fn measure(work_dir: &Path) -> Result<Calibration, String> {
        let bin = super::process::rtapp_binary()?;
        std::fs::create_dir_all(work_dir).map_err(|e| format!("{}: {e}", work_dir.display()))?;
        let spec = serde_json::json!({
            "global": {
                "duration": -1,
                "calibration": "CPU0",
                "logdir": work_dir.display().to_string(),
                "log_basename": "calibration",
            },
            "tasks": { "calib": { "loop": 1, "phases": { "p": { "loop": 1, "run": 100 } } } },
        });
        let file = work_dir.join("calibration.json");
        std::fs::write(&file, spec.to_string()).map_err(|e| format!("{}: {e}", file.display()))?;
        let out_file = work_dir.join("calibration.out");
        let mut cmd = Command::new(&bin);
        cmd.arg(&file);
        if resound_sched::fifo_permitted() {
            fifo_one(&mut cmd);
        }
        let out = run_with_timeout(&mut cmd, &out_file, Duration::from_secs(60))?;
        parse_ploads(&out).ok_or_else(|| {
            format!("rt-app's calibration printed no \"pLoad = <n>ns\" line:\n{out}")
        })
    }

    /// Where commands keep the calibration between runs:
    /// `$XDG_CACHE_HOME/resound/rtapp-calibration.json` (`~/.cache` without
    /// it; the temporary directory without a home).
    pub fn default_cache() -> std::path::PathBuf {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("resound").join("rtapp-calibration.json")
    }

    /// The calibration cached in `cache` (a JSON file), or a new measurement
    /// (in a directory beside it) written there.
    pub fn load_or_measure(cache: &Path) -> Result<Calibration, String> {
        if let Ok(text) = std::fs::read_to_string(cache) {
            let v: Option<u32> = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["ns_per_loop"].as_u64())
                .and_then(|n| u32::try_from(n).ok());
            if let Some(c) = v.and_then(|n| Calibration::from_ns_per_loop(n).ok()) {
                return Ok(c);
            }
        }
        let dir = cache.with_extension("measure.d");
        let c = Calibration::measure(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let c = c?;
        if let Some(parent) = cache.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let text = serde_json::json!({
            "ns_per_loop": c.ns_per_loop,
            "measured_by": "rt-app's calibration on CPU0",
        });
        std::fs::write(cache, text.to_string()).map_err(|e| format!("{}: {e}", cache.display()))?;
        Ok(c)
    }
}

/// Makes `cmd` start at SCHED_FIFO priority 1.
fn fifo_one(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only
    // calls sched_setscheduler(2), which is async-signal-safe, on a
    // sched_param on its own stack; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            let p = libc::sched_param { sched_priority: 1 };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The `N` of rt-app's `pLoad = Nns` notice.
fn parse_ploads(out: &str) -> Option<Calibration> {
    let rest = out.split("pLoad = ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Calibration::from_ns_per_loop(digits.parse().ok()?).ok()
}

/// Runs `cmd` to its end (killed after `timeout`), its stdout and stderr
/// going to the file `path`, and returns them; an error if it failed.
fn run_with_timeout(cmd: &mut Command, path: &Path, timeout: Duration) -> Result<String, String> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f2 = f.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(f)
        .stderr(f2)
        .spawn()
        .map_err(|e| format!("cannot start rt-app: {e}"))?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(path);
            return Err(format!(
                "rt-app's calibration did not end within {timeout:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = std::fs::read_to_string(path).unwrap_or_default();
    let _ = std::fs::remove_file(path);
    if !status.success() {
        return Err(format!("rt-app's calibration failed ({status}):\n{out}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rtapps_pload_notice() {
        let out = "[rt-app] <notice> Calibrate ns per loop\n\
                   [rt-app] <notice> pLoad = 31ns : calib_cpu 0\n";
        assert_eq!(parse_ploads(out).unwrap().ns_per_loop(), 31);
        assert!(parse_ploads("[rt-app] <notice> pLoad = 0ns").is_none());
        assert!(parse_ploads("nothing").is_none());
    }
}
