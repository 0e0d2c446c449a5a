//! End-to-end tests of the ALSA driver (`resoundd -d alsa`) on alsa-lib's
//! user-space PCMs (this machine has no sound card): the test writes an
//! ALSA configuration of its own and points alsa-lib at it with
//! `ALSA_CONFIG_PATH` (the machine's configuration is not touched).

mod common;
use common::*;
use resound_client::prelude::*;
use resound_lab::harness::alsa::config_path_env;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PERIOD: usize = 256;
const NPERIODS: usize = 3;
/// Counter frames sent through the graph.
const COUNTER_FRAMES: usize = 64 * PERIOD;

/// Writes the test's ALSA configuration (file-plugin PCMs over `null`)
/// into a directory of its own (removed when the returned guard drops);
/// returns the directory and the
/// `ALSA_CONFIG_PATH` pointing alsa-lib at it (given to each child).
fn alsa_config(tag: &str) -> (TestDir, String) {
    let dir = TestDir::new("alsadrv", tag);
    let input = dir.join("in.raw");
    // A counter in S16: frame i carries i mod 2^15 on both channels.
    let raw: Vec<u8> = (0..48000u32 * 2)
        .flat_map(|i| {
            let v = (i % 32768) as i16;
            [v.to_le_bytes(), v.to_le_bytes()].concat()
        })
        .collect();
    std::fs::write(&input, raw).unwrap();
    let conf = format!(
        "pcm.rtest_cap {{ type file slave.pcm {{ type null }} file \"/dev/null\" infile \"{}\" format \"raw\" }}\n\
         pcm.rtest_play {{ type file slave.pcm {{ type null }} file \"{}\" format \"raw\" }}\n",
        input.display(),
        dir.join("out.raw").display()
    );
    let path = dir.join("asound.conf");
    std::fs::write(&path, conf).unwrap();
    let env = config_path_env(&path);
    (dir, env)
}

#[test]
fn runs_cycles_on_file_plugin_pcms() {
    let _serial = common::one_at_a_time();
    let (dir, env) = alsa_config("run");
    let args = "-d alsa -C rtest_cap -P rtest_play -r 48000 -p 256 -i 2 -o 2 -S";
    let args: Vec<&str> = args.split_whitespace().collect();
    let mut srv = Srv::start_with_env(&args, &[("ALSA_CONFIG_PATH", &env)]);
    wait_for("cycles on the device", Duration::from_secs(10), || {
        srv.status().cycles > 200
    });
    let st = srv.status();
    assert_eq!(
        (st.driver.as_str(), st.sample_rate, st.buffer_frames),
        ("alsa", 48000, 256)
    );
    let out = std::fs::metadata(dir.join("out.raw")).unwrap().len();
    assert!(out >= 200 * 256 * 4, "playback written: {out} bytes");
    let ports = srv.cli(&["lsp"]);
    let text = String::from_utf8_lossy(&ports.stdout);
    assert!(
        text.contains("system:capture_2") && text.contains("system:playback_2"),
        "{text}"
    );
    assert!(
        !text.contains("system:capture_3"),
        "-i 2 gives two capture ports: {text}"
    );
    assert!(
        srv.log().contains("S16"),
        "-S negotiates 16-bit: {}",
        srv.log()
    );
    srv.stop();
}

#[test]
fn unknown_device_fails_before_start_with_a_clear_message() {
    let _serial = common::one_at_a_time();
    let (_dir, env) = alsa_config("missing");
    let out = Command::new(env!("CARGO_BIN_EXE_resoundd"))
        .env("ALSA_CONFIG_PATH", env)
        .args(["-n", &format!("alsa-missing-{}", std::process::id())])
        .args(["-d", "alsa", "-d", "no_such_pcm", "-p", "256"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot open capture device no_such_pcm"),
        "{err}"
    );
}

#[test]
fn devices_lists_user_space_pcms() {
    let _serial = common::one_at_a_time();
    let (_dir, env) = alsa_config("devices");
    let out = Command::new(env!("CARGO_BIN_EXE_resound"))
        .env("ALSA_CONFIG_PATH", env)
        .arg("devices")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("null"), "{text}");
    assert!(text.contains("rates") && text.contains("S16_LE"), "{text}");
}

/// A sample format as the test writes and reads it (independently of the
/// driver's converter): value `k` (a multiple of 2^-15 full scale) encoded.
#[derive(Clone, Copy, Debug)]
enum Fmt {
    S16,
    S24Packed,
    S32,
    Float,
}

impl Fmt {
    fn bytes(self) -> usize {
        match self {
            Fmt::S16 => 2,
            Fmt::S24Packed => 3,
            Fmt::S32 | Fmt::Float => 4,
        }
    }
    fn encode(self, k: i32) -> Vec<u8> {
        match self {
            Fmt::S16 => (k as i16).to_le_bytes().to_vec(),
            Fmt::S24Packed => (k << 8).to_le_bytes()[..3].to_vec(),
            Fmt::S32 => (k << 16).to_le_bytes().to_vec(),
            Fmt::Float => (k as f32 / 32768.0).to_le_bytes().to_vec(),
        }
    }
    fn decode(self, b: &[u8]) -> i32 {
        match self {
            Fmt::S16 => i16::from_le_bytes([b[0], b[1]]) as i32,
            Fmt::S24Packed => i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 16,
            Fmt::S32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) >> 16,
            Fmt::Float => (f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * 32768.0) as i32,
        }
    }
}

/// The counter on channel 1 (1..=32767, never 0) and its negative on channel 2.
fn counter(i: usize) -> [i32; 2] {
    let k = 1 + (i % 32767) as i32;
    [k, -k]
}

/// Feeds the capture FIFO one period every 10 ms: silence until `go`,
/// then the counter, then silence until `stop`. Returns the number of
/// silent frames before the counter.
fn feeder(
    fifo: PathBuf,
    fmt: Fmt,
    go: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    lead: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let chunk = |frames: &mut dyn Iterator<Item = [i32; 2]>| -> Vec<u8> {
            frames
                .flat_map(|[a, b]| [fmt.encode(a), fmt.encode(b)].concat())
                .collect()
        };
        let mut zeros = 0u64;
        let (mut sent, mut tail) = (0usize, 0usize);
        // After `stop`, 8 more periods of silence push the last of the
        // counter through the graph and the file plugin's buffer.
        while tail < 8 {
            if stop.load(Ordering::Acquire) {
                tail += 1;
            }
            let data = if go.load(Ordering::Acquire) && sent < COUNTER_FRAMES {
                lead.store(zeros, Ordering::Release);
                let c = chunk(&mut (sent..sent + PERIOD).map(counter));
                sent += PERIOD;
                c
            } else {
                if sent == 0 {
                    zeros += PERIOD as u64;
                }
                chunk(&mut std::iter::repeat_n([0, 0], PERIOD))
            };
            if f.write_all(&data).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(15));
        }
    })
}

/// Writes a configuration with a capture PCM reading the FIFO and a
/// playback PCM writing out.raw (file plugins over null) in `dir`.
fn fifo_config(dir: &Path) -> (PathBuf, PathBuf) {
    let fifo = dir.join("in.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = dir.join("out.raw");
    let conf = format!(
        "pcm.rtest_cap {{ type file slave.pcm {{ type null }} file \"/dev/null\" infile \"{}\" format \"raw\" }}\n\
         pcm.rtest_play {{ type file slave.pcm {{ type null }} file \"{}\" format \"raw\" }}\n",
        fifo.display(),
        out.display()
    );
    let path = dir.join("asound-fifo.conf");
    std::fs::write(&path, conf).unwrap();
    (path, out)
}

/// The reported latency of `port` in `resound lsp -l`'s output.
fn reported(lsp: &str, port: &str) -> u64 {
    let mut lines = lsp.lines().skip_while(|l| *l != port).skip(2);
    let l = lines
        .next()
        .unwrap_or_else(|| panic!("{port} missing:\n{lsp}"));
    l.split_whitespace().nth(4).unwrap().parse().unwrap()
}

/// Counter → file plugin (capture) → p1 → p2 → playback (file plugin):
/// the output is the input delayed by exactly the reported latencies.
fn sample_exact(tag: &str, fmt: Fmt, format_arg: &str) {
    let (dir, _) = alsa_config(tag);
    let (conf, out) = fifo_config(&dir);
    let (go, stop, lead) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let feed = feeder(
        dir.join("in.fifo"),
        fmt,
        go.clone(),
        stop.clone(),
        lead.clone(),
    );
    let (p, n) = (PERIOD.to_string(), NPERIODS.to_string());
    let mut args = vec![
        "-d",
        "alsa",
        "-C",
        "rtest_cap",
        "-P",
        "rtest_play",
        "-r",
        "48000",
    ];
    args.extend([
        "-p", &p, "-n", &n, "-i", "2", "-o", "2", "--format", format_arg,
    ]);
    let conf_path = config_path_env(&conf);
    let mut srv = Srv::start_with_env(&args, &[("ALSA_CONFIG_PATH", &conf_path)]);
    let _p1 = srv.tool("p1", &["pass"]);
    let _p2 = srv.tool("p2", &["pass"]);
    let _q1 = srv.tool("q1", &["pass"]);
    let ctl = srv.ctl();
    for (s, d) in [
        ("system:capture_1", "p1:in"),
        ("p1:out", "p2:in"),
        ("p2:out", "system:playback_1"),
        ("system:capture_2", "q1:in"),
        ("q1:out", "system:playback_2"),
    ] {
        ctl.connect_ports(s, d).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    go.store(true, Ordering::Release);
    wait_for("the counter to pass", Duration::from_secs(30), || {
        lead.load(Ordering::Acquire) > 0
            && srv.status().cycles > (COUNTER_FRAMES / PERIOD) as u64 + 200
    });
    let lsp = String::from_utf8_lossy(&srv.cli(&["lsp", "-l"]).stdout).to_string();
    let latency = reported(&lsp, "system:capture_1") + reported(&lsp, "system:playback_1");
    let p = PERIOD as u64;
    assert_eq!(
        latency,
        p + (NPERIODS as u64 - 1) * p + p,
        "capture one period, playback n-1 periods, one more in async mode:\n{lsp}"
    );
    let st = srv.status();
    stop.store(true, Ordering::Release);
    feed.join().unwrap();
    srv.stop();
    let raw = std::fs::read(&out).unwrap();
    let frame = 2 * fmt.bytes();
    let at = |j: usize, ch: usize| fmt.decode(&raw[j * frame + ch * fmt.bytes()..]);
    let start = lead.load(Ordering::Acquire) as usize + latency as usize;
    assert!(
        raw.len() >= (start + COUNTER_FRAMES) * frame,
        "output too short: {} bytes",
        raw.len()
    );
    // Silence up to the counter's arrival, exactly `latency` frames late.
    assert!(
        (0..start).all(|j| at(j, 0) == 0 && at(j, 1) == 0),
        "output before the counter"
    );
    // Each period of each channel is the counter exactly, or (when a client
    // of the chain was late: an xrun the server reports) a stale earlier
    // period; anything else is a conversion or latency error.
    let (mut exact, mut stale) = (0u64, 0u64);
    for k in 0..COUNTER_FRAMES / PERIOD {
        for ch in 0..2 {
            let got: Vec<i32> = (k * PERIOD..(k + 1) * PERIOD)
                .map(|i| at(start + i, ch))
                .collect();
            let want = |m: usize| -> Vec<i32> {
                (k * PERIOD..(k + 1) * PERIOD)
                    .map(|i| i.checked_sub(m * PERIOD).map_or(0, |i| counter(i)[ch]))
                    .collect()
            };
            if got == want(0) {
                exact += 1;
            } else if (1..=k + 1).any(|m| got == want(m)) {
                stale += 1;
            } else {
                panic!("{fmt:?}: output period {k} channel {ch} is not the counter delayed by {latency}: {:?}..", &got[..4]);
            }
        }
    }
    eprintln!(
        "{fmt:?}: {exact} periods exact, {stale} stale (server xruns: {})",
        st.xruns
    );
    assert!(
        stale <= 2 * st.xruns,
        "stale periods without an xrun: {stale} > 2 x {}",
        st.xruns
    );
    assert!(
        exact >= 2 * (COUNTER_FRAMES / PERIOD) as u64 * 3 / 4,
        "{exact} exact periods"
    );
}

#[test]
fn sample_exact_s16() {
    let _serial = common::one_at_a_time();
    sample_exact("s16", Fmt::S16, "s16");
}

#[test]
fn sample_exact_s24_3() {
    let _serial = common::one_at_a_time();
    sample_exact("s24_3", Fmt::S24Packed, "s24_3");
}

#[test]
fn sample_exact_s32() {
    let _serial = common::one_at_a_time();
    sample_exact("s32", Fmt::S32, "s32");
}

#[test]
fn sample_exact_float() {
    let _serial = common::one_at_a_time();
    sample_exact("float", Fmt::Float, "float");
}

/// A PCM that runs at 44100 Hz behind alsa-lib's rate converter accepts the
/// common rates but not 2000 Hz: the server stops before it listens, saying
/// what the device supports.
#[test]
fn refused_rate_fails_at_start_with_the_supported_rates() {
    let _serial = common::one_at_a_time();
    let (dir, _) = alsa_config("rate");
    let conf = dir.join("asound-rate.conf");
    std::fs::write(
        &conf,
        "pcm.rtest_rate { type rate slave { pcm { type null } rate 44100 } }\n",
    )
    .unwrap();
    let sockets = dir.join("sockets");
    let name = format!("alsa-rate-{}", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_resoundd"))
        .env("ALSA_CONFIG_PATH", config_path_env(&conf))
        .env("RESOUND_DIR", &sockets)
        .args([
            "-n",
            &name,
            "-d",
            "alsa",
            "-d",
            "rtest_rate",
            "-r",
            "2000",
            "-p",
            "256",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("rtest_rate refuses 2000 Hz; it supports 8000,"),
        "{err}"
    );
    assert!(err.contains("44100, 48000"), "{err}");
    assert!(
        !sockets.join(format!("{name}.sock")).exists(),
        "no client could have connected"
    );
}

/// Debian's jack_lsp shows the ALSA driver's latencies (capture one period
/// plus -I, playback n-1 periods plus -O plus one in async mode) and
/// jack_simple_client's sine reaches the playback device.
#[test]
fn distribution_jack_programs_on_alsa() {
    let _serial = common::one_at_a_time();
    let t = "alsa-jack-programs";
    let (lsp, simple) = ("/usr/bin/jack_lsp", "/usr/bin/jack_simple_client");
    if !Path::new(lsp).exists() || !Path::new(simple).exists() {
        skip_missing_tool(
            t,
            "jack_lsp or jack_simple_client missing (apt-get install jackd2)",
        );
        return;
    }
    let (dir, _) = alsa_config("jack");
    let (conf, out) = fifo_config(&dir);
    let (go, stop, lead) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let feed = feeder(dir.join("in.fifo"), Fmt::Float, go, stop.clone(), lead);
    let args = "-d alsa -C rtest_cap -P rtest_play -p 256 -n 3 -i 2 -o 2 -I 7 -O 11";
    let args: Vec<&str> = args.split_whitespace().collect();
    let mut srv = Srv::start_with_env(&args, &[("ALSA_CONFIG_PATH", &config_path_env(&conf))]);
    let o = srv.run_program(lsp, &["-l"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(
            "system:capture_1\n\tport playback latency = [ 0 0 ] frames\n\tport capture latency = [ 263 263 ]"
        ),
        "capture: 256 + 7:\n{text}"
    );
    assert!(
        text.contains("system:playback_1\n\tport playback latency = [ 779 779 ]"),
        "playback: 2 x 256 + 256 (async) + 11:\n{text}"
    );
    let mut client = srv.run_program(simple, &[]).spawn().unwrap();
    wait_for(
        "jack_simple_client's cycles",
        Duration::from_secs(15),
        || {
            srv.status()
                .clients
                .iter()
                .any(|c| c.name == "jack_simple_client" && c.last_cycle > 50)
        },
    );
    let len = std::fs::metadata(&out).unwrap().len();
    std::thread::sleep(Duration::from_millis(500));
    signal(client.id(), libc::SIGINT);
    client.wait().unwrap();
    stop.store(true, Ordering::Release);
    feed.join().unwrap();
    srv.stop();
    let raw = std::fs::read(&out).unwrap();
    let loud = raw[len as usize..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).abs())
        .fold(0.0f32, f32::max);
    assert!(
        loud > 0.1,
        "the sine reached the playback file (peak {loud})"
    );
}
