//! `resound legacy trace|detect` on real processes: `resound-tool periodic`
//! with known rates, traced with the ptrace tracer and with the kernel
//! (perf tracepoint) tracer.

mod common;

use std::process::{Command, Stdio};

fn tool_periodic(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_resound-tool"))
        .arg("periodic")
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("resound-tool starts")
}

fn legacy(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_resound"))
        .arg("legacy")
        .args(args)
        .output()
        .expect("resound runs")
}

fn detect_json(pid: u32, seconds: &str) -> serde_json::Value {
    detect_with("ptrace", pid, seconds).expect("the ptrace tracer runs")
}

/// `detect --json` with `tracer`; `None` (after printing `SKIP: reason`)
/// when the kernel refuses that tracer here.
fn detect_with(tracer: &str, pid: u32, seconds: &str) -> Option<serde_json::Value> {
    let p = pid.to_string();
    let args = [
        "detect",
        &p,
        "--seconds",
        seconds,
        "--json",
        "--tracer",
        tracer,
    ];
    let out = legacy(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("kernel tracer unavailable") {
        println!("SKIP: {}", stderr.trim());
        return None;
    }
    assert!(out.status.success(), "detect failed: {stderr}");
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    // The ptrace tracer's event times are its own wake-ups: by default it
    // keeps idle CPUs polling while it traces, where it may.
    let held = &v["trace"]["cpu_latency_us"];
    match (tracer, may_hold_cpu_latency()) {
        ("ptrace", true) => assert_eq!(held, 0, "{}", v["trace"]),
        ("ptrace", false) => assert!(
            v["trace"]["cpu_latency_error"].is_string(),
            "{}",
            v["trace"]
        ),
        _ => assert!(held.is_null(), "{}", v["trace"]),
    }
    Some(v)
}

/// Can this process hold a CPU wake-up latency request (root's device)?
fn may_hold_cpu_latency() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open(resound_sched::cpu_latency::DEVICE)
        .is_ok()
}

/// Skip (with a reason) where ptrace is not permitted.
fn ptrace_permitted() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    // SAFETY: geteuid has no preconditions.
    if scope.trim() == "3" || (scope.trim() != "0" && unsafe { libc::geteuid() } != 0) {
        println!(
            "SKIP: ptrace not permitted here (yama ptrace_scope {})",
            scope.trim()
        );
        return false;
    }
    true
}

/// Wait for a test program that is no longer needed (on a skip).
fn reap(child: std::process::Child) {
    let _ = child.wait_with_output();
}

fn freq(v: &serde_json::Value) -> f64 {
    v["freq_hz"]
        .as_f64()
        .unwrap_or_else(|| panic!("not periodic: {v}"))
}

#[test]
fn ptrace_finds_25_hz_and_the_program_runs_on() {
    let _serial = common::one_at_a_time();
    if !ptrace_permitted() {
        return;
    }
    let child = tool_periodic(&["--fps", "25", "--seconds", "3"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let v = detect_json(child.id(), "1");
    let f = freq(&v["detection"]);
    // Tolerance 1 % (the goal); the timer wakes are exact on average.
    assert!((f - 25.0).abs() / 25.0 < 0.01, "found {f} Hz: {v}");
    assert_eq!(v["trace"]["end"], "timeout");
    // Detached cleanly: the program finishes its 3 s and all 75 frames.
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let rep: serde_json::Value = serde_json::from_str(&last).unwrap();
    let frames = rep["threads"][0]["frames"].as_u64().unwrap();
    assert!((74..=76).contains(&frames), "{frames} frames");
}

/// Two threads at 25 and 60 fps, blocking in futex, read or poll: the
/// detector reports them apart, each within 1 % (2 % for poll, which waits
/// in whole milliseconds). Returns early (after `SKIP`) where `tracer` is
/// refused.
fn threads_with_different_rates_and_blocking_calls(tracer: &str) {
    for blocking in ["futex", "read", "poll"] {
        let child = tool_periodic(&[
            "--threads",
            "2",
            "--thread-fps",
            "25,60",
            "--blocking",
            blocking,
            "--seconds",
            "3",
        ]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let Some(v) = detect_with(tracer, child.id(), "1.5") else {
            reap(child);
            return;
        };
        let d = &v["detection"];
        assert_eq!(d["threads_differ"], true, "{blocking}: {d}");
        let mut fs: Vec<f64> = d["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["freq_hz"].as_f64())
            .collect();
        fs.sort_by(f64::total_cmp);
        let tol = if blocking == "poll" { 0.02 } else { 0.01 };
        assert_eq!(fs.len(), 2, "{blocking}: {d}");
        assert!(
            (fs[0] - 25.0).abs() / 25.0 < tol && (fs[1] - 60.0).abs() / 60.0 < tol,
            "{blocking}: {fs:?}"
        );
        child.wait_with_output().unwrap();
    }
}

/// An aperiodic program is "not periodic". Returns early (after `SKIP`)
/// where `tracer` is refused.
fn aperiodic_program_is_not_periodic(tracer: &str) {
    let child = tool_periodic(&["--fps", "25", "--aperiodic", "--seconds", "5"]);
    let Some(v) = detect_with(tracer, child.id(), "4") else {
        reap(child);
        return;
    };
    assert!(v["detection"]["period_ns"].is_null(), "{v}");
    child.wait_with_output().unwrap();
}

#[test]
fn ptrace_threads_with_different_rates_and_blocking_calls() {
    let _serial = common::one_at_a_time();
    if !ptrace_permitted() {
        return;
    }
    threads_with_different_rates_and_blocking_calls("ptrace");
}

#[test]
fn ptrace_aperiodic_program_is_not_periodic() {
    let _serial = common::one_at_a_time();
    if !ptrace_permitted() {
        return;
    }
    aperiodic_program_is_not_periodic("ptrace");
}

#[test]
fn a_process_that_exits_ends_the_trace_with_what_was_recorded() {
    let _serial = common::one_at_a_time();
    if !ptrace_permitted() {
        return;
    }
    let child = tool_periodic(&["--fps", "50", "--seconds", "1"]);
    let v = detect_json(child.id(), "10");
    assert_eq!(v["trace"]["end"], "exited", "{v}");
    assert!((freq(&v["detection"]) - 50.0).abs() < 0.5);
    child.wait_with_output().unwrap();
}

#[test]
fn fork_and_exec_while_traced() {
    let _serial = common::one_at_a_time();
    if !ptrace_permitted() {
        return;
    }
    let child = tool_periodic(&["--fps", "25", "--seconds", "2", "--fork-at", "0.5"]);
    let v = detect_json(child.id(), "1.5");
    assert!(
        !v["trace"]["children"].as_array().unwrap().is_empty(),
        "fork not followed: {v}"
    );
    assert!(child.wait_with_output().unwrap().status.success());
    let child = tool_periodic(&[
        "--fps",
        "25",
        "--seconds",
        "2",
        "--exec-at",
        "0.4",
        "--",
        "sleep",
        "0.5",
    ]);
    let v = detect_json(child.id(), "2");
    assert_eq!(v["trace"]["execs"], 1, "{v}");
    assert!(child.wait_with_output().unwrap().status.success());
}

#[test]
fn refusals_are_clear() {
    let _serial = common::one_at_a_time();
    let out = legacy(&["trace", "999999999", "--seconds", "0.2"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process with PID 999999999"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        println!("SKIP: the other-user refusal needs root and setpriv");
        return;
    }
    // A root-owned process traced by user nobody: refused, named, untouched,
    // with either tracer.
    let mut child = tool_periodic(&["--fps", "25", "--seconds", "2"]);
    for tracer in ["ptrace", "kernel"] {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_resound"),
            ])
            .args(["legacy", "trace", &child.id().to_string()])
            .args(["--seconds", "0.5", "--tracer", tracer])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        let want = format!(
            "cannot trace PID {} (user root): permission denied; only root may trace it",
            child.id()
        );
        assert!(err.contains(&want), "{tracer}: {err}");
    }
    assert!(child.wait().unwrap().success());
}

#[test]
fn kernel_tracer_finds_25_hz_without_stopping_the_program() {
    let _serial = common::one_at_a_time();
    let child = tool_periodic(&["--fps", "25", "--seconds", "3"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let Some(v) = detect_with("kernel", child.id(), "1") else {
        reap(child);
        return;
    };
    let f = freq(&v["detection"]);
    assert!((f - 25.0).abs() / 25.0 < 0.01, "found {f} Hz: {v}");
    assert_eq!(v["trace"]["tracer"], "kernel");
    assert_eq!(v["trace"]["end"], "timeout");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let rep: serde_json::Value = serde_json::from_str(&last).unwrap();
    let frames = rep["threads"][0]["frames"].as_u64().unwrap();
    assert!((74..=76).contains(&frames), "{frames} frames");
}

#[test]
fn kernel_tracer_threads_with_different_rates_and_blocking_calls() {
    let _serial = common::one_at_a_time();
    threads_with_different_rates_and_blocking_calls("kernel");
}

#[test]
fn kernel_tracer_sees_new_threads_exit_fork_and_exec() {
    let _serial = common::one_at_a_time();
    // Traced from its start: the second frame thread is created while tracing.
    let child = tool_periodic(&[
        "--fps",
        "50",
        "--threads",
        "2",
        "--seconds",
        "1",
        "--fork-at",
        "0.5",
    ]);
    let Some(v) = detect_with("kernel", child.id(), "10") else {
        reap(child);
        return;
    };
    assert_eq!(v["trace"]["end"], "exited", "{v}");
    assert!((freq(&v["detection"]) - 50.0).abs() < 0.5, "{v}");
    assert!(
        !v["trace"]["children"].as_array().unwrap().is_empty(),
        "fork not seen: {v}"
    );
    child.wait_with_output().unwrap();
    let child = tool_periodic(&[
        "--fps",
        "25",
        "--seconds",
        "2",
        "--exec-at",
        "0.4",
        "--",
        "sleep",
        "0.5",
    ]);
    let v = detect_with("kernel", child.id(), "2").unwrap();
    assert_eq!(v["trace"]["execs"], 1, "{v}");
    assert!(child.wait_with_output().unwrap().status.success());
}

#[test]
fn kernel_tracer_aperiodic_program_is_not_periodic() {
    let _serial = common::one_at_a_time();
    aperiodic_program_is_not_periodic("kernel");
}

#[test]
fn rate_change_mid_run_is_seen_in_each_half() {
    let _serial = common::one_at_a_time();
    // 25 fps, then 40 fps from 1 s on: each window finds its own rate.
    let child = tool_periodic(&[
        "--fps",
        "25",
        "--seconds",
        "3",
        "--change-at",
        "1",
        "--new-fps",
        "40",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(150));
    let Some(first) = detect_with("kernel", child.id(), "0.7") else {
        reap(child);
        return;
    };
    std::thread::sleep(std::time::Duration::from_millis(400));
    let second = detect_with("kernel", child.id(), "1").unwrap();
    let (a, b) = (freq(&first["detection"]), freq(&second["detection"]));
    assert!((a - 25.0).abs() / 25.0 < 0.01, "before the change: {a} Hz");
    assert!((b - 40.0).abs() / 40.0 < 0.01, "after the change: {b} Hz");
    child.wait_with_output().unwrap();
}

/// A PNG that decodes, of a sensible size; an SVG document.
fn assert_image(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().unwrap() == "png" {
        let dec = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut r = dec.read_info().expect("a PNG header");
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).expect("PNG pixels decode");
        assert!(info.width >= 800 && info.height >= 400, "{info:?}");
        // Not blank: some pixels differ from the first.
        assert!(buf.iter().any(|&b| b != buf[0]));
    } else {
        let s = String::from_utf8(bytes).unwrap();
        assert!(s.contains("<svg") && s.contains("</svg>"), "not SVG");
    }
}

#[test]
fn plots_of_detect_and_analyze_are_images() {
    let _serial = common::one_at_a_time();
    let dir = std::env::temp_dir().join(format!("resound-legacy-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for ext in ["png", "svg"] {
        let f = dir.join(format!("sbf.{ext}"));
        let out = legacy(&[
            "analyze",
            "--wcet",
            "10",
            "--period",
            "40",
            "--plot",
            f.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_image(&f);
    }
    let bad = legacy(&[
        "analyze", "--wcet", "10", "--period", "40", "--plot", "x.jpg",
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("must end in .png or .svg"));
    // A recorded trace (written by `trace --out`) drawn as a spectrum.
    if !ptrace_permitted() {
        return;
    }
    let child = tool_periodic(&["--fps", "30", "--seconds", "1.5"]);
    let tr = dir.join("t.jsonl");
    let out = legacy(&[
        "trace",
        &child.id().to_string(),
        "--seconds",
        "1",
        "--out",
        tr.to_str().unwrap(),
    ]);
    reap(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ext in ["png", "svg"] {
        let f = dir.join(format!("spectrum.{ext}"));
        let out = legacy(&[
            "detect",
            "--trace",
            tr.to_str().unwrap(),
            "--plot",
            f.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("period"));
        assert_image(&f);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `gst-launch-1.0` playing a live test video at `fps` into a clock-synced
/// sink: a real media program of the distribution, unmodified.
fn gstreamer(fps: u32) -> Option<std::process::Child> {
    let caps = format!("video/x-raw,framerate={fps}/1");
    let args = [
        "-q",
        "videotestsrc",
        "is-live=true",
        "!",
        &caps,
        "!",
        "fakesink",
        "sync=true",
    ];
    match Command::new("gst-launch-1.0")
        .args(args)
        .stdout(Stdio::null())
        .spawn()
    {
        Ok(c) => Some(c),
        Err(e) => {
            common::skip_missing_tool("gstreamer_player", &format!("gst-launch-1.0: {e}"));
            None
        }
    }
}

#[test]
fn gstreamer_player_at_its_native_frame_rate_with_both_tracers() {
    let _serial = common::one_at_a_time();
    for fps in [25u32, 30] {
        let Some(mut child) = gstreamer(fps) else {
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(700));
        for tracer in ["ptrace", "kernel"] {
            if tracer == "ptrace" && !ptrace_permitted() {
                continue;
            }
            let Some(v) = detect_with(tracer, child.id(), "2") else {
                continue;
            };
            let f = freq(&v["detection"]);
            let want = f64::from(fps);
            assert!(
                (f - want).abs() / want < 0.01,
                "{tracer} at {fps} fps: {f} Hz: {v}"
            );
        }
        // Still playing after being traced: it stops on SIGTERM, not before.
        assert!(
            child.try_wait().unwrap().is_none(),
            "gst-launch-1.0 died while traced"
        );
        // SAFETY: signalling the child we started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap();
    }
}

/// Temporary system users made for one test and removed when dropped.
struct TempUsers(Vec<String>);

impl TempUsers {
    /// Make users `names` (no home); `None` (and a printed SKIP) if not permitted.
    fn make(names: &[String]) -> Option<Self> {
        let mut made = TempUsers(Vec::new());
        for n in names {
            let ok = Command::new("useradd")
                .args(["-M", "-r", "-s", "/usr/sbin/nologin", n])
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                println!("SKIP: cannot make a temporary user with useradd (not root?)");
                return None;
            }
            made.0.push(n.clone());
        }
        Some(made)
    }

    fn id(name: &str, flag: &str) -> String {
        let out = Command::new("id").args([flag, name]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for TempUsers {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("userdel").arg(n).output();
        }
    }
}

/// `setpriv` running `prog args` as user `name`.
fn as_user(name: &str, prog: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", TempUsers::id(name, "-u")))
        .arg(format!("--regid={}", TempUsers::id(name, "-g")))
        .args(["--clear-groups", prog]);
    c
}

#[test]
fn a_process_of_another_user_is_refused_by_name() {
    let _serial = common::one_at_a_time();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        println!("SKIP: making users and switching to them needs root and setpriv");
        return;
    }
    let tag = std::process::id();
    let (owner, other) = (format!("rsdown{tag}"), format!("rsdoth{tag}"));
    let Some(_users) = TempUsers::make(&[owner.clone(), other.clone()]) else {
        return;
    };
    let mut child = as_user(&owner, env!("CARGO_BIN_EXE_resound-tool"))
        .args(["periodic", "--fps", "25", "--seconds", "2.5"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = child.id().to_string();
    for tracer in ["ptrace", "kernel"] {
        let out = as_user(&other, env!("CARGO_BIN_EXE_resound"))
            .args([
                "legacy",
                "trace",
                &pid,
                "--seconds",
                "0.5",
                "--tracer",
                tracer,
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{tracer}: traced another user's process"
        );
        let want = format!(
            "cannot trace PID {pid} (user {owner}): permission denied; run as {owner} or as root"
        );
        assert!(err.contains(&want), "{tracer}: {err}");
    }
    // Root may (rate accuracy is checked elsewhere), and the program was
    // not disturbed by the refusals.
    if let Some(v) = detect_with("kernel", child.id(), "1") {
        assert!(v["detection"]["events"].as_u64().unwrap() > 10, "{v}");
    }
    assert!(child.wait().unwrap().success());
}
