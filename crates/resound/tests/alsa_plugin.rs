//! The test sound card (`resoundtest`, an alsa-lib ioplug plugin built by
//! `resound_lab::harness::alsa`) on its own, driven by real alsa-lib
//! programs: Debian's `aplay`/`arecord` and the harness's probe program.
//! Each test installs the card and an ALSA configuration in a directory of
//! its own (`ALSA_CONFIG_PATH`); nothing of the machine's is read or changed
//! beyond alsa-lib's own `alsa.conf`.
//!
//! * pacing: playing or recording 4 s at 48 kHz takes 4 s within 1 %;
//! * sample-exact: data played is recorded exactly, data captured equals
//!   the file the card reads, in every format, interleaved and not, rw and
//!   mmap, and through alsa-lib's own `file` + `null` plugins;
//! * faults injected through the control file reach the application as
//!   `-EPIPE`, `-ESTRPIPE` and `-ENODEV`, and it recovers from each;
//! * a refused rate fails at `hw_params` and says which rates there are;
//! * with `paced false` the card never waits for a clock and stays exact.

mod common;
use common::{skip_missing_tool, TestDir};
use resound_lab::harness::alsa::{self, AlsaCard, AlsaSpec, Fault, SampleFormat};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RATE: u32 = 48_000;
const CHANNELS: u32 = 2;

/// Installs the card, or prints SKIP (no compiler, headers or alsa-utils).
fn card(test: &str, dir: &Path, spec: &AlsaSpec) -> Option<AlsaCard> {
    for tool in ["/usr/bin/aplay", "/usr/bin/arecord"] {
        if !Path::new(tool).exists() {
            skip_missing_tool(
                test,
                &format!("{tool} missing (apt-get install alsa-utils)"),
            );
            return None;
        }
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

/// `aplay`/`arecord` with the card's environment and raw-data options.
fn alsa_util(card: &AlsaCard, prog: &str, pcm: &str, fmt: SampleFormat, period: u32) -> Command {
    let mut c = Command::new(prog);
    c.envs(card.env())
        .args(["-q", "-D", pcm, "-t", "raw", "-f", fmt.alsa_name()])
        .arg(format!("-c{CHANNELS}"))
        .arg(format!("-r{RATE}"))
        .arg(format!("--period-size={period}"))
        .arg(format!("--buffer-size={}", period * 16));
    c
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run alsa-utils");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Pseudo-random bytes (any bit pattern is a valid raw frame for a copy).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Asserts `got` is `want` followed by nothing but silence (aplay pads its
/// last period with silence).
fn assert_played(want: &[u8], got: &[u8], what: &str) {
    assert!(
        got.len() >= want.len(),
        "{what}: recorded {} of {} bytes",
        got.len(),
        want.len()
    );
    let diff = want.iter().zip(got).position(|(a, b)| a != b);
    assert_eq!(diff, None, "{what}: first differing byte");
    assert!(
        got[want.len()..].iter().all(|&b| b == 0),
        "{what}: padding is not silence"
    );
}

/// Wall time of a program playing or recording `seconds` of audio: the
/// shortest of up to 3 runs (a late wake-up on this shared machine only
/// lengthens a run, and an xrun restarts the stream, so such runs are
/// repeated). The program runs under SCHED_FIFO where this process may.
fn timed(test: &str, seconds: f64, mut make: impl FnMut() -> Command) -> Duration {
    let mut best = Duration::MAX;
    for attempt in 1..=3 {
        let inner = make();
        let mut cmd = if common::can_fifo() {
            let mut c = Command::new("chrt");
            c.args(["-f", "20"])
                .arg(inner.get_program())
                .args(inner.get_args());
            c.envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))));
            c
        } else {
            inner
        };
        let t0 = Instant::now();
        let out = run(&mut cmd);
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("underrun") || err.contains("overrun") {
            eprintln!("{test}: attempt {attempt} saw an xrun (machine noise): {err}");
            continue;
        }
        best = best.min(took);
        if (took.as_secs_f64() / seconds - 1.0).abs() <= 0.01 {
            break;
        }
    }
    assert!(best < Duration::MAX, "{test}: every attempt saw an xrun");
    best
}

#[test]
fn pacing_follows_real_time_within_one_percent() {
    let test = "pacing_follows_real_time_within_one_percent";
    let dir = TestDir::new("alsa", "pacing");
    let Some(card) = card(test, &dir.0, &AlsaSpec::default()) else {
        return;
    };
    let seconds = 4.0;
    let frames = (seconds * RATE as f64) as usize;
    let fmt = SampleFormat::S16;
    let silence = dir.0.join("silence.raw");
    std::fs::write(
        &silence,
        vec![0u8; frames * CHANNELS as usize * fmt.bytes()],
    )
    .unwrap();
    let mut runs = Vec::new();
    for period in [128u32, 256] {
        let took = timed(test, seconds, || {
            let mut c = alsa_util(&card, "aplay", alsa::PCM_CARD, fmt, period);
            c.arg(&silence);
            c
        });
        runs.push(("playback", period, took));
    }
    let took = timed(test, seconds, || {
        let mut c = alsa_util(&card, "arecord", alsa::PCM_CARD, fmt, 256);
        c.arg(format!("--samples={frames}")).arg("/dev/null");
        c
    });
    runs.push(("capture", 256, took));
    for (dir, period, took) in runs {
        let ratio = took.as_secs_f64() / seconds;
        println!("{dir} {period}-frame periods: {seconds} s of audio took {took:?} ({ratio:.4})");
        assert!(
            (0.99..=1.01).contains(&ratio),
            "{dir} with {period}-frame periods: {seconds} s took {took:?}"
        );
    }
}

/// Plays `data` through `pcm` with aplay and returns what the card recorded.
fn play(card: &AlsaCard, pcm: &str, fmt: SampleFormat, data: &[u8], mmap: bool) -> Vec<u8> {
    let input = card.config_path().with_file_name("play.raw");
    std::fs::write(&input, data).unwrap();
    let mut c = alsa_util(card, "aplay", pcm, fmt, 256);
    if mmap {
        c.arg("-M");
    }
    run(c.arg(&input));
    let recording = if pcm == alsa::PCM_FILE_PLAYBACK {
        card.file_recording()
    } else {
        card.playback_recording()
    };
    std::fs::read(recording).unwrap()
}

/// Records `frames` frames from `pcm` with arecord.
fn record(card: &AlsaCard, pcm: &str, fmt: SampleFormat, frames: usize, mode: &str) -> Vec<u8> {
    let out = card.config_path().with_file_name("recorded.raw");
    let mut c = alsa_util(card, "arecord", pcm, fmt, 256);
    c.arg(format!("--samples={frames}"));
    match mode {
        "mmap" => {
            c.arg("-M");
        }
        "noninterleaved" => {
            c.arg("-I");
        }
        _ => {}
    }
    run(c.arg(&out));
    if mode != "noninterleaved" {
        return std::fs::read(out).unwrap();
    }
    // arecord -I writes one file per channel (OUT.0, OUT.1): interleave them.
    let chans: Vec<Vec<u8>> = (0..CHANNELS)
        .map(|c| std::fs::read(format!("{}.{c}", out.display())).unwrap())
        .collect();
    let width = fmt.bytes();
    let mut inter = Vec::new();
    for f in 0..chans[0].len() / width {
        for ch in &chans {
            inter.extend_from_slice(&ch[f * width..(f + 1) * width]);
        }
    }
    inter
}

#[test]
fn every_format_is_sample_exact_both_ways() {
    let test = "every_format_is_sample_exact_both_ways";
    for (i, fmt) in SampleFormat::ALL.into_iter().enumerate() {
        let dir = TestDir::new("alsa", &format!("exact-{fmt}"));
        let frames = RATE as usize / 4;
        let data = noise(frames * CHANNELS as usize * fmt.bytes(), 0x9e37 + i as u64);
        let input = dir.0.join("input.raw");
        std::fs::write(&input, &data).unwrap();
        let spec = AlsaSpec {
            format: Some(fmt),
            capture_input: Some(input),
            ..AlsaSpec::default()
        };
        let Some(card) = card(test, &dir.0, &spec) else {
            return;
        };
        for mmap in [false, true] {
            let got = play(&card, alsa::PCM_PLAYBACK_FILE, fmt, &data, mmap);
            assert_played(&data, &got, &format!("{fmt} playback (mmap {mmap})"));
        }
        for mode in ["rw", "mmap", "noninterleaved"] {
            let got = record(&card, alsa::PCM_CAPTURE_FILE, fmt, frames, mode);
            assert!(
                got == data,
                "{fmt} capture ({mode}) differs from the file it reads"
            );
        }
        let got = play(&card, alsa::PCM_FILE_PLAYBACK, fmt, &data, false);
        assert_played(
            &data,
            &got,
            &format!("{fmt} through alsa-lib's file plugin"),
        );
        let got = record(&card, alsa::PCM_FILE_CAPTURE, fmt, frames, "rw");
        assert!(
            got == data,
            "{fmt} capture through alsa-lib's file plugin differs"
        );
    }
}

#[test]
fn capture_loops_or_ends_in_silence() {
    let test = "capture_loops_or_ends_in_silence";
    let fmt = SampleFormat::S32;
    let frames = 1000;
    let data = noise(frames * CHANNELS as usize * fmt.bytes(), 7);
    for looping in [true, false] {
        let dir = TestDir::new("alsa", &format!("loop-{looping}"));
        let input = dir.0.join("input.raw");
        std::fs::write(&input, &data).unwrap();
        let spec = AlsaSpec {
            format: Some(fmt),
            capture_input: Some(input),
            capture_loop: looping,
            ..AlsaSpec::default()
        };
        let Some(card) = card(test, &dir.0, &spec) else {
            return;
        };
        let got = record(&card, alsa::PCM_CAPTURE_FILE, fmt, frames * 3, "rw");
        assert_eq!(got.len(), data.len() * 3);
        assert!(got[..data.len()] == data[..], "first pass (loop {looping})");
        let rest = &got[data.len()..];
        if looping {
            assert!(rest[..data.len()] == data[..] && rest[data.len()..] == data[..]);
        } else {
            assert!(rest.iter().all(|&b| b == 0), "after the end: silence");
        }
    }
}

/// The probe program running in the background, its JSON lines collected.
struct Probe {
    child: Child,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    what: String,
}

impl Probe {
    fn start(card: &AlsaCard, pcm: &str, stream: &str, rate: u32, seconds: f64) -> Probe {
        let mut child = probe_cmd(card, pcm, stream, rate, seconds)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the probe");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Probe {
            child,
            lines,
            seen: Vec::new(),
            what: format!("{pcm} {stream}"),
        }
    }

    /// Waits (up to 10 s) for an event with `key` = `value`; returns it.
    fn wait(&mut self, event: &str, key: &str, value: Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if v["event"] == event && (key.is_empty() || v[key] == value) {
                        return v;
                    }
                }
                Err(_) => panic!(
                    "{}: no {event} {key}={value}; saw {:?}",
                    self.what, self.seen
                ),
            }
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn probe_cmd(card: &AlsaCard, pcm: &str, stream: &str, rate: u32, seconds: f64) -> Command {
    let mut c = Command::new(card.probe().expect("build the probe"));
    c.envs(card.env()).args([
        pcm,
        stream,
        &rate.to_string(),
        &CHANNELS.to_string(),
        "S16_LE",
        "256",
        "16",
        &seconds.to_string(),
    ]);
    c
}

const EPIPE: i32 = 32;
const ESTRPIPE: i32 = 86;
const ENODEV: i32 = 19;

#[test]
fn injected_faults_reach_the_application_and_it_recovers() {
    let test = "injected_faults_reach_the_application_and_it_recovers";
    let dir = TestDir::new("alsa", "faults");
    let Some(card) = card(test, &dir.0, &AlsaSpec::default()) else {
        return;
    };
    for stream in ["play", "capture"] {
        let mut p = Probe::start(&card, alsa::PCM_CARD, stream, RATE, 600.0);
        p.wait("running", "", Value::Null);
        card.inject(Fault::Xrun).unwrap();
        p.wait("error", "code", EPIPE.into());
        p.wait("recovered", "how", "prepare".into());
        card.inject(Fault::Suspend).unwrap();
        p.wait("error", "code", ESTRPIPE.into());
        p.wait("recovered", "how", "resume".into());
        card.inject(Fault::Vanish).unwrap();
        p.wait("error", "code", ENODEV.into());
        p.wait("reopen_failed", "code", ENODEV.into());
        // While the device is gone, nobody can open it.
        let other = probe_cmd(&card, alsa::PCM_CARD, stream, RATE, 0.1)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&other.stdout);
        assert!(!other.status.success(), "opened a vanished card: {text}");
        assert!(text.contains(&format!("\"code\":{ENODEV}")), "{text}");
        card.inject(Fault::Return).unwrap();
        p.wait("recovered", "how", "reopen".into());
        // And it keeps running on the card that came back.
        card.inject(Fault::Xrun).unwrap();
        p.wait("error", "code", EPIPE.into());
        p.wait("recovered", "how", "prepare".into());
    }
}

#[test]
fn a_refused_rate_fails_at_hw_params_and_says_which() {
    let test = "a_refused_rate_fails_at_hw_params_and_says_which";
    let dir = TestDir::new("alsa", "rate");
    let Some(card) = card(test, &dir.0, &AlsaSpec::default()) else {
        return;
    };
    let out = probe_cmd(&card, alsa::PCM_48K_ONLY, "play", 44_100, 0.1)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    let refused: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(refused["what"], "rate", "{text}");
    assert_eq!(
        (refused["rate_min"].clone(), refused["rate_max"].clone()),
        (48_000.into(), 48_000.into())
    );
    // aplay's view of the same device: 48000 Hz only.
    let out = Command::new("aplay")
        .envs(card.env())
        .args([
            "-D",
            alsa::PCM_48K_ONLY,
            "--dump-hw-params",
            "-t",
            "raw",
            "-f",
            "S16_LE",
        ])
        .args(["-r", "44100", "-d", "1", "/dev/zero"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().any(|l| l.trim() == "RATE: 48000"), "{err}");
    // The rate it offers works.
    let ok = probe_cmd(&card, alsa::PCM_48K_ONLY, "play", 48_000, 0.1)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
}

#[test]
fn an_unpaced_card_never_blocks_and_stays_exact() {
    let test = "an_unpaced_card_never_blocks_and_stays_exact";
    let dir = TestDir::new("alsa", "unpaced");
    let fmt = SampleFormat::S16;
    let frames = 10 * RATE as usize;
    let data = noise(frames * CHANNELS as usize * fmt.bytes(), 11);
    let input = dir.0.join("input.raw");
    std::fs::write(&input, &data).unwrap();
    let Some(card) = card(test, &dir.0, &AlsaSpec::default()) else {
        return;
    };
    // The card's `paced false` mode, added to the test's own configuration.
    let out = dir.0.join("unpaced.raw");
    let mut conf = std::fs::read_to_string(card.config_path()).unwrap();
    conf += &format!(
        "pcm.unpaced {{ type resoundtest paced false formats [ \"S16_LE\" ] \
         capture_file \"{}\" playback_file \"{}\" }}\n",
        input.display(),
        out.display()
    );
    std::fs::write(card.config_path(), conf).unwrap();
    let t0 = Instant::now();
    let got = record(&card, "unpaced", fmt, frames, "rw");
    run(alsa_util(&card, "aplay", "unpaced", fmt, 256).arg(&input));
    let took = t0.elapsed();
    assert!(got == data, "unpaced capture differs from its file");
    assert_played(&data, &std::fs::read(&out).unwrap(), "unpaced playback");
    assert!(
        took < Duration::from_secs(5),
        "20 s of audio took {took:?}: the unpaced card waited for a clock"
    );
}
