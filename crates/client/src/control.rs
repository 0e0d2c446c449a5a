//! [`ControlSession`]: a connection to the server that is not a client —
//! status, port listing, (dis)connection, period changes, internal clients
//! and metadata queries (all through [`Requests`]), optionally with the
//! server's profile ring mapped. Non-real-time threads only; its socket
//! reader runs on "resound-ctl-reader".

use crate::connection::{handshake, Connection, NotifySink};
use crate::error::{Error, Result};
use crate::requests::Requests;
use resound_protocol::wire::{HelloKind, Reply, Request, Welcome};
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU32;
use std::sync::mpsc::channel;
use std::sync::Arc;

/// A control session: status, port listing and (dis)connection without being a client.
pub struct ControlSession {
    conn: Connection,
    server: String,
}

impl ControlSession {
    /// Connects to a server as a control session (`dir`: socket directory override).
    pub fn connect(server: Option<&str>, dir: Option<&std::path::Path>) -> Result<ControlSession> {
        Self::connect_kind(server, dir, HelloKind::Control).map(|(s, _)| s)
    }

    /// Connects as a control session that also maps the server's profile
    /// ring (`resound_shm::profile`), read-only.
    pub fn connect_profile(
        server: Option<&str>,
        dir: Option<&std::path::Path>,
    ) -> Result<(ControlSession, resound_shm::profile::ProfileSegment)> {
        let (s, fd) = Self::connect_kind(server, dir, HelloKind::Profile)?;
        let fd = fd.ok_or(Error::State("the server sent no profile segment"))?;
        Ok((s, resound_shm::profile::ProfileSegment::open(fd)?))
    }

    fn connect_kind(
        server: Option<&str>,
        dir: Option<&std::path::Path>,
        kind: HelloKind,
    ) -> Result<(ControlSession, Option<OwnedFd>)> {
        let mut hs = handshake(server, dir, kind)?;
        let server = match hs.welcome {
            Welcome::Control { server } | Welcome::Profile { server } => server,
            Welcome::Refused(e) => return Err(e.into()),
            Welcome::Client { .. } => return Err(Error::State("server answered as to a client")),
        };
        // A control session gets no notifications: the queue has no reader.
        let (notes, _) = channel();
        let sink = NotifySink {
            notes,
            wake: Arc::new(AtomicU32::new(0)),
        };
        let fd = hs.fds.pop();
        let conn = Connection::start(hs.stream, sink, None, "resound-ctl-reader")?;
        Ok((ControlSession { conn, server }, fd))
    }

    /// Server name.
    pub fn server_name(&self) -> &str {
        &self.server
    }
}

impl Requests for ControlSession {
    fn call(&self, req: Request) -> Result<Reply> {
        self.conn.call(req)
    }
}

impl Drop for ControlSession {
    fn drop(&mut self) {
        let _ = self.call(Request::Close);
    }
}
