//! Target `graph_requests`: a sequence of graph requests, as clients make
//! them (names, types and flags are the clients'), applied to the server's
//! [`Graph`] through the same methods the server's request handlers call;
//! after every step the model is compiled, published into a real control
//! segment ([`Compiled::write_next_table`], the server's one way to shared
//! memory) and one cycle's activation is simulated from that table.
//!
//! Checks after every step: no panic; every connection joins two live ports,
//! output to input, of one type, once; every port's owner exists; names are
//! unique and within JACK's limits; the capacities (clients, ports,
//! connections, edges) are never exceeded; a port is found by its full name;
//! and the published activation graph completes: started by the driver,
//! every active client runs exactly once and the driver is signalled back.

use arbitrary::{Arbitrary, Unstructured};
use resound_graph::{Compiled, Graph, DRIVER};
use resound_shm::limits::{AUDIO_TYPE, CLIENT_NAME_MAX, MIDI_TYPE, PORT_NAME_MAX};
use resound_shm::sync::switch;
use resound_shm::{client_state, port_flags, Capacities, Layout, View};
use std::collections::HashSet;

/// Small capacities, so the fuzzer reaches every "server is full" path.
pub const CAPS: Capacities = Capacities {
    max_clients: 6,
    max_ports: 12,
    max_connections: 10,
    max_frames: 256,
};

/// Most requests one input makes.
const MAX_OPS: usize = 256;

/// A name as a client sends it: its own string, or one already in the
/// graph (to reach the "taken" and lookup paths).
#[derive(Arbitrary, Debug)]
pub enum Name {
    /// Anything.
    Raw(String),
    /// The name of the n-th live client.
    Client(u8),
    /// The short name of the n-th live port.
    PortShort(u8),
}

/// A port named in a request.
#[derive(Arbitrary, Debug)]
pub enum PortRef {
    /// Anything.
    Raw(String),
    /// The full name of the n-th live port.
    Full(u8),
    /// The first alias of the n-th live port that has one.
    Alias(u8),
}

/// A client or port picked by a request: the n-th live one, or any slot.
#[derive(Arbitrary, Debug)]
pub enum Pick {
    /// The n-th live one (modulo how many there are).
    Live(u8),
    /// A raw slot number.
    Slot(u32),
}

/// One graph request.
#[derive(Arbitrary, Debug)]
pub enum Op {
    /// jack_client_open.
    AddClient { name: Name, exact: bool, pid: u32 },
    /// jack_client_close or eviction.
    RemoveClient(Pick),
    /// jack_activate / jack_deactivate.
    SetActive(Pick, bool),
    /// jack_port_register: a known type or any type name.
    RegisterPort {
        owner: Pick,
        short: Name,
        midi: bool,
        other_type: Option<String>,
        flags: u32,
    },
    /// jack_port_unregister.
    UnregisterPort { owner: Pick, port: Pick },
    /// jack_port_rename.
    RenamePort {
        owner: Pick,
        port: Pick,
        short: Name,
    },
    /// jack_connect.
    Connect(PortRef, PortRef),
    /// jack_disconnect.
    Disconnect(PortRef, PortRef),
    /// jack_port_disconnect.
    DisconnectAll(PortRef),
    /// jack_port_set_alias.
    SetAlias(Pick, Name),
    /// jack_port_unset_alias.
    UnsetAlias(Pick, Name),
}

/// Applies the requests decoded from `data`, checking after each.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut g = Graph::new(CAPS, "system", 1);
    // The driver's own ports, as the server registers them.
    g.register_port(DRIVER, "capture_1", AUDIO_TYPE, port_flags::IS_OUTPUT)
        .unwrap();
    g.register_port(DRIVER, "playback_1", AUDIO_TYPE, port_flags::IS_INPUT)
        .unwrap();
    VIEW.with(|view| {
        // Arbitrary yields default values once the input is used up: stop there.
        for _ in 0..MAX_OPS {
            let (true, Ok(op)) = (!u.is_empty(), Op::arbitrary(&mut u)) else {
                break;
            };
            apply(&mut g, op);
            check_model(&g);
            check_compiled(&g, &g.compile(), view);
        }
    });
}

thread_local! {
    /// One control segment per thread, reused by every input.
    static VIEW: View = View::create(CAPS, 48_000, 256, true, 0).expect("control segment");
}

fn live_clients(g: &Graph) -> Vec<u32> {
    g.clients().map(|(s, _)| s).collect()
}

fn live_ports(g: &Graph) -> Vec<u32> {
    g.ports().map(|(s, _)| s).collect()
}

fn pick(p: &Pick, live: &[u32]) -> u32 {
    match *p {
        Pick::Live(n) if !live.is_empty() => live[n as usize % live.len()],
        Pick::Live(n) => n as u32,
        Pick::Slot(s) => s,
    }
}

fn name(g: &Graph, n: Name) -> String {
    let nth = |v: Vec<String>, i: u8| {
        if v.is_empty() {
            String::new()
        } else {
            v[i as usize % v.len()].clone()
        }
    };
    match n {
        Name::Raw(s) => s,
        Name::Client(i) => nth(g.clients().map(|(_, c)| c.name.clone()).collect(), i),
        Name::PortShort(i) => nth(g.ports().map(|(_, p)| p.short.clone()).collect(), i),
    }
}

fn port_ref(g: &Graph, r: PortRef) -> String {
    let ports = live_ports(g);
    match r {
        PortRef::Raw(s) => s,
        PortRef::Full(i) if !ports.is_empty() => g
            .port_name(ports[i as usize % ports.len()])
            .unwrap_or_default(),
        PortRef::Alias(i) => {
            let aliases: Vec<String> = g.ports().flat_map(|(_, p)| p.aliases.clone()).collect();
            aliases
                .get(i as usize % aliases.len().max(1))
                .cloned()
                .unwrap_or_default()
        }
        PortRef::Full(_) => String::new(),
    }
}

/// Applies one request; refusals are normal (the server answers them).
fn apply(g: &mut Graph, op: Op) {
    let (clients, ports) = (live_clients(g), live_ports(g));
    match op {
        Op::AddClient {
            name: n,
            exact,
            pid,
        } => {
            let n = name(g, n);
            if let Ok((slot, actual)) = g.add_client(&n, exact, pid) {
                assert_eq!(g.client_by_name(&actual), Some(slot));
                assert!(!exact || actual == n, "exact name changed");
            }
        }
        Op::RemoveClient(p) => {
            let slot = pick(&p, &clients);
            let existed = g.client(slot).is_some() && slot != DRIVER;
            assert_eq!(g.remove_client(slot).is_ok(), existed);
            assert!(g.ports().all(|(_, p)| p.owner != slot) || !existed);
        }
        Op::SetActive(p, on) => {
            let _ = g.set_active(pick(&p, &clients), on);
        }
        Op::RegisterPort {
            owner,
            short,
            midi,
            other_type,
            flags,
        } => {
            let owner = pick(&owner, &clients);
            let short = name(g, short);
            let t = other_type.unwrap_or_else(|| if midi { MIDI_TYPE } else { AUDIO_TYPE }.into());
            if let Ok(slot) = g.register_port(owner, &short, &t, flags) {
                let full = g.port_name(slot).unwrap();
                assert_eq!(g.port_by_name(&full), Some(slot), "{full:?} not found");
            }
        }
        Op::UnregisterPort { owner, port } => {
            let _ = g.unregister_port(pick(&owner, &clients), pick(&port, &ports));
        }
        Op::RenamePort { owner, port, short } => {
            let short = name(g, short);
            let _ = g.rename_port(pick(&owner, &clients), pick(&port, &ports), &short);
        }
        Op::Connect(a, b) => {
            let (a, b) = (port_ref(g, a), port_ref(g, b));
            if g.connect(&a, &b).is_ok() {
                assert!(g.connect(&a, &b).is_err(), "connected twice");
            }
        }
        Op::Disconnect(a, b) => {
            let (a, b) = (port_ref(g, a), port_ref(g, b));
            let _ = g.disconnect(&a, &b);
        }
        Op::DisconnectAll(a) => {
            let a = port_ref(g, a);
            if g.disconnect_all(&a).is_ok() {
                let p = g.port_by_name(&a).unwrap();
                assert!(g.connections_of(p).is_empty());
            }
        }
        Op::SetAlias(p, n) => {
            let alias = name(g, n);
            let _ = g.set_alias(pick(&p, &ports), &alias);
        }
        Op::UnsetAlias(p, n) => {
            let alias = name(g, n);
            let _ = g.unset_alias(pick(&p, &ports), &alias);
        }
    }
}

/// The model's invariants.
fn check_model(g: &Graph) {
    let caps = g.caps();
    assert!(g.client(DRIVER).is_some(), "the driver is gone");
    assert!(g.clients().count() <= caps.max_clients as usize);
    assert!(g.ports().count() <= caps.max_ports as usize);
    assert!(g.connections().len() <= caps.max_connections as usize);
    let mut names = HashSet::new();
    for (_, c) in g.clients() {
        assert!(c.name.len() <= CLIENT_NAME_MAX && !c.name.contains(':'));
        assert!(
            names.insert(c.name.clone()),
            "two clients named {:?}",
            c.name
        );
    }
    let mut full_names = HashSet::new();
    for (slot, p) in g.ports() {
        assert!(g.client(p.owner).is_some(), "port {slot} has no owner");
        let full = g.port_name(slot).unwrap();
        assert!(full.len() <= PORT_NAME_MAX, "{full:?} is too long");
        assert!(full_names.insert(full.clone()), "two ports named {full:?}");
        assert_eq!(g.port_by_name(&full), Some(slot), "{full:?} not found");
        assert!(p.aliases.len() <= 2);
        let dir = p.flags & (port_flags::IS_INPUT | port_flags::IS_OUTPUT);
        assert!(dir == port_flags::IS_INPUT || dir == port_flags::IS_OUTPUT);
    }
    let mut seen = HashSet::new();
    for c in g.connections() {
        let (s, d) = (
            g.port(c.src).expect("live source"),
            g.port(c.dst).expect("live destination"),
        );
        assert!(
            !s.is_input() && d.is_input(),
            "connection {c:?} is not output to input"
        );
        assert_eq!(s.ptype, d.ptype, "connection {c:?} joins two types");
        assert!(seen.insert((c.src, c.dst)), "connection {c:?} twice");
    }
}

/// Publishes `compiled` into `view` and runs one cycle's activation from
/// the shared table, as the driver and the clients' threads do.
fn check_compiled(g: &Graph, compiled: &Compiled, view: &View) {
    let layout = Layout::new(g.caps()).unwrap();
    assert!(
        compiled.edges.len() <= layout.max_edges,
        "edges over capacity"
    );
    assert!(compiled.sources.len() <= g.caps().max_connections as usize);
    assert!(compiled.clients.len() <= g.caps().max_clients as usize);
    assert!(compiled.ports.len() <= g.caps().max_ports as usize);
    // SAFETY: this thread's own view, and nobody else writes its tables.
    unsafe { compiled.write_next_table(view) };
    let (_, switched) = switch::try_switch(&view.header().switch);
    assert!(switched, "the new table was not taken");
    let t = view.table(view.current_index());
    assert_eq!(
        t.version(),
        compiled.version,
        "the table is not the new graph"
    );
    let active: Vec<u32> = (1..t.client_hw())
        .filter(|&s| t.client_state(s) == client_state::ACTIVE)
        .collect();
    let expect: Vec<u32> = g
        .clients()
        .filter(|(s, c)| *s != DRIVER && c.state == resound_graph::ClientState::Active)
        .map(|(s, _)| s)
        .collect();
    assert_eq!(active, expect, "active clients in the table");
    let hw = t.client_hw() as usize;
    // The driver starts the cycle; a client runs once every upstream node
    // (its range in the table's edges) has run.
    let mut ran = vec![0u32; hw];
    ran[DRIVER as usize] = 1;
    let ups = |s: u32| -> Vec<usize> {
        (0..t.up_count(s))
            .map(|i| t.up_at(s, i).expect("edge in range") as usize)
            .inspect(|&u| assert!(u < hw, "edge from slot {u} past the table"))
            .collect()
    };
    while let Some(&s) = active
        .iter()
        .find(|&&s| ran[s as usize] == 0 && ups(s).iter().all(|&u| ran[u] == 1))
    {
        ran[s as usize] += 1;
    }
    for &s in &active {
        assert_eq!(
            ran[s as usize], 1,
            "client {s} ran {} times",
            ran[s as usize]
        );
    }
    assert!(
        ups(DRIVER).iter().all(|&u| ran[u] == 1),
        "the cycle never completes"
    );
}
