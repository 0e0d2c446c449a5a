//! End-to-end tests of the timing profiler: the profile ring written by a
//! real server's driver thread, `resound profile` exports, the in-process
//! `profiler` client's ports, and `resound monitor` rendered in headless
//! Chromium.

mod common;
use common::*;
use resound_client::{Control, PortFlags, PortKind};
use resound_profiler::Profile;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("resound-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn median(mut v: Vec<u64>) -> u64 {
    assert!(!v.is_empty());
    v.sort();
    v[v.len() / 2]
}

fn load_profile(dir: &Path) -> Profile {
    serde_json::from_slice(&std::fs::read(dir.join("profile.json")).expect("profile.json"))
        .expect("profile.json parses")
}

/// Two load clients in a chain, busy 10 % and 25 % of a 512-frame period:
/// `resound profile` writes records whose durations, CPU times and end
/// dates match those loads, every file parses, and the plots hold one curve
/// per client.
///
/// Without the early wake-up: a record's CPU time counts a thread's spin
/// while it waits for its input too (up to 100 µs by default), which is no
/// part of the load this test compares with, and which left little of the
/// allowance for the machine's noise (CI once saw the light client at
/// 1.24 ms for a 1.07 ms load).
#[test]
fn known_loads_show_in_the_exported_records() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&[
        "-S",
        "--early-wake",
        "0",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "512",
    ]);
    let period_ns = 512 * 1_000_000_000u64 / 48000;
    let a = srv.tool("light", &["load", "--busy", "10"]);
    let b = srv.tool("heavy", &["load", "--busy", "25", "-c", "light:out=@:in"]);
    std::thread::sleep(Duration::from_millis(2500));
    let out = tmpdir("profile-export");
    let o = srv.cli(&["profile", "--out", out.to_str().unwrap(), "--last", "2"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "resound profile failed: {stderr}");
    eprintln!("{stderr}\n{stdout}");
    assert!(
        stdout.contains("std dev") && stdout.contains("heavy"),
        "summary printed: {stdout}"
    );
    let p = load_profile(&out);
    // --last 2 at 10.67 ms per cycle: 188 cycles, consecutive.
    let want = (2e9 / period_ns as f64).ceil() as usize;
    assert!(
        (want - 2..=want).contains(&p.cycles.len()),
        "{} cycles for 2 s",
        p.cycles.len()
    );
    assert!(p.cycles.windows(2).all(|w| w[1].cycle == w[0].cycle + 1));
    let uuid = |n: &str| p.clients.iter().find(|c| c.name == n).unwrap().uuid;
    let (ul, uh) = (uuid("light"), uuid("heavy"));
    let rows = |u: u64| -> Vec<_> {
        p.cycles
            .iter()
            .filter_map(|c| c.nodes.iter().find(|n| n.uuid == u).map(|n| (c, *n)))
            .filter(|(_, n)| !n.late)
            .collect()
    };
    let (rl, rh) = (rows(ul), rows(uh));
    assert!(
        rl.len() > 150 && rh.len() > 150,
        "{} {}",
        rl.len(),
        rh.len()
    );
    // CPU time is the load (the tool burns its thread's CPU clock); the
    // duration is at least that (preemption only adds).
    for (rows, pct, name) in [(&rl, 10, "light"), (&rh, 25, "heavy")] {
        let want = period_ns * pct / 100;
        let cpu = median(rows.iter().map(|(_, n)| n.cpu_ns.unwrap()).collect());
        let dur = median(rows.iter().map(|(_, n)| n.duration_ns().unwrap()).collect());
        eprintln!("{name}: want {want} ns, median cpu {cpu}, median duration {dur}");
        assert!(
            cpu.abs_diff(want) < want / 10 + 50_000,
            "{name}: median CPU {cpu} ns, load {want} ns"
        );
        assert!(
            dur + 20_000 >= want && dur < want + want / 5 + 200_000,
            "{name}: median duration {dur} ns, load {want} ns"
        );
    }
    // Data flow: heavy is signalled when light finishes, so it ends after
    // light's end plus its own duration; the chain ends inside the period.
    for (c, h) in &rh {
        if let Some(l) = c.nodes.iter().find(|n| n.uuid == ul && !n.late) {
            assert!(
                h.signal_ns.unwrap() >= l.finish_ns.unwrap(),
                "cycle {}",
                c.cycle
            );
            assert!(h.finish_ns.unwrap() >= l.finish_ns.unwrap() + h.duration_ns().unwrap());
        }
    }
    let end = median(rh.iter().map(|(_, n)| n.finish_ns.unwrap()).collect());
    assert!(
        end > period_ns * 35 / 100 && end < period_ns,
        "chain end {end}"
    );
    // The measured period is the nominal one (absolute deadlines, no drift).
    let per = median(
        p.cycles
            .iter()
            .filter_map(|c| c.measured_period_ns)
            .collect(),
    );
    assert!(per.abs_diff(period_ns) < period_ns / 100, "period {per}");
    // Files: CSV rows per cycle and per client per cycle; curves per client.
    let mut r = csv::Reader::from_path(out.join("cycles.csv")).unwrap();
    assert_eq!(r.records().count(), p.cycles.len());
    let mut r = csv::Reader::from_path(out.join("clients.csv")).unwrap();
    let n_rows: usize = p.cycles.iter().map(|c| c.nodes.len()).sum();
    assert_eq!(r.records().count(), n_rows);
    for f in [
        "driver_period",
        "driver_end",
        "clients_end",
        "scheduling_latency",
        "duration",
        "cpu",
        "cdf_period",
        "cdf_end",
    ] {
        let png = std::fs::read(out.join(format!("{f}.png"))).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{f}.png");
        let svg = std::fs::read_to_string(out.join(format!("{f}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{f}.svg");
        if ["clients_end", "duration", "scheduling_latency", "cpu"].contains(&f) {
            assert!(
                svg.contains(">\nlight\n<") && svg.contains(">\nheavy\n<"),
                "{f} legend"
            );
            assert!(
                svg.matches("<polyline").count() >= 2,
                "{f}: a curve per client"
            );
        }
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("clients_end.png") && html.contains("heavy"));
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(summary.lines().any(|l| l.starts_with("heavy,duration,us,")));
    drop((a, b));
    let _ = std::fs::remove_dir_all(&out);
}

/// A ring of half a second, asked for ten: the export says how much was
/// overwritten; a server without profiling says so clearly.
#[test]
fn a_full_ring_overwrites_the_oldest_and_says_so() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["--profile-seconds", "0.5", "-d", "dummy", "-p", "256"]);
    let _t = srv.tool("osc", &["sine"]);
    std::thread::sleep(Duration::from_millis(1500));
    let out = tmpdir("profile-small");
    let o = srv.cli(&[
        "profile",
        "-q",
        "--out",
        out.to_str().unwrap(),
        "--last",
        "10",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("older cycle(s) had already been overwritten"),
        "{stderr}"
    );
    let p = load_profile(&out);
    let cap = (0.5f64 * 48000.0 / 256.0).ceil() as usize;
    assert!(
        p.cycles.len() <= cap && p.cycles.len() + 2 >= cap,
        "{}",
        p.cycles.len()
    );
    assert!(p.overwritten > 0);
    assert!(std::fs::read_to_string(out.join("index.html"))
        .unwrap()
        .contains("already been overwritten"));
    let _ = std::fs::remove_dir_all(&out);

    let off = Srv::start(&["--profile-seconds", "0", "-d", "dummy", "-p", "256"]);
    let o = off.cli(&["profile", "--out", out.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("profiling is off"), "{e}");
    let o = off.cli(&["load", "profiler"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("profiling is off"));
}

/// `resound load profiler -c -p -e`: the in-process client's ports carry, in
/// cycle c, the measures of cycle c-1 as fractions of the period (as in
/// "Timing measurements in JACK2"), consistent with the records; ports follow clients coming and going;
/// `resound unload` removes it; unknown built-ins and non-internal clients
/// are refused with clear errors.
#[test]
fn profiler_client_ports_carry_the_records() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-S", "-d", "dummy", "-r", "48000", "-p", "512"]);
    let busy = srv.tool("busy", &["load", "--busy", "20"]);
    let o = srv.cli(&["load", "profiler", "-c", "-p", "-e"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let st = srv.status();
    let prof = st.clients.iter().find(|c| c.name == "profiler").unwrap();
    assert!(prof.internal && prof.active, "{prof:?}");
    let srv_pid = srv.pid();
    assert_eq!(prof.pid, srv_pid, "runs inside the server process");
    let ports = String::from_utf8_lossy(&srv.cli(&["lsp"]).stdout).to_string();
    for p in [
        "profiler:cpu_load",
        "profiler:driver_period",
        "profiler:driver_end_time",
        "profiler:busy:scheduling",
        "profiler:busy:duration",
    ] {
        assert!(ports.lines().any(|l| l == p), "{p} in\n{ports}");
    }
    // A recorder in this process: (cycle, duration, cpu_load, end_time) per cycle.
    let rec = srv.client("rec");
    let ins: Vec<_> = ["dur", "load", "end", "sched"]
        .iter()
        .map(|n| {
            rec.register_port(n, PortKind::Audio, PortFlags::INPUT)
                .unwrap()
        })
        .collect();
    let (mut tx, mut rx) = rtrb::RingBuffer::<(u64, [f32; 4])>::new(4096);
    rec.activate(move |ps: &mut resound_client::ProcessScope| {
        let v = [0, 1, 2, 3].map(|i| ins[i].audio_in(ps)[0]);
        let _ = tx.push((ps.cycle(), v));
        Control::Continue
    })
    .unwrap();
    for (s, d) in [
        ("profiler:busy:duration", "rec:dur"),
        ("profiler:cpu_load", "rec:load"),
        ("profiler:driver_end_time", "rec:end"),
        ("profiler:busy:scheduling", "rec:sched"),
    ] {
        rec.connect(s, d).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500));
    // Read the records straight from the ring, as `resound profile` does.
    let (ctl, seg) =
        resound_client::ControlSession::connect_profile(Some(&srv.name), Some(&srv.dir)).unwrap();
    let p = resound_cli::profile::read_profile(&ctl, seg.ring(), Some(1.4)).unwrap();
    let busy_uuid = p.clients.iter().find(|c| c.name == "busy").unwrap().uuid;
    let mut checked = 0;
    while let Ok((cycle, v)) = rx.pop() {
        let Some(c) = p.cycles.iter().find(|c| c.cycle + 1 == cycle) else {
            continue;
        };
        let Some(n) = c.nodes.iter().find(|n| n.uuid == busy_uuid && !n.late) else {
            continue;
        };
        // The profiler's ports carry fractions of the period, clamped to 1
        // (a node can run longer than a period and still not be late when
        // the driver itself woke late).
        let f = |ns: u64| (ns as f32 / c.period_ns as f32).min(1.0);
        let close = |a: f32, b: f32| (a - b).abs() < 1e-4;
        assert!(
            close(v[0], f(n.duration_ns().unwrap())),
            "cycle {cycle}: duration {v:?} vs {n:?}"
        );
        assert!(
            close(v[3], f(n.scheduling_ns().unwrap())),
            "cycle {cycle}: scheduling {v:?} vs {n:?}"
        );
        assert!(
            close(v[2], f(c.driver_end_ns)),
            "cycle {cycle}: end {v:?} vs {c:?}"
        );
        if !c.xrun {
            assert!(
                close(v[1], f(c.graph_end_ns()).min(1.0)),
                "cycle {cycle}: load {v:?}"
            );
        }
        // The busy client burns 20 % of the period in CPU time; its wall
        // duration is at least that, and more when the machine preempts it
        // (the exact comparison with the records above is the real check).
        assert!(v[0] > 0.15, "a 20 % load: {v:?}");
        checked += 1;
    }
    eprintln!("{checked} cycles of the profiler's ports compared with the records");
    assert!(checked > 80, "only {checked} cycles compared");
    // Ports follow the graph: a new client gets its pair, a leaving one loses it.
    let t = srv.tool("late_comer", &["sine"]);
    wait_for(
        "late_comer's profiler ports",
        Duration::from_secs(5),
        || {
            String::from_utf8_lossy(&srv.cli(&["lsp"]).stdout)
                .contains("profiler:late_comer:duration")
        },
    );
    drop(t);
    drop(busy);
    wait_for("busy's ports to go", Duration::from_secs(5), || {
        let l = String::from_utf8_lossy(&srv.cli(&["lsp"]).stdout).to_string();
        !l.contains("profiler:busy:") && !l.contains("profiler:late_comer:")
    });
    // Errors.
    let o = srv.cli(&["load", "nosuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("built in: profiler"));
    let o = srv.cli(&["unload", "rec"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an internal client"));
    let o = srv.cli(&["load", "profiler", "-x"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown option -x"));
    // Unload.
    let o = srv.cli(&["unload", "profiler"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!srv.status().clients.iter().any(|c| c.name == "profiler"));
    rec.close().unwrap();
}

/// A minimal HTTP/1.0 GET: (status code, body).
fn http_get(url: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let code = r.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = r.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (code, body)
}

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// `resound monitor`: the live page, loaded in Debian's headless Chromium,
/// shows the running graph's clients, has received frames with live cycle
/// counts and rendered its four charts; a screenshot is taken.
#[test]
fn monitor_page_renders_in_headless_chromium() {
    let _serial = common::one_at_a_time();
    let Some(chromium) = chromium() else {
        skip_missing_tool(
            "monitor_page_renders_in_headless_chromium",
            "chromium is not installed (scripts/setup.sh installs it)",
        );
        return;
    };
    let srv = Srv::start(&["-d", "dummy", "-p", "256"]);
    let _a = srv.tool("synth", &["sine"]);
    let _b = srv.tool("reverb", &["load", "--busy", "5", "-c", "synth:out=@:in"]);
    let mut mon = std::process::Command::new(RESOUND)
        .env("RESOUND_DIR", &srv.dir)
        .args(["-s", &srv.name, "monitor", "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(mon.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    let profile = tmpdir("chromium");
    let run = |extra: &[&str]| {
        std::process::Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--virtual-time-budget=4000",
                "--window-size=1320,1100",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
            .expect("run chromium")
    };
    let dom = run(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout).to_string();
    let attr = |k: &str| -> String {
        let key = format!("{k}=\"");
        let i = dom.find(&key).unwrap_or_else(|| panic!("no {k} in {dom}")) + key.len();
        dom[i..].split('"').next().unwrap().to_string()
    };
    let frames: u64 = attr("data-frames").parse().unwrap();
    let cycles: u64 = attr("data-cycles").parse().unwrap();
    assert!(frames >= 2, "the page polled: {frames} frames");
    assert!(cycles > 50, "live cycle count: {cycles}");
    let clients = attr("data-clients");
    assert!(
        clients.contains("synth") && clients.contains("reverb"),
        "{clients}"
    );
    assert!(dom.contains("data-client=\"reverb\""), "client table");
    for chart in [
        "Driver period",
        "End of the chain",
        "Client durations",
        "Reservation budgets",
    ] {
        assert!(dom.contains(chart), "{chart} chart rendered");
    }
    assert!(dom.matches("<svg").count() >= 4);
    let shot = profile.join("monitor.png");
    let o = run(&[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(&png[1..4], b"PNG");
    assert!(
        png.len() > 20_000,
        "a screenshot with content ({} bytes)",
        png.len()
    );
    // The data endpoint answers JSON with the clients; unknown paths get a 404.
    let (code, body) = http_get(&url, "/api/frame");
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v["clients"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "synth"));
    assert_eq!(http_get(&url, "/nope").0, 404);
    let _ = mon.kill();
    let _ = mon.wait();
    let _ = std::fs::remove_dir_all(&profile);
}
