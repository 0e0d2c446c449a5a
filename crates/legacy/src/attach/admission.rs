//! Who admits the bandwidth of a legacy process's reservations: the audio
//! server's ledger when a server runs (implemented by the `resound legacy`
//! command over the control socket), else a local
//! [`resound_sched::Ledger::from_system`].
//!
//! Threads: the attach loop's thread.

use resound_sched::Ledger;

/// A bandwidth bookkeeper. `reserve` sets what `tid` holds (grow or shrink).
pub trait Admission {
    /// Admit `bandwidth` (CPUs) for `tid`, replacing what it held; on refusal
    /// a message that says what was asked, what is free and who holds it.
    fn reserve(&mut self, tid: i32, bandwidth: f64) -> Result<(), String>;
    /// Forget `tid`.
    fn release(&mut self, tid: i32);
    /// Where the ledger lives, for messages ("local ledger", "audio server 'default'").
    fn describe(&self) -> String;
}

/// The local ledger: the system's SCHED_DEADLINE capacity, this process's
/// reservations only (the kernel's own admission test still applies).
#[derive(Debug)]
pub struct LocalLedger(pub Ledger);

impl LocalLedger {
    /// A ledger over the system's capacity.
    pub fn from_system() -> LocalLedger {
        LocalLedger(Ledger::from_system())
    }
}

impl Admission for LocalLedger {
    fn reserve(&mut self, tid: i32, bandwidth: f64) -> Result<(), String> {
        self.0.reserve(tid, bandwidth).map_err(|e| {
            format!(
                "needs {:.2} CPU, {:.2} free (local ledger of {:.2} CPU holds {:.2})",
                e.asked,
                e.free,
                e.capacity,
                self.0.used()
            )
        })
    }
    fn release(&mut self, tid: i32) {
        self.0.release(tid);
    }
    fn describe(&self) -> String {
        "local ledger".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_refusal_says_what_was_asked_and_what_is_free() {
        let mut l = LocalLedger(Ledger::with_capacity(0.3));
        l.reserve(1, 0.25).unwrap();
        let e = l.reserve(2, 0.12).unwrap_err();
        assert_eq!(
            e,
            "needs 0.12 CPU, 0.05 free (local ledger of 0.30 CPU holds 0.25)"
        );
        l.reserve(1, 0.1).unwrap();
        l.reserve(2, 0.12).unwrap();
        l.release(1);
        l.release(2);
        assert_eq!(l.0.used(), 0.0);
    }
}
