//! The ALSA driver's cost and offline rendering speed:
//! `cargo bench -p resound --bench alsa_driver`.
//!
//! 1. Driver CPU per cycle on the test sound card (`resoundtest`, the
//!    alsa-lib ioplug plugin of `resound_lab::harness::alsa`, paced on its
//!    own timer like a card) beside the dummy driver, at 48 kHz with 64, 128
//!    and 256 frames, no clients. Each repetition starts one fresh server per
//!    driver, the two alternated (dummy, alsa, dummy, alsa, ...) so machine
//!    noise falls on both; the figure is the driver thread's CPU time
//!    (`/proc/PID/task/TID/schedstat`: waiting for the device, reading,
//!    converting, writing, the cycle) over the window divided by the cycles
//!    run. The table gives the mean and spread (min..max) of each and of the
//!    per-repetition ratio alsa / dummy.
//! 2. Offline render speed: `resoundd -d file` rendering a 10 s mono input
//!    through a chain of 10 `resound-tool pass` clients, as fast as the graph
//!    goes (freewheel); speed = input seconds / wall seconds from the last
//!    connection (which starts the render) to the server's exit.
//!
//! Needs the release binaries next to the bench executable
//! (`cargo build --release --bins -p resound`), a C compiler and alsa-lib's
//! headers (`libasound2-dev`) to build the test card.

use resound_client::Requests;
use resound_lab::harness::alsa::{self, AlsaCard, AlsaSpec};
use resound_lab::harness::{Bins, ChildOptions, Server, ServerSpec, StderrMode};
use std::path::Path;
use std::time::{Duration, Instant};

const RATE: u32 = 48_000;
const WARMUP: Duration = Duration::from_millis(700);
const MEASURE: Duration = Duration::from_secs(2);
const REPETITIONS: usize = 4;
const RENDER_SECONDS: u32 = 10;
const RENDER_CLIENTS: usize = 10;

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
    let result = bench(&bins, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn bench(bins: &Bins, dir: &Path) -> Res<()> {
    let card = AlsaCard::install(dir, &AlsaSpec::default()).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for frames in [64u32, 128, 256] {
        let p = frames.to_string();
        let (mut dummy, mut alsa) = (Vec::new(), Vec::new());
        for _ in 0..REPETITIONS {
            dummy.push(measure(
                bins,
                &["-d", "dummy", "-r", "48000", "-p", &p],
                &[],
            )?);
            let args = ["-d", "alsa", "-d", alsa::PCM_CARD, "-r", "48000", "-p", &p];
            alsa.push(measure(bins, &args, &card.env())?);
        }
        rows.push((frames, dummy, alsa));
    }
    let speed = render_speed(bins, dir)?;
    print_table(&rows, speed);
    Ok(())
}

/// Mean, min and max of `v`.
fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, min, max)
}

/// One measurement: (driver CPU ns per cycle, cycles).
type Sample = (f64, u64);

fn print_table(rows: &[(u32, Vec<Sample>, Vec<Sample>)], speed: (f64, f64)) {
    println!(
        "\ndriver thread CPU per cycle (us), 48 kHz, no clients, {REPETITIONS} alternated \
         repetitions of {} s; ALSA on the resoundtest card (ioplug, paced), 2+2 channels",
        MEASURE.as_secs()
    );
    println!(
        "{:>6} {:>22} {:>22} {:>20} {:>14}",
        "frames",
        "dummy us (min..max)",
        "alsa us (min..max)",
        "alsa/dummy (min..max)",
        "cycles d/a"
    );
    let us = |s: &[Sample]| stats(&s.iter().map(|x| x.0 / 1e3).collect::<Vec<_>>());
    for (f, d, a) in rows {
        let (dm, dl, dh) = us(d);
        let (am, al, ah) = us(a);
        let ratios: Vec<f64> = d.iter().zip(a).map(|(d, a)| a.0 / d.0.max(1.0)).collect();
        let (rm, rl, rh) = stats(&ratios);
        let cycles = |s: &[Sample]| s.iter().map(|x| x.1).sum::<u64>();
        println!(
            "{f:>6} {dm:>8.2} ({dl:>5.2}..{dh:>5.2}) {am:>8.2} ({al:>5.2}..{ah:>5.2}) \
             {rm:>6.2} ({rl:>4.2}..{rh:>5.2}) {:>6}/{:<6}",
            cycles(d),
            cycles(a)
        );
    }
    println!(
        "\noffline render, -d file -p 256, {RENDER_SECONDS} s mono input through \
         {RENDER_CLIENTS} pass clients: {:.1} x real time ({:.2} s wall)",
        speed.0, speed.1
    );
}

/// Starts a server, lets it warm up, and returns (driver CPU ns per cycle, cycles measured).
fn measure(bins: &Bins, args: &[&str], env: &[(String, String)]) -> Res<Sample> {
    eprintln!("bench: resoundd {}", args.join(" "));
    let srv = Server::start(spec(bins, args, env))?;
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

/// A server under the bench's name, its stderr kept (not echoed).
fn spec(bins: &Bins, args: &[&str], env: &[(String, String)]) -> ServerSpec {
    let mut spec = ServerSpec::new(bins.clone(), "alsabench", args);
    spec.env.extend(env.iter().cloned());
    spec.child = ChildOptions {
        stderr: StderrMode::Keep {
            keep: 200,
            echo: None,
        },
        ..ChildOptions::default()
    };
    spec
}

/// Renders the input through the chain of clients; (× real time, wall s).
fn render_speed(bins: &Bins, dir: &Path) -> Res<(f64, f64)> {
    let input = dir.join("render-in.wav");
    let output = dir.join("render-out.wav");
    write_input(&input)?;
    let (i, o) = (input.to_string_lossy(), output.to_string_lossy());
    let args = [
        "-d",
        "file",
        "-p",
        "256",
        "--start-when-connected",
        "--input",
        &i,
        "--output",
        &o,
    ];
    eprintln!("bench: resoundd {}", args.join(" "));
    let mut srv = Server::start(spec(bins, &args, &[]))?;
    let mut tools = Vec::new();
    let mut t0 = Instant::now();
    for k in 0..RENDER_CLIENTS {
        let from = match k {
            0 => "system:capture_1".to_string(),
            _ => format!("c{}:out", k - 1),
        };
        let mut a = vec!["-c".to_string(), format!("{from}=@:in")];
        if k + 1 == RENDER_CLIENTS {
            a.extend(["-c".into(), "@:out=system:playback_1".into()]);
            t0 = Instant::now();
        }
        a.push("pass".into());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (child, _) = srv.tool(&format!("c{k}"), &a, &mut || Ok(()))?;
        tools.push(child);
    }
    loop {
        if let Some(st) = srv.exited() {
            if !st.success() {
                return Err(format!("resoundd -d file: {st}"));
            }
            break;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err("the render did not end in 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let wall = t0.elapsed().as_secs_f64();
    drop(tools);
    Ok((RENDER_SECONDS as f64 / wall, wall))
}

/// A mono float WAV of a 440 Hz sine, RENDER_SECONDS long.
fn write_input(path: &Path) -> Res<()> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut w = hound::WavWriter::create(path, spec).map_err(|e| e.to_string())?;
    for i in 0..RATE * RENDER_SECONDS {
        let x = (i as f32 * 440.0 * std::f32::consts::TAU / RATE as f32).sin() * 0.5;
        w.write_sample(x).map_err(|e| e.to_string())?;
    }
    w.finalize().map_err(|e| e.to_string())
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
