//! Port latencies (JACK's latency API), recomputed by the server after every
//! graph change.
//!
//! Each port has a capture range (frames since the signal entered the graph
//! from a capture port) and a playback range (frames until it leaves through
//! a playback port). The driver's ports carry the device's latencies. Then:
//!
//! * an input port's capture range is the union (min of minima, max of
//!   maxima) of the capture ranges of the outputs connected to it;
//!   an output port's playback range likewise from the inputs it feeds;
//! * a client *without* a latency callback gets JACK's default rule: all its
//!   outputs take the union of its inputs' capture ranges, all its inputs the
//!   union of its outputs' playback ranges (`{0,0}` when there are none);
//! * a client *with* a latency callback sets those ranges itself
//!   (jack_port_set_latency_range in its callback, which the server then
//!   propagates further) after the [`resound_protocol::wire::Notification::Latency`]
//!   notifications that follow a change.
//!
//! Unions never grow along a loop, so iterating to a fixpoint terminates.
//! Control thread only.

use resound_graph::{Graph, DRIVER};
use resound_shm::port_flags;

const EMPTY: (u32, u32) = (u32::MAX, 0);

fn union(a: (u32, u32), b: (u32, u32)) -> (u32, u32) {
    (a.0.min(b.0), a.1.max(b.1))
}

fn finish(r: (u32, u32)) -> (u32, u32) {
    if r.0 == u32::MAX {
        (0, 0)
    } else {
        r
    }
}

/// Recomputes every port's latency ranges in `g`. `custom[slot]` is true for
/// clients with a latency callback. `capture`/`playback` are the driver's
/// device latencies in frames. Returns whether anything changed.
pub fn propagate(g: &mut Graph, custom: &[bool], capture: u32, playback: u32) -> bool {
    let ports: Vec<(u32, u32, bool)> = g
        .ports()
        .map(|(i, p)| (i, p.owner, p.flags & port_flags::IS_INPUT != 0))
        .collect();
    let conns: Vec<(u32, u32)> = g.connections().iter().map(|c| (c.src, c.dst)).collect();
    let n = g.caps().max_ports as usize;
    let mut changed = false;
    let set = |g: &mut Graph, port: u32, lo: usize, r: (u32, u32)| {
        if let Some(p) = g.port_mut(port) {
            if (p.latency[lo], p.latency[lo + 1]) != r {
                p.latency[lo] = r.0;
                p.latency[lo + 1] = r.1;
                return true;
            }
        }
        false
    };
    for &(i, owner, input) in &ports {
        if owner == DRIVER {
            changed |= if input {
                set(g, i, 2, (playback, playback))
            } else {
                set(g, i, 0, (capture, capture))
            };
        }
    }
    let clients: Vec<u32> = g
        .clients()
        .map(|(s, _)| s)
        .filter(|&s| s != DRIVER)
        .collect();
    for _ in 0..clients.len() + 2 {
        let mut any = false;
        let lat = |g: &Graph, p: u32| g.port(p).map_or([0; 4], |p| p.latency);
        // Along connections.
        let mut cap_in = vec![EMPTY; n];
        let mut play_out = vec![EMPTY; n];
        for &(s, d) in &conns {
            let (ls, ld) = (lat(g, s), lat(g, d));
            cap_in[d as usize] = union(cap_in[d as usize], (ls[0], ls[1]));
            play_out[s as usize] = union(play_out[s as usize], (ld[2], ld[3]));
        }
        for &(i, _, input) in &ports {
            any |= if input {
                set(g, i, 0, finish(cap_in[i as usize]))
            } else {
                set(g, i, 2, finish(play_out[i as usize]))
            };
        }
        // Through clients without a latency callback.
        for &c in &clients {
            if custom.get(c as usize).copied().unwrap_or(false) {
                continue;
            }
            let (mut cap, mut play) = (EMPTY, EMPTY);
            for &(i, owner, input) in &ports {
                if owner != c {
                    continue;
                }
                let l = lat(g, i);
                if input {
                    cap = union(cap, (l[0], l[1]));
                } else {
                    play = union(play, (l[2], l[3]));
                }
            }
            for &(i, owner, input) in &ports {
                if owner == c {
                    any |= if input {
                        set(g, i, 2, finish(play))
                    } else {
                        set(g, i, 0, finish(cap))
                    };
                }
            }
        }
        changed |= any;
        if !any {
            break;
        }
    }
    if changed {
        g.touch();
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use resound_shm::limits::AUDIO_TYPE;
    use resound_shm::Capacities;

    #[test]
    fn default_rule_and_custom_clients() {
        let caps = Capacities {
            max_clients: 8,
            max_ports: 16,
            max_connections: 16,
            max_frames: 4096,
        };
        let mut g = Graph::new(caps, "system", 1);
        let phys = port_flags::IS_PHYSICAL;
        let cap = g
            .register_port(
                DRIVER,
                "capture_1",
                AUDIO_TYPE,
                port_flags::IS_OUTPUT | phys,
            )
            .unwrap();
        let play = g
            .register_port(
                DRIVER,
                "playback_1",
                AUDIO_TYPE,
                port_flags::IS_INPUT | phys,
            )
            .unwrap();
        let (a, _) = g.add_client("a", true, 1).unwrap();
        let (b, _) = g.add_client("b", true, 1).unwrap();
        let ai = g
            .register_port(a, "in", AUDIO_TYPE, port_flags::IS_INPUT)
            .unwrap();
        let ao = g
            .register_port(a, "out", AUDIO_TYPE, port_flags::IS_OUTPUT)
            .unwrap();
        let bi = g
            .register_port(b, "in", AUDIO_TYPE, port_flags::IS_INPUT)
            .unwrap();
        let bo = g
            .register_port(b, "out", AUDIO_TYPE, port_flags::IS_OUTPUT)
            .unwrap();
        g.connect("system:capture_1", "a:in").unwrap();
        g.connect("a:out", "b:in").unwrap();
        g.connect("b:out", "system:playback_1").unwrap();
        let mut custom = vec![false; 8];
        assert!(propagate(&mut g, &custom, 128, 256));
        let l = |g: &Graph, p| g.port(p).unwrap().latency;
        assert_eq!(l(&g, cap)[..2], [128, 128]);
        assert_eq!(
            l(&g, bo)[..2],
            [128, 128],
            "capture latency flows down the chain"
        );
        assert_eq!(
            l(&g, ai)[2..],
            [256, 256],
            "playback latency flows up the chain"
        );
        assert_eq!(l(&g, play)[..2], [128, 128]);
        assert!(!propagate(&mut g, &custom, 128, 256), "a fixpoint");
        // b adds 64 frames itself (as its latency callback would).
        custom[b as usize] = true;
        g.port_mut(bo).unwrap().latency[..2].copy_from_slice(&[192, 192]);
        g.port_mut(bi).unwrap().latency[2..].copy_from_slice(&[320, 320]);
        propagate(&mut g, &custom, 128, 256);
        assert_eq!(l(&g, play)[..2], [192, 192]);
        assert_eq!(l(&g, ao)[2..], [320, 320]);
        assert_eq!(l(&g, ai)[2..], [320, 320]);
    }
}
