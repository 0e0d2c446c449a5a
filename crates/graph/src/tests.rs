use super::*;
use proptest::prelude::*;
use resound_shm::limits::{AUDIO_TYPE, MIDI_TYPE};
use resound_shm::{client_state, port_flags, Capacities};

const IN: u32 = port_flags::IS_INPUT;
const OUT: u32 = port_flags::IS_OUTPUT;

fn caps() -> Capacities {
    Capacities {
        max_clients: 16,
        max_ports: 64,
        max_connections: 128,
        max_frames: 256,
    }
}

fn graph() -> Graph {
    let mut g = Graph::new(caps(), "system", 1);
    for i in 1..=2 {
        g.register_port(
            DRIVER,
            &format!("capture_{i}"),
            AUDIO_TYPE,
            OUT | port_flags::IS_PHYSICAL,
        )
        .unwrap();
        g.register_port(
            DRIVER,
            &format!("playback_{i}"),
            AUDIO_TYPE,
            IN | port_flags::IS_PHYSICAL,
        )
        .unwrap();
    }
    g
}

fn client(g: &mut Graph, name: &str) -> u32 {
    let (s, _) = g.add_client(name, true, 100).unwrap();
    g.register_port(s, "in", AUDIO_TYPE, IN).unwrap();
    g.register_port(s, "out", AUDIO_TYPE, OUT).unwrap();
    g.set_active(s, true).unwrap();
    s
}

/// Runs one cycle of the compiled activation sequentially, the way the
/// driver and client threads do it (a node runs once every upstream node
/// released the cycle), and returns the order nodes ran in. Panics if the
/// driver's upstream nodes (the graph's ends) never all release it.
fn simulate(c: &Compiled, cycle: u32) -> Vec<u32> {
    let n = c.clients.len();
    let mut done = vec![cycle - 1; n];
    done[DRIVER as usize] = cycle;
    let mut ran = Vec::new();
    loop {
        let ready = (1..n as u32).find(|&s| {
            c.clients[s as usize].state == client_state::ACTIVE
                && done[s as usize] != cycle
                && c.upstream(s).iter().all(|&u| done[u as usize] == cycle)
        });
        let Some(u) = ready else { break };
        ran.push(u);
        done[u as usize] = cycle;
    }
    assert!(
        c.upstream(DRIVER)
            .iter()
            .all(|&u| done[u as usize] == cycle),
        "graph never signalled its end to the driver"
    );
    ran
}

#[test]
fn chain_runs_in_order_and_ends_at_driver() {
    let mut g = graph();
    let a = client(&mut g, "a");
    let b = client(&mut g, "b");
    let c = client(&mut g, "c");
    g.connect("system:capture_1", "a:in").unwrap();
    g.connect("a:out", "b:in").unwrap();
    g.connect("b:out", "c:in").unwrap();
    g.connect("c:out", "system:playback_1").unwrap();
    let comp = g.compile();
    assert_eq!(simulate(&comp, 1), vec![a, b, c]);
    assert_eq!(comp.order, vec![DRIVER, a, b, c]);
    assert_eq!(
        comp.clients[DRIVER as usize].up_count, 1,
        "only c ends the graph"
    );
    assert!(comp.feedback.is_empty());
}

/// The critical path over a compiled chain counts the driver's work before
/// the first client, ignores the sink's edge back to the driver, and a
/// feedback connection adds no work to either side.
#[test]
fn critical_path_of_a_compiled_chain() {
    let mut g = graph();
    let a = client(&mut g, "a");
    let b = client(&mut g, "b");
    let c = client(&mut g, "c");
    g.connect("system:capture_1", "a:in").unwrap();
    g.connect("a:out", "b:in").unwrap();
    g.connect("b:out", "c:in").unwrap();
    g.connect("c:out", "system:playback_1").unwrap();
    g.connect("c:out", "a:in").unwrap();
    let comp = g.compile();
    assert_eq!(comp.feedback.len(), 1);
    let mut work = vec![0u64; comp.clients.len()];
    for (slot, w) in [(DRIVER, 50), (a, 100), (b, 200), (c, 300)] {
        work[slot as usize] = w;
    }
    let cp = CriticalPath::of(&comp, &work);
    assert_eq!([a, b, c].map(|s| cp.head(s)), [50, 150, 350]);
    assert_eq!([a, b, c].map(|s| cp.tail(s)), [500, 300, 0]);
    assert_eq!(
        [a, b, c].map(|s| cp.deadline(s, 1000, work[s as usize])),
        [450, 550, 650]
    );
}

#[test]
fn parallel_branches_join() {
    let mut g = graph();
    let a = client(&mut g, "a");
    let b = client(&mut g, "b");
    let m = client(&mut g, "m");
    g.connect("a:out", "m:in").unwrap();
    g.connect("b:out", "m:in").unwrap();
    let comp = g.compile();
    assert_eq!(comp.clients[m as usize].up_count, 2);
    let ran = simulate(&comp, 3);
    assert_eq!(ran.last(), Some(&m));
    assert!(ran.contains(&a) && ran.contains(&b));
    // m's input lists both sources.
    let pin = g.port_by_name("m:in").unwrap() as usize;
    assert_eq!(comp.ports[pin].src_count, 2);
}

#[test]
fn loop_is_closed_by_the_last_connection_and_reopened_when_broken() {
    let mut g = graph();
    let a = client(&mut g, "a");
    let b = client(&mut g, "b");
    g.connect("a:out", "b:in").unwrap();
    g.connect("b:out", "a:in").unwrap();
    let comp = g.compile();
    assert_eq!(comp.feedback.len(), 1);
    assert_eq!(g.port_name(comp.feedback[0].src).unwrap(), "b:out");
    assert_eq!(simulate(&comp, 1), vec![a, b]);
    g.disconnect("a:out", "b:in").unwrap();
    let comp = g.compile();
    assert!(
        comp.feedback.is_empty(),
        "with the loop broken, b->a is a normal dependency"
    );
    assert_eq!(simulate(&comp, 2), vec![b, a]);
}

#[test]
fn self_connection_is_feedback() {
    let mut g = graph();
    let a = client(&mut g, "a");
    g.connect("a:out", "a:in").unwrap();
    let comp = g.compile();
    assert_eq!(comp.feedback.len(), 1);
    assert_eq!(simulate(&comp, 1), vec![a]);
}

#[test]
fn bad_requests_get_clear_errors() {
    let mut g = graph();
    client(&mut g, "a");
    client(&mut g, "b");
    let e = g.connect("a:out", "b:out").unwrap_err();
    assert_eq!(e.kind, GraphErrorKind::Incompatible);
    assert!(e.message.contains("both outputs"), "{e}");
    assert_eq!(
        g.connect("a:in", "b:in").unwrap_err().kind,
        GraphErrorKind::Incompatible
    );
    assert_eq!(
        g.connect("nope:out", "b:in").unwrap_err().kind,
        GraphErrorKind::NoSuchPort
    );
    assert_eq!(
        g.connect("garbage", "b:in").unwrap_err().kind,
        GraphErrorKind::NoSuchPort
    );
    g.register_port(1, "midi_out", MIDI_TYPE, OUT).unwrap();
    let e = g.connect("a:midi_out", "b:in").unwrap_err();
    assert!(e.message.contains("8 bit raw midi"), "{e}");
    g.connect("a:out", "b:in").unwrap();
    assert_eq!(
        g.connect("b:in", "a:out").unwrap_err().kind,
        GraphErrorKind::Exists,
        "reverse order is the same pair"
    );
    assert_eq!(
        g.disconnect("a:out", "system:playback_1").unwrap_err().kind,
        GraphErrorKind::NotConnected
    );
    assert_eq!(
        g.add_client("a", true, 1).unwrap_err().kind,
        GraphErrorKind::NameTaken
    );
    assert_eq!(g.add_client("a", false, 1).unwrap().1, "a-01");
    assert_eq!(
        g.add_client(&"x".repeat(64), false, 1).unwrap_err().kind,
        GraphErrorKind::InvalidName
    );
    assert!(g.add_client(&"x".repeat(63), false, 1).is_ok());
    assert_eq!(
        g.add_client("a:b", false, 1).unwrap_err().kind,
        GraphErrorKind::InvalidName
    );
    // An empty name is taken as it is, then numbered like any other (jackd).
    assert_eq!(g.add_client("", false, 1).unwrap().1, "");
    assert_eq!(g.add_client("", false, 1).unwrap().1, "-01");
    assert_eq!(
        g.add_client("", true, 1).unwrap_err().kind,
        GraphErrorKind::NameTaken
    );
    let long = "p".repeat(319 - 2);
    assert!(
        g.register_port(1, &long, AUDIO_TYPE, OUT).is_ok(),
        "a:<317 bytes> is 319 bytes"
    );
    assert_eq!(
        g.register_port(1, &format!("{long}q"), AUDIO_TYPE, OUT)
            .unwrap_err()
            .kind,
        GraphErrorKind::InvalidName
    );
    assert_eq!(
        g.register_port(1, "in", AUDIO_TYPE, IN).unwrap_err().kind,
        GraphErrorKind::NameTaken
    );
    assert_eq!(
        g.register_port(1, "z", "video", IN).unwrap_err().kind,
        GraphErrorKind::UnknownType
    );
    assert_eq!(
        g.register_port(1, "z", AUDIO_TYPE, IN | OUT)
            .unwrap_err()
            .kind,
        GraphErrorKind::InvalidName
    );
    assert_eq!(
        g.unregister_port(2, 0).unwrap_err().kind,
        GraphErrorKind::NotAllowed,
        "not b's port"
    );
}

#[test]
fn inactive_clients_are_not_scheduled() {
    let mut g = graph();
    let a = client(&mut g, "a");
    let b = client(&mut g, "b");
    g.connect("a:out", "b:in").unwrap();
    g.set_active(a, false).unwrap();
    let comp = g.compile();
    assert_eq!(simulate(&comp, 1), vec![b]);
    assert_eq!(comp.clients[a as usize].state, client_state::OPEN);
}

#[derive(Debug, Clone)]
enum Op {
    AddClient(u8),
    RemoveClient(u8),
    Activate(u8, bool),
    AddPort(u8, bool, bool),
    Connect(u8, u8),
    Disconnect(u8, u8),
    DisconnectAll(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u8>().prop_map(Op::AddClient),
        any::<u8>().prop_map(Op::RemoveClient),
        (any::<u8>(), any::<bool>()).prop_map(|(a, b)| Op::Activate(a, b)),
        (any::<u8>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c)| Op::AddPort(a, b, c)),
        (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Connect(a, b)),
        (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Disconnect(a, b)),
        any::<u8>().prop_map(Op::DisconnectAll),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any sequence of operations, valid or not, keeps the model consistent
    /// and compiles to an activation where every active client runs exactly
    /// once per cycle, after all its non-feedback upstream clients, and the
    /// driver sees the graph end exactly once.
    #[test]
    fn any_operation_sequence_keeps_the_graph_sound(ops in proptest::collection::vec(op(), 1..80)) {
        let mut g = graph();
        for (i, o) in ops.into_iter().enumerate() {
            let ports: Vec<String> = g.ports().map(|(s, _)| g.port_name(s).unwrap()).collect();
            let pick = |k: u8| ports[k as usize % ports.len()].clone();
            let slots: Vec<u32> = g.clients().map(|(s, _)| s).filter(|&s| s != DRIVER).collect();
            let pick_client = |k: u8| if slots.is_empty() { None } else { Some(slots[k as usize % slots.len()]) };
            match o {
                Op::AddClient(k) => { let _ = g.add_client(&format!("c{}", k % 8), false, 1); }
                Op::RemoveClient(k) => if let Some(s) = pick_client(k) { g.remove_client(s).unwrap(); },
                Op::Activate(k, on) => if let Some(s) = pick_client(k) { g.set_active(s, on).unwrap(); },
                Op::AddPort(k, input, midi) => if let Some(s) = pick_client(k) {
                    let t = if midi { MIDI_TYPE } else { AUDIO_TYPE };
                    let _ = g.register_port(s, &format!("p{i}"), t, if input { IN } else { OUT });
                },
                Op::Connect(a, b) => { let _ = g.connect(&pick(a), &pick(b)); }
                Op::Disconnect(a, b) => { let _ = g.disconnect(&pick(a), &pick(b)); }
                Op::DisconnectAll(a) => { let _ = g.disconnect_all(&pick(a)); }
            }
            // Model invariants.
            for c in g.connections() {
                let (s, d) = (g.port(c.src).unwrap(), g.port(c.dst).unwrap());
                prop_assert!(!s.is_input() && d.is_input());
                prop_assert_eq!(s.ptype, d.ptype);
                prop_assert!(g.client(s.owner).is_some() && g.client(d.owner).is_some());
            }
            let mut names: Vec<String> = g.ports().map(|(s, _)| g.port_name(s).unwrap()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            prop_assert_eq!(names.len(), n, "port names are unique");
            // Activation invariants.
            let comp = g.compile();
            let ran = simulate(&comp, i as u32 + 1);
            let active: Vec<u32> = g.clients().filter(|(s, c)| *s != DRIVER && c.state == ClientState::Active).map(|(s, _)| s).collect();
            let mut sorted = ran.clone();
            sorted.sort();
            prop_assert_eq!(sorted, active);
            for c in g.connections() {
                if comp.feedback.contains(c) { continue; }
                let (u, v) = (g.port(c.src).unwrap().owner, g.port(c.dst).unwrap().owner);
                if let (Some(iu), Some(iv)) = (ran.iter().position(|&x| x == u), ran.iter().position(|&x| x == v)) {
                    prop_assert!(iu < iv, "{} must run before {}", u, v);
                }
            }
            prop_assert!(comp.sources.len() <= caps().max_connections as usize);
            prop_assert!(comp.edges.len() <= caps().max_connections as usize + 2 * caps().max_clients as usize);
        }
    }
}
