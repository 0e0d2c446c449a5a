//! `resoundd -d file`: offline rendering from a WAV file through real
//! client processes to a WAV file.
//!
//! Each test writes its input with hound, starts a real `resoundd -d file`
//! (through the lab harness, under a unique name in a private directory)
//! holding the render until the graph is wired (`--start-when-connected`),
//! starts a chain of `resound-tool` clients that connect themselves, and
//! waits for the server to stop at the end of the input.

mod common;
use common::*;
use resound_client::{Client, Event};
use resound_lab::harness::{self, Bins, ChildOptions, ServerSpec, StderrMode};
use resound_shm::sync::{switch, Ordering};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PERIOD: u32 = 256;
const RATE: u32 = 48000;

/// A fresh scratch directory for one test's files.
fn scratch(test: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("file-driver")
        .join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A sample-exact test signal: a counter through the format's range.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fmt {
    S16,
    S24,
    S32,
    F32,
}

impl Fmt {
    fn spec(self, channels: u16) -> hound::WavSpec {
        let (bits, float) = match self {
            Fmt::S16 => (16, false),
            Fmt::S24 => (24, false),
            Fmt::S32 => (32, false),
            Fmt::F32 => (32, true),
        };
        hound::WavSpec {
            channels,
            sample_rate: RATE,
            bits_per_sample: bits,
            sample_format: if float {
                hound::SampleFormat::Float
            } else {
                hound::SampleFormat::Int
            },
        }
    }

    /// Frame `i` of the counter, as the file's raw sample bits. 32-bit
    /// integers carry 24 significant bits (what a float port holds).
    fn counter(self, i: u64) -> i64 {
        match self {
            Fmt::S16 => ((i * 7) % 65536) as i64 - 32768,
            Fmt::S24 => ((i * 331) % (1 << 24)) as i64 - (1 << 23),
            Fmt::S32 => (((i * 331) % (1 << 24)) as i64 - (1 << 23)) << 8,
            Fmt::F32 => {
                let v = ((i * 331) % (1 << 24)) as i64 - (1 << 23);
                (v as f32 / (1 << 23) as f32).to_bits() as i64
            }
        }
    }
}

/// Writes a mono WAV file of `frames` counter frames.
fn write_counter(path: &Path, fmt: Fmt, frames: u64) {
    let mut w = hound::WavWriter::create(path, fmt.spec(1)).unwrap();
    for i in 0..frames {
        let v = fmt.counter(i);
        match fmt {
            Fmt::F32 => w.write_sample(f32::from_bits(v as u32)).unwrap(),
            _ => w.write_sample(v as i32).unwrap(),
        }
    }
    w.finalize().unwrap();
}

/// Every sample of a WAV file as raw bits (floats as their bit patterns),
/// with its header.
fn read_raw(path: &Path) -> (hound::WavSpec, Vec<i64>) {
    let mut r = hound::WavReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let spec = r.spec();
    let v = if spec.sample_format == hound::SampleFormat::Float {
        r.samples::<f32>()
            .map(|s| s.unwrap().to_bits() as i64)
            .collect()
    } else {
        r.samples::<i32>().map(|s| s.unwrap() as i64).collect()
    };
    (spec, v)
}

/// A `resoundd -d file` under the lab harness.
fn file_server(args: &[&str]) -> harness::Server {
    let mut all = vec!["-d", "file", "-p", "256", "--start-when-connected"];
    all.extend_from_slice(args);
    let mut spec = ServerSpec::new(Bins::new(RESOUNDD, TOOL), "file", &all);
    spec.env.push(("RESOUND_LOG".into(), "info".into()));
    let keep = StderrMode::Keep {
        keep: usize::MAX,
        echo: Some("resoundd".into()),
    };
    spec.child = ChildOptions {
        stderr: keep.clone(),
        ..ChildOptions::default()
    };
    spec.tools = ChildOptions {
        stderr: StderrMode::Keep {
            keep: usize::MAX,
            echo: None,
        },
        ..ChildOptions::default()
    };
    harness::Server::start(spec).unwrap_or_else(|e| panic!("server did not start: {e}"))
}

/// An in-test client that records the server's shutdown reason.
fn watcher(srv: &harness::Server) -> (Client, Arc<Mutex<Option<String>>>) {
    let c = srv.open_client("watcher").unwrap();
    let reason = Arc::new(Mutex::new(None));
    let r = reason.clone();
    c.set_notification_handler(move |_c: &Client, n: &Event| {
        if let Event::Shutdown { reason } = n {
            *r.lock().unwrap() = Some(reason.clone());
        }
    });
    (c, reason)
}

/// Capture latency of system:capture_1 plus playback latency of
/// system:playback_1, as clients read them (min of each range).
fn reported_latency(c: &Client) -> u32 {
    let snap = c.snapshot();
    let view = c.view();
    let cur = switch::cur(view.header().switch.load(Ordering::Acquire));
    let t = view.table(cur);
    let lat = |name: &str| {
        let id = snap.port(name).unwrap_or_else(|| panic!("no {name}")).id;
        t.port_latency(id).unwrap()
    };
    lat("system:capture_1")[0] + lat("system:playback_1")[2]
}

/// Starts a chain of `n` clients `resound-tool CMD` from system:capture_1
/// to system:playback_1 (the last connection, which starts the render).
fn chain(srv: &harness::Server, cmds: &[&[&str]]) -> Vec<harness::Child> {
    let mut tools = Vec::new();
    for (k, cmd) in cmds.iter().enumerate() {
        let name = format!("c{k}");
        let from = if k == 0 {
            "system:capture_1".to_string()
        } else {
            format!("c{}:out", k - 1)
        };
        let mut args: Vec<String> = vec!["-c".into(), format!("{from}=@:in")];
        if k + 1 == cmds.len() {
            args.extend(["-c".into(), "@:out=system:playback_1".into()]);
        }
        args.extend(cmd.iter().map(|s| s.to_string()));
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (child, _) = srv
            .tool(&name, &a, &mut || Ok(()))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        tools.push(child);
    }
    tools
}

/// Waits (60 s at most) for the server to exit on its own.
fn wait_exit(srv: &mut harness::Server) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = srv.exited() {
            return st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the render did not end:\n{}",
            srv.log().tail(20)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One render of `input` through a chain; returns the reported latency.
fn render(input: &Path, output: &Path, extra: &[&str], cmds: &[&[&str]]) -> u32 {
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    let mut args = vec!["--input", i, "--output", o];
    args.extend_from_slice(extra);
    let mut srv = file_server(&args);
    let (w, reason) = watcher(&srv);
    let mut tools = chain(&srv, cmds);
    let latency = reported_latency(&w);
    let st = wait_exit(&mut srv);
    assert!(st.success(), "resoundd: {st}\n{}", srv.log().tail(20));
    assert_eq!(reason.lock().unwrap().as_deref(), Some("end of input"));
    for t in &mut tools {
        let st = t.wait().unwrap();
        assert!(st.success(), "{}: {st}", t.what());
        assert!(
            t.log().text().contains("server shut down: end of input"),
            "{}: {}",
            t.what(),
            t.log().text()
        );
    }
    latency
}

#[test]
fn sample_exact_through_a_chain_in_every_format() {
    let _serial = common::one_at_a_time();
    let dir = scratch("sample-exact");
    let frames = 20_000 + 77;
    for fmt in [Fmt::S16, Fmt::S24, Fmt::S32, Fmt::F32] {
        let (input, output) = (
            dir.join(format!("{fmt:?}-in.wav")),
            dir.join(format!("{fmt:?}-out.wav")),
        );
        write_counter(&input, fmt, frames);
        let pass: &[&str] = &["pass"];
        let latency = render(&input, &output, &[], &[pass, pass, pass]) as usize;
        assert_eq!(latency, 2 * PERIOD as usize, "one period each way");
        let (in_spec, inp) = read_raw(&input);
        let (out_spec, out) = read_raw(&output);
        assert_eq!(out_spec, in_spec, "{fmt:?}: output in the input's format");
        assert_eq!(out.len(), inp.len() + latency, "{fmt:?}: input + latency");
        assert!(
            out[..latency].iter().all(|&s| s == 0),
            "{fmt:?}: lead silence"
        );
        if let Some(t) = (0..inp.len()).find(|&t| out[t + latency] != inp[t]) {
            panic!(
                "{fmt:?}: frame {t} differs: in {} out {}",
                inp[t],
                out[t + latency]
            );
        }
    }
}

#[test]
fn two_renders_are_identical_bit_for_bit() {
    let _serial = common::one_at_a_time();
    let dir = scratch("determinism");
    let input = dir.join("in.wav");
    write_counter(&input, Fmt::F32, 30_000);
    let cmds: &[&[&str]] = &[
        &["lowpass", "--cutoff", "1000"],
        &["gain", "--gain", "0.7"],
        &["load", "--busy", "0.05"],
        &["lowpass", "--cutoff", "3000"],
    ];
    let (a, b) = (dir.join("a.wav"), dir.join("b.wav"));
    render(&input, &a, &[], cmds);
    render(&input, &b, &[], cmds);
    let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(a.len() > 30_000 * 4, "output has the render");
    assert!(a == b, "two renders of the same input and graph differ");
    let (_, s) = read_raw(&dir.join("a.wav"));
    assert!(s.iter().any(|&x| x != 0), "the render is not silent");
}

#[test]
fn output_format_is_converted_as_asked() {
    let _serial = common::one_at_a_time();
    let dir = scratch("convert");
    let (input, output) = (dir.join("in.wav"), dir.join("out.wav"));
    write_counter(&input, Fmt::S16, 5000);
    let pass: &[&str] = &["pass"];
    let latency = render(&input, &output, &["--output-format", "s24"], &[pass]) as usize;
    let (_, inp) = read_raw(&input);
    let (spec, out) = read_raw(&output);
    assert_eq!(
        (spec.bits_per_sample, spec.sample_format),
        (24, hound::SampleFormat::Int)
    );
    for t in 0..inp.len() {
        assert_eq!(out[t + latency], inp[t] << 8, "frame {t}");
    }
}

/// Runs `resoundd ARGS` in a private directory; it must fail at start-up.
fn fails_at_startup(dir: &Path, args: &[&str], want: &str) {
    let sock = dir.join("run");
    std::fs::create_dir_all(&sock).unwrap();
    let t0 = Instant::now();
    let out = Command::new(RESOUNDD)
        .env("RESOUND_DIR", &sock)
        .args(["-n", "badfile"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} started:\n{err}");
    assert!(err.contains(want), "{args:?}: expected {want:?} in:\n{err}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(
        !sock.join("badfile.sock").exists(),
        "no socket for clients was left behind"
    );
}

#[test]
fn bad_input_fails_at_startup_with_a_clear_error() {
    let _serial = common::one_at_a_time();
    let dir = scratch("bad-input");
    let good = dir.join("in.wav");
    write_counter(&good, Fmt::S16, 1000);
    let text = dir.join("text.wav");
    std::fs::write(&text, "this is not audio").unwrap();
    let (g, t, out) = (
        good.to_str().unwrap(),
        text.to_str().unwrap(),
        dir.join("out.wav"),
    );
    let o = out.to_str().unwrap();
    let missing = dir.join("missing.wav");
    let m = missing.to_str().unwrap();
    fails_at_startup(
        &dir,
        &["-d", "file", "--input", m, "--output", o],
        "cannot read input",
    );
    fails_at_startup(
        &dir,
        &["-d", "file", "--input", t, "--output", o],
        "is not a WAV file",
    );
    fails_at_startup(
        &dir,
        &[
            "-d",
            "file",
            "--input",
            g,
            "--output",
            "/nonexistent/dir/out.wav",
        ],
        "cannot create output /nonexistent/dir/out.wav",
    );
    fails_at_startup(
        &dir,
        &["-d", "file", "--input", g, "--output", o, "-r", "44100"],
        "-r 44100 disagrees with the input",
    );
    fails_at_startup(&dir, &["-d", "file", "--output", o], "needs --input");
    assert!(
        good.exists() && std::fs::read(&good).unwrap().len() > 2000,
        "input untouched"
    );
}

#[test]
fn distribution_simple_client_renders_a_sine_for_seconds() {
    let _serial = common::one_at_a_time();
    let t = "file-dist-simple-client";
    let simple = "/usr/bin/jack_simple_client";
    if !Path::new(simple).exists() {
        skip_missing_tool(
            t,
            "/usr/bin/jack_simple_client missing (apt-get install jackd2)",
        );
        return;
    }
    let dir = scratch("simple-client");
    let output = dir.join("out.wav");
    let o = output.to_str().unwrap();
    let mut srv = file_server(&["--seconds", "1.5", "-r", "44100", "--output", o]);
    let (_w, reason) = watcher(&srv);
    let mut client = srv
        .command(RESOUND.as_ref())
        .env_remove("RESOUND_SERVER")
        .env_remove("JACK_DEFAULT_SERVER")
        .args(["-s", &srv.name, "run", "--", simple])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let st = wait_exit(&mut srv);
    assert!(st.success(), "resoundd: {st}\n{}", srv.log().tail(20));
    assert_eq!(
        reason.lock().unwrap().as_deref(),
        Some("end of render (--seconds)")
    );
    // jack_simple_client exits on the server's shutdown notification.
    let t0 = Instant::now();
    while client.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "jack_simple_client still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut r = hound::WavReader::open(&output).unwrap();
    let spec = r.spec();
    assert_eq!((spec.channels, spec.sample_rate), (2, 44100));
    assert_eq!(
        spec.sample_format,
        hound::SampleFormat::Float,
        "f32 by default"
    );
    let len = r.duration() as u64;
    assert_eq!(len, 66150 + 2 * PERIOD as u64, "1.5 s plus the latency");
    let s: Vec<f32> = r.samples::<f32>().map(|x| x.unwrap()).collect();
    let peak = s.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    assert!(
        peak > 0.05 && peak <= 1.0,
        "a sine, not silence: peak {peak}"
    );
}
