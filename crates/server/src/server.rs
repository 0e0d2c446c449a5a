//! The control side of the server: the socket, one session per connection,
//! request handling, graph publication and notifications. This module owns
//! the [`Server`] handle and the state its control threads share; each
//! responsibility lives in a child module:
//!
//! | module | owns | thread |
//! |---|---|---|
//! | `startup` | [`Server::start`]: socket, shared segments, driver ports | the caller of `start` |
//! | `driver_thread` | building and starting the engine and its reservations; commands to them | the caller of `start` (then the driver thread runs) |
//! | `events` | draining the driver's event ring, critical-path deadlines | housekeeping |
//! | `sched_mode` | the scheduling mode chosen from the options and the system | the caller of `start` |
//! | `publish` | writing the compiled graph into the next shared table | session threads (state lock) |
//! | `notify` | notifications to every session | session and housekeeping threads (state lock) |
//! | `session`, `handshake` | accepting connections, per-session reader and writer threads, the hello/welcome exchange | listener, session threads |
//! | `log_limit` | rate limits of the log lines a peer can cause at will | session threads |
//! | `dispatch` | routing a request to its family, converting graph errors | session threads |
//! | `port_requests`, `client_requests`, `connection_requests`, `transport_requests`, `property_requests`, `internal_requests` | one family of requests each | session threads (state lock, except internal clients) |
//! | `external_requests` | admitting threads outside the graph (legacy programs) in the driver's ledger | session threads (state lock) |
//! | `status` | the `Status` and `ListPorts` replies | session threads (state lock) |
//! | `shutdown` | [`Server::stop`] | the caller of `stop` |
//!
//! Threads (none real-time):
//! * the listener accepts connections and starts a session for each;
//! * each session has a reader thread (requests, handled inline under the
//!   state lock) and a writer thread (replies and notifications, from a
//!   bounded queue, so a client that stops reading never blocks the server:
//!   when its queue is full it is dropped);
//! * the housekeeping thread drains the driver's event ring (xruns, corrupt
//!   records) every few milliseconds.
//!
//! Graph changes are serialised by the state lock; each one is compiled and
//! written into the *next* table, and the request returns once the driver
//! has switched to it (at most about one period later), so a client that
//! made a change reads it back from shared memory.

use crate::config::Config;
use crate::internal::Internals;
use resound_engine::Command;
use resound_engine::EngineShared;
use resound_graph::Graph;
use resound_protocol::wire::ServerMsg;
use resound_shm::profile::ProfileSegment;
use resound_shm::View;
use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard};

mod access;
mod client_requests;
mod client_threads;
mod connection_requests;
mod dispatch;
mod driver_thread;
mod events;
mod external_requests;
mod handshake;
mod internal_requests;
mod log_limit;
mod node_segments;
mod notify;
mod port_requests;
mod property_requests;
mod publish;
mod sched_mode;
mod session;
mod shutdown;
mod startup;
mod status;
mod transport_requests;
mod zombie;

/// A running server.
pub struct Server {
    /// Server name.
    name: String,
    /// The configuration it was started with.
    cfg: Config,
    /// The shared-memory segments.
    view: Arc<View>,
    /// What the driver thread shares with the control side.
    engine: Arc<EngineShared>,
    /// Graph, sessions and bookkeeping, under the state lock.
    state: Mutex<State>,
    /// Set once by [`Server::stop`].
    stopping: AtomicBool,
    /// The driver did not take the last graph table in time (its thread is
    /// starved or stopped): graph changes stop waiting for it until it
    /// takes one again (see `publish`).
    driver_stalled: AtomicBool,
    /// Socket path.
    socket: PathBuf,
    /// Id of the next session.
    next_session: AtomicU64,
    /// Requests to the driver thread's reservation manager.
    commands: Mutex<rtrb::Producer<Command>>,
    /// Scheduling mode as decided at start (after fallbacks).
    sched_desc: String,
    /// Set once by the housekeeping thread when the driver reports that a
    /// full ledger lowered every budget floor; read by status.
    floors_lowered: AtomicBool,
    /// Whether reservations exist (deadline mode).
    deadline_mode: bool,
    /// Admission capacity of the ledger (CPUs).
    ledger_capacity: f64,
    /// The per-cycle profile ring (None with `--profile-seconds 0`).
    profile: Option<Arc<ProfileSegment>>,
    /// Loaded internal clients.
    internals: Internals,
    /// Who may connect (`--allow-group`).
    access: access::Access,
    /// Limits the log lines peers can cause at will.
    peer_logs: log_limit::PeerLogs,
    /// The device's latencies on top of the period (the driver's `latencies()`).
    device_latencies: resound_engine::Latencies,
    /// `-d file`: the render's start trigger and outcome.
    render: Option<Arc<resound_engine::RenderControl>>,
    /// `-d alsa`: changes the device's period (a buffer-size request).
    device_period: Option<Arc<resound_engine::driver::alsa::period::PeriodControl>>,
}

/// One connection: a client (with a slot) or a control/profile session.
struct Session {
    /// The client's slot; None for control and profile sessions.
    slot: Option<u32>,
    /// Queue to the session's writer thread (replies and notifications).
    tx: SyncSender<ServerMsg>,
    /// The socket, kept to shut it down (dropping the client).
    stream: UnixStream,
    /// The peer's process id (from SO_PEERCRED; 0 if unknown).
    pid: u32,
    /// The peer's effective uid (from SO_PEERCRED).
    uid: u32,
}

/// What the control threads share, under the state lock.
struct State {
    /// The graph model.
    graph: Graph,
    /// Metadata properties (jack_set_property & co).
    metadata: crate::metadata::Metadata,
    /// Per slot: the client computes its own latencies (has a latency callback).
    latency_custom: Vec<bool>,
    /// Open sessions by id.
    sessions: HashMap<u64, Session>,
    /// Per slot: xruns the client was late in.
    xruns: Vec<u64>,
    /// The last xruns with their causes, oldest first (at most
    /// `RECENT_XRUNS`).
    recent_xruns: std::collections::VecDeque<resound_protocol::wire::XrunRecord>,
    /// Per slot: the client was evicted from the cycle and has not
    /// activated again (see `zombie`).
    zombies: Vec<bool>,
    /// Slots already being dropped for corrupting their record.
    condemned: Vec<u32>,
    /// Threads outside the graph admitted in the ledger: (session id, tid).
    external: Vec<(u64, i32)>,
    /// Real-time threads clients created, with their reservations (see `client_threads`).
    client_threads: Vec<client_threads::ClientThread>,
}

impl Server {
    /// Server name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Socket path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// The state lock (a panicked holder does not poison it for the others).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
