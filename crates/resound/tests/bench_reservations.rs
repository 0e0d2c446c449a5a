//! `resound bench reservations` end to end with tiny settings: Debian's
//! rt-app runs periodic tasks (four, or twice the CPUs) for two seconds
//! under SCHED_FIFO and under two SCHED_DEADLINE budgets (one too large
//! for the kernel's admission limit, which the bench must lower), and
//! the table and `runs.csv` must say plausible things. Not how often
//! anything misses.
//! Skips (`SKIP: reason`) without rt-app (fails instead under
//! `RESOUND_REQUIRE_TEST_TOOLS=1`) or without SCHED_FIFO and
//! SCHED_DEADLINE permission.

mod common;
use common::*;
use std::process::Command;

const TEST: &str = "bench_reservations_tiny";

fn prerequisites() -> bool {
    if resound_lab::rtapp::rtapp_binary().is_err() {
        skip_missing_tool(TEST, "rt-app is not installed (apt-get install rt-app)");
        return false;
    }
    if !resound_sched::fifo_permitted() || !resound_sched::deadline_permitted() {
        println!("SKIP {TEST}: SCHED_FIFO or SCHED_DEADLINE is not permitted here");
        return false;
    }
    true
}

/// `resound bench reservations ARGS`, its calibration cached in `dir`.
fn bench(dir: &TestDir, args: &[&str]) -> std::process::Output {
    Command::new(RESOUND)
        .args(["bench", "reservations"])
        .args(args)
        .arg("--out")
        .arg(&dir.0)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .unwrap()
}

#[test]
fn bench_reservations_tiny() {
    if !prerequisites() {
        return;
    }
    let _g = one_at_a_time();
    let dir = TestDir::new("vsfifo", "tiny");
    // Enough tasks that 20 x a job's run time (100 us of work or more)
    // for each is more than this machine admits (at most 0.95 of each CPU
    // every 2667 us), so the bench has to lower that multiple.
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    let tasks = (2 * cpus).clamp(4, 64);
    let tasks_arg = tasks.to_string();
    let out = bench(
        &dir,
        &[
            "--runs",
            "1",
            "--seconds",
            "2",
            "--tasks",
            &tasks_arg,
            "--run-us",
            "100",
            "--budget",
            "1.5,20",
        ],
    );
    let out = (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.0.success(), "{}\n{}", out.1, out.2);
    let stdout = out.1;
    let head = format!("== {tasks} rt-app tasks x 100 us every 2667 us");
    assert!(stdout.contains(&head), "no {head:?} in:\n{stdout}");
    for want in [
        "deadline-1.5x",
        "deadline misses per 10k jobs",
        "longest string of misses (periods)",
        "host steal in the window (ms)",
        "fifo: SCHED_FIFO 50",
        "--budget 20 lowered to",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    assert!(dir.join("table.txt").is_file());
    // rt-app's files go once read, unless --keep-raw.
    assert!(!dir.join("run1").join("fifo").exists() && !dir.join("need").exists());
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3, "{csv}");
    let policies: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(policies[..2], ["fifo", "deadline-1.5x"], "{csv}");
    assert!(policies[2].starts_with("deadline-") && policies[2] != "deadline-20x");
    for r in &rows {
        let n = |i: usize| r[i].parse::<u64>().unwrap();
        let (jobs, misses, held, longest) = (n(2), n(3), n(4), n(5));
        // 2 s / 2667 us = 750 jobs a task (rt-app logs them all).
        assert!(
            jobs.abs_diff(tasks * 750) <= tasks * 25,
            "jobs {jobs}: {csv}"
        );
        assert!(
            misses <= jobs && held <= misses && longest <= misses,
            "{csv}"
        );
        if !r[7].is_empty() {
            // The host cannot take more than the window from each CPU.
            let cpus = std::thread::available_parallelism().unwrap().get() as u64;
            let steal_ms: u64 = r[7].parse().unwrap();
            assert!(steal_ms <= 2 * 1000 * cpus, "{csv}");
        }
    }
}

#[test]
fn bench_reservations_refuses_bad_settings_before_it_runs() {
    let dir = TestDir::new("vsfifo", "bad");
    for (args, want) in [
        (&["--budget", "0.5"][..], "--budget 0.5"),
        (&["--tasks", "0"][..], "--tasks 0"),
        (&["--run-us", "3000"][..], "--run-us 3000"),
        (&["--seconds", "0"][..], "--seconds 0"),
    ] {
        let out = bench(&dir, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!dir.join("runs.csv").exists(), "{args:?} ran anyway");
    }
}
