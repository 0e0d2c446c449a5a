//! `resoundd -d alsa` on the test sound card (`resoundtest`, installed by
//! `resound_lab::harness::alsa` with an ALSA configuration of the test's
//! own): the driver paces the graph on the card's periods, recovers from
//! and reports an injected xrun, keeps clients running when the card
//! vanishes and resumes on it when it is back, refuses a rate the card
//! does not offer at start-up, and carries audio captured from a file through
//! a client into the recorded playback unchanged.
//!
//! Only jackd's documented ALSA options are used (`-d alsa -d DEVICE -r -p
//! -n`). Where this `resoundd` has no ALSA driver the tests print `SKIP`.

mod common;
use common::{skip_missing_tool, TestDir};
use resound_client::prelude::*;
use resound_client::{Control, Event, ProcessScope};
use resound_lab::harness::alsa::{self, AlsaCard, AlsaSpec, CardAccess, Fault};
use resound_lab::harness::{Bins, ChildOptions, Server, ServerSpec, StderrMode};
use resound_protocol::wire::Status;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const RATE: u32 = 48_000;
const PERIOD: u32 = 256;

/// Whether this resoundd has the ALSA driver (SKIP printed if not).
fn has_alsa_driver(test: &str) -> bool {
    let ok = Command::new(common::RESOUNDD)
        .args(["-d", "alsa", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        common::say_skipped(test, "this resoundd has no ALSA driver (-d alsa)");
    }
    ok
}

/// Installs the card (SKIP printed when the compiler or headers are missing).
fn card(test: &str, dir: &Path) -> Option<AlsaCard> {
    card_with(test, dir, &AlsaSpec::default())
}

/// Installs the card as `spec` says (SKIP printed as for [`card`]).
fn card_with(test: &str, dir: &Path, spec: &AlsaSpec) -> Option<AlsaCard> {
    if !has_alsa_driver(test) {
        return None;
    }
    match AlsaCard::install(dir, spec) {
        Ok(c) => Some(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skip_missing_tool(test, &e.to_string());
            None
        }
        Err(e) => panic!("installing the test card: {e}"),
    }
}

/// `resoundd -d alsa -d DEVICE -r 48000 -p 256 -n 3` on the test card.
fn start(card: &AlsaCard, device: &str) -> Server {
    let (r, p) = (RATE.to_string(), PERIOD.to_string());
    let args = ["-d", "alsa", "-d", device, "-r", &r, "-p", &p, "-n", "3"];
    let mut spec = ServerSpec::new(Bins::new(common::RESOUNDD, common::TOOL), "alsa", &args);
    spec.env = card.env();
    spec.env.push(("RESOUND_LOG".into(), "info".into()));
    spec.child = ChildOptions {
        stderr: StderrMode::Keep {
            keep: usize::MAX,
            echo: Some("resoundd".into()),
        },
        ..ChildOptions::default()
    };
    Server::start(spec).unwrap_or_else(|e| panic!("resoundd -d alsa did not start: {e}"))
}

fn status(srv: &Server) -> Status {
    srv.try_ctl()
        .expect("control session")
        .status()
        .expect("status")
}

/// Asserts that the cycles come `want` times a second within `tolerance`
/// (a fraction) in at least one of up to five windows of `secs`. An xrun
/// restarts the stream and loses time, and on this shared machine any
/// window may hold one, so a window can read slow; none can read fast, so
/// the best window says at which pace the card runs.
fn assert_paced(srv: &Server, want: f64, tolerance: f64, secs: f64, what: &str) {
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (got, xrun) = window(srv, secs);
        println!("cycles per second: {got:.2} (card: {want:.2}; xrun in the window: {xrun})");
        seen.push((got, xrun));
        if (got / want - 1.0).abs() <= tolerance {
            return;
        }
    }
    panic!(
        "{what}: the card's periods come {want:.1} times a second, but no {secs} s window \
         counted that many cycles within {:.0} % (rate, xrun): {seen:?}",
        tolerance * 100.0
    );
}

/// A client of the test that forwards its driver-level xrun notifications.
fn xrun_watcher(srv: &Server) -> (resound_client::Client, mpsc::Receiver<u64>) {
    let watcher = srv.open_client("watcher").expect("open the watcher");
    let (tx, rx) = mpsc::channel();
    watcher.set_notification_handler(move |_c: &resound_client::Client, n: &Event| {
        if let Event::Xrun { cycle, late } = n {
            if late.is_empty() {
                let _ = tx.send(*cycle);
            }
        }
    });
    (watcher, rx)
}

/// Cycles per second over a window of `secs`, and whether the server
/// counted an xrun in it (a device xrun restarts the stream: time is lost).
fn window(srv: &Server, secs: f64) -> (f64, bool) {
    let (a, t0) = (status(srv), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (b, t1) = (status(srv), Instant::now());
    let rate = (b.cycles - a.cycles) as f64 / (t1 - t0).as_secs_f64();
    (rate, b.xruns > a.xruns)
}

#[test]
fn cycles_follow_the_cards_periods_within_one_percent() {
    let _serial = common::one_at_a_time();
    let test = "cycles_follow_the_cards_periods_within_one_percent";
    let dir = TestDir::new("alsad", "pace");
    let Some(card) = card(test, &dir.0) else {
        return;
    };
    let srv = start(&card, alsa::PCM_CARD);
    let _gen = srv.tool("gen", &["counter"], &mut || Ok(())).expect("gen");
    std::thread::sleep(Duration::from_secs(1));
    let want = RATE as f64 / PERIOD as f64;
    assert_paced(&srv, want, 0.01, 3.0, "paced by the card alone");
}

/// The cycle starts clients see (`jack_get_cycle_times`) are the card's
/// period boundaries filtered by the driver's delay-locked loop: spaced by
/// the period within a few microseconds, while the driver's own wake-ups
/// jitter by tens or hundreds.
#[test]
fn cycle_starts_are_the_cards_periods_filtered() {
    let _serial = common::one_at_a_time();
    let test = "cycle_starts_are_the_cards_periods_filtered";
    let dir = TestDir::new("alsad", "dll");
    let Some(card) = card(test, &dir.0) else {
        return;
    };
    let srv = start(&card, alsa::PCM_CARD);
    let c = srv.open_client("starts").expect("client");
    const N: usize = 600;
    // Per cycle: its start and the frame time of its first frame.
    let starts: Arc<Vec<(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64)>> =
        Arc::new((0..N).map(|_| Default::default()).collect());
    let filled = Arc::new(AtomicUsize::new(0));
    let (st, fl) = (starts.clone(), filled.clone());
    c.activate(move |ps: &mut ProcessScope| {
        let i = fl.load(Ordering::Relaxed);
        if i < N {
            st[i].0.store(ps.cycle_start_ns(), Ordering::Relaxed);
            st[i].1.store(ps.last_frame_time(), Ordering::Relaxed);
            fl.store(i + 1, Ordering::Release);
        }
        Control::Continue
    })
    .unwrap();
    let t0 = Instant::now();
    while filled.load(Ordering::Acquire) < N && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let v: Vec<(u64, u64)> = starts
        .iter()
        .map(|(a, f)| (a.load(Ordering::Relaxed), f.load(Ordering::Relaxed)))
        .collect();
    let period = PERIOD as f64 * 1e9 / RATE as f64;
    // After the loop has locked (1 s), consecutive starts of cycles one
    // period of frames apart (a gap across a driver skip-ahead or a device
    // restart, after a machine stall, measures the stall, not the loop):
    // 95 % of them are within 1 % of the period, and they are most gaps.
    let steady: Vec<f64> = v[N / 2..]
        .windows(2)
        .filter(|w| w[1].1 == w[0].1 + PERIOD as u64)
        .map(|w| w[1].0 as f64 - w[0].0 as f64)
        .collect();
    let all = N / 2 - 1;
    assert!(
        steady.len() * 10 >= all * 8,
        "only {} of {all} gaps between cycles one period of frames apart",
        steady.len()
    );
    let close = steady
        .iter()
        .filter(|g| (*g / period - 1.0).abs() < 0.01)
        .count();
    println!(
        "{close} of {} steady gaps within 1 % of the period ({} across a skip or restart left out)",
        steady.len(),
        all - steady.len()
    );
    assert!(
        close * 100 >= steady.len() * 95,
        "{close} of {} gaps within 1 % of {period:.0} ns: {:?}",
        steady.len(),
        &steady[..20.min(steady.len())]
    );
}

#[test]
fn an_injected_xrun_is_recovered_and_reported() {
    let _serial = common::one_at_a_time();
    let test = "an_injected_xrun_is_recovered_and_reported";
    let dir = TestDir::new("alsad", "xrun");
    let Some(card) = card(test, &dir.0) else {
        return;
    };
    let srv = start(&card, alsa::PCM_CARD);
    let (_watcher, xruns) = xrun_watcher(&srv);
    let _gen = srv.tool("gen", &["counter"], &mut || Ok(())).expect("gen");
    std::thread::sleep(Duration::from_millis(500));
    // Notifications of earlier xruns (a machine stall) do not count: drain
    // them, and wait for the count and a notification after the injection.
    while xruns.try_recv().is_ok() {}
    let before = status(&srv);
    card.inject(Fault::Xrun).unwrap();
    let t0 = Instant::now();
    while status(&srv).xruns == before.xruns && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        status(&srv).xruns > before.xruns,
        "resound status counts the device's xrun"
    );
    let told = xruns
        .recv_timeout(Duration::from_secs(5))
        .expect("clients are told about the device's xrun");
    assert!(
        told >= before.cycles,
        "notified for cycle {told}, injected after {}",
        before.cycles
    );
    let want = RATE as f64 / PERIOD as f64;
    assert_paced(&srv, want, 0.2, 1.0, "cycles go on after the xrun");
}

#[test]
fn a_vanished_card_keeps_clients_running_and_is_resumed_on() {
    let _serial = common::one_at_a_time();
    let test = "a_vanished_card_keeps_clients_running_and_is_resumed_on";
    let dir = TestDir::new("alsad", "vanish");
    let Some(card) = card(test, &dir.0) else {
        return;
    };
    let mut srv = start(&card, alsa::PCM_CARD);
    let (_watcher, xruns) = xrun_watcher(&srv);
    let _gen = srv.tool("gen", &["counter"], &mut || Ok(())).expect("gen");
    let want = RATE as f64 / PERIOD as f64;
    card.inject(Fault::Vanish).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let gen_cycle = |srv: &Server| {
        let st = status(srv);
        st.clients
            .iter()
            .find(|c| c.name == "gen")
            .unwrap()
            .last_cycle
    };
    let a = gen_cycle(&srv);
    std::thread::sleep(Duration::from_secs(1));
    let b = gen_cycle(&srv);
    assert!(
        srv.exited().is_none(),
        "the server survives the card's loss"
    );
    assert!(
        (b - a) as f64 > 0.8 * want,
        "the client keeps running at the card's rate without it: {} cycles in 1 s",
        b - a
    );
    // The card is looked for on a helper thread, not on the driver thread.
    assert!(
        threads(srv.pid()).iter().any(|n| n == REOPEN_THREAD),
        "a {REOPEN_THREAD} thread looks for the card: {:?}",
        threads(srv.pid())
    );
    card.inject(Fault::Return).unwrap();
    // The driver retries every second; once back on the card, an xrun the
    // card injects reaches the clients (only an open card can report one).
    let deadline = Instant::now() + Duration::from_secs(10);
    while xruns.try_recv().is_ok() {}
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        card.inject(Fault::Xrun).unwrap();
        if xruns.recv_timeout(Duration::from_secs(1)).is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the driver never resumed on the card"
        );
    }
    assert_paced(&srv, want, 0.05, 2.0, "paced by the card again");
    assert!(
        !threads(srv.pid()).iter().any(|n| n == REOPEN_THREAD),
        "the {REOPEN_THREAD} thread ended once the card was back"
    );
}

/// The reopen helper's thread name (see `resound_engine`'s ALSA driver).
const REOPEN_THREAD: &str = "resound-reopen";

/// Names of the threads of process `pid`.
fn threads(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_refused_rate_fails_at_start_naming_the_supported_rates() {
    let _serial = common::one_at_a_time();
    let test = "a_refused_rate_fails_at_start_naming_the_supported_rates";
    let dir = TestDir::new("alsad", "rate");
    let Some(card) = card(test, &dir.0) else {
        return;
    };
    let out = Command::new(common::RESOUNDD)
        .envs(card.env())
        .env("RESOUND_DIR", &dir.0)
        .args(["-n", &format!("alsarate{}", std::process::id())])
        .args([
            "-d",
            "alsa",
            "-d",
            alsa::PCM_48K_ONLY,
            "-r",
            "44100",
            "-p",
            "256",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run resoundd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started at a refused rate: {err}");
    assert!(
        err.contains("48000"),
        "the message names the supported rate: {err}"
    );
}

/// What [`check_continuity`] found.
#[derive(Debug, Default)]
struct Continuity {
    /// Samples that are input samples in their place.
    matched: usize,
    /// Skips ahead at a period boundary (capture data dropped).
    gaps: usize,
    /// Whole periods played again (a late client's output of the cycle before).
    repeats: usize,
}

/// Checks that the non-silent samples of `out` are `input` (looping) in
/// order: within a period each sample follows the one before; at a period
/// boundary the stream may skip ahead (a gap: capture data dropped by a
/// device xrun's restart), but only when `xruns` says the device had some,
/// or go back by exactly one period (counted as a repeat: the caller
/// decides whether a late client explains it). Silence may come between (a
/// playback restart prefills it).
fn check_continuity(input: &[i16], out: &[i16], xruns: bool) -> Continuity {
    let n = input.len();
    let at: std::collections::HashMap<i16, usize> =
        input.iter().enumerate().map(|(i, &x)| (x, i)).collect();
    // The input position of the last sample, unwrapped (counting loops).
    let mut last: Option<usize> = None;
    let mut c = Continuity::default();
    let period = PERIOD as usize;
    for (t, &v) in out.iter().enumerate() {
        if v == 0 {
            continue;
        }
        let Some(&pos) = at.get(&v) else {
            panic!("frame {t}: {v} is not an input sample");
        };
        c.matched += 1;
        let Some(prev) = last else {
            last = Some(pos);
            continue;
        };
        // The next input position at or after prev + 1 holding this sample.
        let next = prev + 1 + (pos + n - (prev + 1) % n) % n;
        let skipped = next - (prev + 1);
        let around = &out[t.saturating_sub(4)..(t + 4).min(out.len())];
        if skipped > 0 && n - skipped == period && t % period == 0 {
            eprintln!("frame {t}: the period before played again");
            c.repeats += 1;
            last = Some(next - n);
            continue;
        }
        if skipped > 0 {
            assert!(
                skipped < n / 2,
                "frame {t}: input sample {pos} again, {} samples after its \
                 place (around: {around:?})",
                n - skipped
            );
            assert!(
                xruns && t % PERIOD as usize == 0,
                "frame {t}: {skipped} input samples skipped without a device \
                 xrun or inside a period (around: {around:?})"
            );
            eprintln!("frame {t}: a gap of {skipped} samples after a device xrun");
            c.gaps += 1;
        }
        last = Some(next);
    }
    c
}

/// A client of the test counting the cycles a client was reported late in.
fn late_watcher(srv: &Server) -> (resound_client::Client, Arc<AtomicUsize>) {
    let watcher = srv.open_client("latewatch").expect("open the watcher");
    let late = Arc::new(AtomicUsize::new(0));
    let count = late.clone();
    watcher.set_notification_handler(move |_c: &resound_client::Client, n: &Event| {
        if let Event::Xrun { late, .. } = n {
            if !late.is_empty() {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (watcher, late)
}

#[test]
fn the_paced_duplex_card_carries_audio_through_a_client_unchanged_mmap() {
    duplex_through_a_client(
        "the_paced_duplex_card_carries_audio_through_a_client_unchanged_mmap",
        CardAccess::Mmap,
        "mmap interleaved",
    );
}

#[test]
fn the_paced_duplex_card_carries_audio_through_a_client_unchanged_rw() {
    duplex_through_a_client(
        "the_paced_duplex_card_carries_audio_through_a_client_unchanged_rw",
        CardAccess::Rw,
        "read/write interleaved",
    );
}

/// Audio captured from a file on the card offering `access` goes through a
/// client into the recorded playback unchanged; the server's log names
/// the access it chose (`chosen`).
fn duplex_through_a_client(test: &str, access: CardAccess, chosen: &str) {
    let _serial = common::one_at_a_time();
    let dir = TestDir::new("alsad", "duplex");
    if !has_alsa_driver(test) {
        return;
    }
    // One second of distinct, never-silent S16 samples, captured in a loop.
    let half = (RATE / 2) as i16;
    let input: Vec<i16> = (1..=half).chain(-half..0).collect();
    assert_eq!(input.len(), RATE as usize);
    let raw: Vec<u8> = input
        .iter()
        .flat_map(|&s| [s.to_le_bytes(), (-s).to_le_bytes()].concat())
        .collect();
    let input_path = dir.0.join("input.raw");
    std::fs::write(&input_path, raw).unwrap();
    let spec = AlsaSpec {
        format: Some(alsa::SampleFormat::S16),
        capture_input: Some(input_path),
        capture_loop: true,
        access,
        ..AlsaSpec::default()
    };
    let card = match AlsaCard::install(&dir.0, &spec) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return skip_missing_tool(test, &e.to_string())
        }
        Err(e) => panic!("installing the test card: {e}"),
    };
    let mut srv = start(&card, alsa::PCM_DUPLEX_FILE);
    let (_late_watcher, late) = late_watcher(&srv);
    let _pass = srv.tool("pass", &["pass"], &mut || Ok(())).expect("pass");
    let ctl = srv.try_ctl().expect("control session");
    ctl.connect_ports("system:capture_1", "pass:in").unwrap();
    ctl.connect_ports("pass:out", "system:playback_1").unwrap();
    // A device xrun in the middle: after its recovery the capture goes on
    // without a period delivered twice.
    std::thread::sleep(Duration::from_millis(1500));
    let before = status(&srv).xruns;
    card.inject(Fault::Xrun).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let xruns = status(&srv).xruns;
    assert!(xruns > before, "the injected xrun was counted");
    let xruns = xruns > 0;
    let log = srv.log().text();
    assert!(
        log.contains(&format!("S16, {chosen}")),
        "the start-up line names the access ({chosen}): {log}"
    );
    srv.stop().expect("stop resoundd");
    let rec = std::fs::read(card.playback_recording()).unwrap();
    let frames: Vec<[i16; 2]> = rec
        .chunks_exact(4)
        .map(|f| {
            let s = |i: usize| i16::from_le_bytes([f[i], f[i + 1]]);
            [s(0), s(2)]
        })
        .collect();
    let left: Vec<i16> = frames.iter().map(|f| f[0]).collect();
    assert!(
        frames.iter().all(|f| f[1] == 0),
        "playback_2 is not connected: silence"
    );
    let c = check_continuity(&input, &left, xruns);
    let late = late.load(Ordering::Relaxed);
    println!(
        "{} samples arrived unchanged and in order of {} recorded \
         ({} gaps, {} periods played twice, {late} late cycles of a client)",
        c.matched,
        left.len(),
        c.gaps,
        c.repeats
    );
    // The device's recovery never repeats a period: only a client that
    // missed its cycle leaves its output of the cycle before in its buffer.
    assert!(
        c.repeats <= late,
        "{} periods played twice but a client was late in only {late} cycles",
        c.repeats
    );
    let matched = c.matched;
    assert!(
        matched >= RATE as usize,
        "at least a second of audio went through ({matched} samples)"
    );
}

/// Capture latency of system:capture_1 and playback latency of
/// system:playback_1 (min of each range), as a client reads them.
fn port_latencies(c: &resound_client::Client) -> (u32, u32) {
    use resound_shm::sync::{switch, Ordering as ShmOrdering};
    let snap = c.snapshot();
    let view = c.view();
    let cur = switch::cur(view.header().switch.load(ShmOrdering::Acquire));
    let t = view.table(cur);
    let lat = |name: &str| {
        let id = snap.port(name).unwrap_or_else(|| panic!("no {name}")).id;
        t.port_latency(id).unwrap()
    };
    (lat("system:capture_1")[0], lat("system:playback_1")[2])
}

#[test]
fn a_buffer_size_change_reconfigures_the_card_or_is_refused_mmap() {
    buffer_size_change(
        "a_buffer_size_change_reconfigures_the_card_or_is_refused_mmap",
        CardAccess::Mmap,
    );
}

#[test]
fn a_buffer_size_change_reconfigures_the_card_or_is_refused_rw() {
    buffer_size_change(
        "a_buffer_size_change_reconfigures_the_card_or_is_refused_rw",
        CardAccess::Rw,
    );
}

/// On the card offering `access` and periods up to 256 frames: a longer
/// period is refused with the card's message and the server stays at 256;
/// Debian's jack_bufsize sets 128, the card runs at it and the latencies
/// follow.
fn buffer_size_change(test: &str, access: CardAccess) {
    let _serial = common::one_at_a_time();
    let bufsize = "/usr/bin/jack_bufsize";
    if !Path::new(bufsize).exists() {
        return skip_missing_tool(test, "jack_bufsize missing (apt-get install jackd2)");
    }
    let dir = TestDir::new("alsad", "bufsize");
    let spec = AlsaSpec {
        access,
        ..AlsaSpec::default()
    };
    let Some(card) = card_with(test, &dir.0, &spec) else {
        return;
    };
    let mut srv = start(&card, alsa::PCM_SHORT_PERIODS);
    let chosen = match access {
        CardAccess::Rw => ", read/write interleaved",
        _ => ", mmap interleaved",
    };
    assert!(srv.log().text().contains(chosen), "the card runs{chosen}");
    let _gen = srv.tool("gen", &["counter"], &mut || Ok(())).expect("gen");
    let me = srv.open_client("asker").expect("open a client");
    // -n 3, async: capture one period, playback 2 + (3 - 2) periods.
    assert_eq!(port_latencies(&me), (PERIOD, 3 * PERIOD));
    // The card refuses periods longer than 256 frames: a clear error, and
    // the server keeps running at 256.
    let err = me.set_buffer_size(512).expect_err("512 frames refused");
    let msg = err.to_string();
    assert!(
        msg.contains("512") && msg.contains("refuses"),
        "the error says what the card refused: {msg}"
    );
    assert_eq!(status(&srv).buffer_frames, PERIOD);
    let want = RATE as f64 / PERIOD as f64;
    assert_paced(
        &srv,
        want,
        0.1,
        1.0,
        "still paced by the card at 256 frames",
    );
    // Debian's jack_bufsize through `resound run`: the card runs at 128.
    let out = srv
        .command(common::RESOUND.as_ref())
        .env_remove("RESOUND_SERVER")
        .env_remove("JACK_DEFAULT_SERVER")
        .args(["-s", &srv.name, "run", "--", bufsize, "128"])
        .output()
        .expect("run jack_bufsize");
    assert!(
        out.status.success(),
        "jack_bufsize 128: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(status(&srv).buffer_frames, 128);
    assert_eq!(port_latencies(&me), (128, 3 * 128), "latencies follow");
    let want = RATE as f64 / 128.0;
    assert_paced(&srv, want, 0.02, 2.0, "the card runs at 128 frames");
    assert!(srv.exited().is_none());
}
