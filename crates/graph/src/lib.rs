//! # resound-graph
//!
//! The server's authoritative model of the graph: clients, ports and
//! connections, with every validation a request needs (names, directions,
//! types, capacities), and [`Graph::compile`], which turns the model into the
//! flat form the real-time side reads from shared memory: per node the
//! activation count armed at cycle start and the list of nodes to decrement
//! when it finishes (the data-flow activation of "jackdmp: Jack server for multi-processor
//! machines"), per input port its
//! sources.
//!
//! Loops are allowed: connections are considered in the order they were made,
//! and one that would close a cycle among clients becomes a *feedback*
//! connection that does not count as a dependency, so its reader sees the
//! writer's previous cycle (one period of delay). This is jackdmp's rule
//! ("the feedback connection is introduced at the place where the loop is
//! established") applied afresh on every change, so breaking a loop elsewhere
//! turns the feedback connection back into a normal one.
//!
//! Node 0 is the driver: it owns the `system:*` ports, triggers the clients
//! that depend only on it (or on nothing), and counts the clients that end the
//! graph (those feeding playback or feeding no client) to know when a cycle is
//! complete.
//!
//! Where each part lives:
//!
//! | module | owns |
//! |---|---|
//! | [`model`] | [`Graph`], [`Client`], [`Port`], [`Connection`]; lookups |
//! | [`validate`] | JACK's name rules, port type names |
//! | [`edit`] | adding/removing clients and ports, aliases, activation |
//! | [`connections`] | connecting and disconnecting ports by name |
//! | [`compile`] | [`Graph::compile`] into [`Compiled`] |
//! | [`critical_path`] | [`CriticalPath`]: per-client relative deadlines from the compiled graph |
//! | [`error`] | [`GraphError`] and its [`GraphErrorKind`] |
//!
//! Threads: everything here runs on the server's control threads (the
//! session threads under the server's state lock, the housekeeping thread
//! for [`CriticalPath`]). Nothing is real-time.

pub mod compile;
pub mod connections;
pub mod critical_path;
pub mod edit;
pub mod error;
pub mod model;
pub mod validate;

pub use compile::Compiled;
pub use critical_path::CriticalPath;
pub use error::{GraphError, GraphErrorKind};
pub use model::{Client, ClientState, Connection, Graph, Port, Removed};
pub use validate::{check_client_name, port_type_name, port_type_of};

/// Slot of the driver node.
pub const DRIVER: u32 = 0;

/// Type bits of client UUIDs (JACK's `JackUUIDClient << 32`), so UUIDs read
/// like jackd's and libjack can hand them out unchanged.
pub const CLIENT_UUID_TYPE: u64 = 2 << 32;
/// Type bits of port UUIDs (JACK's `JackUUIDPort << 32`).
pub const PORT_UUID_TYPE: u64 = 1 << 32;

#[cfg(test)]
mod tests;
