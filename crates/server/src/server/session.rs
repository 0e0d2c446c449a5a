//! Sessions: the listener accepting connections, and per connection a
//! reader thread (handshake, then requests handled inline) and a writer
//! thread (replies and notifications from a bounded queue); when a session
//! ends, its client leaves the graph.
//!
//! Threads: the listener thread; per session its reader thread (which takes
//! the state lock per request) and its writer thread (which never takes it).

use super::access::Peer;
use super::handshake::{read_hello, refuse, Opening};
use super::log_limit::more;
use super::Server;
use resound_engine::Command;
use resound_protocol::wire::{self, Envelope, ErrorCode, FrameError, Reply, Request, ServerMsg};
use resound_shm::limits;
use resound_shm::sync::Ordering;
use resound_shm::{self as shm};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use tracing::{debug, info, warn};

impl Server {
    /// The listener thread: one session thread per connection.
    pub(super) fn listen(self: Arc<Self>, listener: UnixListener) {
        for conn in listener.incoming() {
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            match conn {
                Ok(stream) => {
                    let s = self.clone();
                    let _ = std::thread::Builder::new()
                        .name("resound-session".into())
                        .spawn(move || s.session(stream));
                }
                Err(e) => warn!("accept failed: {e}"),
            }
        }
    }

    /// A session's reader thread, from handshake to close.
    fn session(self: Arc<Self>, stream: UnixStream) {
        let Some(peer) = Peer::of(&stream) else {
            warn!("connection without peer credentials dropped");
            return;
        };
        let pid = peer.pid;
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        let Ok(mut rd) = stream.try_clone() else {
            return;
        };
        let Some(hello) = read_hello(&stream, &mut rd, pid) else {
            return;
        };
        // Before any answer but a refusal: is this user let in?
        if let Err(m) = self.access.admit(&self.name, &stream, &peer) {
            refuse(&stream, ErrorCode::NotAllowed, m);
            return;
        }
        let (tx, rx) = sync_channel::<ServerMsg>(limits::NOTIFY_QUEUE);
        let opening = Opening {
            id,
            pid,
            uid: peer.uid,
            stream: &stream,
            tx: &tx,
        };
        let Some(slot) = self.welcome(&opening, hello.kind) else {
            return;
        };
        let writer = spawn_writer(&stream, rx, self.view.clone());
        self.serve(id, slot, pid, &mut rd, &tx);
        self.end_session(id);
        drop(tx);
        if let Ok(w) = writer {
            let _ = w.join();
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }

    /// Reads and answers requests until the peer closes or misbehaves.
    fn serve(
        &self,
        id: u64,
        slot: Option<u32>,
        pid: u32,
        rd: &mut UnixStream,
        tx: &SyncSender<ServerMsg>,
    ) {
        // Unbuffered: a frame's descriptors (AttachNode's node segment) come
        // with its first bytes, so each frame is read on its own. Descriptors
        // that come with any other request are closed here.
        loop {
            let (payload, mut fds) = match wire::recv_frame_with_fds(rd, limits::MAX_REQUEST_BYTES)
            {
                Ok(p) => p,
                Err(e) => {
                    match drop_reason(&e) {
                        Some(why) => self.log_dropped(slot, pid, &why),
                        None => debug!("{}: {e}", self.who(slot, pid)),
                    }
                    break;
                }
            };
            let (seq, reply, close) = match wire::decode::<Envelope>(&payload) {
                Ok(env) => {
                    let close = env.req == Request::Close;
                    let r = if close {
                        // Gone before the reply, as on jackd: once
                        // jack_client_close returns, nobody finds the client
                        // by name or UUID any more.
                        self.end_session(id);
                        Reply::Ok
                    } else if env.req == Request::AttachNode {
                        self.attach_node(id, slot, fds.pop(), tx)
                            .map_or_else(Reply::Err, |()| Reply::Ok)
                    } else {
                        self.handle(id, slot, env.req)
                    };
                    (env.seq, r, close)
                }
                Err(e) => {
                    if let Some(skipped) = self.peer_logs.malformed.allow() {
                        let more = more(skipped, "malformed message(s)");
                        warn!("{}: {e}{more}", self.who(slot, pid));
                    }
                    (u32::MAX, Reply::Err(e), false)
                }
            };
            if tx.try_send(ServerMsg::Reply { seq, reply }).is_err() {
                break;
            }
            if close {
                break;
            }
        }
    }

    /// Logs that session `slot`/`pid` is dropped for `why` (rate-limited).
    fn log_dropped(&self, slot: Option<u32>, pid: u32, why: &str) {
        if let Some(skipped) = self.peer_logs.dropped.allow() {
            let more = more(skipped, "session(s) dropped");
            warn!(
                "{}: {why}; dropping the connection{more}",
                self.who(slot, pid)
            );
        }
    }

    /// A session for logs: its client's name and pid, or "control session".
    fn who(&self, slot: Option<u32>, pid: u32) -> String {
        match slot.and_then(|s| self.lock().graph.client(s).map(|c| c.name.clone())) {
            Some(n) => format!("client {n:?} (pid {pid})"),
            None => format!("control session (pid {pid})"),
        }
    }

    /// Removes a session; a client's leaves the graph with its ports,
    /// connections and properties, and everyone is told.
    fn end_session(&self, id: u64) {
        let mut st = self.lock();
        let Some(sess) = st.sessions.remove(&id) else {
            return;
        };
        self.release_external(&mut st, id);
        self.release_client_threads(&mut st, id);
        let Some(slot) = sess.slot else { return };
        let sess_uuid = st.graph.client(slot).map_or(0, |c| c.uuid);
        let name = st
            .graph
            .client(slot)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let gone_uuids = self.uuids_of_client(&st, slot);
        let was_active = Self::is_active(&st, slot);
        if let Ok((conns, ports)) = st.graph.remove_client(slot) {
            self.forget_client(&mut st, slot, &gone_uuids);
            self.publish(&mut st);
            self.command(Command::Detach { slot });
            self.view.retire_node(slot, sess_uuid);
            st.condemned.retain(|&s| s != slot);
            info!(
                "client {name:?} closed ({} port(s), {} connection(s) removed)",
                ports.len(),
                conns.len()
            );
            Self::tell_client_left(&mut st, name, conns, ports, was_active);
            Self::graph_order(&mut st);
        }
    }
}

/// Why a session whose next frame could not be read is dropped, for the
/// log: a frame over the limit, or one cut short by the end of the
/// connection; None for the end between two frames (a close) or a failed
/// read (a client that died: its reset connection is no news).
fn drop_reason(e: &FrameError) -> Option<String> {
    match e {
        FrameError::TooLong(..) => Some(e.to_string()),
        FrameError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            Some("its connection ended inside a frame (truncated)".into())
        }
        FrameError::Closed | FrameError::Io(_) => None,
    }
}

/// The session's writer thread: sends queued messages until the queue
/// closes or the socket fails. A [`ServerMsg::Node`] goes with its
/// segment's descriptor, taken from `view` when it is sent; one whose
/// client has left by then is not sent.
fn spawn_writer(
    stream: &UnixStream,
    rx: Receiver<ServerMsg>,
    view: Arc<shm::View>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut wr = stream.try_clone().expect("clone socket");
    std::thread::Builder::new()
        .name("resound-session-w".into())
        .spawn(move || {
            for m in rx {
                let sent = match &m {
                    ServerMsg::Node { slot, uuid } => match view.node(*slot, *uuid) {
                        Some(seg) => wire::send_frame_with_fds(&wr, &m, &[seg.fd()]),
                        None => Ok(()),
                    },
                    _ => wire::write_frame(&mut wr, &m),
                };
                if sent.is_err() {
                    break;
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_and_truncated_frames_are_reasons_to_log_a_close_is_not() {
        let mut oversized = &[0xff, 0xff, 0xff, 0x7f, 1, 2][..];
        let e = wire::read_frame(&mut oversized, limits::MAX_REQUEST_BYTES).unwrap_err();
        let why = drop_reason(&e).unwrap();
        assert!(why.contains("exceeds the limit of 65536"), "{why}");
        let mut truncated = &[10, 0, 0, 0, 1, 2][..];
        let e = wire::read_frame(&mut truncated, limits::MAX_REQUEST_BYTES).unwrap_err();
        assert!(drop_reason(&e).unwrap().contains("truncated"));
        let e = wire::read_frame(&mut &[][..], limits::MAX_REQUEST_BYTES).unwrap_err();
        assert_eq!(drop_reason(&e), None);
        let reset = FrameError::Io(std::io::ErrorKind::ConnectionReset.into());
        assert_eq!(drop_reason(&reset), None);
    }
}
