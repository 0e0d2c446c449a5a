//! Internal-client requests: loading and unloading the built-in in-process
//! clients (`profiler`). They open through the socket like any client, so
//! these run without the state lock.
//!
//! Threads: session threads, without the state lock.

use super::dispatch::werr;
use super::log_limit::more;
use super::Server;
use crate::internal::Host;
use resound_protocol::wire::{ErrorCode, Reply, Request, WireError};
use resound_shm::sync::Ordering;
use tracing::{info, warn};

impl Server {
    /// Handles a load or unload request.
    pub(super) fn internal_request(&self, req: Request) -> Result<Reply, WireError> {
        match req {
            Request::LoadInternal {
                client_name,
                load_name,
                init,
            } => self.load_internal(&client_name, &load_name, &init),
            Request::UnloadInternal { uuid } => self.internals.unload(uuid).map(|()| {
                info!("internal client {uuid} unloaded");
                Reply::Ok
            }),
            other => Err(werr(
                ErrorCode::Protocol,
                format!("unexpected request {other:?}"),
            )),
        }
    }

    /// Loads internal client `load_name` as `client_name` with `init`.
    fn load_internal(
        &self,
        client_name: &str,
        load_name: &str,
        init: &str,
    ) -> Result<Reply, WireError> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(werr(ErrorCode::NotAllowed, "the server is stopping"));
        }
        let host = Host {
            server: self.name.clone(),
            dir: self
                .socket
                .parent()
                .map(|p| p.to_path_buf())
                .unwrap_or_default(),
            profile: self.profile.clone(),
        };
        let (uuid, name) = self
            .internals
            .load(&host, client_name, load_name, init)
            .inspect_err(|e| {
                if let Some(skipped) = self.peer_logs.loads.allow() {
                    let more = more(skipped, "load(s) refused");
                    warn!("loading internal client {load_name:?}: {e}{more}");
                }
            })?;
        info!("internal client {name:?} ({load_name} {init}) loaded");
        Ok(Reply::Internal { uuid, name })
    }
}
