//! # resound-client
//!
//! The native Rust client library: open a client on a running `resoundd`,
//! register ports, activate with a process callback that runs on the client's
//! own real-time thread every cycle, connect ports, and receive notifications
//! on a separate non-real-time thread.
//!
//! ```no_run
//! use resound_client::prelude::*;
//! use resound_client::{Client, Control, OpenOptions, PortFlags, PortKind};
//! let client = Client::open("gain", OpenOptions::default())?;
//! let inp = client.register_port("in", PortKind::Audio, PortFlags::INPUT)?;
//! let mut out = client.register_port("out", PortKind::Audio, PortFlags::OUTPUT)?;
//! client.activate(move |ps: &mut resound_client::ProcessScope| {
//!     let x = inp.audio_in(ps);
//!     let y = out.audio_out(ps);
//!     for (y, x) in y.iter_mut().zip(x) {
//!         *y = 0.5 * x;
//!     }
//!     Control::Continue
//! })?;
//! client.connect("system:capture_1", "gain:in")?;
//! # Ok::<(), resound_client::Error>(())
//! ```
//!
//! Threads: [`Client`] methods are for non-real-time threads (they talk to
//! the server over the socket). [`ProcessHandler::process`] runs on the
//! process thread; [`NotificationHandler::notification`] on the notification
//! thread. In debug builds the process callback runs under
//! `assert_no_alloc`: with the `AllocDisabler` global allocator installed (as
//! resound's own tools do) an allocation there aborts the program.
//!
//! Requests that any connection may make (status, port listing,
//! connections, period, internal clients, metadata queries) are one
//! implementation, the [`Requests`] trait, shared by [`Client`] and
//! [`ControlSession`]; bring it into scope with
//! `use resound_client::prelude::*;`.
//!
//! Modules: `connection` (socket, handshake,
//! request/reply, reader thread), `client` ([`Client`] lifecycle and
//! activation), `graph` (ports and connections), `port` ([`Port`] and its
//! per-cycle accessors), `scope` ([`ProcessScope`], port buffer
//! resolution), `process` (the process thread, [`RtContext`]), `notify`
//! (notification thread), `transport`, `metadata`, `snapshot`, `control`
//! ([`ControlSession`]), `requests` ([`Requests`]), `error`.

mod client;
mod connection;
mod control;
mod error;
mod graph;
mod hold;
mod metadata;
mod notify;
mod port;
mod process;
mod requests;
mod scope;
mod snapshot;
mod transport;
mod wake_timer;

pub use client::Client;
pub use connection::OpenOptions;
pub use control::ControlSession;
pub use error::{Error, Result};
pub use metadata::MetadataApi;
pub use notify::NotificationHandler;
pub use port::{MidiEvent, MidiIn, MidiOut, Port, PortFlags, PortKind};
pub use process::{Control, CycleInfo, ProcessHandler, RtContext};
pub use requests::{InternalClientInfo, Requests};
pub use resound_protocol::wire::{ErrorCode as Code, Notification as Event};
pub use scope::{silence_outputs, ProcessScope};
pub use snapshot::{clients, snapshot, ClientSnap, PortSnap, Snapshot};
pub use transport::{Position, Transport};

/// The traits a caller needs in scope to use clients and control sessions.
pub mod prelude {
    pub use crate::requests::Requests;
}
