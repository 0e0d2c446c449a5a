//! Client node segments: a client's activation record, mailbox and port
//! buffers live in a memfd the client made and sealed (see
//! `resound_shm::layout`). Here the server adopts it (seals and size
//! checked, mapped read-only), passes it on to the other clients, and
//! gives the newcomer everybody else's.
//!
//! Threads: session threads, under the state lock (so the segments a
//! newcomer is given and the ones announced to it never cross).

use super::dispatch::{need_client, werr};
use super::{Server, State};
use resound_protocol::wire::{ErrorCode, ServerMsg, WireError};
use rustix::fd::OwnedFd;
use std::sync::mpsc::{SyncSender, TrySendError};
use tracing::{debug, warn};

impl Server {
    /// `AttachNode` from session `id` (client `slot`), with the descriptor
    /// that came with the frame.
    pub(super) fn attach_node(
        &self,
        id: u64,
        slot: Option<u32>,
        fd: Option<OwnedFd>,
        tx: &SyncSender<ServerMsg>,
    ) -> Result<(), WireError> {
        let me = need_client(slot)?;
        let fd = fd.ok_or_else(|| {
            werr(
                ErrorCode::Protocol,
                "AttachNode needs the node segment's memfd with the frame",
            )
        })?;
        let mut st = self.lock();
        let uuid = st.graph.client(me).map_or(0, |c| c.uuid);
        if self.view.node(me, uuid).is_some() {
            return Err(werr(
                ErrorCode::Protocol,
                "this client's node segment is already attached",
            ));
        }
        let seg = self
            .view
            .map_node(fd)
            .map_err(|e| werr(ErrorCode::NotAllowed, format!("node segment refused: {e}")))?;
        if !self.view.install_node(me, uuid, seg) {
            return Err(werr(
                ErrorCode::NotAllowed,
                "node segment refused: it is another client's",
            ));
        }
        self.give_existing_nodes(me, tx)?;
        Self::announce_node(&mut st, id, me, uuid);
        debug!("client in slot {me} attached its node segment");
        Ok(())
    }

    /// Queues, for the newcomer in `me`, every other client's node segment
    /// (the driver's came with the welcome).
    fn give_existing_nodes(&self, me: u32, tx: &SyncSender<ServerMsg>) -> Result<(), WireError> {
        for (slot, uuid) in self.view.nodes() {
            if slot == 0 || slot == me {
                continue;
            }
            if let Err(TrySendError::Full(_)) = tx.try_send(ServerMsg::Node { slot, uuid }) {
                return Err(werr(ErrorCode::Full, "notification queue full"));
            }
        }
        Ok(())
    }

    /// Queues the node segment of the client `uuid` in `slot` to every
    /// other client session; one that does not read its queue is dropped.
    fn announce_node(st: &mut State, from: u64, slot: u32, uuid: u64) {
        for (id, s) in &st.sessions {
            if *id == from || s.slot.is_none() {
                continue;
            }
            if let Err(TrySendError::Full(_)) = s.tx.try_send(ServerMsg::Node { slot, uuid }) {
                warn!(
                    "client {:?} does not read its notifications; dropping it",
                    Self::label(st, s)
                );
                let _ = s.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}
