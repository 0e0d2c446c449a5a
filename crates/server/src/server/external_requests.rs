//! `ReserveExternal`: threads outside the graph (legacy programs reserved by
//! `resound legacy`) admitted in the driver thread's ledger, through
//! `Command::External` and the engine's `ExternalReply` (see
//! `resound_engine::external`). What each session holds is remembered here
//! and released when the session ends, so a tool that dies leaks nothing.
//!
//! Only threads of the caller's own user's processes may be named (see
//! `access::may_reserve`), and a thread another session holds is refused.
//!
//! Threads: session threads (state lock held by the caller for the
//! bookkeeping; the wait for the driver's answer is at most a few periods).

use super::access::may_reserve;
use super::dispatch::werr;
use super::{Server, State};
use resound_engine::Command;
use resound_protocol::wire::{ErrorCode, Reply, WireError};
use std::time::Duration;

/// How long to wait for the driver thread's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

impl Server {
    /// Admits or releases `bandwidth` for `tid` on behalf of session `id`.
    pub(super) fn reserve_external(
        &self,
        st: &mut State,
        id: u64,
        tid: i32,
        bandwidth: f64,
    ) -> Result<Reply, WireError> {
        if !(bandwidth.is_finite() && (0.0..=64.0).contains(&bandwidth)) {
            return Err(werr(
                ErrorCode::Protocol,
                format!("bandwidth {bandwidth}: must be between 0 and the number of CPUs"),
            ));
        }
        let held = st.external.iter().any(|&(s, t)| s == id && t == tid);
        if !(bandwidth == 0.0 && held) {
            self.check_own_thread(st, id, tid)?;
        }
        let v = self.external_command(tid, bandwidth)?;
        if !v.ok {
            return Err(werr(
                ErrorCode::Full,
                format!(
                    "needs {bandwidth:.2} CPU, {:.2} free (audio server '{}' holds {:.2})",
                    v.free, self.name, v.used
                ),
            ));
        }
        st.external.retain(|&(_, t)| t != tid);
        if bandwidth > 0.0 {
            st.external.push((id, tid));
        }
        Ok(Reply::Ok)
    }

    /// `tid` must be a thread of a process of the session's own user (or
    /// the session is root's), and held by no other session: else NotAllowed.
    fn check_own_thread(&self, st: &State, id: u64, tid: i32) -> Result<(), WireError> {
        let uid = st.sessions.get(&id).map_or(u32::MAX, |s| s.uid);
        may_reserve(uid, tid).map_err(|m| {
            let code = if m.starts_with("no thread") {
                ErrorCode::NotFound
            } else {
                ErrorCode::NotAllowed
            };
            werr(code, m)
        })?;
        if st.external.iter().any(|&(s, t)| s != id && t == tid) {
            return Err(werr(
                ErrorCode::NotAllowed,
                format!("thread {tid} is reserved by another session"),
            ));
        }
        Ok(())
    }

    /// Releases everything session `id` held (at its end).
    pub(super) fn release_external(&self, st: &mut State, id: u64) {
        let mine: Vec<i32> = st
            .external
            .iter()
            .filter(|e| e.0 == id)
            .map(|e| e.1)
            .collect();
        st.external.retain(|e| e.0 != id);
        for tid in mine {
            let _ = self.external_command(tid, 0.0);
        }
    }

    /// One ledger request for a thread outside the graph (a legacy
    /// program's, or a client's own real-time thread) through the driver
    /// thread, which owns the ledger; bandwidth 0 releases it.
    pub(super) fn external_command(
        &self,
        tid: i32,
        bandwidth: f64,
    ) -> Result<resound_engine::ExternalVerdict, WireError> {
        let ppm = (bandwidth * 1e6).ceil() as u64;
        self.engine
            .external
            .request(ANSWER_TIMEOUT, |seq| {
                let mut q = self.commands.lock().unwrap_or_else(|e| e.into_inner());
                q.push(Command::External { tid, ppm, seq }).is_ok()
            })
            .ok_or_else(|| {
                werr(
                    ErrorCode::Internal,
                    "the driver thread did not answer the admission request",
                )
            })
    }
}
