//! The request surface shared by [`crate::Client`] and
//! [`crate::ControlSession`]: the [`Requests`] trait (one required method,
//! [`Requests::call`], and the shared requests on top of it), and the reply
//! checks every request method uses. Non-real-time threads only.

use crate::error::{unexpected, Result};
use crate::metadata::MetadataApi;
use resound_protocol::wire::{PortInfo, Reply, Request, Status};

/// Requests any connection to the server can make, client or control
/// session. Implementors provide [`Requests::call`]; every other method is
/// built on it. Import it (or `resound_client::prelude::*`) to call them.
pub trait Requests {
    /// Sends one request and waits for its reply (a server error is `Err`).
    fn call(&self, req: Request) -> Result<Reply>;

    /// Server status.
    fn status(&self) -> Result<Status> {
        match self.call(Request::Status)? {
            Reply::Status(s) => Ok(*s),
            other => Err(unexpected(other)),
        }
    }

    /// Every port with its connections (asks the server).
    fn list_ports(&self) -> Result<Vec<PortInfo>> {
        match self.call(Request::ListPorts)? {
            Reply::Ports(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Changes the server's period (frames per cycle).
    fn set_buffer_size(&self, frames: u32) -> Result<()> {
        expect_ok(self.call(Request::SetBufferSize { frames })?)
    }

    /// Connects an output to an input (full names; JACK's argument order).
    fn connect_ports(&self, src: &str, dst: &str) -> Result<()> {
        expect_ok(self.call(Request::Connect {
            src: src.into(),
            dst: dst.into(),
        })?)
    }

    /// Disconnects two ports.
    fn disconnect_ports(&self, src: &str, dst: &str) -> Result<()> {
        expect_ok(self.call(Request::Disconnect {
            src: src.into(),
            dst: dst.into(),
        })?)
    }

    /// Loads one of the server's built-in in-process clients (JACK's internal
    /// clients), e.g. `load_internal("", "profiler", "-c -p -e")`. It stays
    /// loaded until [`Requests::unload_internal`], whatever happens to the
    /// connection that loaded it.
    fn load_internal(
        &self,
        client_name: &str,
        load_name: &str,
        load_init: &str,
    ) -> Result<InternalClientInfo> {
        let req = Request::LoadInternal {
            client_name: client_name.into(),
            load_name: load_name.into(),
            init: load_init.into(),
        };
        match self.call(req)? {
            Reply::Internal { uuid, name } => Ok(InternalClientInfo { uuid, name }),
            other => Err(unexpected(other)),
        }
    }

    /// Unloads an internal client by uuid.
    fn unload_internal(&self, uuid: u64) -> Result<()> {
        expect_ok(self.call(Request::UnloadInternal { uuid })?)
    }

    /// Metadata queries.
    fn metadata(&self) -> MetadataApi<'_>
    where
        Self: Sized,
    {
        MetadataApi::new(self)
    }
}

/// An internal client the server loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalClientInfo {
    /// Its uuid (for [`Requests::unload_internal`]).
    pub uuid: u64,
    /// Its actual name.
    pub name: String,
}

/// Checks a reply that carries nothing.
pub(crate) fn expect_ok(r: Reply) -> Result<()> {
    match r {
        Reply::Ok => Ok(()),
        other => Err(unexpected(other)),
    }
}
