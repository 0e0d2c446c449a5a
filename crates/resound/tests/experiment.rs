//! `resound experiment` end to end: a short scenario (three load clients
//! joining one by one, an rt-app task under SCHED_FIFO in one configuration
//! and under its own SCHED_DEADLINE reservation in the other, a client
//! killed) on resound and on Debian's jackd2, then the report directory:
//! report.html with the published value, results.json with one entry per
//! configuration and server, per-cycle CSVs with as many rows as the run
//! had cycles, the rt-app jobs, the figures. Also: `experiment check` on a
//! bad file gives a line-numbered error; `experiment list` names the
//! shipped reproductions and each of them checks clean.
//! Skips (`SKIP: reason`) without jackd2, rt-app, the JACK headers, a C
//! compiler or SCHED_DEADLINE; under `RESOUND_REQUIRE_TEST_TOOLS=1` a
//! missing tool fails instead.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

const SCENARIO: &str = r#"
name = "e2e-short"
title = "A short scenario for the test suite"
duration_s = 8
warmup_s = 1

[server]
rate = 48000
frames = 256

[[run]]
name = "fifo"
policy = "fifo"
rtapp_policy = "fifo"
rtapp_priority = 5

[[run]]
name = "reserved"
policy = "deadline+reclaim"
rtapp_policy = "deadline+reclaim"

[[clients]]
count = 3
busy_pct = 5
join_at_s = 0.5
join_every_s = 1

[[rtapp]]
name = "voip"
period_us = 10000
run_us = 1000
start_s = 1
stop_s = 6

[[event]]
at_s = 6.5
kill = "dnl3"

[[event]]
at_s = 7
buffer_size = 128

[published]
setup = "none: a test"
differences = "none: a test"

[[published.table]]
source = "this test"
caption = "driver period (us)"

[[published.table.value]]
run = "fifo"
metric = "driver_period_avg_us"
value = 5333.3
"#;

/// Whether everything the experiment needs is here (SKIP printed otherwise).
fn prerequisites(test: &str) -> bool {
    for (path, why) in [
        (
            "/usr/bin/jackd",
            "Debian's jackd is missing (apt-get install jackd2)",
        ),
        (
            "/usr/bin/rt-app",
            "rt-app is missing (apt-get install rt-app)",
        ),
        (
            "/usr/include/jack/jack.h",
            "JACK headers missing (apt-get install libjack-jackd2-dev)",
        ),
    ] {
        if !Path::new(path).exists() {
            skip_missing_tool(test, why);
            return false;
        }
    }
    if Command::new("cc").arg("--version").output().is_err() {
        skip_missing_tool(test, "no C compiler (cc)");
        return false;
    }
    deadline_or_skip(test)
}

/// `resound experiment run FILE --out DIR`, waited for.
fn experiment_run(file: &Path, out_dir: &Path) -> std::process::Output {
    Command::new(RESOUND)
        .args(["experiment", "run"])
        .arg(file)
        .arg("--out")
        .arg(out_dir)
        .output()
        .unwrap()
}

fn csv_rows(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().count().saturating_sub(1)
}

#[test]
fn a_short_scenario_runs_on_both_servers_and_writes_its_report() {
    const TEST: &str = "a_short_scenario_runs_on_both_servers_and_writes_its_report";
    if !prerequisites(TEST) {
        return;
    }
    let _g = one_at_a_time();
    let dir = TestDir::new("experiment", "short");
    let file = dir.join("short.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let out_dir = dir.join("out");
    let out = experiment_run(&file, &out_dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let runs = json["runs"].as_array().unwrap();
    let who: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["run"].as_str().unwrap(),
                r["server"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        who,
        ["fifo/resound", "fifo/jackd", "reserved/resound"],
        "{json}"
    );
    for r in runs {
        assert!(r["error"].is_null(), "run failed: {r}");
        let name = format!(
            "{}-{}",
            r["run"].as_str().unwrap(),
            if r["server"] == "jackd" {
                "jackd2"
            } else {
                "resound"
            }
        );
        // 7 s at 48 kHz / 256 frames and 1 s at 128 frames is 1687
        // cycles; a loaded machine stalls some.
        let cycles = csv_rows(&out_dir.join(format!("cycles-{name}.csv")));
        assert!((1000..=1760).contains(&cycles), "{name}: {cycles} cycles");
        let clients = r["clients"].as_array().unwrap();
        assert_eq!(clients.len(), 3, "{name}: {r}");
        // rt-app ran 5 s at 100 Hz.
        let jobs = csv_rows(&out_dir.join(format!("jobs-{name}.csv")));
        assert!((250..=560).contains(&jobs), "{name}: {jobs} rt-app jobs");
        let m = &r["metrics"];
        let end = m["end_p50_us"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: {r}"));
        assert!(
            end > 0.0 && end < 4.0 * 5333.0,
            "{name}: end of chain {end} us"
        );
        // 7 s of 5333 us periods and 1 s of 2667 us ones (jackd2 in sync
        // mode also stalls for a while when a client is killed).
        let period = m["driver_period_avg_us"].as_f64().unwrap();
        assert!(
            period > 2667.0 && period < 8000.0,
            "{name}: period {period} us"
        );
        let setup = r["setup"].to_string();
        let want = if r["run"] == "reserved" {
            "SCHED_DEADLINE 1050/10000 us reclaim"
        } else {
            "SCHED_FIFO 5"
        };
        assert!(setup.contains(want), "{name}: {setup}");
    }
    // The raw records behind the tables are kept.
    for f in [
        "raw/fifo-resound/profile-cycles.csv",
        "raw/fifo-resound/profile-clients.csv",
        "raw/fifo-resound/rtapp-voip-0.log",
        "raw/fifo-jackd2/dnl1.csv",
        "raw/reserved-resound/rtapp.json",
    ] {
        assert!(out_dir.join(f).is_file(), "{f} is missing");
    }
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    for want in [
        "A short scenario for the test suite",
        "5333.3",
        "jackd2",
        "dnl3 killed",
        "buffer size 128",
    ] {
        assert!(html.contains(want), "report.html has no {want:?}");
    }
    // One curve per client in each configuration's inset of the clients'
    // figure; on jackd2 the killed dnl3 left no records (a load client
    // writes them when it exits), so it has two curves.
    let clients_svg = std::fs::read_to_string(out_dir.join("clients-end.svg")).unwrap();
    for (c, want) in [("dnl1", 3), ("dnl2", 3), ("dnl3", 2)] {
        let n = clients_svg.matches(&format!(">\n{c}\n</text>")).count();
        assert_eq!(n, want, "{c} is in {n} insets of clients-end.svg");
    }
    let svgs = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        .count();
    assert!(svgs >= 4, "{svgs} figures");
}

#[test]
fn check_gives_line_numbered_errors_and_the_shipped_scenarios_are_valid() {
    let dir = TestDir::new("experiment", "check");
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        SCENARIO.replace("policy = \"deadline+reclaim\"", "policy = \"edf\""),
    )
    .unwrap();
    let out = Command::new(RESOUND)
        .args(["experiment", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let line = SCENARIO
        .lines()
        .position(|l| l.contains("deadline+reclaim"))
        .unwrap()
        + 1;
    assert!(
        stderr.contains(&format!("bad.toml:{line}:")),
        "no line {line} in: {stderr}"
    );
    let list = Command::new(RESOUND)
        .args(["experiment", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    let names: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for want in [
        "driver-timing",
        "table2-2666",
        "min-latency",
        "jackdmp-activation",
    ] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    let check = Command::new(RESOUND)
        .args(["experiment", "check", "--quick"])
        .args(&names)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn two_runs_into_one_directory_are_refused() {
    use std::os::fd::AsRawFd;
    let dir = TestDir::new("experiment", "lock");
    let file = dir.join("short.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    // Another run holds the directory.
    let held = std::fs::File::create(out_dir.join(".experiment.lock")).unwrap();
    // SAFETY: flock(2) on a descriptor this test owns for the whole test.
    assert_eq!(
        unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let out = experiment_run(&file, &out_dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("another resound experiment is writing into"),
        "{stderr}"
    );
    assert!(!out_dir.join("results.json").exists());
}
