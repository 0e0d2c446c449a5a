//! The distribution's JACK programs (jackd2's tools and example clients)
//! run unchanged, and `resound run`'s environment.

use crate::common::*;
use crate::programs::*;
use resound_client::prelude::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn distribution_clients_lsp_connect_simple_client_metro() {
    let _serial = one_at_a_time();
    let t = "dist-clients";
    let (Some(lsp), Some(connect), Some(disconnect), Some(simple), Some(metro)) = (
        dist(t, "jack_lsp"),
        dist(t, "jack_connect"),
        dist(t, "jack_disconnect"),
        dist(t, "jack_simple_client"),
        dist(t, "jack_metro"),
    ) else {
        return;
    };
    let srv = server();
    let (code, out, _) = run_to_end(&srv, &lsp, &["-c", "-l", "-p", "-t"], "");
    assert_eq!(code, 0);
    for want in [
        "system:capture_1",
        "system:playback_2",
        "32 bit float mono audio",
        "properties: output,physical,terminal,",
        "port capture latency = [ 256 256 ]",
    ] {
        assert!(out.contains(want), "jack_lsp output lacks {want:?}:\n{out}");
    }
    // Aliases: jack_alias sets one, jack_lsp -A shows it, jack_alias -u removes it.
    if let Some(alias) = dist(t, "jack_alias") {
        let (code, _, err) = run_to_end(&srv, &alias, &["system:capture_1", "mic:left"], "");
        assert_eq!(code, 0, "{err}");
        let (_, out, _) = run_to_end(&srv, &lsp, &["-A"], "");
        assert!(out.contains("system:capture_1\n   mic:left"), "{out}");
        run_to_end(&srv, &alias, &["-u", "system:capture_1", "mic:left"], "");
        let (_, out, _) = run_to_end(&srv, &lsp, &["-A"], "");
        assert!(!out.contains("mic:left"), "{out}");
    }
    let mut simple = Bg::start(&srv, &simple, &[]);
    wait_for(
        "jack_simple_client's ports connected",
        Duration::from_secs(10),
        || connected(&srv, "jack_simple_client:output1", "system:playback_1"),
    );
    let (_, out, _) = run_to_end(&srv, &lsp, &["-c"], "");
    assert!(
        out.contains("jack_simple_client:output1\n   system:playback_1"),
        "{out}"
    );
    let mut m = Bg::start(&srv, &metro, &["-b", "120"]);
    wait_for("metro port", Duration::from_secs(10), || {
        ports(&srv).iter().any(|p| p.name == "metro:120_bpm")
    });
    let (code, _, err) = run_to_end(&srv, &connect, &["metro:120_bpm", "system:playback_2"], "");
    assert_eq!(code, 0, "{err}");
    assert!(connected(&srv, "metro:120_bpm", "system:playback_2"));
    let (code, _, err) = run_to_end(
        &srv,
        &disconnect,
        &["metro:120_bpm", "system:playback_2"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(!connected(&srv, "metro:120_bpm", "system:playback_2"));
    // An unknown port: jack_connect fails, the server is fine.
    let (code, _, _) = run_to_end(&srv, &connect, &["metro:nope", "system:playback_2"], "");
    assert_ne!(code, 0);
    // The metronome and the sine keep producing sound.
    let st = srv.status();
    for c in ["metro", "jack_simple_client"] {
        let s = st.clients.iter().find(|x| x.name == c).unwrap();
        assert!(s.active && s.last_cycle > 0, "{c}: {s:?}");
    }
    simple.signal(libc::SIGINT);
    simple.wait();
    m.signal(libc::SIGINT);
    m.wait();
}

/// A distribution JACK program stopped (SIGSTOP) while active: after the
/// client timeout the server evicts it from the cycle (JACK's zombie
/// state) and keeps running; when the program continues, its shutdown
/// callback tells it (jack_simple_client then exits, as under jackd).
#[test]
fn a_stopped_distribution_program_is_evicted_and_told() {
    let _serial = one_at_a_time();
    let Some(simple) = dist("dist-zombie", "jack_simple_client") else {
        return;
    };
    let srv = Srv::start(&["-t", "300", "-d", "dummy", "-r", "48000", "-p", PERIOD]);
    let mut simple = Bg::start(&srv, &simple, &[]);
    wait_for(
        "jack_simple_client's ports connected",
        Duration::from_secs(10),
        || connected(&srv, "jack_simple_client:output1", "system:playback_1"),
    );
    simple.signal(libc::SIGSTOP);
    let zombie = |srv: &Srv| {
        srv.status()
            .clients
            .iter()
            .any(|c| c.name == "jack_simple_client" && c.zombie && !c.active)
    };
    wait_for(
        "the stopped program to be evicted",
        Duration::from_secs(10),
        || zombie(&srv),
    );
    let a = srv.status().cycles;
    std::thread::sleep(Duration::from_millis(500));
    let per_half_second = 48000 / PERIOD.parse::<u64>().unwrap() / 2;
    let ran = srv.status().cycles - a;
    assert!(ran > per_half_second * 8 / 10, "cycles go on: {ran}");
    simple.signal(libc::SIGCONT);
    simple.wait();
    let code = simple.child.try_wait().unwrap().and_then(|s| s.code());
    assert_eq!(
        code,
        Some(1),
        "jack_simple_client's shutdown callback exits 1"
    );
    assert!(
        srv.log().contains("evicted from the cycle"),
        "{}",
        srv.log()
    );
}

#[test]
fn distribution_midiseq_to_midi_dump() {
    let _serial = one_at_a_time();
    let t = "dist-midi";
    let (Some(seq), Some(dump), Some(connect)) = (
        dist(t, "jack_midiseq"),
        dist(t, "jack_midi_dump"),
        dist(t, "jack_connect"),
    ) else {
        return;
    };
    let srv = server();
    let mut s = Bg::start(
        &srv,
        &seq,
        &["seq", "24000", "0", "60", "8000", "12000", "63", "8000"],
    );
    let mut d = Bg::start(&srv, "stdbuf", &["-oL", &dump, "dump"]);
    wait_for("both MIDI ports", Duration::from_secs(10), || {
        let p = ports(&srv);
        p.iter().any(|p| p.name == "seq:out") && p.iter().any(|p| p.name == "dump:input")
    });
    let (code, _, err) = run_to_end(&srv, &connect, &["seq:out", "dump:input"], "");
    assert_eq!(code, 0, "{err}");
    d.wait_for("note on 60", |l| {
        l.contains("note on") && l.contains("pitch  60")
    });
    d.wait_for("note off 63", |l| {
        l.contains("note off") && l.contains("pitch  63")
    });
    s.signal(libc::SIGINT);
    s.wait();
    d.signal(libc::SIGINT);
    let out = d.wait();
    let ons = out.iter().filter(|l| l.contains("note on")).count();
    assert!(ons >= 2, "{out:?}");
}

#[test]
fn distribution_bufsize_cpu_load_wait_freewheel_property() {
    let _serial = one_at_a_time();
    let t = "dist-control";
    let (Some(bufsize), Some(cpu), Some(wait_p), Some(fw), Some(prop), Some(simple)) = (
        dist(t, "jack_bufsize"),
        dist(t, "jack_cpu_load"),
        dist(t, "jack_wait"),
        dist(t, "jack_freewheel"),
        dist(t, "jack_property"),
        dist(t, "jack_simple_client"),
    ) else {
        return;
    };
    let mut srv = server();
    // jack_bufsize reads and changes the period.
    let (_, out, _) = run_to_end(&srv, &bufsize, &[], "");
    assert_eq!(out.trim(), "256");
    run_to_end(&srv, &bufsize, &["512"], "");
    assert_eq!(srv.status().buffer_frames, 512);
    let (_, out, _) = run_to_end(&srv, &bufsize, &[], "");
    assert_eq!(out.trim(), "512");
    // jack_cpu_load prints the DSP load.
    let mut sc = Bg::start(&srv, &simple, &[]);
    let mut c = Bg::start(&srv, "stdbuf", &["-oL", &cpu]);
    c.wait_for("a DSP load line", |l| l.starts_with("jack DSP load"));
    c.signal(libc::SIGINT);
    c.wait();
    // jack_wait sees the server.
    let (code, out, _) = run_to_end(&srv, &wait_p, &["-c"], "");
    assert_eq!((code, out.trim()), (0, "running"));
    // jack_freewheel: the server runs without its clock (faster than real time).
    let client = srv.client("observer");
    assert!(!client.freewheeling());
    run_to_end(&srv, &fw, &["y"], "");
    assert!(client.freewheeling());
    let (c0, t0) = (client.view().timer().frame_time, Instant::now());
    std::thread::sleep(Duration::from_millis(500));
    let frames = client.view().timer().frame_time - c0;
    let real = t0.elapsed().as_secs_f64() * 48000.0;
    eprintln!("freewheel: {frames} frames in {real:.0} frames of wall time");
    assert!(
        frames as f64 > real * 1.2,
        "not faster than real time: {frames} vs {real:.0}"
    );
    run_to_end(&srv, &fw, &["n"], "");
    assert!(!client.freewheeling());
    // jack_property sets, reads back and deletes metadata.
    let (code, _, err) = run_to_end(
        &srv,
        &prop,
        &[
            "-p",
            "-s",
            "jack_simple_client:output1",
            "http://jackaudio.org/metadata/pretty-name",
            "Left",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run_to_end(
        &srv,
        &prop,
        &[
            "-p",
            "-l",
            "jack_simple_client:output1",
            "http://jackaudio.org/metadata/pretty-name",
        ],
        "",
    );
    assert_eq!(out.trim(), "Left");
    let uuid = client
        .snapshot()
        .port("jack_simple_client:output1")
        .map(|p| p.id)
        .and_then(|id| client.view().table(client.view().current_index()).port(id))
        .map(|e| e.uuid)
        .unwrap();
    let p = client
        .metadata()
        .get(uuid, "http://jackaudio.org/metadata/pretty-name")
        .unwrap();
    assert_eq!(p.map(|p| p.value), Some("Left".to_string()));
    let (code, _, _) = run_to_end(
        &srv,
        &prop,
        &[
            "-p",
            "-d",
            "jack_simple_client:output1",
            "http://jackaudio.org/metadata/pretty-name",
        ],
        "",
    );
    assert_eq!(code, 0);
    assert!(client.metadata().get_all(uuid).unwrap().is_empty());
    sc.signal(libc::SIGINT);
    sc.wait();
    drop(client);
    // jack_wait notices the server is gone.
    srv.stop();
    let (code, out, _) = run_to_end(&srv, &wait_p, &["-c"], "");
    assert!(code != 0 || out.contains("not running"), "{code} {out}");
}

#[test]
fn resound_run_sets_up_the_environment() {
    let _serial = one_at_a_time();
    let srv = server();
    let (code, out, _) = run_to_end(
        &srv,
        "sh",
        &["-c", "echo \"$LD_LIBRARY_PATH|$JACK_DEFAULT_SERVER\""],
        "",
    );
    assert_eq!(code, 0);
    let (path, name) = out.trim().split_once('|').unwrap();
    let first = path.split(':').next().unwrap();
    assert!(Path::new(first).join("libjack.so.0").exists(), "{path}");
    assert_eq!(name, srv.name);
    let out = Command::new(RESOUND)
        .args(["run", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run"));
}
