//! A Rust program on the crates.io `jack` crate, run unchanged.

use crate::common::*;
use crate::programs::*;
use resound_client::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A Rust program on the crates.io `jack` crate, run unchanged through
/// resound's libjack: audio and MIDI pass-through in a chain, notifications,
/// transport. The test re-runs this test binary as that program.
#[test]
fn rust_jack_crate_client_runs_unchanged() {
    let _serial = one_at_a_time();
    if std::env::var_os("RESOUND_JACKRS_CHILD").is_some() {
        jack_crate_child();
        return;
    }
    let Some(chain) = c_program("jack-crate", "chain") else {
        return;
    };
    let srv = server();
    let exe = std::env::current_exe().unwrap();
    let mut child = Bg::start(
        &srv,
        "env",
        &[
            "RESOUND_JACKRS_CHILD=1",
            exe.to_str().unwrap(),
            "--exact",
            "jack_crate::rust_jack_crate_client_runs_unchanged",
            "--nocapture",
            "--test-threads=1",
        ],
    );
    child.wait_for("RS READY", |l| l.starts_with("RS READY"));
    let ready = child
        .output()
        .into_iter()
        .find(|l| l.starts_with("RS READY"))
        .unwrap();
    assert_eq!(field(&ready, "rate"), 48000, "{ready}");
    assert_eq!(field(&ready, "frames"), 256, "{ready}");
    let gen = srv.tool("gen", &["counter"]);
    let check = srv.tool("chk", &["check", "--latency", "0"]);
    let chain = chain.to_str().unwrap();
    let mut g = Bg::start(&srv, chain, &["midigen", "g1", "1"]);
    let mut mc = Bg::start(&srv, chain, &["midicheck", "mchk", "1"]);
    g.wait_for("READY", |l| l == "READY");
    mc.wait_for("READY", |l| l == "READY");
    let ctl = srv.ctl();
    for (s, d) in [
        ("gen:out", "rsjack:in"),
        ("rsjack:out", "chk:in"),
        ("gen:out", "chk:ref"),
        ("g1:midi_out", "rsjack:midi_in"),
        ("rsjack:midi_out", "mchk:midi_in"),
    ] {
        ctl.connect_ports(s, d).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    mc.signal(libc::SIGUSR1);
    std::thread::sleep(Duration::from_secs(2));
    let r = check.stop();
    assert_eq!(n(&r, "bad_unexplained"), 0, "{r}");
    assert!(n(&r, "ok") > 100, "{r}");
    let m = mc.stop();
    let sum = m.iter().find(|l| l.starts_with("SUMMARY")).unwrap().clone();
    let (bad, xruns) = (field(&sum, "bad"), field(&sum, "xruns"));
    assert!(field(&sum, "ok") > 100, "{sum}");
    assert!(bad == 0 || bad <= 4 * xruns, "{sum}");
    child.send("stop");
    let out = child.wait();
    let fin = out
        .iter()
        .find(|l| l.starts_with("RS FINAL"))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(field(fin, "cycles") > 100, "{fin}");
    assert!(
        field(fin, "port_regs") >= 4,
        "port registrations seen: {fin}"
    );
    assert!(field(fin, "connects") >= 4, "connections seen: {fin}");
    assert_eq!(
        field(fin, "located"),
        48000,
        "transport locate through the jack crate: {fin}"
    );
    drop((g, gen));
}

/// The `jack` crate program (runs in the child process, with resound's
/// libjack.so.0 first in LD_LIBRARY_PATH).
fn jack_crate_child() {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    struct Notes {
        port_regs: Arc<AtomicU32>,
        connects: Arc<AtomicU32>,
    }
    impl jack::NotificationHandler for Notes {
        fn port_registration(&mut self, _: &jack::Client, _: jack::PortId, reg: bool) {
            if reg {
                self.port_regs.fetch_add(1, Ordering::Relaxed);
            }
        }
        fn ports_connected(&mut self, _: &jack::Client, _: jack::PortId, _: jack::PortId, c: bool) {
            if c {
                self.connects.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let (client, _status) =
        jack::Client::new("rsjack", jack::ClientOptions::NO_START_SERVER).expect("jack client");
    let ain = client
        .register_port("in", jack::AudioIn::default())
        .unwrap();
    let mut aout = client
        .register_port("out", jack::AudioOut::default())
        .unwrap();
    let min = client
        .register_port("midi_in", jack::MidiIn::default())
        .unwrap();
    let mut mout = client
        .register_port("midi_out", jack::MidiOut::default())
        .unwrap();
    // On stderr: the test harness writes its own progress on stdout.
    eprintln!(
        "RS READY rate={} frames={}",
        client.sample_rate(),
        client.buffer_size()
    );
    let cycles = Arc::new(AtomicU64::new(0));
    let cyc = cycles.clone();
    let process = jack::contrib::ClosureProcessHandler::new(
        move |_: &jack::Client, ps: &jack::ProcessScope| -> jack::Control {
            aout.as_mut_slice(ps).copy_from_slice(ain.as_slice(ps));
            let mut w = mout.writer(ps);
            for e in min.iter(ps) {
                let _ = w.write(&e);
            }
            cyc.fetch_add(1, Ordering::Relaxed);
            jack::Control::Continue
        },
    );
    let notes = Notes {
        port_regs: Arc::new(AtomicU32::new(0)),
        connects: Arc::new(AtomicU32::new(0)),
    };
    let (pr, cn) = (notes.port_regs.clone(), notes.connects.clone());
    let active = client.activate_async(notes, process).expect("activate");
    // Transport through the crate: locate, then read back.
    let tr = active.as_client().transport();
    tr.locate(48000).unwrap();
    let mut located = 0;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(10));
        let q = tr.query().unwrap();
        if q.pos.frame() == 48000 {
            located = 48000;
            break;
        }
    }
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    eprintln!(
        "RS FINAL cycles={} port_regs={} connects={} located={located}",
        cycles.load(Ordering::Relaxed),
        pr.load(Ordering::Relaxed),
        cn.load(Ordering::Relaxed)
    );
    active.deactivate().unwrap();
    std::process::exit(0);
}
