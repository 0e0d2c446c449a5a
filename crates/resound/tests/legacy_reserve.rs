//! `resound legacy run|attach`: adaptive SCHED_DEADLINE reservations for an
//! unmodified process (the stand-in player `resound-tool periodic`),
//! with real processes and real reservations. Tests that need SCHED_DEADLINE
//! print SKIP with the reason where it is not permitted.

mod common;
use common::*;
use resound_lab::harness::{self, ChildOptions, StderrMode};
use resound_sched::Policy;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const PERIOD_NS: u64 = 40_000_000;

fn opts() -> ChildOptions {
    ChildOptions {
        stderr: StderrMode::Keep {
            keep: 1000,
            echo: Some("legacy".into()),
        },
        ..ChildOptions::default()
    }
}

/// A player at 25 fps with `threads` frame threads and 6 ms of work per frame.
fn player(threads: u32, seconds: u32) -> harness::Child {
    let mut c = Command::new(TOOL);
    c.args([
        "periodic",
        "--drop-late",
        "--fps",
        "25",
        "--work-us",
        "6000",
    ])
    .args(["--threads", &threads.to_string()])
    .args(["--seconds", &seconds.to_string()]);
    let p = harness::Child::spawn(c, "player", &opts()).expect("player");
    wait_for("player threads", Duration::from_secs(5), || {
        tids(p.pid()).len() == threads as usize
    });
    p
}

fn tids(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `resound [-s server] legacy ARGS`, its JSON status lines collected.
fn legacy(srv: Option<&Srv>, args: &[&str]) -> harness::Child {
    let mut c = match srv {
        Some(s) => {
            let mut c = s.command(RESOUND.as_ref());
            c.args(["-s", &s.name]);
            c
        }
        None => Command::new(RESOUND),
    };
    c.arg("legacy").args(args);
    harness::Child::spawn(c, "resound legacy", &opts()).expect("resound legacy")
}

/// Waits for `c` to exit and for its output to be read to the end.
fn finish(c: &mut harness::Child) -> std::process::ExitStatus {
    let st = c.wait().expect("resound legacy exits");
    assert!(c.lines().wait_closed(Duration::from_secs(5)));
    assert!(c.log().wait_closed(Duration::from_secs(5)));
    st
}

fn status_lines(c: &harness::Child) -> Vec<Value> {
    c.lines().all()
}

fn deadline_period(tid: i32) -> Option<u64> {
    match resound_sched::current(tid) {
        Ok(Policy::Deadline { period_ns, .. }) => Some(period_ns),
        _ => None,
    }
}

#[test]
fn attach_reserves_every_thread_adapts_and_restores_on_sigint() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("attach_reserves_every_thread_adapts_and_restores_on_sigint") {
        return;
    }
    let mut p = player(2, 30);
    let pid = p.pid().to_string();
    let mut a = legacy(
        None,
        &[
            "attach",
            &pid,
            "--period",
            "40",
            "--json",
            "--no-server",
            "--sample-ms",
            "300",
            "--controller",
            "lfs",
            "--reclaim",
        ],
    );
    wait_for("4 status lines", Duration::from_secs(20), || {
        status_lines(&a).len() >= 4
    });
    for tid in tids(p.pid()) {
        assert_eq!(deadline_period(tid), Some(PERIOD_NS), "thread {tid}");
        assert!(
            matches!(
                resound_sched::current(tid),
                Ok(Policy::Deadline { reclaim: true, .. })
            ),
            "thread {tid}: --reclaim not set"
        );
    }
    let lines = status_lines(&a);
    let last = lines.last().unwrap();
    assert_eq!(last["period_ns"].as_u64(), Some(PERIOD_NS));
    assert_eq!(last["threads"].as_array().unwrap().len(), 2);
    // The first budget is a tenth of the period; 6 ms of work per 40 ms
    // makes LFSg move it (shrink by beta or grow by alpha).
    assert!(n(last, "changes") > 0, "budgets never moved: {lines:?}");
    assert!(last["bandwidth"].as_f64().unwrap() > 0.0);
    harness::signal(a.pid(), libc::SIGINT);
    let st = finish(&mut a);
    assert!(st.success(), "attach failed: {}", a.log().text());
    for tid in tids(p.pid()) {
        assert_eq!(
            resound_sched::current(tid).ok(),
            Some(Policy::Other),
            "thread {tid} not restored"
        );
    }
    assert!(
        p.exited().is_none(),
        "the player must keep running after detach"
    );
}

#[test]
fn run_detaches_when_the_program_exits() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("run_detaches_when_the_program_exits") {
        return;
    }
    let t0 = Instant::now();
    let mut r = legacy(
        None,
        &[
            "run",
            "--period",
            "40",
            "--json",
            "--no-server",
            "--",
            TOOL,
            "periodic",
            "--drop-late",
            "--fps",
            "25",
            "--work-us",
            "10000",
            "--frames",
            "50",
        ],
    );
    let st = finish(&mut r);
    assert!(st.success(), "run failed: {}", r.log().text());
    assert!(t0.elapsed() < Duration::from_secs(30));
    let lines = status_lines(&r);
    // The player's own report comes through on the same stdout.
    let report = lines.iter().find(|v| v.get("frames").is_some());
    assert_eq!(report.map(|v| n(v, "frames")), Some(50), "{lines:?}");
    // The player uses 0.25 CPU; the budget follows it from the first
    // decision on (the CPU time of the watched start-up window once counted
    // as one period's and sent it to a whole CPU; four growths of 1.25 on a
    // loaded machine stay below 0.9).
    let most = lines
        .iter()
        .filter_map(|v| v.get("bandwidth")?.as_f64())
        .fold(0.0, f64::max);
    assert!(most < 0.9, "bandwidth reached {most}: {lines:?}");
    assert!(
        r.log().text().contains("detached from"),
        "{}",
        r.log().text()
    );
}

#[test]
fn period_auto_detects_the_players_period_and_reserves_at_it() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("period_auto_detects_the_players_period_and_reserves_at_it") {
        return;
    }
    let mut p = player(1, 12);
    let pid = p.pid();
    let mut a = legacy(
        None,
        &[
            "attach",
            &pid.to_string(),
            "--period",
            "auto",
            "--json",
            "--no-server",
        ],
    );
    // Detection (about a second), then the reservation at the detected period.
    let tid = pid as i32;
    let t0 = Instant::now();
    let mut period = None;
    while t0.elapsed() < Duration::from_secs(15) && period.is_none() {
        period = deadline_period(tid);
        std::thread::sleep(Duration::from_millis(100));
    }
    harness::signal(a.pid(), libc::SIGINT);
    let st = finish(&mut a);
    let _ = p.stop(Duration::from_secs(3));
    let log = a.log().text();
    assert!(st.success(), "attach failed: {log}");
    let period = period.unwrap_or_else(|| panic!("no SCHED_DEADLINE reservation seen: {log}"));
    // The player runs at 25 fps: 40 ms within 1 %.
    assert!(
        (39_600_000..=40_400_000).contains(&period),
        "reservation period {period} ns, expected 40 ms: {log}"
    );
    assert!(log.contains("period of process"), "{log}");
}

#[test]
fn a_process_that_exits_while_attached_is_handled() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("a_process_that_exits_while_attached_is_handled") {
        return;
    }
    let mut p = player(1, 2);
    let pid = p.pid().to_string();
    let mut a = legacy(None, &["attach", &pid, "--period", "40", "--no-server"]);
    let st = finish(&mut a);
    assert!(st.success(), "attach failed: {}", a.log().text());
    assert!(p.wait().expect("player").success());
    assert!(a.log().text().contains("detached from"));
}

#[test]
fn the_audio_servers_ledger_holds_the_bandwidth_and_gets_it_back() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("the_audio_servers_ledger_holds_the_bandwidth_and_gets_it_back") {
        return;
    }
    // The graph on SCHED_FIFO holds no bandwidth: what the ledger holds is the player's.
    let srv = Srv::start(&["--sched", "fifo", "-d", "dummy", "-r", "48000", "-p", "256"]);
    let base = srv.status().ledger_used;
    assert_eq!(base, 0.0);
    let mut p = player(1, 30);
    let pid = p.pid().to_string();
    let mut a = legacy(
        Some(&srv),
        &[
            "attach",
            &pid,
            "--period",
            "40",
            "--json",
            "--initial-us",
            "8000",
        ],
    );
    wait_for("2 status lines", Duration::from_secs(20), || {
        status_lines(&a).len() >= 2
    });
    assert!(a
        .log()
        .text()
        .contains(&format!("audio server '{}'", srv.name)));
    let st = srv.status();
    let held = st.ledger_used - base;
    assert!(st.ledger_capacity > 0.0, "status hides the ledger");
    let shown = status_lines(&a).last().unwrap()["bandwidth"]
        .as_f64()
        .unwrap();
    assert!(held > 0.01, "server ledger holds {held}");
    assert!((held - shown).abs() < 0.05, "ledger {held} vs tool {shown}");
    harness::signal(a.pid(), libc::SIGTERM);
    assert!(finish(&mut a).success(), "{}", a.log().text());
    let after = srv.status().ledger_used;
    assert!((after - base).abs() < 1e-3, "ledger {after}, was {base}");
    assert_eq!(
        resound_sched::current(p.pid() as i32).ok(),
        Some(Policy::Other)
    );
    let _ = p.stop(Duration::from_secs(5));
}

#[test]
fn bandwidth_is_refused_when_the_servers_ledger_is_full() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("bandwidth_is_refused_when_the_servers_ledger_is_full") {
        return;
    }
    let srv = Srv::start(&[
        "--max-bandwidth",
        "0.05",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "256",
    ]);
    let mut p = player(1, 30);
    let pid = p.pid().to_string();
    let mut a = legacy(
        Some(&srv),
        &["attach", &pid, "--period", "40", "--initial-us", "8000"],
    );
    let st = finish(&mut a);
    assert!(!st.success());
    let err = a.log().text();
    assert!(
        err.contains("needs 0.20 CPU")
            && err.contains(&format!("audio server '{}' holds", srv.name)),
        "{err}"
    );
    assert_eq!(
        resound_sched::current(p.pid() as i32).ok(),
        Some(Policy::Other)
    );
    let _ = p.stop(Duration::from_secs(5));
}

#[test]
fn bad_options_get_clear_errors() {
    let _serial = common::one_at_a_time();
    let out = Command::new(RESOUND)
        .args([
            "legacy",
            "attach",
            "999999999",
            "--period",
            "40",
            "--no-server",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no running process") || err.contains("SCHED_DEADLINE is not permitted"),
        "{err}"
    );
    let out = Command::new(RESOUND)
        .args(["legacy", "attach", "1", "--period", "fast", "--no-server"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("neither auto nor milliseconds") || err.contains("not permitted"),
        "{err}"
    );
    // The default period is `auto`: a process that does not exist cannot be
    // traced for it.
    let out = Command::new(RESOUND)
        .args(["legacy", "attach", "4194302", "--no-server"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no running process")
            || err.contains("no process")
            || err.contains("not permitted"),
        "{err}"
    );
}

#[test]
fn a_killed_tool_leaves_nothing_in_the_servers_ledger() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("a_killed_tool_leaves_nothing_in_the_servers_ledger") {
        return;
    }
    let srv = Srv::start(&["--sched", "fifo", "-d", "dummy", "-r", "48000", "-p", "256"]);
    let mut p = player(1, 30);
    let pid = p.pid().to_string();
    let mut a = legacy(
        Some(&srv),
        &[
            "attach",
            &pid,
            "--period",
            "40",
            "--json",
            "--initial-us",
            "8000",
        ],
    );
    wait_for("attached", Duration::from_secs(20), || {
        !status_lines(&a).is_empty()
    });
    assert!(srv.status().ledger_used > 0.1);
    let _ = a.kill9();
    wait_for(
        "the server's ledger emptied",
        Duration::from_secs(10),
        || srv.status().ledger_used < 1e-3,
    );
    // SIGKILL gave the tool no chance to restore the player: do it here
    // (shrink first, as the tool does).
    let tid = p.pid() as i32;
    let _ = resound_sched::apply(
        tid,
        &Policy::Deadline {
            runtime_ns: 100_000,
            deadline_ns: PERIOD_NS,
            period_ns: PERIOD_NS,
            reclaim: false,
        },
    );
    let _ = resound_sched::apply(tid, &Policy::Other);
    let _ = p.stop(Duration::from_secs(5));
}

/// Whether perf tracepoint events are open to this user (root, or
/// `kernel.perf_event_paranoid` at -1); prints `SKIP` when not.
fn perf_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    if root || paranoid == Some(-1) {
        true
    } else {
        println!("SKIP {test}: perf tracepoint events are not permitted (perf_event_paranoid {paranoid:?}, not root)");
        false
    }
}

#[test]
fn a_rate_change_is_redetected_and_the_reservation_retuned() {
    let _serial = common::one_at_a_time();
    let test = "a_rate_change_is_redetected_and_the_reservation_retuned";
    if !deadline_or_skip(test) || !perf_or_skip(test) {
        return;
    }
    // 25 fps for 5 s, then 50 fps: the reservation period must follow.
    let mut c = Command::new(TOOL);
    c.args(["periodic", "--fps", "25", "--work-us", "2000"])
        .args(["--change-at", "5", "--new-fps", "50", "--seconds", "16"]);
    let mut p = harness::Child::spawn(c, "periodic", &opts()).expect("periodic");
    // One frame thread: the main thread.
    let tid = p.pid() as i32;
    let pid = p.pid().to_string();
    let mut a = legacy(
        None,
        &[
            "attach",
            &pid,
            "--period",
            "auto",
            "--detect-seconds",
            "1",
            "--redetect",
            "2",
            "--json",
            "--no-server",
        ],
    );
    let mut seen = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        if let Some(t) = deadline_period(tid) {
            if seen.last() != Some(&t) {
                seen.push(t);
            }
            if (19_400_000..=20_600_000).contains(&t) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The status line after the re-tune shows it.
    let retuned = |a: &harness::Child| {
        status_lines(a).iter().any(|v| {
            n(v, "retunes") >= 1 && v["period_ns"].as_u64().is_some_and(|t| t < 30_000_000)
        })
    };
    let t1 = Instant::now();
    while !retuned(&a) && t1.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    harness::signal(a.pid(), libc::SIGINT);
    let st = finish(&mut a);
    let _ = p.stop(Duration::from_secs(3));
    let log = a.log().text();
    assert!(st.success(), "attach failed: {log}");
    let near = |t: &u64, ms: u64| t.abs_diff(ms * 1_000_000) <= ms * 1_000_000 * 3 / 100;
    assert!(
        seen.first().is_some_and(|t| near(t, 40)),
        "first reservation period not 40 ms: {seen:?}\n{log}"
    );
    assert!(
        seen.last().is_some_and(|t| near(t, 20)),
        "the reservation never moved to 20 ms: {seen:?}\n{log}"
    );
    assert!(
        log.contains("period 40.0 ms -> ") && log.contains("(re-tuned)"),
        "{log}"
    );
    assert!(
        retuned(&a),
        "no status line shows the re-tune: {:?}",
        status_lines(&a)
    );
}

/// `attach` a 25 fps player doing 6 ms per frame with its budget held at
/// `budget_us`; the misses the last status line shows.
fn misses_with_budget(budget_us: &str) -> u64 {
    let mut p = player(1, 30);
    let pid = p.pid().to_string();
    let mut a = legacy(
        None,
        &[
            "attach",
            &pid,
            "--period",
            "40",
            "--json",
            "--no-server",
            "--controller",
            "lfs",
            "--initial-us",
            budget_us,
            "--min-us",
            budget_us,
            "--max-us",
            budget_us,
            "--sample-ms",
            "500",
        ],
    );
    wait_for("7 status lines", Duration::from_secs(20), || {
        status_lines(&a).len() >= 7
    });
    harness::signal(a.pid(), libc::SIGINT);
    let st = finish(&mut a);
    let _ = p.stop(Duration::from_secs(3));
    assert!(st.success(), "attach failed: {}", a.log().text());
    let lines = status_lines(&a);
    let last = lines.last().unwrap();
    let per_thread: u64 = last["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| n(t, "misses"))
        .sum();
    assert_eq!(per_thread, n(last, "misses"), "{last}");
    assert!(
        a.log().text().contains("deadline misses"),
        "{}",
        a.log().text()
    );
    n(last, "misses")
}

#[test]
fn a_too_small_budget_misses_deadlines_and_a_generous_one_does_not() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("a_too_small_budget_misses_deadlines_and_a_generous_one_does_not") {
        return;
    }
    // 3 s at 25 fps: 75 jobs of 6 ms each. With 2 ms per 40 ms every job
    // needs three budgets (two postponements); with 16 ms none.
    let small = misses_with_budget("2000");
    assert!(small >= 30, "2 ms budget: only {small} misses");
    let generous = misses_with_budget("16000");
    assert!(generous <= 3, "16 ms budget: {generous} misses");
}

#[test]
fn a_server_that_hangs_up_is_said_and_the_local_ledger_used() {
    let _serial = common::one_at_a_time();
    let test = "a_server_that_hangs_up_is_said_and_the_local_ledger_used";
    if !deadline_or_skip(test) {
        return;
    }
    // Something listens on the server's socket but hangs up on every
    // connection, as a server that refuses the session does.
    let dir = TestDir::new("legacy", "hangup");
    let name = format!("hangup-{}", std::process::id());
    let listener =
        std::os::unix::net::UnixListener::bind(dir.0.join(format!("{name}.sock"))).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
        }
    });
    let mut c = Command::new(RESOUND);
    c.env("RESOUND_DIR", &dir.0)
        .args(["-s", &name, "legacy", "run", "--period", "40", "--", TOOL])
        .args([
            "periodic",
            "--fps",
            "25",
            "--work-us",
            "2000",
            "--frames",
            "25",
        ]);
    let mut r = harness::Child::spawn(c, "resound legacy", &opts()).expect("resound legacy");
    let st = finish(&mut r);
    let log = r.log().text();
    assert!(st.success(), "run failed: {log}");
    assert!(
        log.contains("refused a control session") && log.contains("own ledger"),
        "the fallback to the local ledger is said: {log}"
    );
}
