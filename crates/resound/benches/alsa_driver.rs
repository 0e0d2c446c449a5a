//! Driver CPU per cycle of the ALSA driver beside the dummy driver's:
//! `cargo bench -p resound --bench alsa_driver`.
//!
//! For 64, 128 and 256 frames at 48 kHz, one fresh server per driver, no
//! clients: the driver thread's CPU time (`/proc/PID/task/TID/schedstat`,
//! all of it: waiting for the device, reading, converting, writing, the
//! cycle) over 3 s divided by the cycles run. The ALSA driver runs on
//! alsa-lib's `file` plugin over `null` (2 channels each way, float): its
//! capture reads a FIFO this bench feeds one period at a time on absolute
//! deadlines (real pacing at the nominal rate), its playback goes to
//! /dev/null. The test plugin of the `ioplug` work will give a card-like
//! device later.
//!
//! Needs the release binaries next to the bench executable
//! (`cargo build --release --bins -p resound`).

use resound_client::Requests;
use resound_lab::harness::{Bins, ChildOptions, Server, ServerSpec, StderrMode};
use resound_shm::time::{frames_to_ns, monotonic_ns, sleep_until};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const RATE: u32 = 48_000;
const WARMUP: Duration = Duration::from_millis(700);
const MEASURE: Duration = Duration::from_secs(3);

type Res<T> = Result<T, String>;

fn main() {
    if let Err(e) = run() {
        eprintln!("alsa_driver bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let bins = Bins::beside_current_exe()?;
    let dir = std::env::temp_dir().join(format!("resound-alsa-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for frames in [64u32, 128, 256] {
        let dummy = measure(
            &bins,
            &["-d", "dummy", "-r", "48000", "-p", &frames.to_string()],
            &[],
        )?;
        let alsa = alsa_run(&bins, &dir, frames)?;
        rows.push((frames, dummy, alsa));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("\ndriver thread CPU per cycle (us), 48 kHz, no clients; ALSA on file plugin over null (FIFO-paced capture), float, 2+2 channels");
    println!(
        "{:>7} {:>12} {:>8} {:>12} {:>8}",
        "frames", "dummy us", "cycles", "alsa us", "cycles"
    );
    for (f, d, a) in rows {
        println!(
            "{f:>7} {:>12.2} {:>8} {:>12.2} {:>8}",
            d.0 / 1e3,
            d.1,
            a.0 / 1e3,
            a.1
        );
    }
    Ok(())
}

/// Starts the ALSA server on a FIFO-fed capture and measures it.
fn alsa_run(bins: &Bins, dir: &Path, frames: u32) -> Res<(f64, u64)> {
    let fifo = dir.join(format!("in{frames}.fifo"));
    let _ = std::fs::remove_file(&fifo);
    let ok = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map_err(|e| e.to_string())?;
    if !ok.success() {
        return Err("mkfifo failed".into());
    }
    let conf = dir.join(format!("asound{frames}.conf"));
    let text = format!(
        "pcm.bench_cap {{ type file slave.pcm {{ type null }} file \"/dev/null\" infile \"{}\" format \"raw\" }}\n\
         pcm.bench_play {{ type file slave.pcm {{ type null }} file \"/dev/null\" format \"raw\" }}\n",
        fifo.display()
    );
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let feed = feeder(fifo, frames, stop.clone());
    let env = format!("/usr/share/alsa/alsa.conf:{}", conf.display());
    let p = frames.to_string();
    let args = [
        "-d",
        "alsa",
        "-C",
        "bench_cap",
        "-P",
        "bench_play",
        "-r",
        "48000",
        "-p",
        &p,
    ];
    let args = [&args[..], &["-i", "2", "-o", "2", "--format", "float"]].concat();
    let r = measure(bins, &args, &[("ALSA_CONFIG_PATH", &env)]);
    stop.store(true, Ordering::Release);
    let _ = feed.join();
    r
}

/// Writes one period of float stereo silence per period, on absolute deadlines.
fn feeder(fifo: PathBuf, frames: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
            return;
        };
        let chunk = vec![0u8; frames as usize * 2 * 4];
        let period = frames_to_ns(frames as u64, RATE);
        let mut next = monotonic_ns();
        while !stop.load(Ordering::Acquire) {
            if f.write_all(&chunk).is_err() {
                return;
            }
            next += period;
            sleep_until(next);
        }
    })
}

/// Starts a server, lets it warm up, and returns (driver CPU ns per cycle, cycles measured).
fn measure(bins: &Bins, args: &[&str], env: &[(&str, &str)]) -> Res<(f64, u64)> {
    eprintln!("bench: resoundd {}", args.join(" "));
    let mut spec = ServerSpec::new(bins.clone(), "alsabench", args);
    spec.env
        .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    spec.child = ChildOptions {
        stderr: StderrMode::Keep {
            keep: 200,
            echo: None,
        },
        ..ChildOptions::default()
    };
    let srv = Server::start(spec)?;
    std::thread::sleep(WARMUP);
    let tid = driver_tid(srv.pid()).ok_or("no resound-driver thread")?;
    let ctl = srv.try_ctl().ok_or("no control session")?;
    let cycles = |c: &resound_client::ControlSession| {
        c.status().map(|s| s.cycles).map_err(|e| e.to_string())
    };
    let (cpu0, c0) = (schedstat(srv.pid(), tid)?, cycles(&ctl)?);
    std::thread::sleep(MEASURE);
    let (cpu1, c1) = (schedstat(srv.pid(), tid)?, cycles(&ctl)?);
    drop(ctl);
    drop(srv);
    let n = c1.saturating_sub(c0).max(1);
    Ok(((cpu1 - cpu0) as f64 / n as f64, n))
}

/// The driver thread of process `pid`.
fn driver_tid(pid: u32) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .find_map(|e| {
            let tid = e.ok()?.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            (comm.trim() == "resound-driver").then_some(tid)
        })
}

/// Nanoseconds thread `tid` has run on a CPU.
fn schedstat(pid: u32, tid: u32) -> Res<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .map_err(|e| e.to_string())?;
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("schedstat: {s:?}"))
}
