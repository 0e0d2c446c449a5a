//! Client requests: activation (with the process thread's TID handed to the
//! reservation manager), deactivation, latency callbacks; and what a leaving
//! client's slot gives back.
//!
//! Threads: session threads, under the state lock.

use super::dispatch::{graph_error, need_client, werr};
use super::{Server, State};
use resound_engine::Command;
use resound_protocol::wire::{ErrorCode, Notification, Reply, Request, WireError};

impl Server {
    /// Handles one client request of session `id`.
    pub(super) fn client_request(
        &self,
        st: &mut State,
        id: u64,
        slot: Option<u32>,
        req: Request,
    ) -> Result<Reply, WireError> {
        match req {
            Request::Activate { tid } => {
                let me = need_client(slot)?;
                self.check_tid(st.sessions.get(&id).map_or(0, |s| s.pid), tid)?;
                if self.view.record(me).is_none() {
                    return Err(WireError::new(
                        ErrorCode::Protocol,
                        "the client's shared memory is not attached (AttachNode first)",
                    ));
                }
                st.graph.set_active(me, true).map_err(graph_error)?;
                st.zombies[me as usize] = false;
                self.publish(st);
                self.command(Command::Attach { slot: me, tid });
                Self::announce_ports(st, me, true);
                Self::graph_order(st);
            }
            Request::Deactivate => {
                let me = need_client(slot)?;
                if st.zombies[me as usize] {
                    // Already deactivated by its eviction.
                    return Ok(Reply::Ok);
                }
                st.graph.set_active(me, false).map_err(graph_error)?;
                self.publish(st);
                self.command(Command::Detach { slot: me });
                self.leave_timebase(me);
                Self::announce_ports(st, me, false);
                Self::graph_order(st);
            }
            Request::SetLatencyCallback { on } => {
                st.latency_custom[need_client(slot)? as usize] = on;
                self.publish(st);
            }
            // Control sessions may ask too (jack_recompute_total_latencies).
            Request::RecomputeLatencies => {
                self.publish(st);
                Self::notify(st, Notification::Latency { mode: 0 });
                Self::notify(st, Notification::Latency { mode: 1 });
            }
            other => {
                return Err(werr(
                    ErrorCode::Protocol,
                    format!("unexpected request {other:?}"),
                ))
            }
        }
        Ok(Reply::Ok)
    }

    /// The process-thread TID a client announces must be one of its own threads.
    pub(super) fn check_tid(&self, pid: u32, tid: i32) -> Result<(), WireError> {
        if tid <= 0 || pid == 0 {
            return Err(werr(
                ErrorCode::NotAllowed,
                format!("invalid thread id {tid}"),
            ));
        }
        let path = format!("/proc/{pid}/task/{tid}");
        if std::path::Path::new(&path).exists() {
            Ok(())
        } else {
            Err(werr(
                ErrorCode::NotAllowed,
                format!("thread {tid} does not belong to the client's process {pid}"),
            ))
        }
    }

    /// UUIDs of a client and its ports (for their metadata).
    pub(super) fn uuids_of_client(&self, st: &State, slot: u32) -> Vec<u64> {
        let mut v: Vec<u64> = st.graph.client(slot).map(|c| c.uuid).into_iter().collect();
        v.extend(
            st.graph
                .ports()
                .filter(|(_, p)| p.owner == slot)
                .map(|(_, p)| p.uuid),
        );
        v
    }

    /// Drops what a leaving client held: timebase mastership, slow-sync flag,
    /// latency mode, and the properties of it and its ports.
    pub(super) fn forget_client(&self, st: &mut State, slot: u32, uuids: &[u64]) {
        self.leave_timebase(slot);
        self.set_sync_client(slot, false);
        if let Some(c) = st.latency_custom.get_mut(slot as usize) {
            *c = false;
        }
        for &u in uuids {
            Self::forget_subject(st, u);
        }
    }
}
