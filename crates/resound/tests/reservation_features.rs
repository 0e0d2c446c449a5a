//! The reservation features the papers' experiments need: the automatic
//! reservation-period multiplier for short periods (`--period-multiplier
//! auto`), the graph-level view of the reservations (status line, profile
//! columns) and reservations for threads JACK clients create. Real
//! SCHED_DEADLINE threads; tests print SKIP with the reason where
//! SCHED_DEADLINE is not permitted.

mod common;
use common::*;
use resound_client::prelude::*;
use resound_protocol::wire::ReservationStatus;
use resound_sched::Policy;
use std::path::PathBuf;
use std::time::Duration;

/// The reservation period the kernel has for `tid` (ns).
fn kernel_period(tid: i32) -> u64 {
    kernel_reservation(tid).2
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("resound-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// 48 kHz, 32 frames (667 us): `--period-multiplier auto` makes the
/// reservation periods two audio periods long (>= 1333 us), as the kernel
/// sees them; a buffer-size change to 128 frames brings them back to one.
#[test]
fn auto_multiplier_doubles_the_reservation_period_of_short_periods() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("auto_multiplier_doubles_the_reservation_period_of_short_periods") {
        return;
    }
    // Light threads keep the audio period here, so that every period is
    // the multiplier's.
    let srv = Srv::start_without_rescue(&[
        "--sched",
        "deadline",
        "--light-period",
        "100",
        "--light-deadline",
        "100",
        "--period-multiplier",
        "auto",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "32",
    ]);
    let _a = srv.tool("a", &["load", "--busy", "5"]);
    let p32 = resound_shm::time::frames_to_ns(32, 48000);
    let mut st = srv.status();
    wait_for("a's reservation", Duration::from_secs(5), || {
        st = srv.status();
        res(&st, "a").is_some_and(|r| r.policy == "SCHED_DEADLINE")
    });
    assert_eq!(st.period_multiplier, 2, "{}", st.sched);
    assert!(
        st.sched.contains("period auto (>= 1333 us)"),
        "{}",
        st.sched
    );
    for name in ["driver", "a"] {
        let r = res(&st, name).unwrap();
        assert_eq!(r.period_ns, 2 * p32, "{r:?}");
        assert_eq!(kernel_period(r.tid), 2 * p32, "{name}: the kernel's period");
    }
    assert!(
        srv.log().contains("reservation period x2 (auto:1333)"),
        "start-up line: {}",
        srv.log()
    );
    let out = srv.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("multiplier    x2"), "{text}");
    // 128 frames (2667 us): one audio period per reservation period again.
    srv.ctl().set_buffer_size(128).unwrap();
    let p128 = resound_shm::time::frames_to_ns(128, 48000);
    wait_for(
        "the multiplier to follow the buffer size",
        Duration::from_secs(5),
        || {
            let st = srv.status();
            st.period_multiplier == 1
                && ["driver", "a"].iter().all(|n| {
                    res(&st, n).is_some_and(|r| r.period_ns == p128 && kernel_period(r.tid) == p128)
                })
        },
    );
    // And back to 16 frames: four.
    srv.ctl().set_buffer_size(16).unwrap();
    let p16 = resound_shm::time::frames_to_ns(16, 48000);
    wait_for("x4 at 16 frames", Duration::from_secs(5), || {
        let st = srv.status();
        st.period_multiplier == 4
            && res(&st, "driver").is_some_and(|r| kernel_period(r.tid) == 4 * p16)
    });
}

/// A fixed `--period-multiplier N` is unchanged by the buffer size.
#[test]
fn fixed_multiplier_stays_fixed() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("fixed_multiplier_stays_fixed") {
        return;
    }
    let srv = Srv::start_without_rescue(&[
        "--sched",
        "deadline",
        "--light-period",
        "100",
        "--light-deadline",
        "100",
        "--period-multiplier",
        "3",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "256",
    ]);
    let st = srv.status();
    let d = res(&st, "driver").unwrap();
    assert_eq!(st.period_multiplier, 3);
    assert_eq!(
        kernel_period(d.tid),
        3 * resound_shm::time::frames_to_ns(256, 48000)
    );
}

/// The kernel's (runtime, deadline, period) for `tid` (ns).
fn kernel_reservation(tid: i32) -> (u64, u64, u64) {
    match resound_sched::current(tid).expect("sched_getattr") {
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
            ..
        } => (runtime_ns, deadline_ns, period_ns),
        p => panic!("tid {tid} is {p:?}, not under SCHED_DEADLINE"),
    }
}

/// Light shapes, on by default: a light thread (a client busy 1 %, under a
/// budget of at least 5 % of the period) has, in the kernel, a period of
/// 75 % of the audio period and a deadline of half that; a heavy one
/// (busy 40 % of the first period) keeps the audio period with deadline =
/// period and a budget above its work; after a buffer-size change too.
/// With `--light-deadline 100` every thread is on the audio period.
#[test]
fn light_threads_get_a_shorter_period_and_deadline_in_the_kernel() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("light_threads_get_a_shorter_period_and_deadline_in_the_kernel") {
        return;
    }
    let srv = Srv::start_without_rescue(&[
        "--sched", "deadline", "-d", "dummy", "-r", "48000", "-p", "128",
    ]);
    let _light = srv.tool("light", &["load", "--busy", "1"]);
    let _heavy = srv.tool("heavy", &["load", "--busy", "40", "-c", "light:out=@:in"]);
    let st = srv.status();
    assert!(
        st.sched
            .contains("period deadlines, light threads 50% of a 75% period"),
        "{}",
        st.sched
    );
    // Polled on one control session: opening one per poll made the chain
    // tests lose cycles (see docs/bench-vs-jackd2.md).
    let ctl = srv.ctl();
    let shapes = |frames: u64| {
        let audio = resound_shm::time::frames_to_ns(frames, 48000);
        let short = (audio as f64 * 0.75).round() as u64;
        let st = ctl.status().expect("status");
        let of = |name: &str| res(&st, name).map(|r| kernel_reservation(r.tid));
        let (light, heavy) = (of("light"), of("heavy"));
        let light_ok = light.is_some_and(|(q, d, p)| {
            p == short && d == (short as f64 * 0.5).round() as u64 && q <= d
        });
        // "load" burns a fixed time, 40 % of the period it started with.
        let heavy_work = resound_shm::time::frames_to_ns(128, 48000) * 4 / 10;
        let heavy_ok = heavy.is_some_and(|(q, d, p)| p == audio && d == audio && q > heavy_work);
        (
            light_ok && heavy_ok,
            format!("light {light:?}, heavy {heavy:?} (runtime, deadline, period)"),
        )
    };
    for frames in [128, 256] {
        if frames != 128 {
            ctl.set_buffer_size(frames as u32).unwrap();
        }
        wait_for_seen(
            &format!("the light and full shapes in the kernel at {frames} frames"),
            Duration::from_secs(20),
            || shapes(frames),
        );
    }
    drop(ctl);
    drop(srv);
    let srv = Srv::start_without_rescue(&[
        "--sched",
        "deadline",
        "--light-deadline",
        "100",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "128",
    ]);
    let _light = srv.tool("light", &["load", "--busy", "1"]);
    let audio = resound_shm::time::frames_to_ns(128, 48000);
    let ctl = srv.ctl();
    let on_the_audio_period = || {
        let st = ctl.status().expect("status");
        res(&st, "light").is_some_and(|r| {
            let (_, d, p) = kernel_reservation(r.tid);
            (d, p) == (audio, audio)
        })
    };
    wait_for(
        "the light client's reservation",
        Duration::from_secs(20),
        on_the_audio_period,
    );
    // Past the warm-up (a 100-cycle window, 0.27 s), when light shapes
    // would have made it light: still the audio period.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            on_the_audio_period(),
            "--light-deadline 100: no light threads"
        );
    }
}

/// Two clients under `--sched deadline`: `resound status` shows the graph
/// as one group reservation, and the profile's per-cycle graph columns are
/// the sums of the per-thread columns.
#[test]
fn graph_view_in_status_and_profile() {
    let _serial = common::one_at_a_time();
    if !deadline_or_skip("graph_view_in_status_and_profile") {
        return;
    }
    let srv = Srv::start_without_rescue(&[
        "--sched", "deadline", "-S", "-d", "dummy", "-r", "48000", "-p", "256",
    ]);
    let _a = srv.tool("a", &["load", "--busy", "10"]);
    let _b = srv.tool("b", &["load", "--busy", "15", "-c", "a:out=@:in"]);
    std::thread::sleep(Duration::from_millis(1500));
    let st = srv.status();
    let g = st.graph.expect("graph view");
    assert_eq!((g.reserved, g.threads), (3, 3), "{g:?}");
    let sum: u64 = st.reservations.iter().map(|r| r.budget_ns).sum();
    assert_eq!(g.budget_ns, sum, "multiplier 1: the plain sum");
    assert!(g.used_ns > 0 && g.predicted_ns > 0, "{g:?}");
    let out = srv.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("graph: budget "))
        .unwrap_or_else(|| panic!("no graph line in {text}"));
    assert!(
        line.contains(" us, predicted ")
            && line.contains(" us per cycle (")
            && line.ends_with("% of the period)"),
        "{line}"
    );
    let dir = tmpdir("graph-view");
    let o = srv.cli(&["profile", "--out", dir.to_str().unwrap(), "--last", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut cycles = csv::Reader::from_path(dir.join("cycles.csv")).unwrap();
    let h = cycles.headers().unwrap().clone();
    let col = |h: &csv::StringRecord, n: &str| {
        h.iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("no column {n}"))
    };
    let (cy, db, dp, dc, gb, gp, gu) = (
        col(&h, "cycle"),
        col(&h, "driver_budget_ns"),
        col(&h, "driver_predicted_ns"),
        col(&h, "driver_cpu_ns"),
        col(&h, "graph_budget_ns"),
        col(&h, "graph_predicted_ns"),
        col(&h, "graph_used_ns"),
    );
    let num = |r: &csv::StringRecord, i: usize| -> u64 { r[i].parse().unwrap_or(0) };
    let mut per_cycle: std::collections::BTreeMap<u64, [u64; 3]> = Default::default();
    let mut clients = csv::Reader::from_path(dir.join("clients.csv")).unwrap();
    let ch = clients.headers().unwrap().clone();
    let (ccy, cb, cp, cc) = (
        col(&ch, "cycle"),
        col(&ch, "budget_ns"),
        col(&ch, "predicted_ns"),
        col(&ch, "cpu_ns"),
    );
    for r in clients.records() {
        let r = r.unwrap();
        let e = per_cycle.entry(num(&r, ccy)).or_default();
        e[0] += num(&r, cb);
        e[1] += num(&r, cp);
        e[2] += num(&r, cc);
    }
    let mut n = 0;
    for r in cycles.records() {
        let r = r.unwrap();
        let c = per_cycle.get(&num(&r, cy)).copied().unwrap_or_default();
        assert_eq!(
            num(&r, gb),
            num(&r, db) + c[0],
            "budget sum, cycle {}",
            &r[cy]
        );
        assert_eq!(
            num(&r, gp),
            num(&r, dp) + c[1],
            "prediction sum, cycle {}",
            &r[cy]
        );
        assert_eq!(num(&r, gu), num(&r, dc) + c[2], "CPU sum, cycle {}", &r[cy]);
        n += 1;
    }
    assert!(n > 50, "{n} cycles");
    assert!(dir.join("graph_budget.svg").exists(), "graph budget figure");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.contains("graph (per cycle)"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rtthread.c` compiled against the distribution's JACK headers (None:
/// no compiler or headers; SKIP printed, a failure under
/// RESOUND_REQUIRE_TEST_TOOLS=1).
fn rtthread_program(test: &str) -> Option<PathBuf> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !std::path::Path::new("/usr/include/jack/jack.h").exists() {
        skip_missing_tool(
            test,
            "JACK headers missing (apt-get install libjack-jackd2-dev)",
        );
        return None;
    }
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../libjack/tests/c/rtthread.c");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("libjack-c");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("rtthread");
    let out = match std::process::Command::new("cc")
        .args(["-std=gnu11", "-O1", "-g", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(["-ljack", "-lpthread"])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            skip_missing_tool(test, &format!("no C compiler (cc): {e}"));
            return None;
        }
    };
    assert!(
        out.status.success(),
        "compiling rtthread.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// Starts `resound run -- rtthread RUN_MS` against `srv` (resound's libjack first).
fn spawn_rtthread(srv: &Srv, exe: &std::path::Path, run_ms: u32) -> std::process::Child {
    std::process::Command::new(RESOUND)
        .env("RESOUND_DIR", &srv.dir)
        .env_remove("RESOUND_SERVER")
        .env_remove("JACK_DEFAULT_SERVER")
        .args(["-s", &srv.name, "run", "--"])
        .arg(exe)
        .arg(run_ms.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rtthread")
}

/// Waits (30 s at most) for the program and returns its stdout.
fn finish(child: std::process::Child) -> String {
    let t0 = std::time::Instant::now();
    let mut child = child;
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "rtthread did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let so = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && so.contains("DONE"),
        "rtthread failed: {so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// The value of `key=` on the line starting with `tag`.
fn field(out: &str, tag: &str, key: &str) -> i64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(tag))
        .unwrap_or_else(|| panic!("no {tag} line in {out}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

/// Under `--sched deadline` a thread made with jack_client_create_thread
/// runs under SCHED_DEADLINE (admitted in the server's ledger, its budget
/// following what it uses, shown in status), as does one raised with
/// jack_acquire_real_time_scheduling; both are released when they end or
/// drop real-time scheduling. Under `--sched fifo` they are SCHED_FIFO.
#[test]
fn client_threads_get_reservations() {
    let _serial = common::one_at_a_time();
    let test = "client_threads_get_reservations";
    if !deadline_or_skip(test) {
        return;
    }
    let Some(exe) = rtthread_program(test) else {
        return;
    };
    let srv = Srv::start_without_rescue(&[
        "--sched", "deadline", "-d", "dummy", "-r", "48000", "-p", "256",
    ]);
    let child = spawn_rtthread(&srv, &exe, 2500);
    let mut seen: Option<ReservationStatus> = None;
    wait_for(
        "the client thread's reservation in status",
        Duration::from_secs(10),
        || {
            let st = srv.status();
            seen = st
                .reservations
                .iter()
                .find(|r| r.name.starts_with("rtthread thread "))
                .cloned();
            seen.as_ref()
                .is_some_and(|r| r.policy == "SCHED_DEADLINE" && r.used_ns > 0)
        },
    );
    let r = seen.unwrap();
    let period = resound_shm::time::frames_to_ns(256, 48000);
    assert_eq!(r.period_ns, period, "{r:?}");
    assert_eq!(kernel_period(r.tid), period, "the kernel agrees");
    // Admitted in the server's ledger: it holds the sum of every reservation, the thread's included.
    let st = srv.status();
    let sum: f64 = st
        .reservations
        .iter()
        .map(|x| x.budget_ns as f64 / x.period_ns.max(1) as f64)
        .sum();
    assert!(
        (st.ledger_used - sum).abs() < 0.01 && st.reservations.len() == 3,
        "ledger {} = sum {sum} of {:?}",
        st.ledger_used,
        st.reservations
    );
    // The worker uses ~20 % of its time: the feedback follows (generous bounds).
    wait_for(
        "the budget to follow the use",
        Duration::from_secs(3),
        || {
            srv.status().reservations.iter().any(|x| {
                x.tid == r.tid && x.predicted_ns > period / 20 && x.predicted_ns < period / 2
            })
        },
    );
    let out = finish(child);
    assert_eq!(field(&out, "CREATED", "policy"), 6, "{out}");
    assert_eq!(field(&out, "CREATED", "tid"), r.tid as i64);
    assert_eq!(field(&out, "ACQUIRED", "policy"), 6, "{out}");
    assert_eq!(field(&out, "DROPPED", "policy"), 0, "{out}");
    assert!(srv.log().contains("thread") && srv.log().contains("SCHED_DEADLINE reservation"));
    let mut last = srv.status();
    let left = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        last = srv.status();
        // Only the driver is left, and the ledger holds only its reservation.
        let only_driver: f64 = last
            .reservations
            .iter()
            .map(|x| x.budget_ns as f64 / x.period_ns.max(1) as f64)
            .sum();
        last.reservations.len() == 1 && (last.ledger_used - only_driver).abs() < 0.005
    });
    assert!(
        left,
        "threads released: ledger {} {:?}",
        last.ledger_used, last.reservations
    );

    let srv =
        Srv::start_without_rescue(&["--sched", "fifo", "-d", "dummy", "-r", "48000", "-p", "256"]);
    let out = finish(spawn_rtthread(&srv, &exe, 200));
    assert_eq!(field(&out, "CREATED", "policy"), 1, "--sched fifo: {out}");
    assert_eq!(field(&out, "ACQUIRED", "policy"), 1, "--sched fifo: {out}");
}

/// A client may only name threads of its own process.
#[test]
fn a_thread_of_another_process_is_refused() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start_without_rescue(&["--sched", "deadline", "-d", "dummy", "-p", "256"]);
    use resound_protocol::wire::{Reply, Request};
    let s = raw_client(&srv, "liar");
    let ask = |_seq: u32, req: Request| call(&s, req);
    // The server's own main thread, and a thread of this test process (the
    // session's peer is this process, so that one is its own).
    for (seq, tid) in [(1, srv.pid() as i32), (2, -5), (3, 0)] {
        match ask(seq, Request::ReserveThread { tid, on: true }) {
            Reply::Err(e) => assert!(
                e.message.contains("does not belong") || e.message.contains("invalid thread"),
                "{e}"
            ),
            r => panic!("a foreign tid {tid} was accepted: {r:?}"),
        }
    }
    let st = srv.status();
    assert!(
        !st.reservations.iter().any(|r| r.name.contains(" thread ")),
        "nothing reserved: {:?}",
        st.reservations
    );
    // The server's main thread was not touched.
    assert!(!matches!(
        resound_sched::current(srv.pid() as i32),
        Ok(Policy::Deadline { .. })
    ));
}

/// When the ledger has no room for a client thread's reservation, the
/// thread runs SCHED_FIFO and the log names it.
#[test]
fn a_refused_client_thread_falls_back_to_fifo() {
    let _serial = common::one_at_a_time();
    let test = "a_refused_client_thread_falls_back_to_fifo";
    if !deadline_or_skip(test) {
        return;
    }
    let Some(exe) = rtthread_program(test) else {
        return;
    };
    // 30 % per thread in a 0.7 CPU ledger: the driver and the process thread fit, a third does not.
    let srv = Srv::start_without_rescue(&[
        "--sched",
        "deadline",
        "--fixed-budget",
        "30",
        "--max-bandwidth",
        "0.7",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "256",
    ]);
    let out = finish(spawn_rtthread(&srv, &exe, 200));
    assert_eq!(field(&out, "CREATED", "policy"), 1, "{out}\n{}", srv.log());
    let log = srv.log();
    assert!(
        log.contains("no SCHED_DEADLINE reservation (needs 0.300 CPU")
            && log.contains("running SCHED_FIFO"),
        "{log}"
    );
}
