//! Bad input from clients, notifications, the command line and server life cycle.

mod common;
use common::*;
use resound_client::prelude::*;
use resound_client::{Client, Code, Event, OpenOptions, PortFlags, PortKind};
use resound_protocol::wire::{
    self, Envelope, Hello, HelloKind, Reply, Request, ServerMsg, Welcome,
};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::channel;
use std::time::Duration;

fn graph_keeps_running(srv: &Srv, check: Tool) {
    std::thread::sleep(Duration::from_millis(600));
    let r = check.stop();
    assert_eq!(n(&r, "bad_unexplained"), 0, "{r}");
    assert!(
        n(&r, "ok") > 50,
        "the other clients kept producing exact audio: {r}"
    );
    assert!(srv.status().cycles > 100);
}

fn running_pair(srv: &Srv) -> (Tool, Tool) {
    let gen = srv.tool("gen", &["counter"]);
    let check = srv.tool("check", &["check"]);
    let ctl = srv.ctl();
    ctl.connect_ports("gen:out", "check:in").unwrap();
    ctl.connect_ports("gen:out", "check:ref").unwrap();
    (gen, check)
}

#[test]
fn bad_requests_get_clear_errors_and_change_nothing() {
    let _serial = common::one_at_a_time();
    let mut srv = Srv::start(&["-d", "dummy", "-p", "256"]);
    let a = srv.client("a");
    a.register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    a.register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    a.register_port("midi_in", PortKind::Midi, PortFlags::INPUT)
        .unwrap();
    let cases: Vec<(Result<(), resound_client::Error>, Code, &str)> = vec![
        (
            a.connect("nobody:out", "a:in"),
            Code::NoSuchPort,
            "no port named \"nobody:out\"",
        ),
        (
            a.connect("a:out", "system:capture_1"),
            Code::Incompatible,
            "both outputs",
        ),
        (
            a.connect("system:playback_1", "a:in"),
            Code::Incompatible,
            "both inputs",
        ),
        (
            a.connect("a:out", "a:midi_in"),
            Code::Incompatible,
            "cannot connect 32 bit float mono audio port",
        ),
        (
            a.disconnect("a:out", "system:playback_1"),
            Code::NotConnected,
            "not connected",
        ),
        (
            a.register_port("out", PortKind::Audio, PortFlags::OUTPUT)
                .map(|_| ()),
            Code::NameTaken,
            "already exists",
        ),
        (
            a.register_port(&"x".repeat(318), PortKind::Audio, PortFlags::OUTPUT)
                .map(|_| ()),
            Code::InvalidName,
            "the limit is 319",
        ),
        (
            a.register_port(
                "both",
                PortKind::Audio,
                PortFlags::INPUT | PortFlags::OUTPUT,
            )
            .map(|_| ()),
            Code::InvalidName,
            "exactly one",
        ),
        (
            a.register_port("v", PortKind::Audio, PortFlags(0))
                .map(|_| ()),
            Code::InvalidName,
            "exactly one",
        ),
        (
            a.register_port_raw("v", "video", 1).map(|_| ()),
            Code::UnknownType,
            "unknown port type",
        ),
    ];
    for (r, code, msg) in cases {
        let e = r.expect_err("must fail");
        assert_eq!(e.code(), Some(code), "{e}");
        assert!(e.to_string().contains(msg), "{e:?} should mention {msg:?}");
    }
    a.connect("a:out", "system:playback_1").unwrap();
    let e = a.connect("system:playback_1", "a:out").unwrap_err();
    assert_eq!(e.code(), Some(Code::Exists), "{e}");
    // Names: duplicate (exact), over-long, separator.
    let o = |name: &str, exact| {
        Client::open(
            name,
            OpenOptions {
                server: Some(srv.name.clone()),
                dir: Some(srv.dir.clone()),
                exact_name: exact,
            },
        )
    };
    assert_eq!(
        o("a", true).err().and_then(|e| e.code()),
        Some(Code::NameTaken)
    );
    assert_eq!(o("a", false).unwrap().name(), "a-01");
    let e = o(&"n".repeat(64), false).err().unwrap();
    assert!(e.to_string().contains("the limit is 63"), "{e}");
    assert_eq!(o(&"n".repeat(63), true).unwrap().name().len(), 63);
    assert_eq!(
        o("x:y", false).err().and_then(|e| e.code()),
        Some(Code::InvalidName)
    );
    // Nothing changed by the failures.
    let ports = srv.ctl().list_ports().unwrap();
    assert_eq!(ports.iter().filter(|p| p.name.starts_with("a:")).count(), 3);
    assert_eq!(
        ports
            .iter()
            .find(|p| p.name == "a:out")
            .unwrap()
            .connections,
        vec!["system:playback_1"]
    );
    // Wrong server name: a clear message.
    let e = Client::open(
        "z",
        OpenOptions {
            server: Some("nope".into()),
            dir: Some(srv.dir.clone()),
            exact_name: false,
        },
    )
    .err()
    .unwrap();
    assert!(
        e.to_string().contains("no resound server named \"nope\""),
        "{e}"
    );
    assert!(srv.alive());
}

#[test]
fn malformed_and_truncated_messages_drop_only_that_session() {
    let _serial = common::one_at_a_time();
    let mut srv = Srv::start(&["-S", "-d", "dummy", "-p", "256"]);
    let (_gen, check) = running_pair(&srv);
    let sock = srv.dir.join(format!("{}.sock", srv.name));
    // 1. Garbage instead of a hello: refused with a protocol error.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(&[5, 0, 0, 0, 0xff, 0xfe, 0xfd, 0xfc, 0xfb])
        .unwrap();
    let w: Welcome = wire::decode(&wire::read_frame(&mut s, 1 << 20).unwrap()).unwrap();
    assert!(
        matches!(w, Welcome::Refused(ref e) if e.code == Code::Protocol),
        "{w:?}"
    );
    // 2. Wrong protocol version: refused with a message saying so.
    let mut s = UnixStream::connect(&sock).unwrap();
    wire::write_frame(
        &mut s,
        &Hello {
            protocol: 999,
            kind: HelloKind::Control,
        },
    )
    .unwrap();
    let w: Welcome = wire::decode(&wire::read_frame(&mut s, 1 << 20).unwrap()).unwrap();
    assert!(
        matches!(w, Welcome::Refused(ref e) if e.code == Code::Version && e.message.contains("999")),
        "{w:?}"
    );
    // 3. A real client handshake, then a malformed request: an error reply, session kept.
    let s = UnixStream::connect(&sock).unwrap();
    let hello = Hello {
        protocol: wire::PROTOCOL_VERSION,
        kind: HelloKind::Client {
            name: "raw".into(),
            exact_name: true,
        },
    };
    wire::write_frame(&mut &s, &hello).unwrap();
    let (p, fds) = wire::recv_frame_with_fds(&s, 1 << 20).unwrap();
    assert!(matches!(
        wire::decode::<Welcome>(&p).unwrap(),
        Welcome::Client { .. }
    ));
    assert_eq!(fds.len(), 2, "the control and the driver's node memfds");
    let mut rs = s.try_clone().unwrap();
    (&s).write_all(&[3, 0, 0, 0, 0x7f, 0x7f, 0x7f]).unwrap();
    let m: ServerMsg = wire::decode(&wire::read_frame(&mut rs, 1 << 24).unwrap()).unwrap();
    assert!(
        matches!(m, ServerMsg::Reply { seq: u32::MAX, reply: Reply::Err(ref e) } if e.code == Code::Protocol),
        "{m:?}"
    );
    wire::write_frame(
        &mut &s,
        &Envelope {
            seq: 7,
            req: Request::Status,
        },
    )
    .unwrap();
    let m: ServerMsg = loop {
        let m = wire::decode(&wire::read_frame(&mut rs, 1 << 24).unwrap()).unwrap();
        if matches!(m, ServerMsg::Reply { .. }) {
            break m;
        }
    };
    assert!(
        matches!(
            m,
            ServerMsg::Reply {
                seq: 7,
                reply: Reply::Status(_)
            }
        ),
        "session still usable"
    );
    // 4. An absurd frame length: that session is dropped.
    (&s).write_all(&u32::MAX.to_le_bytes()).unwrap();
    let mut buf = [0u8; 1 << 16];
    let mut closed = false;
    for _ in 0..100 {
        match rs.read(&mut buf) {
            Ok(0) | Err(_) => {
                closed = true;
                break;
            }
            Ok(_) => {}
        }
    }
    assert!(
        closed,
        "server closes a session that sent an over-long frame"
    );
    wait_for("removal of the raw client", Duration::from_secs(5), || {
        !srv.status().clients.iter().any(|c| c.name == "raw")
    });
    // 5. A truncated frame, then hang up.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(&[100, 0, 0, 0, 1, 2, 3]).unwrap();
    drop(s);
    // The server and the other clients are unaffected.
    graph_keeps_running(&srv, check);
    assert!(srv.alive());
}

#[test]
fn client_corrupting_its_shared_record_is_dropped_alone() {
    let _serial = common::one_at_a_time();
    let mut srv = Srv::start(&["-S", "-d", "dummy", "-p", "256"]);
    let (_gen, check) = running_pair(&srv);
    let _bad = srv.tool("scribbler", &["misbehave", "--mode", "scribble"]);
    srv.ctl()
        .connect_ports("gen:out", "system:playback_1")
        .unwrap();
    wait_for(
        "the server to drop the scribbler",
        Duration::from_secs(10),
        || !srv.status().clients.iter().any(|c| c.name == "scribbler"),
    );
    assert!(
        srv.log().contains("invalid status"),
        "the log says why: {}",
        srv.log()
    );
    graph_keeps_running(&srv, check);
    assert!(srv.alive());
}

#[test]
fn notifications_arrive_on_the_notification_thread() {
    let _serial = common::one_at_a_time();
    let mut srv = Srv::start(&["-d", "dummy", "-p", "256"]);
    let watcher = srv.client("watcher");
    let (tx, rx) = channel();
    watcher.set_notification_handler(move |_c: &Client, n: &Event| {
        let _ = tx.send((n.clone(), std::thread::current().name().map(String::from)));
    });
    let other = srv.client("other");
    let p = other
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    other
        .activate(|_ps: &mut resound_client::ProcessScope| resound_client::Control::Continue)
        .unwrap();
    other.connect("other:out", "system:playback_1").unwrap();
    other.disconnect("other:out", "system:playback_1").unwrap();
    other.unregister_port(p).unwrap();
    other.deactivate().unwrap();
    other.close().unwrap();
    let mut got = vec![];
    let want = |got: &Vec<Event>| {
        got.iter().any(|e| matches!(e, Event::ClientRegistration { registered: false, name } if name == "other"))
    };
    while !want(&got) {
        let (e, thread) = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("notification");
        assert_eq!(
            thread.as_deref(),
            Some("resound-notify"),
            "callbacks run on the notification thread"
        );
        got.push(e);
    }
    let has = |f: &dyn Fn(&Event) -> bool| got.iter().any(f);
    assert!(
        has(
            &|e| matches!(e, Event::ClientRegistration { name, registered: true } if name == "other")
        ),
        "{got:?}"
    );
    assert!(
        has(
            &|e| matches!(e, Event::PortRegistration { name, registered: true, .. } if name == "other:out")
        ),
        "{got:?}"
    );
    assert!(
        has(&|e| matches!(
            e,
            Event::PortConnect {
                connected: true,
                ..
            }
        )),
        "{got:?}"
    );
    assert!(
        has(&|e| matches!(
            e,
            Event::PortConnect {
                connected: false,
                ..
            }
        )),
        "{got:?}"
    );
    assert!(
        has(
            &|e| matches!(e, Event::PortRegistration { name, registered: false, .. } if name == "other:out")
        ),
        "{got:?}"
    );
    assert!(has(&|e| matches!(e, Event::GraphOrder)), "{got:?}");
    // Stopping the server notifies every client.
    assert!(srv.stop().success());
    let reason = loop {
        match rx
            .recv_timeout(Duration::from_secs(5))
            .expect("shutdown notification")
            .0
        {
            Event::Shutdown { reason } => break reason,
            _ => continue,
        }
    };
    assert!(reason.contains("SIGTERM"), "{reason}");
    assert!(
        watcher.server_gone() || {
            std::thread::sleep(Duration::from_millis(200));
            watcher.server_gone()
        }
    );
}

#[test]
fn cli_status_lsp_connect_disconnect() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&[
        "-S", "-d", "dummy", "-r", "44100", "-p", "128", "-C", "3", "-P", "2",
    ]);
    let _g = srv.tool("gen", &["sine"]);
    let out = srv.cli(&["connect", "gen:out", "system:playback_2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = srv.cli(&["connect", "gen:out", "nope:in"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no port named \"nope:in\""));
    let lsp = String::from_utf8(srv.cli(&["lsp", "-c", "-t", "-p"]).stdout).unwrap();
    for p in [
        "system:capture_1",
        "system:capture_3",
        "system:playback_2",
        "gen:out",
    ] {
        assert!(lsp.lines().any(|l| l == p), "{p} listed in:\n{lsp}");
    }
    assert!(lsp.contains("gen:out\n   system:playback_2\n"), "{lsp}");
    assert!(
        lsp.contains("32 bit float mono audio")
            && lsp.contains("properties: output,physical,terminal"),
        "{lsp}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let js = srv.cli(&["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
    assert_eq!(st["sample_rate"], 44100);
    assert_eq!(st["buffer_frames"], 128);
    assert_eq!(st["mode"], "sync");
    assert!(st["cycles"].as_u64().unwrap() > 10);
    let g = st["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "gen")
        .unwrap();
    assert!(g["active"].as_bool().unwrap());
    let (aw, fi, cpu) = (n(g, "awake_ns"), n(g, "finish_ns"), n(g, "cpu_ns"));
    // Offsets from the cycle's start, in order: not absolute times, and
    // not bounded by one period (a cycle run late, on a stalled machine,
    // ends after it; that is for the bench to measure, not this test).
    assert!(
        aw <= fi && fi < 100_000_000 && cpu > 0,
        "plausible last-cycle timings: {g}"
    );
    let text = String::from_utf8(srv.cli(&["status"]).stdout).unwrap();
    assert!(
        text.contains("sample rate   44100 Hz") && text.contains("gen"),
        "{text}"
    );
    let out = srv.cli(&["disconnect", "gen:out", "system:playback_2"]);
    assert!(out.status.success());
    let lsp = String::from_utf8(srv.cli(&["lsp", "-c", "gen"]).stdout).unwrap();
    assert_eq!(lsp, "gen:out\n");
}

#[test]
fn server_life_cycle_and_private_socket_directory() {
    let _serial = common::one_at_a_time();
    let mut srv = Srv::start(&["-d", "dummy", "-p", "256"]);
    let mode = std::fs::metadata(&srv.dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "socket directory must be private");
    // A second server under the same name is refused with a clear message.
    let out = std::process::Command::new(RESOUNDD)
        .env("RESOUND_DIR", &srv.dir)
        .args(["-n", &srv.name, "-d", "dummy"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Bad command lines get clear errors.
    let out = std::process::Command::new(RESOUNDD)
        .args(["-d", "firewire"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown driver \"firewire\"") && err.contains("dummy, alsa, file"),
        "{err}"
    );
    let out = std::process::Command::new(RESOUNDD).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no driver given"));
    // SIGTERM: clean exit, socket removed.
    let sock = srv.dir.join(format!("{}.sock", srv.name));
    assert!(sock.exists());
    assert!(srv.stop().success());
    assert!(!sock.exists(), "socket removed on exit");
}

/// The server's driver thread, found by its name.
fn driver_tid(pid: u32) -> Option<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .is_ok_and(|c| c.trim() == "resound-driver")
        })
        .and_then(|e| e.file_name().to_str()?.parse().ok())
}

/// Stops one thread of another process with ptrace (SEIZE + INTERRUPT);
/// false where ptrace is not permitted.
fn stop_thread(tid: i32) -> bool {
    // SAFETY: ptrace(2) and waitpid(2) with integer arguments and null data;
    // `tid` is a thread of a child process this test started.
    unsafe {
        if libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) != 0 {
            return false;
        }
        libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
        let mut st = 0;
        libc::waitpid(tid, &mut st, libc::__WALL);
    }
    true
}

/// Lets a thread stopped by [`stop_thread`] run again.
fn resume_thread(tid: i32) {
    // SAFETY: as in stop_thread; the thread is stopped under our ptrace.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0) };
}

/// A starved or stopped driver thread does not make requests wait for
/// minutes: a graph change that waits for the driver waits a bounded time,
/// connection changes do not wait at all, the server says why (its
/// housekeeping sees a table the driver does not take), and the changes
/// apply when it runs.
#[test]
fn requests_are_answered_in_bounded_time_while_the_driver_thread_is_stopped() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-p", "256"]);
    let Some(tid) = driver_tid(srv.pid()) else {
        panic!("no resound-driver thread in {}", srv.pid());
    };
    let ctl = srv.ctl();
    if !stop_thread(tid) {
        eprintln!("SKIP requests_are_answered_in_bounded_time: ptrace not permitted");
        return;
    }
    // Read once the thread is stopped: the cycles it ran before do not count.
    let before = srv.status().cycles;
    let t0 = std::time::Instant::now();
    let pairs = [
        ("system:capture_1", "system:playback_1"),
        ("system:capture_2", "system:playback_2"),
        ("system:capture_1", "system:playback_2"),
        ("system:capture_2", "system:playback_1"),
    ];
    let results: Vec<_> = pairs.iter().map(|(s, d)| ctl.connect_ports(s, d)).collect();
    let took = t0.elapsed();
    // Connection changes are answered without waiting for the driver; the
    // server notices the table it does not take and says so.
    wait_for("the log to say why", Duration::from_secs(5), || {
        srv.log().contains("did not take a graph change")
    });
    let stalled_cycles = srv.status().cycles;
    resume_thread(tid);
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    assert!(
        took < Duration::from_secs(5),
        "four connects took {took:?} with the driver stopped"
    );
    assert!(
        stalled_cycles <= before + 2,
        "the driver was really stopped"
    );
    wait_for("cycles to resume", Duration::from_secs(5), || {
        srv.status().cycles > stalled_cycles + 50
    });
    // The xrun is put down to the stalled driver, with how late it woke.
    let st = srv.status();
    assert!(
        st.recent_xruns
            .iter()
            .any(|x| x.cause == "driver" && x.driver_late_ns > 500_000_000),
        "{:?}",
        st.recent_xruns
    );
    let out = srv.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the machine stalled it"), "{text}");
    // The changes reached the driver: the ports are connected, and a new
    // change is taken at once again.
    let conns = ctl.list_ports().unwrap();
    let p1 = conns.iter().find(|p| p.name == "system:capture_1").unwrap();
    assert_eq!(p1.connections.len(), 2, "{p1:?}");
    ctl.disconnect_ports("system:capture_1", "system:playback_1")
        .unwrap();
    wait_for(
        "the driver to be back in the log",
        Duration::from_secs(5),
        || srv.log().contains("takes graph changes again"),
    );
}
