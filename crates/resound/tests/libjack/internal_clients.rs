//! Internal clients: the distribution's objects and a C one, loaded and
//! unloaded, their `jack_finish` after their process thread stopped.

use crate::common::*;
use crate::programs::*;
use resound_client::prelude::*;
use std::time::Duration;

/// Waits up to 5 s until client `name` has run ten cycles past cycle `after`.
fn wait_for_cycles(srv: &Srv, name: &str, after: u64) {
    wait_for(
        &format!("{name} to run cycles"),
        Duration::from_secs(5),
        || {
            srv.status()
                .clients
                .iter()
                .any(|c| c.name == name && c.last_cycle > after + 10)
        },
    );
}

/// An internal client object's `jack_finish` runs after its client is
/// closed, as on jackd: its process callback never runs again once
/// `jack_finish` may have freed what it uses (the distribution's
/// inprocess.so frees its ports' struct there; calling it first crashed the
/// server now and then).
#[test]
fn internal_client_finish_runs_after_its_process_thread_stopped() {
    let _serial = one_at_a_time();
    let t = "finish-order";
    let (Some(load), Some(unload)) = (dist(t, "jack_load"), dist(t, "jack_unload")) else {
        return;
    };
    let Some(objects) = c_internal_object(t, "finish_order") else {
        return;
    };
    let mut srv = Srv::start_with_env(
        &["-d", "dummy", "-r", "48000", "-p", PERIOD],
        &[("RESOUND_INTERNAL_DIR", &objects.to_string_lossy())],
    );
    let report = srv.dir.join("finish-report.txt");
    let init = report.to_string_lossy().into_owned();
    let (code, out, err) = run_to_end(&srv, &load, &["-i", &init, "fo", "finish_order"], "");
    assert_eq!(code, 0, "{out}\n{err}");
    let c0 = srv.ctl().status().unwrap().cycles;
    wait_for_cycles(&srv, "fo", c0);
    let (code, out, err) = run_to_end(&srv, &unload, &["fo"], "");
    assert_eq!(code, 0, "{out}\n{err}");
    let got = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", srv.log()));
    let field = |k: &str| -> String {
        got.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} in {got:?}"))
            .to_string()
    };
    assert_eq!(
        field("arg="),
        "set",
        "jack_finish gets the process argument: {got}"
    );
    assert!(field("cycles=").parse::<u64>().unwrap() > 10, "{got}");
    assert_eq!(
        field("after_finish="),
        "0",
        "process ran after jack_finish: {got}"
    );
    assert!(srv.alive(), "the server runs");
}

#[test]
fn distribution_jack_load_and_unload_internal_clients() {
    let _serial = one_at_a_time();
    let t = "dist-intclient";
    let (Some(load), Some(unload)) = (dist(t, "jack_load"), dist(t, "jack_unload")) else {
        return;
    };
    let srv = server();
    let (code, out, err) = run_to_end(&srv, &load, &["-i", "-c", "prof", "profiler"], "");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("client name = prof"), "{out}");
    let st = srv.status();
    let c = st
        .clients
        .iter()
        .find(|c| c.name == "prof")
        .expect("prof loaded");
    assert!(c.internal, "{c:?}");
    assert!(ports(&srv).iter().any(|p| p.name == "prof:cpu_load"));
    // jack_unload finds it by name (jack_internal_client_handle) and unloads it.
    let (code, out, err) = run_to_end(&srv, &unload, &["prof"], "");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("prof unloaded"), "{out}");
    assert!(!srv.status().clients.iter().any(|c| c.name == "prof"));
    // A real internal client object from the distribution (inprocess.so:
    // it connects itself to the physical ports and copies in to out), loaded
    // into the server process and run there, then unloaded.
    if internal_object_exists("inprocess") {
        let (code, out, err) = run_to_end(&srv, &load, &["-i", "", "inproc", "inprocess"], "");
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("client name = inproc"), "{out}");
        let st = srv.status();
        let c = st
            .clients
            .iter()
            .find(|c| c.name == "inproc")
            .expect("loaded");
        assert!(c.internal && c.active, "{c:?}");
        assert_eq!(c.pid, srv.pid(), "it runs in the server process");
        assert!(connected(&srv, "system:capture_1", "inproc:input"));
        assert!(connected(&srv, "inproc:output", "system:playback_1"));
        wait_for_cycles(&srv, "inproc", c.last_cycle);
        let (code, out, err) = run_to_end(&srv, &unload, &["inproc"], "");
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!srv.status().clients.iter().any(|c| c.name == "inproc"));
    } else {
        skip(
            "internal_object_inprocess",
            "inprocess.so missing (apt-get install jackd2)",
        );
    }
    // Objects are found by bare name only.
    let (code, _, _) = run_to_end(&srv, &load, &["x", "../jack/inprocess"], "");
    assert_ne!(code, 0);
    // An unknown built-in: JackFailure|JackLoadFailure; an unknown client: not found.
    let (code, out, err) = run_to_end(&srv, &load, &["x", "nosuch"], "");
    assert_ne!(code, 0);
    assert!(
        format!("{out}{err}").contains("status = 0x81"),
        "{out}\n{err}"
    );
    let (code, out, err) = run_to_end(&srv, &unload, &["nosuch"], "");
    assert_ne!(code, 0);
    assert!(format!("{out}{err}").contains("not found"), "{out}\n{err}");
    assert!(srv.status().clients.iter().all(|c| !c.internal));
}

/// Whether the distribution ships JACK internal client object `name`.
fn internal_object_exists(name: &str) -> bool {
    resound_server::internal_object::find(name).is_some()
}
