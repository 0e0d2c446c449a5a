//! Notifications: one message queued to every client session; a client
//! whose queue is full (it stopped reading) is dropped.
//!
//! Threads: session and housekeeping threads, under the state lock; never
//! blocks (the queues are bounded and written with `try_send`).

use super::{Server, Session, State};
use resound_graph::Connection;
use resound_protocol::wire::{Notification, ServerMsg};
use resound_shm::limits;
use std::sync::mpsc::TrySendError;
use tracing::warn;

impl Server {
    /// Queues `n` to every client session; drops the clients whose queue is full.
    pub(super) fn notify(st: &mut State, n: Notification) {
        let mut full = Vec::new();
        for (id, s) in &st.sessions {
            if s.slot.is_none() {
                continue;
            }
            if let Err(TrySendError::Full(_)) = s.tx.try_send(ServerMsg::Notify(n.clone())) {
                full.push(*id);
            }
        }
        for id in full {
            if let Some(s) = st.sessions.get(&id) {
                warn!(
                    "client {:?} does not read its notifications ({} queued); dropping it",
                    Self::label(st, s),
                    limits::NOTIFY_QUEUE
                );
                let _ = s.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// A session for logs: its client's name, or its pid.
    pub(super) fn label(st: &State, s: &Session) -> String {
        s.slot
            .and_then(|sl| st.graph.client(sl))
            .map_or_else(|| format!("pid {}", s.pid), |c| c.name.clone())
    }

    /// GraphOrder, then the latency notifications for clients with latency callbacks.
    pub(super) fn graph_order(st: &mut State) {
        Self::notify(st, Notification::GraphOrder);
        Self::notify(st, Notification::Latency { mode: 0 });
        Self::notify(st, Notification::Latency { mode: 1 });
    }

    /// Tells everyone these connections are gone.
    pub(super) fn tell_disconnected(st: &mut State, conns: &[Connection]) {
        for c in conns {
            Self::notify(
                st,
                Notification::PortConnect {
                    src: c.src,
                    dst: c.dst,
                    connected: false,
                },
            );
        }
    }

    /// Whether the client in `slot` is active (its ports are announced).
    pub(super) fn is_active(st: &State, slot: u32) -> bool {
        st.graph
            .client(slot)
            .is_some_and(|c| c.state == resound_graph::ClientState::Active)
    }

    /// Announces (`registered`) or withdraws every port of the client in
    /// `slot`, as jackd does when a client activates or deactivates: its
    /// ports are known to the other clients only while it is active.
    pub(super) fn announce_ports(st: &mut State, slot: u32, registered: bool) {
        let ports: Vec<(u32, String)> = st
            .graph
            .ports()
            .filter(|(_, p)| p.owner == slot)
            .map(|(id, _)| (id, st.graph.port_name(id).unwrap_or_default()))
            .collect();
        for (port, name) in ports {
            Self::notify(
                st,
                Notification::PortRegistration {
                    port,
                    name,
                    registered,
                },
            );
        }
    }

    /// Tells everyone a client left, with its connections, and its ports
    /// if it was active (an inactive client's ports were never announced).
    pub(super) fn tell_client_left(
        st: &mut State,
        name: String,
        conns: Vec<Connection>,
        ports: Vec<(u32, String)>,
        was_active: bool,
    ) {
        Self::tell_disconnected(st, &conns);
        for (port, name) in ports.into_iter().filter(|_| was_active) {
            Self::notify(
                st,
                Notification::PortRegistration {
                    port,
                    name,
                    registered: false,
                },
            );
        }
        Self::notify(
            st,
            Notification::ClientRegistration {
                name,
                registered: false,
            },
        );
    }
}
