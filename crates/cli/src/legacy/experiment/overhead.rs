//! The tracer-overhead experiment (Table I of the paper): a CPU-heavy job
//! (`dd bs=4k | gzip -6` of a generated text file) run untraced, under `strace -f`
//! with the same events, under resound's ptrace tracer and under its kernel
//! tracer (each tracer a separate `resound legacy trace` process attached
//! before the job starts its work); total (wall) time and system time of the
//! job, mean ± σ over the repetitions. With strace the times include strace
//! itself, as `time strace` measures.

use super::{mean_sd, write_rows, ExperimentArgs};
use resound_legacy::events::DEFAULT;
use resound_profiler::plots::{render, Chart, Series};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const VARIANTS: [&str; 4] = ["none", "strace", "ptrace", "kernel"];
/// The paper's Table I (ffmpeg transcoding, s): total and system time.
const PAPER: [(&str, &str, &str); 4] = [
    ("none", "21.02 ± 0.14", "0.15 ± 0.02"),
    ("strace", "22.03 ± 0.11 (+4.8 %)", "0.84 ± 0.04"),
    ("ptrace", "21.60 ± 0.16 (+2.8 %, qostrace)", "0.51 ± 0.04"),
    ("kernel", "(future work)", ""),
];

/// One run of the job.
#[derive(Debug, Serialize)]
struct Row {
    tracer: &'static str,
    rep: usize,
    total_s: f64,
    user_s: f64,
    system_s: f64,
    cpu_s: f64,
}

/// A compressible text file of `mb` MiB (words from a small vocabulary).
fn make_input(dir: &Path, mb: usize) -> Result<PathBuf, String> {
    const WORDS: [&str; 16] = [
        "frame",
        "period",
        "budget",
        "audio",
        "video",
        "server",
        "thread",
        "deadline",
        "jitter",
        "sample",
        "buffer",
        "latency",
        "cycle",
        "client",
        "kernel",
        "reservation",
    ];
    let mut s = String::with_capacity(mb << 20);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while s.len() < mb << 20 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(WORDS[(x >> 60) as usize]);
        s.push(if x & 0xF00 == 0 { '\n' } else { ' ' });
    }
    let p = dir.join("input.txt");
    std::fs::write(&p, s).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}

/// Start the job (waiting on its stdin for the go) under `variant`.
fn start(variant: &str, input: &Path) -> Result<(Child, Option<Child>), String> {
    let script = format!(
        // dd reads in 4 KiB blocks: many read/write calls, as a transcoder's I/O.
        "read _ && dd if='{}' bs=4k status=none | gzip -6 -c > /dev/null",
        input.display()
    );
    let mut cmd = if variant == "strace" {
        let mut c = Command::new("strace");
        c.args(["-f", "-qq", "-o", "/dev/null", "-e"])
            .arg(format!("trace={}", DEFAULT.join(",")))
            .args(["sh", "-c", &script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &script]);
        c
    };
    let job = cmd
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the {variant} job: {e}"))?;
    let tracer = match variant {
        "ptrace" | "kernel" => {
            let me = std::env::current_exe().map_err(|e| e.to_string())?;
            let t = Command::new(me)
                .args([
                    "legacy",
                    "trace",
                    &job.id().to_string(),
                    "--seconds",
                    "3600",
                ])
                .args(["--tracer", variant, "--out", "/dev/null"])
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start the tracer: {e}"))?;
            Some(t)
        }
        _ => None,
    };
    std::thread::sleep(Duration::from_millis(400));
    Ok((job, tracer))
}

/// One measured run.
fn once(variant: &'static str, rep: usize, input: &Path) -> Result<Row, String> {
    let (mut job, tracer) = start(variant, input)?;
    let t0 = Instant::now();
    job.stdin
        .take()
        .expect("piped")
        .write_all(b"go\n")
        .map_err(|e| e.to_string())?;
    // SAFETY: all-zero is a valid rusage; wait4 fills it and `status`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    // SAFETY: waiting for our own child with valid out pointers.
    let r = unsafe { libc::wait4(job.id() as i32, &mut status, 0, &mut ru) };
    let total_s = t0.elapsed().as_secs_f64();
    if r < 0 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("the {variant} job failed (status {status:#x})"));
    }
    if let Some(t) = tracer {
        let out = t.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "the {variant} tracer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    Ok(Row {
        tracer: variant,
        rep,
        total_s,
        user_s: secs(ru.ru_utime),
        system_s: secs(ru.ru_stime),
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
    })
}

/// Run it.
pub fn run(a: &ExperimentArgs) -> Result<(), String> {
    let reps = a.reps.unwrap_or(if a.quick { 3 } else { 10 });
    let mb = if a.quick { 16 } else { 64 };
    let dir = std::env::temp_dir().join(format!("resound-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let input = make_input(&dir, mb);
    println!(
        "Tracer overhead: dd bs=4k | gzip -6 of a {mb} MiB text file, {reps} runs per tracer (interleaved)"
    );
    let mut rows = Vec::new();
    let result = input.and_then(|input| {
        for rep in 0..reps {
            for v in VARIANTS {
                rows.push(once(v, rep, &input)?);
            }
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    let series = table(&rows);
    if let Some(dir) = &a.out {
        let h = ["tracer", "rep", "total_s", "user_s", "system_s", "cpu_s"];
        write_rows(dir, "tracer-overhead", &h, &rows, |r| {
            vec![
                r.tracer.into(),
                r.rep.to_string(),
                r.total_s.to_string(),
                r.user_s.to_string(),
                r.system_s.to_string(),
            ]
        })?;
        let ch = Chart {
            title: "Tracer overhead (x: 0 none, 1 strace, 2 ptrace, 3 kernel)",
            x_label: "tracer",
            y_label: "mean time above untraced (%)",
            series,
            reference: None,
            marks: Vec::new(),
        };
        render(&dir.join("tracer-overhead"), &[ch])?;
        println!(
            "wrote {}/tracer-overhead.{{csv,json,png,svg}}",
            dir.display()
        );
    }
    Ok(())
}

/// Print mean ± σ per tracer beside the paper's; return the overhead curves.
fn table(rows: &[Row]) -> Vec<Series> {
    println!(
        "{:>7} {:>18} {:>9} {:>16} {:>9} {:>16} {:>9}   paper: total (s) | system (s)",
        "tracer", "total (s)", "overhead", "system (s)", "overhead", "cpu (s)", "overhead"
    );
    let stat = |v: &str, f: fn(&Row) -> f64| {
        mean_sd(
            &rows
                .iter()
                .filter(|r| r.tracer == v)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };
    let (base_t, _) = stat("none", |r| r.total_s);
    let (base_s, _) = stat("none", |r| r.system_s);
    let (base_c, _) = stat("none", |r| r.cpu_s);
    let (mut tot, mut sys, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (v, pt, ps)) in PAPER.iter().enumerate() {
        let (t, ts) = stat(v, |r| r.total_s);
        let (s, ss) = stat(v, |r| r.system_s);
        let (ot, os) = (
            (t / base_t - 1.0) * 100.0,
            (s / base_s.max(1e-9) - 1.0) * 100.0,
        );
        let (c, cs) = stat(v, |r| r.cpu_s);
        let oc = (c / base_c - 1.0) * 100.0;
        println!(
            "{v:>7} {t:>9.3} ± {ts:<6.3} {ot:>+8.1}% {s:>7.3} ± {ss:<6.3} {os:>+8.1}% {c:>7.3} ± {cs:<6.3} {oc:>+8.1}%   {pt} | {ps}"
        );
        tot.push((i as f64, ot));
        sys.push((i as f64, os));
        cpu.push((i as f64, oc));
    }
    vec![
        Series {
            name: "total time".into(),
            points: tot,
        },
        Series {
            name: "system time".into(),
            points: sys,
        },
        Series {
            name: "CPU time (user + system)".into(),
            points: cpu,
        },
    ]
}
