//! The throttle rescue with real SCHED_DEADLINE threads: a client whose
//! reservation's throttle holds it for a whole cycle runs SCHED_FIFO until
//! the kernel would give it fresh parameters, then under its reservation
//! again. Without GRUB reclaiming, a
//! one-off overrun of tens of milliseconds is caught at the scheduler tick
//! and leaves the thread owing milliseconds of runtime, which the kernel
//! collects by throttling it for many periods: the same hold a machine
//! stall charged to the thread causes, made on purpose.
//! Tests that need SCHED_DEADLINE print SKIP with the reason where it is
//! not permitted.

mod common;
use common::*;
use resound_sched::Policy;
use std::time::Duration;

/// A server without reclaiming (so the overrun is throttled, not let
/// through on idle bandwidth) nor eviction, and extra `args`, with one client busy 5 %
/// of each period that stays busy 100 ms in one cycle two seconds in and
/// every 1.5 s after. Whether a spike leaves the thread owing runtime
/// (caught at the tick past its budget) or only stretches it at its
/// bandwidth (its CPU time moving every period: not held) varies from
/// spike to spike and, more, from server to server: since the hold is
/// sized to the debt, of 10 fresh servers 6 rescued the spiker within
/// 3–21 s and 4 not at all in 20–60 s (likely where the kernel placed the
/// spiker: its throttle is caught late only on a CPU where nothing else
/// interrupts it before the tick; not traced). So the rescue test waits
/// for one of several spikes, on up to [`RESCUE_ATTEMPTS`] fresh servers.
fn spiking_client(args: &[&str]) -> (Srv, Tool) {
    // Kept in the cycle however late (not evicted after the client
    // timeout), so that the same thread is watched throughout.
    let mut all = vec!["--sched", "deadline", "--no-reclaim", "--no-evict"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-d", "dummy", "-p", "128"]);
    let srv = Srv::start(&all);
    let tool = srv.tool(
        "spiker",
        &[
            "load",
            "--busy",
            "5",
            "--spike-ms",
            "100",
            "--spike-after-s",
            "2",
            "--spike-every-s",
            "1.5",
            "-c",
            "system:capture_1=@:in",
            "-c",
            "@:out=system:playback_1",
        ],
    );
    (srv, tool)
}

const HELD: &str = "was held by its reservation's throttle";

/// Fresh servers tried before the rescue test gives up (see
/// [`spiking_client`]).
const RESCUE_ATTEMPTS: u32 = 3;

/// A server with the rescue on and the spiker, once the spiker was
/// rescued: waits 25 s for it on each of up to [`RESCUE_ATTEMPTS`] fresh
/// servers. The longest hold (1000 cycles) is far beyond any debt a
/// 100-ms spike caught at the scheduler's tick leaves (a few ms at a 5 %
/// budget: tens of periods).
fn rescued_spiker() -> (Srv, Tool) {
    for attempt in 1..=RESCUE_ATTEMPTS {
        let (srv, spiker) = spiking_client(&["--throttle-rescue", "1000"]);
        let rescued = poll_until(Duration::from_secs(25), || {
            let st = srv.status();
            let r = res(&st, "spiker").map_or(0, |r| r.rescues);
            (r >= 1 && srv.log().contains(HELD), format!("rescues {r}"))
        });
        match rescued {
            Ok(()) => return (srv, spiker),
            Err(seen) => println!("attempt {attempt}: no rescue in 25 s ({seen}); a fresh server"),
        }
    }
    panic!("no rescue on {RESCUE_ATTEMPTS} fresh servers, 25 s each");
}

/// The hold the first rescue in `log` announced (cycles).
fn hold_of(log: &str) -> Option<u32> {
    let line = log.lines().find(|l| l.contains(HELD))?;
    let (_, rest) = line.split_once("runs SCHED_FIFO for ")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[test]
fn a_client_its_throttle_holds_runs_fifo_for_a_while_then_under_its_reservation_again() {
    let _serial = one_at_a_time();
    if !deadline_or_skip(
        "a_client_its_throttle_holds_runs_fifo_for_a_while_then_under_its_reservation_again",
    ) {
        return;
    }
    let (srv, _spiker) = rescued_spiker();
    // The hold is the time to the thread's 0-lag time, where the kernel
    // prints its entity, not the longest.
    let hold = hold_of(&srv.log()).expect("the rescue says its hold");
    let st = srv.status();
    let printed = st
        .reservations
        .iter()
        .filter(|r| r.policy == "SCHED_DEADLINE")
        .any(|r| resound_sched::thread_run::read_deadline_entity(r.tid).is_some());
    if printed {
        assert!(
            (2..1000).contains(&hold),
            "held {hold} cycles: sized to its 0-lag time"
        );
    } else {
        println!("the kernel prints no dl.deadline: the longest hold, {hold} cycles");
    }
    // During the hold the kernel has the thread on SCHED_FIFO, below the
    // driver's fallback priority, and its bandwidth stays booked.
    let st = srv.status();
    let spiker = res(&st, "spiker").expect("spiker's reservation row");
    let policy = resound_sched::current(spiker.tid).expect("thread readable");
    let during = srv.log();
    assert!(
        matches!(policy, Policy::Fifo { priority: 9 })
            || during.contains("under its reservation again"),
        "rescued thread is {policy:?}; status {spiker:?}"
    );
    assert!(st.ledger_used > 0.0, "bandwidth booked: {st:?}");
    wait_for("the end of the hold", Duration::from_secs(5), || {
        srv.log()
            .contains("\"spiker\": under its reservation again")
    });
    wait_for_seen(
        "the spiker under SCHED_DEADLINE again",
        Duration::from_secs(5),
        || {
            let st = srv.status();
            let Some(r) = res(&st, "spiker") else {
                return (false, "no row".into());
            };
            let kernel = resound_sched::current(r.tid);
            let ok = r.policy == "SCHED_DEADLINE"
                && matches!(kernel, Ok(Policy::Deadline { runtime_ns, .. }) if runtime_ns == r.budget_ns);
            (ok, format!("status {r:?}, kernel {kernel:?}"))
        },
    );
}

/// The rescue is off by default (`--throttle-rescue 0`).
#[test]
fn by_default_a_held_client_stays_under_its_reservation() {
    let _serial = one_at_a_time();
    if !deadline_or_skip("by_default_a_held_client_stays_under_its_reservation") {
        return;
    }
    let (srv, _spiker) = spiking_client(&[]);
    // The spike comes two seconds in; its throttle lasts hundreds of ms.
    let mut saw_late = false;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        let st = srv.status();
        let r = res(&st, "spiker").expect("spiker's reservation row");
        assert_eq!(r.policy, "SCHED_DEADLINE", "never moved: {r:?}");
        assert_eq!(r.rescues, 0, "{r:?}");
        saw_late |= r.xruns > 0;
    }
    assert!(saw_late, "the spike made it late");
    assert!(!srv.log().contains(HELD));
}
