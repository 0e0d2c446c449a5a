//! `resound hostile` against a server running the sample-exact chain
//! (counter → pass → pass → check, as in the soak): random, truncated,
//! oversized and out-of-order messages over many sessions and random bytes
//! in every shared page the hostile client can write (its own node
//! segments, since it can write nothing else). The server must not crash
//! or hang, must drop the hostile sessions with a clear log line, and
//! nothing the hostile client does may reach the chain: no wrong or silent
//! block, no client of the chain removed, no missing block that no xrun
//! explains (the hostile-client run, short).
//!
//! A block the chain misses in a cycle with an xrun is counted and printed,
//! not failed: the tool and the server's parsing keep both CPUs of this
//! machine busy (debug builds), and the chain is then sometimes late
//! (1 to 23 blocks in a run here, a third of them in cycles where the
//! driver itself woke late). That is lateness under load, which the
//! xrun attributes, not the hostile client reaching the chain's memory.
//! cyclictest watches the machine meanwhile (keeping idle CPUs polling, as
//! it does), and the test prints how many of those blocks fell in a
//! machine stall (a CPU unavailable to a SCHED_FIFO 99 probe for 500 us or
//! more) and how many did not.
//!
//! It failed when every client mapped one shared segment read-write that
//! held every client's activation record and port buffers: the random
//! bytes landed in the chain's records and the server removed its clients.

mod common;
use common::*;
use resound_lab::harness::stalls::StallWatch;
use resound_lab::harness::{chain, dummy_driver_args, losses};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Messages of the short run (the tool's default is 10 million).
const MESSAGES: &str = "300000";

/// A CPU unavailable this long (us) is a machine stall.
const STALL_US: u32 = 500;

/// Cycles per second of the test server (48 kHz, 256 frames).
const CYCLES_PER_S: f64 = 48000.0 / 256.0;

#[test]
fn a_hostile_client_crashes_nothing_and_the_chain_loses_no_block() {
    let _serial = common::one_at_a_time();
    let mut args = vec!["-t".to_string(), "200".to_string()];
    args.extend(dummy_driver_args(48000, 256));
    let mut srv = Srv::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut procs = chain::start_chain(&srv, &srv.ctl()).expect("start the chain");
    let before = settled_report(&procs);
    let watch = StallWatch::start(STALL_US, Duration::from_secs(600));

    let (t0, t0_ns) = (Instant::now(), resound_shm::time::monotonic_ns());
    let out = srv.cli(&["hostile", "--messages", MESSAGES, "--seed", "1"]);
    let ran = t0.elapsed();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // A report of the check that covers the whole run.
    std::thread::sleep(Duration::from_millis(1500));
    let after = chain::check_report(&procs).expect("a report of the check");

    assert!(out.status.success(), "resound hostile failed:\n{text}");
    assert_every_kind_sent_and_a_session_dropped(&text);
    let clients = assert_server_survived(&mut srv);
    let mut lost = chain_losses(&before, &after, ran);
    lost.extend(removed_from_chain(&clients));
    chain::stop_chain(&mut procs);
    print_machine_share(watch, &procs, t0_ns);
    assert!(
        lost.is_empty(),
        "the chain lost blocks during the hostile run: {}\nbefore: {before}\nafter: {after}",
        lost.join("; ")
    );
}

/// The hostile client's report: every kind of message sent, at least one
/// session dropped by the server, the server answering at the end.
fn assert_every_kind_sent_and_a_session_dropped(text: &str) {
    for kind in [
        "well-formed request",
        "undecodable payload",
        "truncated frame",
        "oversized frame",
        "out-of-order protocol",
    ] {
        assert!(count(text, kind) > 0, "no {kind} sent:\n{text}");
    }
    let dropped = between(text, "opened, ", " dropped by the server");
    assert!(dropped > 0, "no session dropped by the server:\n{text}");
    assert!(text.contains("still answers status"), "{text}");
}

/// The server still runs, answers status (its clients are returned) and
/// logged dropping a hostile session, naming it.
fn assert_server_survived(srv: &mut Srv) -> Vec<String> {
    assert!(srv.alive(), "the server died:\n{}", srv.log());
    let clients = srv.status().clients.into_iter().map(|c| c.name).collect();
    let log = srv.log();
    assert!(
        log.lines()
            .any(|l| l.contains("dropping the connection") && l.contains("(pid ")),
        "no log line about dropping a hostile session:\n{log}"
    );
    clients
}

/// The chain's clients the server no longer has.
fn removed_from_chain(clients: &[String]) -> Option<String> {
    let gone: Vec<&str> = chain::CHAIN
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !clients.iter().any(|c| c == name))
        .collect();
    (!gone.is_empty()).then(|| format!("the server removed {}", gone.join(", ")))
}

/// The check's report once the chain runs wired (its first full second).
fn settled_report(procs: &[resound_lab::harness::Child]) -> Value {
    std::thread::sleep(Duration::from_millis(2500));
    let r = chain::check_report(procs).expect("a report of the check");
    assert!(n(&r, "ok") > 0, "the chain does not run: {r}");
    r
}

/// What the chain lost between two reports of the check, `ran` apart at
/// least: bad blocks and missing cycles (reference gaps) that no xrun
/// explains, blocks that came silent or without reference (a client of
/// the chain gone), and cycles the check did not run at all. Blocks
/// missed in cycles with an xrun are printed.
fn chain_losses(before: &Value, after: &Value, ran: Duration) -> Vec<String> {
    let grew = |k: &str| n(after, k).saturating_sub(n(before, k));
    let stalled = (grew("bad") + grew("ref_gaps"))
        .saturating_sub(grew("bad_unexplained_by_driver") + grew("gaps_unexplained_by_driver"));
    eprintln!(
        "chain during the run: {} bad, {} missing, {stalled} of them in cycles where the driver woke late, {} in no cycle with an xrun",
        grew("bad"),
        grew("ref_gaps"),
        grew("bad_unexplained") + grew("gaps_unexplained")
    );
    let mut lost = Vec::new();
    for (k, what) in [
        ("bad_unexplained", "bad block(s) that no xrun explains"),
        (
            "gaps_unexplained",
            "missing cycle(s) (reference gaps) that no xrun explains",
        ),
        ("silent", "silent block(s) (an upstream client gone)"),
        ("no_ref", "block(s) without reference (the counter gone)"),
    ] {
        if grew(k) > 0 {
            lost.push(format!("{} {what}", grew(k)));
        }
    }
    let expected = (ran.as_secs_f64() * CYCLES_PER_S) as u64;
    if grew("cycles") < expected / 2 {
        lost.push(format!(
            "the check ran {} cycle(s) in {:.1} s, about {expected} expected",
            grew("cycles"),
            ran.as_secs_f64()
        ));
    }
    lost
}

/// How many of the blocks the chain lost since `from_ns` fell in a
/// machine stall (printed; the chain's losses under load are printed, not
/// failed, see the top of the file).
fn print_machine_share(
    watch: Result<StallWatch, String>,
    procs: &[resound_lab::harness::Child],
    from_ns: u64,
) {
    let stalls = match watch.and_then(StallWatch::stop) {
        Ok(s) => s,
        Err(e) => return eprintln!("machine stalls not watched: {e}"),
    };
    let blocks: Vec<_> = chain::lost_blocks(procs)
        .into_iter()
        .filter(|b| b.start_ns >= from_ns)
        .collect();
    let min_ns = STALL_US as u64 * 1000;
    let split = losses::attribute(&blocks, &stalls, min_ns);
    let period_ns = 1_000_000_000 * 256 / 48000;
    let now = resound_shm::time::monotonic_ns();
    let chance = losses::by_chance(&stalls, from_ns, now, &[period_ns], min_ns);
    eprintln!(
        "machine: worst wake-up {} us, {} stall(s) of {STALL_US} us or more; chain: {} lost block(s) in a stall, {} outside any ({:.0} % of all cycles have one)",
        stalls.worst_us(),
        losses::count_at_least(&stalls, min_ns),
        split.in_stall,
        split.outside.len(),
        chance * 100.0
    );
}

/// The number at the end of the report line that starts with `label`.
fn count(text: &str, label: &str) -> u64 {
    text.lines()
        .find(|l| l.trim_start().starts_with(label))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The number between `after` and `before` on the first line with both.
fn between(text: &str, after: &str, before: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let rest = &l[l.find(after)? + after.len()..];
            rest[..rest.find(before)?].trim().parse().ok()
        })
        .unwrap_or(0)
}
