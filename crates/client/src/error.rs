//! Errors of client operations and the conversions of socket and reply
//! failures into them. Used on non-real-time threads only.

use resound_protocol::wire::{ErrorCode, FrameError, Reply, WireError};
use std::time::Duration;

/// Errors of client operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No server is listening under that name.
    #[error("no resound server named {name:?} is running (no socket at {path}); start one, e.g. `resoundd -d dummy`")]
    NoServer {
        /// Server name.
        name: String,
        /// Socket path tried.
        path: String,
    },
    /// The server refused or failed the request.
    #[error("{0}")]
    Server(#[from] WireError),
    /// The connection to the server failed or it went away.
    #[error("connection to the server: {0}")]
    Io(#[from] std::io::Error),
    /// The server did not answer in time.
    #[error("the server did not answer within {0:?}")]
    Timeout(Duration),
    /// The call does not fit the client's state.
    #[error("{0}")]
    State(&'static str),
}

impl Error {
    /// The server's error code, if the server reported the error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server(e) => Some(e.code),
            _ => None,
        }
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error for a reply of the wrong kind (or the server's error).
pub(crate) fn unexpected(r: Reply) -> Error {
    match r {
        Reply::Err(e) => Error::Server(e),
        other => Error::Server(WireError::new(
            ErrorCode::Protocol,
            format!("unexpected reply {other:?}"),
        )),
    }
}

/// The error for a failed frame read.
pub(crate) fn frame_err(e: FrameError) -> Error {
    match e {
        FrameError::Closed => Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "server closed the connection",
        )),
        FrameError::TooLong(n, m) => Error::Io(std::io::Error::other(format!(
            "server sent a {n}-byte frame (limit {m})"
        ))),
        FrameError::Io(e) => Error::Io(e),
    }
}
