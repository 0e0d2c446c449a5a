//! Request dispatch: each request routed to the module of its family, under
//! the state lock (internal clients excepted, see `internal_requests`), and
//! the one conversion of graph errors into wire errors.
//!
//! Threads: session threads.

use super::{Server, State};
use resound_graph::{GraphError, GraphErrorKind};
use resound_protocol::wire::{ErrorCode, Reply, Request, WireError};

/// A wire error of `code` saying `m`.
pub(super) fn werr(code: ErrorCode, m: impl Into<String>) -> WireError {
    WireError::new(code, m)
}

/// The wire form of a refused graph edit: same message, the matching code.
pub(super) fn graph_error(e: GraphError) -> WireError {
    let code = match e.kind {
        GraphErrorKind::InvalidName => ErrorCode::InvalidName,
        GraphErrorKind::NameTaken => ErrorCode::NameTaken,
        GraphErrorKind::Full => ErrorCode::Full,
        GraphErrorKind::NotAllowed => ErrorCode::NotAllowed,
        GraphErrorKind::NoSuchPort => ErrorCode::NoSuchPort,
        GraphErrorKind::NotFound => ErrorCode::NotFound,
        GraphErrorKind::Incompatible => ErrorCode::Incompatible,
        GraphErrorKind::Exists => ErrorCode::Exists,
        GraphErrorKind::NotConnected => ErrorCode::NotConnected,
        GraphErrorKind::UnknownType => ErrorCode::UnknownType,
    };
    WireError::new(code, e.message)
}

/// The slot of a client session; control sessions are refused.
pub(super) fn need_client(slot: Option<u32>) -> Result<u32, WireError> {
    slot.ok_or_else(|| {
        werr(
            ErrorCode::NotAllowed,
            "this request needs a client session, not a control session",
        )
    })
}

impl Server {
    /// Answers one request of session `id` (client `slot`, if any).
    pub(super) fn handle(&self, id: u64, slot: Option<u32>, req: Request) -> Reply {
        let r = match req {
            // Internal clients open through the socket, whose session thread
            // takes the state lock: (un)load them without holding it.
            req @ (Request::LoadInternal { .. } | Request::UnloadInternal { .. }) => {
                self.internal_request(req)
            }
            req => self.handle_locked(id, slot, req),
        };
        r.unwrap_or_else(Reply::Err)
    }

    /// Routes a request to its family, under the state lock.
    fn handle_locked(&self, id: u64, slot: Option<u32>, req: Request) -> Result<Reply, WireError> {
        let mut st = self.lock();
        let st = &mut *st;
        match req {
            Request::RegisterPort { .. }
            | Request::UnregisterPort { .. }
            | Request::RenamePort { .. }
            | Request::SetPortAlias { .. }
            | Request::UnsetPortAlias { .. }
            | Request::SetLatencyRange { .. }
            | Request::RequestMonitor { .. }
            | Request::EnsureMonitor { .. } => self.port_request(st, slot, req),
            Request::Activate { .. }
            | Request::Deactivate
            | Request::SetLatencyCallback { .. }
            | Request::RecomputeLatencies => self.client_request(st, id, slot, req),
            Request::Connect { .. }
            | Request::Disconnect { .. }
            | Request::DisconnectAll { .. } => self.connection_request(st, req),
            Request::SetBufferSize { .. }
            | Request::SetFreewheel { .. }
            | Request::SetSyncClient { .. }
            | Request::SetSyncTimeout { .. }
            | Request::SetTimebase { .. }
            | Request::ReleaseTimebase
            | Request::ResetMaxDelayed => self.transport_request(st, slot, req),
            Request::SetProperty { .. }
            | Request::GetProperty { .. }
            | Request::GetProperties { .. }
            | Request::GetAllProperties
            | Request::RemoveProperty { .. }
            | Request::RemoveProperties { .. }
            | Request::RemoveAllProperties => Self::property_request(st, req),
            Request::ReserveExternal { tid, bandwidth } => {
                self.reserve_external(st, id, tid, bandwidth)
            }
            Request::ReserveThread { tid, on } => self.reserve_thread(st, id, slot, tid, on),
            other => self.query(st, other),
        }
    }

    /// Read-only requests: status, the port list; anything else is refused.
    fn query(&self, st: &mut State, req: Request) -> Result<Reply, WireError> {
        match req {
            Request::Status => Ok(Reply::Status(Box::new(self.status(st)))),
            Request::ListPorts => Ok(Reply::Ports(Self::list_ports(&st.graph))),
            Request::Close => Ok(Reply::Ok),
            Request::LoadInternal { .. } | Request::UnloadInternal { .. } => Err(werr(
                ErrorCode::Internal,
                "internal client request misrouted",
            )),
            other => Err(werr(
                ErrorCode::Protocol,
                format!("unexpected request {other:?}"),
            )),
        }
    }
}
