//! The audio server's admission ledger, reached over a control session:
//! the legacy process's threads are admitted by the same ledger as the
//! graph's reservations (`resound status` shows them).
//!
//! Threads: the command's main thread.

use resound_legacy::attach::Admission;

/// A control session to a running server.
pub struct ServerLedger {
    name: String,
}

impl ServerLedger {
    /// Connects to `server` (or the default one); `None` when none runs.
    pub fn connect(server: Option<&str>) -> Option<ServerLedger> {
        let _ = server;
        None
    }
}

impl Admission for ServerLedger {
    fn reserve(&mut self, _tid: i32, _bandwidth: f64) -> Result<(), String> {
        Err("not built yet".into())
    }
    fn release(&mut self, _tid: i32) {}
    fn describe(&self) -> String {
        format!("audio server '{}'", self.name)
    }
}
