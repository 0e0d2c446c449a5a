//! The C API through C test programs: the ABI, every callback with its
//! arguments and thread, bad input, parity with jackd, the scheduling a
//! process thread hands on, the rest of the API.

use crate::common::*;
use crate::programs::*;
use resound_client::prelude::*;
use std::time::Duration;

#[test]
fn abi_matches_the_distribution_headers() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("abi", "abi") else {
        return;
    };
    let srv = server();
    let (code, out, err) = run_to_end(&srv, exe.to_str().unwrap(), &[], "");
    assert_eq!(code, 0, "ABI check failed:\n{out}\n{err}");
    assert!(out.starts_with("OK "), "{out}");
    assert!(
        field(&out.replace(' ', "="), "OK") > 100,
        "too few checks: {out}"
    );
}

#[test]
fn every_callback_fires_with_its_arguments_on_its_thread() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("callbacks", "callbacks") else {
        return;
    };
    let (Some(lsp), Some(connect), Some(disconnect), Some(bufsize), Some(fw), Some(prop)) = (
        dist("callbacks", "jack_lsp"),
        dist("callbacks", "jack_connect"),
        dist("callbacks", "jack_disconnect"),
        dist("callbacks", "jack_bufsize"),
        dist("callbacks", "jack_freewheel"),
        dist("callbacks", "jack_property"),
    ) else {
        return;
    };
    let mut srv = server();
    let mut cb = Bg::start(&srv, exe.to_str().unwrap(), &["cbtest"]);
    cb.wait_for("READY", |l| l.starts_with("READY"));
    let wait = |cb: &mut Bg, what: &str| {
        let w = what.to_string();
        cb.wait_for(what, move |l| l.starts_with(&w));
    };
    // Client registration (another client comes and goes).
    run_to_end(&srv, &lsp, &[], "");
    wait(&mut cb, "CB client_registration lsp 1 notify");
    wait(&mut cb, "CB client_registration lsp 0 notify");
    // Port registration (a client with ports comes and goes).
    let tool = srv.tool("ports", &["pass"]);
    wait(&mut cb, "CB port_registration ports:in 1 notify");
    wait(&mut cb, "CB port_registration ports:out 1 notify");
    drop(tool);
    wait(&mut cb, "CB port_registration - 0 notify");
    // Connections, graph order, latency (the callback adds 32 frames).
    run_to_end(&srv, &connect, &["system:capture_1", "cbtest:in"], "");
    run_to_end(&srv, &connect, &["cbtest:out", "system:playback_1"], "");
    wait(
        &mut cb,
        "CB port_connect system:capture_1 cbtest:in 1 notify",
    );
    wait(
        &mut cb,
        "CB port_connect cbtest:out system:playback_1 1 notify",
    );
    wait(&mut cb, "CB graph_order notify");
    wait(&mut cb, "CB latency 0 notify");
    wait(&mut cb, "CB latency 1 notify");
    wait_for(
        "cbtest:out capture latency set by its callback",
        Duration::from_secs(10),
        || {
            ports(&srv)
                .iter()
                .any(|p| p.name == "cbtest:out" && p.latency == (256 + 32, 256 + 32))
        },
    );
    run_to_end(&srv, &disconnect, &["cbtest:out", "system:playback_1"], "");
    wait(
        &mut cb,
        "CB port_connect cbtest:out system:playback_1 0 notify",
    );
    // Port rename (from the client itself).
    cb.send("rename");
    wait(&mut cb, "CB port_rename cbtest:out cbtest:renamed notify");
    // Xrun: the process callback overruns its period once.
    cb.send("stall");
    wait(&mut cb, "CB xrun notify");
    // Buffer size: announced on the notification thread before any process call uses it.
    run_to_end(&srv, &bufsize, &["512"], "");
    wait(&mut cb, "CB bufsize 512 notify");
    // Freewheel on and off.
    run_to_end(&srv, &fw, &["y"], "");
    wait(&mut cb, "CB freewheel 1 notify");
    run_to_end(&srv, &fw, &["n"], "");
    wait(&mut cb, "CB freewheel 0 notify");
    // Metadata.
    run_to_end(
        &srv,
        &prop,
        &["-c", "-s", "cbtest", "urn:resound:test", "42"],
        "",
    );
    wait(&mut cb, "CB property self urn:resound:test 0 notify");
    // What the real-time callbacks saw.
    std::thread::sleep(Duration::from_millis(300));
    cb.send("dump");
    wait(&mut cb, "RT ");
    let rt = cb
        .output()
        .into_iter()
        .find(|l| l.starts_with("RT "))
        .unwrap();
    assert!(field(&rt, "process") > 50, "{rt}");
    assert_eq!(
        field(&rt, "process"),
        field(&rt, "on_rt"),
        "process off the RT thread: {rt}"
    );
    assert_eq!(
        field(&rt, "bad_nframes"),
        0,
        "process saw an unannounced period: {rt}"
    );
    assert_eq!(
        field(&rt, "gbs_mismatch"),
        0,
        "jack_get_buffer_size != nframes: {rt}"
    );
    assert_eq!(field(&rt, "last_nframes"), 512, "{rt}");
    assert_eq!(
        (field(&rt, "init"), field(&rt, "init_on_rt")),
        (1, 1),
        "{rt}"
    );
    assert_eq!(field(&rt, "bufsize_on_rt"), 1, "{rt}");
    assert_eq!(field(&rt, "first_bufsize"), 256, "{rt}");
    assert!(
        field(&rt, "sync") >= 1 && field(&rt, "sync") == field(&rt, "sync_on_rt"),
        "{rt}"
    );
    assert!(
        field(&rt, "timebase") >= 1 && field(&rt, "timebase") == field(&rt, "tb_on_rt"),
        "{rt}"
    );
    assert_eq!(field(&rt, "tb_newpos"), 1, "timebase new_pos once: {rt}");
    // Shutdown: the info variant (jackd prefers it to the plain one) with the reason.
    srv.stop();
    wait(&mut cb, "CB info_shutdown 33 notify");
    cb.send("exit");
    let out = cb.wait();
    assert!(out.iter().any(|l| l.starts_with("DONE close=")), "{out:?}");
    assert!(!out.iter().any(|l| l.starts_with("CB shutdown")), "{out:?}");
    assert!(!out.iter().any(|l| l.contains("FAIL")), "{out:?}");
    // The sample-rate callback runs right away on the caller (jackd does so);
    // every other notification on one and the same notification thread.
    assert!(out.iter().any(|l| l == "CB srate 48000 main"), "{out:?}");
    for l in out
        .iter()
        .filter(|l| l.starts_with("CB ") && !l.starts_with("CB srate"))
    {
        let thread = l
            .split_whitespace()
            .find(|w| w.starts_with("notify") || *w == "rt" || *w == "main")
            .unwrap_or("?");
        assert_eq!(thread, "notify1", "callback on the wrong thread: {l}");
    }
}

#[test]
fn bad_input_gets_jack_errors_and_crashes_nothing() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("badinput", "badinput") else {
        return;
    };
    let mut srv = server();
    let gen = srv.tool("gen", &["counter"]);
    let check = srv.tool("chk", &["check", "--latency", "0"]);
    let ctl = srv.ctl();
    ctl.connect_ports("gen:out", "chk:in").unwrap();
    ctl.connect_ports("gen:out", "chk:ref").unwrap();
    let srv_name = srv.name.clone();
    let mut b = Bg::start(&srv, exe.to_str().unwrap(), &[&srv_name]);
    b.wait_for("PHASE2", |l| l == "PHASE2");
    std::thread::sleep(Duration::from_millis(500));
    // The server and the other clients are unharmed by all of it.
    assert!(srv.alive(), "the server died");
    let r = check.stop();
    assert_eq!(n(&r, "bad_unexplained"), 0, "{r}");
    assert!(n(&r, "ok") > 20, "{r}");
    // Now the server goes away under a busy client.
    srv.stop();
    let out = b.wait();
    let fails: Vec<&String> = out.iter().filter(|l| l.contains(" FAIL")).collect();
    assert!(fails.is_empty(), "{fails:?}");
    assert!(
        out.iter().any(|l| l.starts_with("SURVIVED")),
        "the program did not survive: {out:?}"
    );
    assert!(
        out.iter().filter(|l| l.ends_with(" ok")).count() > 40,
        "{out:?}"
    );
    assert_eq!(b.child.wait().unwrap().code(), Some(0));
    drop(gen);
}

/// Behaviour that used to differ from jackd (empty client names, a closed
/// client gone by UUID when close returns, a stop and a locate in one
/// cycle): the same C program passes on resound and on Debian's jackd.
#[test]
fn parity_with_jackd_on_names_close_and_transport() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("parity", "parity") else {
        return;
    };
    let srv = server();
    let (code, out, err) = run_to_end(&srv, exe.to_str().unwrap(), &[], "");
    eprintln!("resound:\n{out}\n{err}");
    assert!(out.contains("DONE failed=0"), "on resound:\n{out}\n{err}");
    assert_eq!(code, 0);
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" ok")).count(),
        10,
        "{out}"
    );
    if !resound_lab::harness::Jackd::available() {
        skip(
            "parity_with_jackd",
            "jackd missing (apt-get install jackd2)",
        );
        return;
    }
    let jackd =
        resound_lab::harness::Jackd::start("parity", &["-d", "dummy", "-r", "48000", "-p", PERIOD])
            .expect("jackd starts");
    let out = jackd.command(&exe).output().expect("run parity on jackd");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("jackd:\n{text}");
    assert!(
        text.contains("DONE failed=0"),
        "the same checks on jackd:\n{text}\n{}",
        jackd.log()
    );
}

/// Port registration callbacks as jackd makes them: each step's callback
/// lines are printed before the step's name (see registration.c).
const REGISTRATION_AS_JACKD: &str = "\
-- start
-- subject registers p while inactive
A: port registered subject:p
B: port registered subject:p
-- subject activates
A: port registered subject:q
B: port registered subject:q
-- subject registers q while active
A: port unregistered subject:q
B: port unregistered subject:q
-- subject unregisters q while active
A: port unregistered subject:p
-- subject deactivates
-- subject unregisters p while inactive
-- subject registers r while inactive
A: port registered subject:r
B: port registered subject:r
-- subject activates again
A: port unregistered subject:r
-- subject closes while active
DONE
";

/// Ports are announced when their client activates and withdrawn when it
/// deactivates, never while it is inactive, and the unregistration callback
/// can still name the port: the same callbacks as on Debian's jackd, which
/// runs the same program in the same test.
#[test]
fn port_registration_callbacks_as_on_jackd() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("registration", "registration") else {
        return;
    };
    let srv = server();
    let (code, out, err) = run_to_end(&srv, exe.to_str().unwrap(), &[], "");
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out, REGISTRATION_AS_JACKD, "on resound");
    if !resound_lab::harness::Jackd::available() {
        skip(
            "port_registration_on_jackd",
            "jackd missing (apt-get install jackd2)",
        );
        return;
    }
    let jackd = resound_lab::harness::Jackd::start(
        "registration",
        &["-d", "dummy", "-r", "48000", "-p", PERIOD],
    )
    .expect("jackd starts");
    let out = jackd.command(&exe).output().expect("run on jackd");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        REGISTRATION_AS_JACKD,
        "on jackd (the reference): {}",
        jackd.log()
    );
}

/// A program that copies its process thread's policy and priority to its own
/// worker threads gets real-time workers under reservations (the process
/// thread reads as SCHED_FIFO at jack_client_real_time_priority while it
/// really runs under SCHED_DEADLINE), under SCHED_FIFO, and on jackd.
#[test]
fn workers_copy_the_process_threads_scheduling() {
    let _serial = one_at_a_time();
    if !resound_sched::deadline_permitted() || !can_fifo() {
        eprintln!("SKIP workers_copy_the_process_threads_scheduling: SCHED_DEADLINE or SCHED_FIFO not permitted");
        return;
    }
    let Some(exe) = c_program("workers", "workers") else {
        return;
    };
    for sched in ["deadline", "fifo"] {
        let srv = Srv::start(&["--sched", sched, "-d", "dummy", "-r", "48000", "-p", PERIOD]);
        let (code, out, err) = run_to_end(&srv, exe.to_str().unwrap(), &[], "");
        assert!(
            out.contains("DONE failed=0"),
            "--sched {sched}:\n{out}\n{err}"
        );
        assert_eq!(code, 0);
        assert_eq!(
            out.lines().filter(|l| l.ends_with(" ok")).count(),
            8,
            "{out}"
        );
        if sched == "deadline" {
            assert!(
                srv.log()
                    .contains("client \"workers\": SCHED_DEADLINE reservation"),
                "the process thread was really reserved: {}",
                srv.log()
            );
        }
    }
    if !resound_lab::harness::Jackd::available() {
        skip("workers_on_jackd", "jackd missing (apt-get install jackd2)");
        return;
    }
    let jackd = resound_lab::harness::Jackd::start(
        "workers",
        &["-d", "dummy", "-r", "48000", "-p", PERIOD],
    )
    .expect("jackd starts");
    let out = jackd.command(&exe).output().expect("run on jackd");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("DONE failed=0"),
        "on jackd (the reference):\n{text}"
    );
}

#[test]
fn the_rest_of_the_api() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("misc", "misc") else {
        return;
    };
    let srv = server();
    let (code, out, err) = run_to_end(&srv, exe.to_str().unwrap(), &["misc"], "");
    eprintln!("{out}\n{err}");
    assert!(out.contains("DONE failed=0"), "{out}\n{err}");
    assert_eq!(code, 0);
    assert!(
        out.lines().filter(|l| l.ends_with(" ok")).count() > 50,
        "{out}"
    );
}

/// jackd's jack_activate waits for the process thread to start and run
/// thread init, not for its first cycle: a jack_set_process_thread function
/// may call the library, and wait for something the application does after
/// jack_activate returned, before its first jack_cycle_wait (both deadlocked).
#[test]
fn a_process_thread_may_wait_for_the_application_before_its_first_cycle() {
    let _serial = one_at_a_time();
    let Some(exe) = c_program("lifecycle", "lifecycle") else {
        return;
    };
    let srv = server();
    let (code, out, err) = run_to_end(&srv, exe.to_str().unwrap(), &["semthread", "st"], "");
    eprintln!("{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("ACTIVATED 0"), "{out}");
    let run = out.lines().find(|l| l.starts_with("RUNNING")).unwrap();
    assert!(field(run, "cycles") >= 20, "{run}");
    assert_eq!(
        field(run, "early_rc"),
        -1,
        "a callback setter on the active client is refused, not blocked: {run}"
    );
    assert!(out.contains("DONE deactivate=0 close=0"), "{out}");
}
