//! [`GraphError`]: why the model refused an edit, as a kind (for callers
//! that map it to their own codes) and the message users see.
//!
//! Threads: any (plain data).

/// What kind of refusal a [`GraphError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphErrorKind {
    /// A client name, port name or alias breaks JACK's rules.
    InvalidName,
    /// The name is already taken.
    NameTaken,
    /// A capacity (clients, ports, connections, aliases) is exhausted.
    Full,
    /// The caller may not do this (not its port, no client in that slot).
    NotAllowed,
    /// No port with that id or name.
    NoSuchPort,
    /// The thing to remove (an alias) does not exist.
    NotFound,
    /// The ports cannot be connected (directions or types).
    Incompatible,
    /// The connection already exists.
    Exists,
    /// The ports are not connected.
    NotConnected,
    /// Unknown port type name.
    UnknownType,
}

/// A refused graph edit: its kind and the message shown to users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GraphError {
    /// What kind of refusal.
    pub kind: GraphErrorKind,
    /// The message users see (names the offending client, port or limit).
    pub message: String,
}

impl GraphError {
    /// A refusal of `kind` saying `message`.
    pub fn new(kind: GraphErrorKind, message: impl Into<String>) -> GraphError {
        GraphError {
            kind,
            message: message.into(),
        }
    }
}

/// Short form of [`GraphError::new`] for this crate's checks.
pub(crate) fn err(kind: GraphErrorKind, message: impl Into<String>) -> GraphError {
    GraphError::new(kind, message)
}
