//! The handshake: the client's `Hello` read (with a timeout), the protocol
//! version checked, then a client admitted into the graph (fresh activation
//! record and mailbox, `Welcome::Client` with the segments' descriptors) or
//! a control or profile session welcomed.
//!
//! Threads: the new connection's session thread; admitting a client takes
//! the state lock.

use super::dispatch::{graph_error, werr};
use super::log_limit::more;
use super::{Server, Session};
use resound_protocol::hello::check_hello;
use resound_protocol::wire::{self, ErrorCode, Hello, HelloKind, Notification, ServerMsg, Welcome};
use resound_shm::limits;
use resound_shm::sync::Ordering;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::SyncSender;
use std::time::Duration;
use tracing::{debug, info, warn};

/// The session being opened: its id, peer pid, socket and reply queue.
pub(super) struct Opening<'a> {
    /// Session id.
    pub(super) id: u64,
    /// Peer process id.
    pub(super) pid: u32,
    /// Peer's effective user id.
    pub(super) uid: u32,
    /// The connection.
    pub(super) stream: &'a UnixStream,
    /// Queue to the session's writer thread.
    pub(super) tx: &'a SyncSender<ServerMsg>,
}

/// Answers `Welcome::Refused` with `code` and `message` (the session then ends).
pub(super) fn refuse(stream: &UnixStream, code: ErrorCode, message: String) {
    let _ = wire::write_frame(&mut &*stream, &Welcome::Refused(werr(code, message)));
}

/// Reads the `Hello` (5 s timeout) and checks the protocol version; on
/// failure answers `Welcome::Refused` and returns None.
pub(super) fn read_hello(stream: &UnixStream, rd: &mut UnixStream, pid: u32) -> Option<Hello> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let refused = match wire::read_frame(rd, limits::MAX_REQUEST_BYTES) {
        Ok(payload) => match check_hello(&payload) {
            Ok(hello) => {
                let _ = stream.set_read_timeout(None);
                return Some(hello);
            }
            Err(e) => e,
        },
        Err(e) => werr(ErrorCode::Protocol, e.to_string()),
    };
    if refused.code != ErrorCode::Version {
        debug!(
            "connection from pid {pid} dropped before handshake: {}",
            refused.message
        );
    }
    let _ = wire::write_frame(&mut &*stream, &Welcome::Refused(refused));
    None
}

impl Server {
    /// Answers a `Hello`: admits a client or welcomes a control/profile
    /// session. Returns the session's slot (None for control and profile
    /// sessions), or None (outer) if the session ends here.
    pub(super) fn welcome(&self, o: &Opening<'_>, kind: HelloKind) -> Option<Option<u32>> {
        match kind {
            HelloKind::Client { name, exact_name } => {
                self.admit_client(o, &name, exact_name).map(Some)
            }
            kind @ (HelloKind::Control | HelloKind::Profile) => {
                self.welcome_observer(o, kind == HelloKind::Profile)?;
                Some(None)
            }
        }
    }

    /// Adds a client to the graph and sends it the segments; returns its slot.
    fn admit_client(&self, o: &Opening<'_>, name: &str, exact: bool) -> Option<u32> {
        let mut st = self.lock();
        if self.stopping.load(Ordering::Acquire) {
            return None;
        }
        let (slot, actual) = match st.graph.add_client(name, exact, o.pid) {
            Ok(added) => added,
            Err(e) => {
                if let Some(skipped) = self.peer_logs.refused.allow() {
                    let more = more(skipped, "client(s) refused");
                    info!("refused client {name:?} (pid {}): {e}{more}", o.pid);
                }
                let refusal = Welcome::Refused(graph_error(e));
                let _ = wire::write_frame(&mut &*o.stream, &refusal);
                return None;
            }
        };
        st.latency_custom[slot as usize] = false;
        st.xruns[slot as usize] = 0;
        st.zombies[slot as usize] = false;
        self.publish(&mut st);
        let uuid = st.graph.client(slot).map_or(0, |c| c.uuid);
        if let Some(p) = &self.profile {
            // Under the state lock: the name ring's single writer.
            p.ring().write_name(uuid, slot, o.pid, &actual);
        }
        let w = Welcome::Client {
            slot,
            name: actual.clone(),
            uuid,
            server: self.name.clone(),
        };
        let driver = self.view.node(0, 0)?;
        let fds = [self.view.control().fd(), driver.fd()];
        if let Err(e) = wire::send_frame_with_fds(o.stream, &w, &fds) {
            if let Some(skipped) = self.peer_logs.dropped.allow() {
                let more = more(skipped, "session(s) dropped");
                warn!("handshake with {actual:?} failed: {e}{more}");
            }
            let _ = st.graph.remove_client(slot);
            self.publish(&mut st);
            return None;
        }
        info!("client {actual:?} (pid {}) opened", o.pid);
        Self::notify(
            &mut st,
            Notification::ClientRegistration {
                name: actual,
                registered: true,
            },
        );
        st.sessions.insert(o.id, Self::session_entry(o, Some(slot)));
        Some(slot)
    }

    /// Welcomes a control session, or a profile session (with the profile
    /// ring's descriptor; refused when profiling is off).
    fn welcome_observer(&self, o: &Opening<'_>, profile: bool) -> Option<()> {
        let sent = if profile {
            let Some(p) = &self.profile else {
                let refusal = Welcome::Refused(werr(
                    ErrorCode::NotAllowed,
                    format!(
                        "profiling is off in server {:?} (started with --profile-seconds 0)",
                        self.name
                    ),
                ));
                let _ = wire::write_frame(&mut &*o.stream, &refusal);
                return None;
            };
            let w = Welcome::Profile {
                server: self.name.clone(),
            };
            wire::send_frame_with_fds(o.stream, &w, &[p.fd()])
        } else {
            let w = Welcome::Control {
                server: self.name.clone(),
            };
            wire::write_frame(&mut &*o.stream, &w)
        };
        sent.ok()?;
        self.lock()
            .sessions
            .insert(o.id, Self::session_entry(o, None));
        Some(())
    }

    /// The session table's entry for an opened session.
    fn session_entry(o: &Opening<'_>, slot: Option<u32>) -> Session {
        Session {
            slot,
            tx: o.tx.clone(),
            stream: o.stream.try_clone().expect("clone socket"),
            pid: o.pid,
            uid: o.uid,
        }
    }
}
