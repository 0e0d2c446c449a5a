//! The end of a process callback: a client whose callback returns
//! [`Control::Quit`] is deactivated, and until then the stream through it
//! stays intact (native clients; the libjack counterpart is in libjack/streams.rs).

mod common;
use common::*;
use resound_client::{Client, Control, Event, PortFlags, PortKind, ProcessScope};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the last client of the chain saw.
#[derive(Default)]
struct Seen {
    /// Counting missed cycles starts (the graph is wired and settled).
    armed: AtomicBool,
    last: AtomicU64,
    /// Cycles it did not run (gaps in its cycle numbers) while armed.
    missed: AtomicU64,
    /// Cycles with Q's signal (all 1.0) before Q quit.
    signal: AtomicU64,
    /// Cycles after Q quit: all, and those not exactly silent.
    after: AtomicU64,
    stale: AtomicU64,
}

/// A -> Q -> B, Q's callback returns Quit 5 cycles after the registration of
/// a client "z", in a notification callback that then keeps Q's notification
/// thread busy for 1.5 s: the deactivation cannot happen before. Meanwhile B
/// must run every cycle, on time, and hear silence from Q (not its last
/// buffer); afterwards Q is inactive.
#[test]
fn a_quitting_client_keeps_its_downstream_running_on_silence_until_deactivated() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    let (a, q, b) = (srv.client("a"), srv.client("q"), srv.client("b"));

    let mut a_out = a
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    a.activate(move |ps: &mut ProcessScope| {
        a_out.audio_out(ps).fill(1.0);
        Control::Continue
    })
    .unwrap();

    let go = Arc::new(AtomicBool::new(false));
    let quit_cycle = Arc::new(AtomicU64::new(0));
    let q_in = q
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    let mut q_out = q
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    let (g, qc) = (go.clone(), quit_cycle.clone());
    let mut countdown = 5;
    q.activate(move |ps: &mut ProcessScope| {
        let x = q_in.audio_in(ps);
        q_out.audio_out(ps).copy_from_slice(x);
        if g.load(Ordering::Acquire) {
            countdown -= 1;
            if countdown == 0 {
                qc.store(ps.cycle(), Ordering::Release);
                return Control::Quit;
            }
        }
        Control::Continue
    })
    .unwrap();
    let g = go.clone();
    q.set_notification_handler(move |_: &Client, n: &Event| {
        if let Event::ClientRegistration {
            name,
            registered: true,
        } = n
        {
            if name == "z" && !g.swap(true, Ordering::AcqRel) {
                std::thread::sleep(Duration::from_millis(1500));
            }
        }
    });

    let seen = Arc::new(Seen::default());
    let b_in = b
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    let (s, qc) = (seen.clone(), quit_cycle.clone());
    b.activate(move |ps: &mut ProcessScope| {
        let c = ps.cycle();
        let last = s.last.swap(c, Ordering::Relaxed);
        if s.armed.load(Ordering::Acquire) && last != 0 && c > last + 1 {
            s.missed.fetch_add(c - last - 1, Ordering::Relaxed);
        }
        let x = b_in.audio_in(ps);
        let quit = qc.load(Ordering::Acquire);
        if quit != 0 && c > quit {
            s.after.fetch_add(1, Ordering::Relaxed);
            if x.iter().any(|&v| v != 0.0) {
                s.stale.fetch_add(1, Ordering::Relaxed);
            }
        } else if x.iter().all(|&v| v == 1.0) {
            s.signal.fetch_add(1, Ordering::Relaxed);
        }
        Control::Continue
    })
    .unwrap();

    a.connect("a:out", "q:in").unwrap();
    q.connect("q:out", "b:in").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    seen.armed.store(true, Ordering::Release);
    let xruns_of_b = |st: &resound_protocol::wire::Status| {
        st.clients.iter().find(|c| c.name == "b").unwrap().xruns
    };
    let x0 = xruns_of_b(&srv.status());

    // Q quits while its notification thread is busy.
    let z = srv.client("z");
    wait_for("q to quit", Duration::from_secs(10), || {
        quit_cycle.load(Ordering::Acquire) != 0
    });
    srv.wait_inactive("q", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(100));
    let st = srv.status();
    let xruns = xruns_of_b(&st) - x0;
    let (missed, signal, after, stale) = (
        seen.missed.load(Ordering::Relaxed),
        seen.signal.load(Ordering::Relaxed),
        seen.after.load(Ordering::Relaxed),
        seen.stale.load(Ordering::Relaxed),
    );
    eprintln!("b: signal={signal} after={after} stale={stale} missed={missed} xruns={xruns}");
    assert!(signal > 10, "Q's signal never reached B: {signal}");
    assert_eq!(
        stale, 0,
        "B heard Q's old buffer after Q quit ({stale} of {after} cycles)"
    );
    // Q's notification thread was busy for 1.5 s (~280 cycles): without the
    // fix B misses every one of them, each an xrun attributed to B. A loaded
    // machine costs B cycles of its own: in one CI run, with the driver
    // waking up to 71 ms late, B missed 29 and had 40 xruns of 225 cycles.
    // Never a third of them.
    assert!(
        missed * 3 <= after,
        "B missed {missed} cycles while Q was quitting ({after} run)"
    );
    assert!(
        xruns * 3 <= after,
        "{xruns} xruns attributed to B while Q was quitting ({after} cycles run)"
    );
    assert!(!q.is_active(), "Q not deactivated");
    assert!(!st.clients.iter().any(|c| c.name == "q" && c.active));
    drop(z);
}
