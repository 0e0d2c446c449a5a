//! Views set up the way tests, fuzz targets and benches need them: one
//! process that is the server and plays every client itself. Not for a
//! real server (it owns every node segment); hidden from the docs.

use crate::sync::switch;
use crate::{client_state, empty_client, Capacities, ClientEntry, TableHeader, View};

/// Capacities small enough for unit tests: 8 node slots (the driver's
/// and 7 clients'), 8 ports and connections, 256 frames.
pub const SMALL_CAPS: Capacities = Capacities {
    max_clients: 8,
    max_ports: 8,
    max_connections: 8,
    max_frames: 256,
};

/// A sync view at 48 kHz and `frames` per period with `caps`, a node
/// segment of its own for every client slot, and a published table in
/// which the clients of slots `1..=active` are active (no ports, no
/// edges). Panics when the segments cannot be made, as a test would.
/// Non-real-time.
pub fn view_with_active_clients(caps: Capacities, frames: u32, active: u32) -> View {
    assert!(active < caps.max_clients, "slot 0 is the driver's");
    let v = View::create(caps, 48_000, frames, true, 0).expect("control segment");
    v.own_nodes(1..caps.max_clients).expect("node segments");
    let states = vec![client_state::ACTIVE; active as usize];
    // SAFETY: the view was created just above, in this function, and no
    // other thread has it: this is its single graph writer.
    unsafe { publish_client_states(&v, &states) };
    v
}

/// As [`view_with_active_clients`], the active clients in a chain: slot 1
/// fed by the driver, each next slot by the one before it. Non-real-time.
pub fn view_with_chain(caps: Capacities, frames: u32, active: u32) -> View {
    let v = view_with_active_clients(caps, frames, active);
    let clients: Vec<ClientEntry> = (1..=active)
        .map(|slot| ClientEntry {
            state: client_state::ACTIVE,
            up_start: slot - 1,
            up_count: 1,
            order: slot - 1,
            ..empty_client()
        })
        .collect();
    let edges: Vec<u32> = (0..active).collect();
    let order: Vec<u32> = (1..=active).collect();
    // SAFETY: the view was created just above, in this call, and no other
    // thread has it: this is its single graph writer.
    unsafe { publish(&v, &clients, &edges, &order) };
    v
}

/// Publishes a table in which client slot `i + 1` is in `states[i]` (a
/// [`client_state`] value) and the clients end there (no ports, no edges),
/// and makes it the current one. Non-real-time.
///
/// # Safety
/// The caller must be the single graph writer of `v` (as for
/// [`View::table_mut`]): a test's or fuzz target's own view, which no
/// server writes.
pub unsafe fn publish_client_states(v: &View, states: &[u32]) {
    let clients: Vec<ClientEntry> = states
        .iter()
        .map(|&state| ClientEntry {
            state,
            ..empty_client()
        })
        .collect();
    // SAFETY: the caller is the single graph writer (this function's
    // contract, which is publish's).
    unsafe { publish(v, &clients, &[], &[]) };
}

/// Publishes a table in which client slot `i + 1` is `clients[i]`, with
/// these edges and activation order (no ports), and makes it the current
/// one. Non-real-time.
///
/// # Safety
/// As [`publish_client_states`]: the caller is the single graph writer of
/// `v`.
unsafe fn publish(v: &View, clients: &[ClientEntry], edges: &[u32], order: &[u32]) {
    let h = v.header();
    let version = v.table(v.current_index()).version() + 1;
    let next = switch::begin_write(&h.switch);
    {
        // SAFETY: the caller is the single graph writer (this function's
        // contract), and `next` is the inactive table begin_write handed
        // out, which no reader looks at before end_write + try_switch below.
        let mut t = unsafe { v.table_mut(next) };
        for (slot, c) in (1u32..).zip(clients) {
            t.set_client(slot, c);
        }
        t.set_arrays(&[], edges, order);
        t.set_header(TableHeader {
            version,
            client_hw: clients.len() as u32 + 1,
            port_hw: 0,
            n_sources: 0,
            n_edges: edges.len() as u32,
            n_order: order.len() as u32,
            _pad: 0,
        });
    }
    switch::end_write(&h.switch);
    switch::try_switch(&h.switch);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_active_clients_are_in_the_current_table_and_own_their_records() {
        let v = view_with_active_clients(SMALL_CAPS, 128, 2);
        let t = v.table(v.current_index());
        assert_eq!(t.client_hw(), 3);
        assert_eq!(t.client_state(1), client_state::ACTIVE);
        assert_eq!(t.client_state(2), client_state::ACTIVE);
        assert!(v.record(3).is_some(), "every slot has its node segment");
    }

    #[test]
    fn a_chain_feeds_each_client_from_the_one_before() {
        let v = view_with_chain(SMALL_CAPS, 128, 3);
        let t = v.table(v.current_index());
        assert_eq!(t.client_hw(), 4);
        let ups: Vec<Vec<u32>> = (1..=3).map(|s| t.ups(s).collect()).collect();
        assert_eq!(ups, [vec![0], vec![1], vec![2]]);
        assert_eq!(t.client_state(3), client_state::ACTIVE);
    }
}
