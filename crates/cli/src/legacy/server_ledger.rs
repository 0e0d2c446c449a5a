//! The audio server's admission ledger, reached over a control session
//! (`Request::ReserveExternal`): the legacy process's threads are admitted
//! by the same ledger as the graph's reservations, and `resound status`
//! shows them in its ledger line. The server releases what the session held
//! when it ends, so a killed tool leaks nothing there.
//!
//! Threads: the command's main thread.

use resound_client::{ControlSession, Requests};
use resound_legacy::attach::Admission;
use resound_protocol::wire::{Reply, Request};

/// A control session to a running server.
pub struct ServerLedger {
    session: ControlSession,
    name: String,
}

impl ServerLedger {
    /// Connects to `server` (or the default one): `Ok(None)` when none
    /// runs, an error (to be said) when one runs but refuses the session.
    pub fn connect(server: Option<&str>) -> Result<Option<ServerLedger>, String> {
        match ControlSession::connect(server, None) {
            Ok(session) => {
                let name = session.server_name().to_string();
                Ok(Some(ServerLedger { session, name }))
            }
            Err(resound_client::Error::NoServer { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn call(&self, tid: i32, bandwidth: f64) -> Result<(), String> {
        match self
            .session
            .call(Request::ReserveExternal { tid, bandwidth })
        {
            Ok(Reply::Ok) => Ok(()),
            Ok(Reply::Err(e)) => Err(e.message),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(format!("audio server '{}': {e}", self.name)),
        }
    }
}

impl Admission for ServerLedger {
    fn reserve(&mut self, tid: i32, bandwidth: f64) -> Result<(), String> {
        self.call(tid, bandwidth)
    }
    fn release(&mut self, tid: i32) {
        let _ = self.call(tid, 0.0);
    }
    fn describe(&self) -> String {
        format!("audio server '{}'", self.name)
    }
}
