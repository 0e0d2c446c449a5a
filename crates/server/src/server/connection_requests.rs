//! Connection requests: connect, disconnect, disconnect everything of a
//! port; each change published and told to every client.
//!
//! Threads: session threads, under the state lock.

use super::dispatch::{graph_error, werr};
use super::{Server, State};
use resound_graph::Connection;
use resound_protocol::wire::{ErrorCode, Notification, Reply, Request, WireError};

impl Server {
    /// Handles one connection request.
    pub(super) fn connection_request(
        &self,
        st: &mut State,
        req: Request,
    ) -> Result<Reply, WireError> {
        match req {
            Request::Connect { src, dst } => {
                let c = st.graph.connect(&src, &dst).map_err(graph_error)?;
                self.connections_changed(st, &[c], true);
            }
            Request::Disconnect { src, dst } => {
                let c = st.graph.disconnect(&src, &dst).map_err(graph_error)?;
                self.connections_changed(st, &[c], false);
            }
            Request::DisconnectAll { port } => {
                let gone = st.graph.disconnect_all(&port).map_err(graph_error)?;
                if !gone.is_empty() {
                    self.connections_changed(st, &gone, false);
                }
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

    /// Publishes a connection change (without waiting for the driver: the
    /// next request of a pair lands in the same table) and tells every client.
    fn connections_changed(&self, st: &mut State, conns: &[Connection], connected: bool) {
        self.publish_soon(st);
        for c in conns {
            Self::notify(
                st,
                Notification::PortConnect {
                    src: c.src,
                    dst: c.dst,
                    connected,
                },
            );
        }
        Self::graph_order(st);
    }
}
