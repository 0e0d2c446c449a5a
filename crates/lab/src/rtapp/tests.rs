//! Unit tests: the spec's checks, the JSON it becomes, and the log parser on
//! the logs of a real rt-app 1.0 run (`testdata/`, from `testdata/rtapp.json`:
//! `dl` SCHED_DEADLINE 2100/20000 us running 2000 us every 20 ms, two `fifo`
//! threads SCHED_FIFO 10 running 1 ms every 10 ms from 50 ms on, and `late`
//! SCHED_OTHER running 12 ms every 10 ms, which misses every deadline).

use super::*;
use std::path::{Path, PathBuf};

fn task(name: &str, policy: RtPolicy) -> RtTask {
    RtTask {
        name: name.into(),
        period_us: 10_000,
        run_us: 1_000,
        policy,
        instances: 1,
        start_s: 0.0,
        stop_s: None,
    }
}

fn spec(tasks: Vec<RtTask>) -> RtAppSpec {
    RtAppSpec {
        tasks,
        duration_s: 2.0,
    }
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rtapp/testdata")
}

#[test]
fn reservation_is_the_papers_rule() {
    assert_eq!(
        RtTask::reservation(10_000, 2_000),
        RtPolicy::Deadline {
            runtime_us: 2_100,
            period_us: 10_000,
            deadline_us: 10_000
        }
    );
    // ceil: 1.05 * 1001 = 1051.05 -> 1052
    assert!(matches!(
        RtTask::reservation(5_000, 1_001),
        RtPolicy::Deadline {
            runtime_us: 1_052,
            ..
        }
    ));
}

#[test]
fn validate_refuses_bad_specs() {
    let ok = spec(vec![task("a", RtPolicy::Other)]);
    assert_eq!(ok.validate(), Ok(()));
    let bad = |s: RtAppSpec, needle: &str| {
        let e = s.validate().unwrap_err();
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    };
    bad(spec(vec![]), "at least one task");
    bad(
        spec(vec![task("a", RtPolicy::Other), task("a", RtPolicy::Other)]),
        "twice",
    );
    bad(spec(vec![task("a-b", RtPolicy::Other)]), "task name");
    bad(
        spec(vec![task("sixteen_chars_xx", RtPolicy::Other)]),
        "task name",
    );
    bad(
        spec(vec![task("f", RtPolicy::Fifo { priority: 0 })]),
        "1..=99",
    );
    bad(
        spec(vec![task(
            "d",
            RtPolicy::Deadline {
                runtime_us: 11_000,
                period_us: 10_000,
                deadline_us: 10_000,
            },
        )]),
        "runtime",
    );
    let mut t = task("a", RtPolicy::Other);
    t.instances = 0;
    bad(spec(vec![t]), "instances");
    let mut t = task("a", RtPolicy::Other);
    t.start_s = 1.0;
    t.stop_s = Some(0.5);
    bad(spec(vec![t]), "stop_s");
    let mut t = task("a", RtPolicy::Other);
    t.start_s = 3.0;
    bad(spec(vec![t]), "after the spec");
    bad(
        RtAppSpec {
            tasks: vec![task("a", RtPolicy::Other)],
            duration_s: f64::NAN,
        },
        "duration_s",
    );
}

#[test]
fn jobs_cover_start_to_stop() {
    let mut t = task("a", RtPolicy::Other);
    assert_eq!(t.jobs(2.0), 200);
    t.start_s = 0.5;
    t.stop_s = Some(1.0);
    assert_eq!(t.jobs(2.0), 50);
    t.stop_s = Some(5.0); // the spec's end comes first
    assert_eq!(t.jobs(2.0), 150);
    t.stop_s = Some(0.5001); // one release (at 0.5 s) before the stop
    assert_eq!(t.jobs(2.0), 1);
    // Whole microseconds: 0.3 - 0.1 is not 0.2 in floating point.
    t.start_s = 0.1;
    t.stop_s = Some(0.3);
    assert_eq!(t.jobs(2.0), 20);
    t.start_s = 0.7;
    t.stop_s = Some(0.9);
    assert_eq!(t.jobs(2.0), 20);
}

#[test]
fn json_has_rtapps_grammar() {
    let mut fifo = task("fifo", RtPolicy::Fifo { priority: 50 });
    fifo.instances = 2;
    fifo.start_s = 0.25;
    fifo.stop_s = Some(1.25);
    let dl = task("dl", RtTask::reservation(10_000, 2_000));
    let s = spec(vec![fifo, dl, task("other", RtPolicy::Other)]);
    let cal = Calibration::from_ns_per_loop(31).unwrap();
    let v = s.to_json(Path::new("/tmp/x"), &cal);
    let g = &v["global"];
    assert_eq!(g["duration"], -1);
    assert_eq!(g["calibration"], 31);
    assert_eq!(g["logdir"], "/tmp/x");
    assert_eq!(g["log_basename"], LOG_BASENAME);
    assert!(
        g.get("log_size").is_none(),
        "\"file\" would disable rt-app 1.0's logs"
    );
    let f = &v["tasks"]["fifo"];
    assert_eq!(f["instance"], 2);
    assert_eq!(f["policy"], "SCHED_FIFO");
    assert_eq!(f["priority"], 50);
    assert_eq!(f["delay"], 250_000);
    assert_eq!(f["loop"], 1);
    let job = &f["phases"]["job"];
    assert_eq!(job["loop"], 100);
    assert_eq!(job["run"], 1_000);
    assert_eq!(job["timer"]["period"], 10_000);
    assert_eq!(job["timer"]["mode"], "absolute");
    assert_eq!(job["timer"]["ref"], "unique");
    let d = &v["tasks"]["dl"];
    assert_eq!(d["policy"], "SCHED_DEADLINE");
    assert_eq!(d["dl-runtime"], 2_100);
    assert_eq!(d["dl-period"], 10_000);
    assert_eq!(d["dl-deadline"], 10_000);
    assert!(d.get("delay").is_none() && d.get("priority").is_none());
    assert_eq!(d["phases"]["job"]["loop"], 200);
    let o = &v["tasks"]["other"];
    assert_eq!(o["policy"], "SCHED_OTHER");
    assert!(o.get("priority").is_none());
}

#[test]
fn parses_a_real_run() {
    let log = RtAppLog::read_dir(&testdata()).unwrap();
    let names: Vec<(&str, u32, &str)> = log
        .threads
        .iter()
        .map(|t| (t.task.as_str(), t.instance, t.policy.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("dl", 0, "SCHED_DEADLINE"),
            ("fifo", 0, "SCHED_FIFO 10"),
            ("fifo", 1, "SCHED_FIFO 10"),
            ("late", 0, "SCHED_OTHER"),
        ]
    );
    let late = log.task("late")[0];
    assert_eq!(late.period_us, 10_000);
    assert_eq!(late.jobs.len(), 8);
    let s = late.summary();
    assert_eq!((s.jobs, s.misses), (8, 8));
    assert_eq!(s.slack_min_us, -53_134);
    // Releases every period from the common start (recovered as end + slack
    // of the late jobs), which the dl thread's sleeping jobs give too.
    let t0 = late.jobs[0].release_ns;
    for (k, j) in late.jobs.iter().enumerate() {
        assert_eq!(j.index, k as u64);
        assert_eq!(j.release_ns, t0 + k as u64 * 10_000_000);
        assert_eq!(j.response_us, (10_000 - j.slack_us) as u64);
        assert!(j.start_ns >= j.release_ns && j.end_ns > j.start_ns);
    }
    let dl0 = log.task("dl")[0].jobs[0].release_ns;
    assert!(t0.abs_diff(dl0) <= 2_000, "late {t0} vs dl {dl0}");
    // Line 1 of rtapp-late-3.log: start 23618387602, end 23618403487, slack -10707.
    assert_eq!(late.jobs[0].start_ns, 23_618_387_602_000);
    assert_eq!(late.jobs[0].run_us, 15_881);
    assert_eq!(late.jobs[0].end_ns, t0 + 10_000_000 + 10_707_000);
}

#[test]
fn fifo_threads_start_after_their_delay() {
    let log = RtAppLog::read_dir(&testdata()).unwrap();
    let dl0 = log.task("dl")[0].jobs[0].release_ns;
    for th in log.task("fifo") {
        let s = th.summary();
        assert_eq!((s.jobs, s.misses), (10, 0));
        let r0 = th.jobs[0].release_ns;
        // "delay": 50000 us after the common start.
        assert!((r0 - dl0).abs_diff(50_000_000) <= 2_000, "{r0} - {dl0}");
        for j in &th.jobs {
            assert!(j.wakeup_latency_us < 1_000, "{j:?}");
            assert_eq!(j.response_us as i64, 10_000 - j.slack_us);
        }
    }
    let all = log.summary();
    assert_eq!(all.jobs, 10 + 20 + 8);
    assert_eq!(all.misses, 8);
    assert!(all.resp_p50_us <= all.resp_p99_us && all.resp_p99_us <= all.resp_max_us);
    let warm = log.released_from(dl0 + 100_000_000);
    assert!(warm.summary().jobs < all.jobs);
}

#[test]
fn parser_refuses_what_is_not_an_rtapp_log() {
    assert!(parse_thread_log("a", 0, "1 2 3\n").is_err());
    let head = "# Policy : SCHED_OTHER priority : 0\n#idx perf ...\n";
    assert!(parse_thread_log("a", 0, &format!("{head}1 2 3\n")).is_err());
    let t = parse_thread_log("a", 0, head).unwrap();
    assert!(t.jobs.is_empty());
    assert!(t.summary().resp_max_us.is_nan());
}

#[test]
fn csv_has_one_row_per_job() {
    let log = RtAppLog::read_dir(&testdata()).unwrap();
    let path = std::env::temp_dir().join(format!("resound-rtapp-csv-{}.csv", std::process::id()));
    log.write_csv(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 1 + 38);
    assert!(rows[0].starts_with("task,instance,policy,index,release_ns"));
    assert!(rows.iter().any(|r| r.starts_with("late,0,SCHED_OTHER,7,")));
}
