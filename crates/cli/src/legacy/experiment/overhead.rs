//! The tracer-overhead experiment (Table I of the paper): a CPU-heavy job
//! (by default a transcoding, as the paper's: a generated Theora video
//! decoded and encoded again by GStreamer's `gst-launch-1.0`; with `--job
//! dd`, `dd bs=4k | gzip -6` of a generated text file, which makes many
//! more system calls per second) run untraced, under `strace -f`
//! with the same events, under resound's ptrace tracer and under its kernel
//! tracer (each tracer a separate `resound legacy trace` process attached
//! before the job starts its work); total (wall) time and system time of the
//! job, mean ± σ over the repetitions. With strace the times include strace
//! itself, as `time strace` measures.
//!
//! The goal (kernel tracer ≤ 0.5 % of the traced program's run time) is
//! smaller than the machine's run-to-run noise in wall time, so it is judged
//! on the job's own CPU time (user + system of the shell, dd and gzip, from
//! `wait4`'s rusage) and on its system time as a share of that CPU time (the
//! kernel tracer's cost is spent in the traced threads' system calls, so it
//! shows there, without the user time's noise), with the job pinned to one CPU
//! (the last) and the tracer processes kept off it, the variants interleaved
//! in an order reversed every other repetition (ABBA: a slow drift of the
//! machine cancels), and the overhead given as the mean of the paired
//! per-repetition ratios kernel / none − 1 with its 95 % confidence
//! interval (Student's t).

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

/// Progress over the job's runs on stderr: on a terminal one line redrawn
/// after each run, otherwise (CI logs, pipes) a line every ten runs.
struct RunProgress {
    done: usize,
    total: usize,
    started: Instant,
    tty: bool,
}

impl RunProgress {
    fn new(total: usize) -> RunProgress {
        use std::io::IsTerminal;
        RunProgress {
            done: 0,
            total,
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// One run of `variant` ended.
    fn step(&mut self, variant: &str) {
        self.done += 1;
        let per_run = self.started.elapsed().as_secs_f64() / self.done as f64;
        let left = per_run * (self.total - self.done) as f64;
        let line = format!(
            "[tracer-overhead] run {}/{} ({variant}), about {left:.0} s left",
            self.done, self.total
        );
        let last = self.done == self.total;
        if self.tty {
            eprint!("\r{line}\x1b[K{}", if last { "\n" } else { "" });
        } else if self.done.is_multiple_of(10) || last {
            eprintln!("{line}");
        }
    }
}

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

/// The CPU the job runs on (the last online one) and a mask of the others.
fn cpus() -> (usize, Vec<usize>) {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let job = n - 1;
    let others: Vec<usize> = (0..n).filter(|&c| c != job || n == 1).collect();
    (job, others)
}

/// Makes `cmd`'s process run only on `cpu_list`.
fn pin(cmd: &mut Command, cpu_list: Vec<usize>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls
    // sched_setaffinity (async-signal-safe) on a set built on its stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in &cpu_list {
                libc::CPU_SET(c, &mut set);
            }
            // Best effort: an unpinned run is still a valid run.
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

/// The traced job.
#[derive(Debug, Clone)]
enum Job {
    /// GStreamer: decode the Theora file and encode it again.
    Transcode(PathBuf),
    /// dd bs=4k | gzip -6 of the text file.
    Dd(PathBuf),
}

impl Job {
    /// Prepares the job's input in `dir` (`kind`: "transcode" or "dd").
    fn prepare(kind: &str, dir: &Path, quick: bool) -> Result<Job, String> {
        match kind {
            "dd" => make_input(dir, if quick { 16 } else { 64 }).map(Job::Dd),
            "transcode" => make_video(dir, if quick { 150 } else { 600 }).map(Job::Transcode),
            other => Err(format!("--job {other:?}: transcode or dd")),
        }
    }

    /// What it does, for the heading.
    fn describe(&self) -> String {
        match self {
            Job::Transcode(_) => {
                "a Theora video (320x240) decoded and encoded again by gst-launch-1.0".into()
            }
            Job::Dd(_) => "dd bs=4k | gzip -6 of a text file".into(),
        }
    }

    /// The shell command of one run (after the go on stdin).
    fn script(&self) -> String {
        match self {
            Job::Transcode(p) => format!(
                "read _ && gst-launch-1.0 -q filesrc location='{}' ! oggdemux ! theoradec ! videoconvert ! theoraenc ! oggmux ! fakesink",
                p.display()
            ),
            // dd reads in 4 KiB blocks: many read/write calls.
            Job::Dd(p) => format!(
                "read _ && dd if='{}' bs=4k status=none | gzip -6 -c > /dev/null",
                p.display()
            ),
        }
    }
}

/// A Theora video of `frames` frames (25 fps test pattern), encoded once
/// before the runs.
fn make_video(dir: &Path, frames: u32) -> Result<PathBuf, String> {
    let p = dir.join("input.ogg");
    let out = Command::new("gst-launch-1.0")
        .args(["-q", "videotestsrc", &format!("num-buffers={frames}"), "pattern=ball"])
        .args(["!", "video/x-raw,width=320,height=240,framerate=25/1"])
        .args(["!", "theoraenc", "!", "oggmux", "!", "filesink"])
        .arg(format!("location={}", p.display()))
        .output()
        .map_err(|e| format!("gst-launch-1.0 (apt-get install gstreamer1.0-tools gstreamer1.0-plugins-base): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cannot make the input video: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(p)
}

/// Start the job (waiting on its stdin for the go) under `variant`.
fn start(variant: &str, job_kind: &Job) -> Result<(Child, Option<Child>), String> {
    let (job_cpu, others) = cpus();
    let script = job_kind.script();
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
    // With strace, strace itself runs there too (it is part of what
    // `time strace` measures).
    pin(&mut cmd, vec![job_cpu]);
    let job = cmd
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the {variant} job: {e}"))?;
    let tracer = match variant {
        "ptrace" | "kernel" => {
            let me = std::env::current_exe().map_err(|e| e.to_string())?;
            let mut t = Command::new(me);
            pin(&mut t, others);
            let t = t
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
fn once(variant: &'static str, rep: usize, input: &Job) -> Result<Row, String> {
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
    let dir = std::env::temp_dir().join(format!("resound-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let input = Job::prepare(&a.job, &dir, a.quick);
    if let Ok(j) = &input {
        println!(
            "Tracer overhead: {}, {reps} runs per tracer (interleaved)",
            j.describe()
        );
    }
    let (mut rows, mut extra) = (Vec::new(), Vec::new());
    let pairs = a.pairs.unwrap_or(if a.quick { 6 } else { 30 });
    let mut progress = RunProgress::new(reps * VARIANTS.len() + pairs * 2);
    let result = input.and_then(|input| {
        for rep in 0..reps {
            let mut order = VARIANTS;
            if rep % 2 == 1 {
                order.reverse();
            }
            for v in order {
                rows.push(once(v, rep, &input)?);
                progress.step(v);
            }
        }
        if pairs > 0 {
            println!(
                "... and {pairs} more untraced/kernel pairs (alternating) for the paired overhead"
            );
        }
        for i in 0..pairs {
            let mut order = ["none", "kernel"];
            if i % 2 == 1 {
                order.reverse();
            }
            for v in order {
                extra.push(once(v, reps + i, &input)?);
                progress.step(v);
            }
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    let series = table(&rows);
    rows.extend(extra);
    paired(&rows);
    if let Some(dir) = &a.out {
        let h = ["tracer", "rep", "total_s", "user_s", "system_s", "cpu_s"];
        write_rows(dir, "tracer-overhead", &h, &rows, |r| {
            vec![
                r.tracer.into(),
                r.rep.to_string(),
                r.total_s.to_string(),
                r.user_s.to_string(),
                r.system_s.to_string(),
                r.cpu_s.to_string(),
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

/// The paired overhead of each tracer on the job's CPU time: mean of the
/// per-repetition ratios to the untraced run − 1, with a 95 % confidence
/// interval; then the same for the system time alone, as a share of the
/// untraced run's CPU time (the tracers' cost is spent in the traced
/// threads' system calls, and system time is far less noisy than user time);
/// and the verdicts on the kernel tracer's 0.5 % goal.
fn paired(rows: &[Row]) {
    let reps = rows.iter().map(|r| r.rep + 1).max().unwrap_or(0);
    let pair = |v: &str, i: usize| {
        let get = |t: &str| rows.iter().find(|r| r.tracer == t && r.rep == i);
        Some((get(v)?, get("none")?))
    };
    let measures: [(&str, Measure); 2] = [
        ("CPU time (user + system)", |r, n| {
            (r.cpu_s / n.cpu_s - 1.0) * 100.0
        }),
        ("system time, share of the CPU time", |r, n| {
            (r.system_s - n.system_s) / n.cpu_s * 100.0
        }),
    ];
    for (what, f) in measures {
        println!("Paired overhead, {what}, per repetition against the untraced run:");
        for v in ["strace", "ptrace", "kernel"] {
            let d: Vec<f64> = (0..reps)
                .filter_map(|i| pair(v, i).map(|(r, n)| f(r, n)))
                .collect();
            let (m, sd) = mean_sd(&d);
            let half = t95(d.len()) * sd / (d.len() as f64).sqrt();
            let verdict = match v {
                "kernel" => verdict(m, half, d.len()),
                _ => String::new(),
            };
            println!(
                "{v:>7} {m:>+7.2} % ± {half:.2} % (95 % CI, {} pairs)   {verdict}",
                d.len()
            );
        }
    }
}

/// One overhead measure of a traced run against its untraced pair (%).
type Measure = fn(&Row, &Row) -> f64;

/// Whether an overhead of `m` ± `half` % meets the 0.5 % goal.
fn verdict(m: f64, half: f64, n: usize) -> String {
    if n < 2 {
        "goal <= 0.5 %: too few runs".into()
    } else if m + half <= 0.5 {
        "goal <= 0.5 %: met".into()
    } else if m - half > 0.5 {
        "goal <= 0.5 %: not met".into()
    } else {
        format!(
            "goal <= 0.5 %: cannot tell (interval reaches {:+.2} %)",
            m + half
        )
    }
}

/// Student's t at 97.5 % for `n` − 1 degrees of freedom.
fn t95(n: usize) -> f64 {
    const T: [f64; 30] = [
        12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
        2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04,
    ];
    match n {
        0 | 1 => f64::INFINITY,
        n if n - 1 <= T.len() => T[n - 2],
        _ => 1.96,
    }
}

#[cfg(test)]
mod tests {
    use super::t95;

    #[test]
    fn verdicts() {
        assert_eq!(super::verdict(0.1, 0.2, 30), "goal <= 0.5 %: met");
        assert_eq!(super::verdict(2.0, 0.7, 50), "goal <= 0.5 %: not met");
        assert!(super::verdict(0.7, 1.5, 50).contains("cannot tell"));
        assert!(super::verdict(0.0, 0.0, 1).contains("too few"));
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t95(2), 12.71);
        assert_eq!(t95(11), 2.23);
        assert_eq!(t95(200), 1.96);
        assert!(t95(1).is_infinite());
    }
}
