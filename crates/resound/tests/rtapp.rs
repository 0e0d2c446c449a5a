//! End-to-end tests of `resound_lab::rtapp` on Debian's real rt-app and the
//! real kernel: the papers' competing load (SCHED_FIFO threads and a
//! SCHED_DEADLINE reservation by the 1.05 rule, several threads), its
//! per-job logs, start/stop times, SIGTERM, and the admission error.
//! Where SCHED_FIFO or SCHED_DEADLINE is refused the tests print `SKIP` and
//! return; a missing rt-app fails under `RESOUND_REQUIRE_TEST_TOOLS=1`.

mod common;

use common::{one_at_a_time, skip_missing_tool, TestDir};
use resound_lab::harness::ChildOptions;
use resound_lab::rtapp::{Calibration, RtApp, RtAppLog, RtAppSpec, RtPolicy, RtTask, ThreadLog};
use resound_shm::time::monotonic_ns;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// rt-app's calibration (measured once per test process: it takes rt-app
/// about 4 s), or None after printing why the test cannot run.
fn setup(test: &str) -> Option<Calibration> {
    if resound_lab::rtapp::rtapp_binary().is_err() {
        skip_missing_tool(test, "rt-app is not installed");
        return None;
    }
    if !resound_sched::fifo_permitted() {
        println!("SKIP {test}: SCHED_FIFO is not permitted here");
        return None;
    }
    if !resound_sched::deadline_permitted() {
        println!("SKIP {test}: SCHED_DEADLINE is not permitted here");
        return None;
    }
    static CAL: OnceLock<Calibration> = OnceLock::new();
    Some(*CAL.get_or_init(|| {
        let dir = TestDir::new("rtapp", "calibration");
        Calibration::load_or_measure(&dir.join("calibration.json")).unwrap()
    }))
}

fn task(name: &str, period_us: u64, run_us: u64, policy: RtPolicy) -> RtTask {
    RtTask {
        name: name.into(),
        period_us,
        run_us,
        policy,
        instances: 1,
        start_s: 0.0,
        stop_s: None,
    }
}

/// The kernel's policy number for each of `rt`'s threads named `name`
/// (`policy` in /proc/PID/task/TID/sched: 0 OTHER, 1 FIFO, 6 DEADLINE).
fn kernel_policies(rt: &RtApp, name: &str) -> Vec<u32> {
    rt.threads()
        .into_iter()
        .filter(|(comm, _)| comm == name)
        .map(|(_, tid)| {
            let f = format!("/proc/{}/task/{tid}/sched", rt.pid());
            let text = std::fs::read_to_string(&f).unwrap();
            let line = text.lines().find(|l| l.starts_with("policy")).unwrap();
            line.rsplit(':').next().unwrap().trim().parse().unwrap()
        })
        .collect()
}

/// Waits until rt-app has finished its jobs (it exits by itself).
fn wait_exit(rt: &mut RtApp, timeout: Duration) {
    let t0 = Instant::now();
    while rt.exited().is_none() {
        assert!(
            t0.elapsed() < timeout,
            "rt-app still runs after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_releases(th: &ThreadLog, after_ns: u64, before_ns: u64) {
    let p = th.period_us * 1000;
    let r0 = th.jobs[0].release_ns;
    for (k, j) in th.jobs.iter().enumerate() {
        assert_eq!(j.index, k as u64);
        assert_eq!(j.release_ns, r0 + k as u64 * p, "{} job {k}", th.task);
        assert!(
            j.release_ns >= after_ns && j.end_ns <= before_ns,
            "{j:?} not in [{after_ns}, {before_ns}]"
        );
        assert!(
            j.start_ns >= j.release_ns && j.end_ns >= j.start_ns,
            "{j:?}"
        );
        assert_eq!(j.response_us, (j.end_ns - j.release_ns) / 1000);
        assert_eq!(j.slack_us < 0, j.missed());
    }
}

#[test]
fn fifo_and_deadline_tasks_run_and_log_their_jobs() {
    let test = "fifo_and_deadline_tasks_run_and_log_their_jobs";
    let _g = one_at_a_time();
    let dir = TestDir::new("rtapp", "run");
    let Some(cal) = setup(test) else { return };
    let mut fifo = task("fifo", 10_000, 1_000, RtPolicy::Fifo { priority: 10 });
    fifo.instances = 2;
    let mut dl = task("dl", 20_000, 2_000, RtTask::reservation(20_000, 2_000));
    dl.start_s = 0.5;
    // Three periods of work per period: every job finishes after its deadline.
    let mut late = task("late", 10_000, 30_000, RtPolicy::Other);
    late.stop_s = Some(0.2);
    let spec = RtAppSpec {
        tasks: vec![fifo, dl, late],
        duration_s: 2.0,
    };
    let t_before = monotonic_ns();
    let mut rt = RtApp::start(&spec, &dir.join("run"), &cal, &ChildOptions::default()).unwrap();
    rt.wait_running(Duration::from_secs(10)).unwrap();
    // What the kernel itself says, besides wait_running's sched_getattr.
    assert_eq!(kernel_policies(&rt, "fifo"), [1, 1]);
    assert_eq!(kernel_policies(&rt, "dl"), [6]);
    wait_exit(&mut rt, Duration::from_secs(20));
    let log = rt.stop().unwrap();
    let t_after = monotonic_ns();

    for th in &log.threads {
        println!(
            "{} {} ({}): {:?}",
            th.task,
            th.instance,
            th.policy,
            th.summary()
        );
    }
    assert_eq!(log.threads.len(), 4);
    let fifos = log.task("fifo");
    assert_eq!(fifos.iter().map(|t| t.instance).collect::<Vec<_>>(), [0, 1]);
    for th in &fifos {
        assert_eq!(th.policy, "SCHED_FIFO 10");
        assert_eq!(th.jobs.len(), 200, "2 s / 10 ms");
        check_releases(th, t_before, t_after);
        assert!(th.summary().misses < 100, "{:?}", th.summary());
    }
    let dl = log.task("dl")[0];
    assert_eq!(dl.policy, "SCHED_DEADLINE 2100/20000/20000 us");
    assert_eq!(dl.jobs.len(), 75, "(2 s - 0.5 s) / 20 ms");
    check_releases(dl, t_before, t_after);
    // Its first release is its delay after the common start.
    let start = fifos[0].jobs[0].release_ns;
    let off = dl.jobs[0].release_ns - start;
    assert!(
        off.abs_diff(500_000_000) < 2_000_000,
        "dl starts {off} ns after fifo"
    );
    // Released on CLOCK_MONOTONIC within the test's own readings of it.
    assert!(start - t_before < 5_000_000_000, "{start} vs {t_before}");

    let late = log.task("late")[0];
    assert_eq!(late.jobs.len(), 20, "0.2 s / 10 ms");
    check_releases(late, t_before, t_after);
    let s = late.summary();
    assert_eq!(s.misses, s.jobs, "run > period: every job misses: {s:?}");
    assert!(
        s.slack_min_us < -20_000 && s.resp_max_us > 30_000.0,
        "{s:?}"
    );

    let all = log.summary();
    assert_eq!(all.jobs, 400 + 75 + 20);
    assert!(all.misses >= 20);
    let csv = dir.join("jobs.csv");
    log.write_csv(&csv).unwrap();
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        1 + 495
    );
}

#[test]
fn sigterm_stops_it_with_its_logs() {
    let test = "sigterm_stops_it_with_its_logs";
    let _g = one_at_a_time();
    let dir = TestDir::new("rtapp", "stop");
    let Some(cal) = setup(test) else { return };
    let spec = RtAppSpec {
        tasks: vec![task("bg", 10_000, 500, RtPolicy::Fifo { priority: 5 })],
        duration_s: 60.0,
    };
    let mut rt = RtApp::start(&spec, &dir.join("run"), &cal, &ChildOptions::default()).unwrap();
    rt.wait_running(Duration::from_secs(10)).unwrap();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    assert!(rt.exited().is_none());
    let log = rt.stop().unwrap();
    let ran = t0.elapsed().as_secs_f64();
    let jobs = log.summary().jobs as f64;
    // ~100 jobs a second; generous: the machine is shared.
    assert!(
        jobs > 50.0 && jobs < (ran + 0.5) * 100.0,
        "{jobs} jobs in {ran} s"
    );
}

#[test]
fn refused_reservations_say_ebusy() {
    let test = "refused_reservations_say_ebusy";
    let _g = one_at_a_time();
    let dir = TestDir::new("rtapp", "ebusy");
    let Some(cal) = setup(test) else { return };
    let rt_runtime: i64 = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(-1);
    if rt_runtime < 0 {
        println!("SKIP {test}: sched_rt_runtime_us is -1: no SCHED_DEADLINE admission limit");
        return;
    }
    // 90% reservations (of which the threads use 1%): one more than the CPUs hold.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let mut big = task(
        "big",
        10_000,
        100,
        RtPolicy::Deadline {
            runtime_us: 9_000,
            period_us: 10_000,
            deadline_us: 10_000,
        },
    );
    big.instances = cpus + 1;
    let spec = RtAppSpec {
        tasks: vec![big],
        duration_s: 1.0,
    };
    let mut rt = RtApp::start(&spec, &dir.join("run"), &cal, &ChildOptions::default()).unwrap();
    let e = rt.wait_running(Duration::from_secs(10)).unwrap_err();
    assert!(e.contains("EBUSY") && e.contains("admission"), "{e}");
    let e = rt.stop().unwrap_err();
    assert!(e.contains("EBUSY"), "{e}");
}

#[test]
fn bad_specs_are_refused_before_rtapp_starts() {
    let dir = TestDir::new("rtapp", "bad");
    let cal = Calibration::from_ns_per_loop(30).unwrap();
    let spec = RtAppSpec {
        tasks: vec![task("no/slash", 10_000, 100, RtPolicy::Other)],
        duration_s: 1.0,
    };
    let e = match RtApp::start(&spec, &dir.join("run"), &cal, &ChildOptions::default()) {
        Err(e) => e,
        Ok(_) => panic!("started a spec with a bad name"),
    };
    assert!(e.contains("task name"), "{e}");
    assert!(
        !dir.join("run").exists(),
        "nothing written for a refused spec"
    );
    let log = RtAppLog::default();
    assert_eq!(log.summary().jobs, 0);
}
