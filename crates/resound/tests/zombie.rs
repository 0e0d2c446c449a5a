//! Hung clients: a client that stalls inside its process callback is
//! evicted from the cycle after the client timeout (JACK's zombie state),
//! its downstream runs every cycle on silence, the server's log stays
//! short, the client is told and can activate again once it recovers
//! (native clients here; a distribution JACK program in libjack/distribution.rs).

mod common;
use common::*;
use resound_client::{Client, Control, Event, PortFlags, PortKind, ProcessScope, Requests};
use resound_protocol::wire::{Status, XrunRecord};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the client downstream of the hung one saw.
#[derive(Default)]
struct Downstream {
    last: AtomicU64,
    /// Cycles it ran with non-silent input while the hung client was evicted.
    loud_while_evicted: AtomicU64,
    /// Cycles it ran while the hung client was evicted.
    ran_while_evicted: AtomicU64,
}

fn client_status<'a>(st: &'a Status, name: &str) -> &'a resound_protocol::wire::ClientStatus {
    st.clients
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{name} in status: {st:?}"))
}

/// A source of ones: `src:out`.
fn source(srv: &Srv) -> Client {
    let c = srv.client("src");
    let mut out = c
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    c.activate(move |ps: &mut ProcessScope| {
        out.audio_out(ps).fill(1.0);
        Control::Continue
    })
    .unwrap();
    c
}

/// The client that hangs on demand: `hung:in` → `hung:out`, stuck inside
/// its callback while `hang` is set.
fn hanging(srv: &Srv, hang: Arc<AtomicBool>, cycles: Arc<AtomicU64>) -> Client {
    let c = srv.client("hung");
    let inp = c
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    let mut out = c
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    c.activate(move |ps: &mut ProcessScope| {
        while hang.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        out.audio_out(ps).copy_from_slice(inp.audio_in(ps));
        cycles.store(ps.cycle(), Ordering::Release);
        Control::Continue
    })
    .unwrap();
    c
}

/// `after:in`, counting what it hears while `evicted` is set.
fn downstream(srv: &Srv, evicted: Arc<AtomicBool>, seen: Arc<Downstream>) -> Client {
    let c = srv.client("after");
    let inp = c
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    c.activate(move |ps: &mut ProcessScope| {
        seen.last.store(ps.cycle(), Ordering::Release);
        if evicted.load(Ordering::Acquire) {
            seen.ran_while_evicted.fetch_add(1, Ordering::Relaxed);
            if inp.audio_in(ps).iter().any(|&x| x != 0.0) {
                seen.loud_while_evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        Control::Continue
    })
    .unwrap();
    c
}

fn xrun_lines(log: &str) -> usize {
    log.lines().filter(|l| l.contains("xrun")).count()
}

/// The whole story in one server configuration.
fn hung_client_is_evicted_and_may_come_back(args: &[&str]) {
    let _serial = common::one_at_a_time();
    let mut srv = Srv::start(args);
    let hang = Arc::new(AtomicBool::new(false));
    let hung_cycles = Arc::new(AtomicU64::new(0));
    let evicted = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Downstream::default());
    let _src = source(&srv);
    let hung = hanging(&srv, hang.clone(), hung_cycles.clone());
    let _after = downstream(&srv, evicted.clone(), seen.clone());
    let (tx, rx) = channel();
    hung.set_notification_handler(move |_: &Client, n: &Event| {
        if let Event::Evicted { reason } = n {
            let _ = tx.send(reason.clone());
        }
    });
    let ctl = srv.ctl();
    for (s, d) in [("src:out", "hung:in"), ("hung:out", "after:in")] {
        ctl.connect_ports(s, d).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        hung_cycles.load(Ordering::Acquire) > 0,
        "hung runs at first"
    );

    // It hangs inside its process callback.
    let hung_at = Instant::now();
    hang.store(true, Ordering::Release);
    let reason = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the hung client is told it was evicted");
    let took = hung_at.elapsed();
    assert!(reason.contains("late"), "reason: {reason}");
    assert!(
        took >= Duration::from_millis(200),
        "not evicted before the 200 ms timeout: {took:?}"
    );
    evicted.store(true, Ordering::Release);
    let st = srv.status();
    let h = client_status(&st, "hung");
    assert!(h.zombie && !h.active, "status shows the zombie: {h:?}");
    // Each xrun is attributed: the hung client ran short, the one after
    // it waited for it.
    // (The last xrun the hung client was late in: a machine stall after the
    // eviction may add xruns of its own.)
    let x = st
        .recent_xruns
        .iter()
        .rev()
        .find(|x| x.cause == "clients" && x.late.iter().any(|l| l.name == "hung"))
        .unwrap_or_else(|| panic!("an attributed xrun: {:?}", st.recent_xruns));
    let who = |n: &str| x.late.iter().find(|l| l.name == n).cloned();
    assert!(who("hung").is_some_and(|l| l.ran_short), "{x:?}");
    assert!(who("after").is_some_and(|l| !l.ran_short), "{x:?}");
    assert!(who("src").is_none(), "{x:?}");
    assert!(
        !hung.is_active(),
        "the client library knows it is not active"
    );

    // Its downstream runs every cycle, on silence, on time (once the cycles
    // that were running when it was evicted are checked).
    std::thread::sleep(Duration::from_millis(100));
    let st = srv.status();
    let x0 = client_status(&st, "after").xruns;
    let c0 = st.cycles;
    std::thread::sleep(Duration::from_secs(1));
    let st = srv.status();
    let ran = seen.ran_while_evicted.load(Ordering::Relaxed);
    let cycles = st.cycles - c0;
    assert!(
        ran + 3 >= cycles,
        "after ran {ran} of {cycles} cycles while hung was evicted"
    );
    assert_eq!(
        seen.loud_while_evicted.load(Ordering::Relaxed),
        0,
        "after hears silence from the evicted client"
    );
    // Before the eviction `after` was late in every cycle (about 190 a
    // second), waiting for the hung client; after it, it never waits for
    // it, and is on time apart from machine stalls (several ms happen on
    // these shared 2-CPU machines): cycles whose driver woke late, or in
    // which `after` itself woke 1 ms or more after its signal.
    let late_after = client_status(&st, "after").xruns - x0;
    let window: Vec<_> = st.recent_xruns.iter().filter(|x| x.cycle > c0).collect();
    let waited = |x: &&XrunRecord| x.late.iter().any(|l| l.name == "after" && !l.ran_short);
    assert!(
        !window.iter().any(waited),
        "`after` waited for the evicted client: {window:?}"
    );
    let stalled = window
        .iter()
        .filter(|x| {
            x.cause == "driver"
                || x.late
                    .iter()
                    .any(|l| l.name == "after" && l.wake_delay_us.is_none_or(|us| us >= 1000))
        })
        .count() as u64;
    assert!(
        late_after <= 2 + stalled,
        "{late_after} xruns of `after` in the second after the eviction, of {cycles} cycles \
         ({stalled} in machine stalls): {window:?}"
    );
    assert!(srv.alive(), "the server runs");

    // A short log: not one line per late cycle.
    let log = srv.log();
    assert!(log.contains("evicted from the cycle (zombie)"), "{log}");
    let late_cycles = (took.as_secs_f64() * 48000.0 / 256.0) as usize;
    assert!(
        xrun_lines(&log) <= 12,
        "{} xrun lines for about {late_cycles} late cycles:\n{log}",
        xrun_lines(&log)
    );

    // It recovers and activates again: back in the cycle, not a zombie.
    hang.store(false, Ordering::Release);
    evicted.store(false, Ordering::Release);
    wait_for("hung to activate again", Duration::from_secs(10), || {
        hung.activate(|_: &mut ProcessScope| Control::Continue)
            .is_ok()
    });
    let st = srv.status();
    let h = client_status(&st, "hung");
    assert!(h.active && !h.zombie, "active again: {h:?}");
    let c = srv.status().cycles;
    wait_for("hung to run cycles again", Duration::from_secs(5), || {
        client_status(&srv.status(), "hung").last_cycle > c
    });
}

#[test]
fn sync_mode_with_reservations() {
    hung_client_is_evicted_and_may_come_back(&["-S", "-t", "200", "-d", "dummy", "-p", "256"]);
}

#[test]
fn async_mode_with_sched_fifo() {
    if !fifo_or_skip("async_mode_with_sched_fifo") {
        return;
    }
    hung_client_is_evicted_and_may_come_back(&[
        "--sched", "fifo", "-t", "200", "-d", "dummy", "-p", "256",
    ]);
}

#[test]
fn no_evict_keeps_the_late_client_in_the_cycle_and_the_log_short() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-S", "-t", "50", "--no-evict", "-d", "dummy", "-p", "256"]);
    let _staller = srv.tool("staller", &["misbehave", "--mode", "stall"]);
    srv.ctl()
        .connect_ports("system:capture_1", "staller:in")
        .ok();
    std::thread::sleep(Duration::from_millis(2500));
    let st = srv.status();
    let s = client_status(&st, "staller");
    assert!(s.active && !s.zombie && s.xruns > 100, "{s:?}");
    // Under a reservation, a client that stalls is bumped once per cycle it
    // finishes (the staller finishes one a second), not at every late cycle
    // (which would pile its budget up to the maximum and hold that much of
    // the CPUs for nothing): the grant and about three bumps.
    match res(&st, "staller") {
        Some(r) if r.policy.starts_with("SCHED_DEADLINE") => assert!(
            r.updates <= 6 && r.budget_ns < st.buffer_frames as u64 * 1_000_000_000 / 48_000 / 2,
            "{} xruns, {r:?}",
            s.xruns
        ),
        other => println!("no reservation to check ({other:?}): the bump rule is not exercised"),
    }
    let log = srv.log();
    assert!(!log.contains("evicted"), "{log}");
    // About 470 late cycles: a handful of lines and one summary a second.
    assert!(
        xrun_lines(&log) <= 15,
        "{} xrun lines:\n{log}",
        xrun_lines(&log)
    );
    assert!(log.contains("more xrun(s) in the last second"), "{log}");
}
