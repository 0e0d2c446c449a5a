//! Requests added for libjack: aliases, latencies, monitoring, freewheel,
//! transport roles (slow-sync clients, timebase master), statistics and
//! metadata. Control thread, under the state lock, like the rest of
//! [`Server::handle`].

use super::{werr, Server, State};
use resound_protocol::wire::{
    property_change, ErrorCode, Notification, Property, Reply, Request, WireError,
};
use resound_shm::sync::Ordering;
use tracing::info;

impl Server {
    /// The driver's device latencies in frames: capture one period; playback
    /// one period, plus one in async mode (the extra period of buffering).
    pub(super) fn device_latency(&self) -> (u32, u32) {
        let p = self.view.header().buffer_frames.load(Ordering::Relaxed);
        let play = if self.cfg.server.sync { p } else { 2 * p };
        (p, play)
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

    /// Removes a subject's properties and tells everyone.
    pub(super) fn forget_subject(st: &mut State, subject: u64) {
        for key in st.metadata.remove_subject(subject) {
            Self::notify(
                st,
                Notification::PropertyChange {
                    subject,
                    key,
                    change: property_change::DELETED,
                },
            );
        }
    }

    /// GraphOrder, then the latency notifications for clients with latency callbacks.
    pub(super) fn graph_order(st: &mut State) {
        Self::notify(st, Notification::GraphOrder);
        Self::notify(st, Notification::Latency { mode: 0 });
        Self::notify(st, Notification::Latency { mode: 1 });
    }

    /// A client that is timebase master stops being it.
    pub(super) fn leave_timebase(&self, slot: u32) {
        let h = self.view.header();
        let _ = h
            .timebase_master
            .compare_exchange(slot, 0, Ordering::AcqRel, Ordering::Relaxed);
    }

    fn set_sync_client(&self, slot: u32, on: bool) {
        let w = (slot / 64) as usize;
        let Some(word) = self.view.header().sync_clients.get(w) else {
            return;
        };
        let bit = 1u64 << (slot % 64);
        if on {
            word.fetch_or(bit, Ordering::AcqRel);
        } else {
            word.fetch_and(!bit, Ordering::AcqRel);
        }
    }

    fn own_port(st: &State, me: u32, port: u32) -> Result<(), WireError> {
        match st.graph.port(port) {
            Some(p) if p.owner == me => Ok(()),
            Some(_) => Err(werr(
                ErrorCode::NotAllowed,
                format!("port {port} belongs to another client"),
            )),
            None => Err(werr(
                ErrorCode::NoSuchPort,
                format!("no port with id {port}"),
            )),
        }
    }

    /// Handles the requests added for libjack.
    pub(super) fn handle_jack(
        &self,
        st: &mut State,
        slot: Option<u32>,
        req: Request,
    ) -> Result<Reply, WireError> {
        let h = self.view.header();
        match req {
            Request::SetPortAlias { port, alias } => {
                st.graph.set_alias(port, &alias)?;
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::UnsetPortAlias { port, alias } => {
                st.graph.unset_alias(port, &alias)?;
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::SetLatencyRange {
                port,
                mode,
                min,
                max,
            } => {
                let me = Self::need_client(slot)?;
                Self::own_port(st, me, port)?;
                if mode > 1 || min > max {
                    return Err(werr(
                        ErrorCode::NotAllowed,
                        format!("invalid latency range mode {mode} [{min}, {max}]"),
                    ));
                }
                if let Some(p) = st.graph.port_mut(port) {
                    let i = mode as usize * 2;
                    p.latency[i] = min;
                    p.latency[i + 1] = max;
                }
                st.graph.touch();
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::SetLatencyCallback { on } => {
                let me = Self::need_client(slot)?;
                st.latency_custom[me as usize] = on;
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::RecomputeLatencies => {
                self.publish(st);
                Self::notify(st, Notification::Latency { mode: 0 });
                Self::notify(st, Notification::Latency { mode: 1 });
                Ok(Reply::Ok)
            }
            Request::RequestMonitor { port, on } | Request::EnsureMonitor { port, on } => {
                let ensure = matches!(req, Request::EnsureMonitor { .. });
                let p = st.graph.port_mut(port).ok_or_else(|| {
                    werr(ErrorCode::NoSuchPort, format!("no port with id {port}"))
                })?;
                p.monitor = match (ensure, on) {
                    (false, true) => p.monitor.saturating_add(1),
                    (false, false) => p.monitor.saturating_sub(1),
                    (true, true) => p.monitor.max(1),
                    (true, false) => 0,
                };
                st.graph.touch();
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::SetFreewheel { on } => {
                if h.freewheel.swap(on as u32, Ordering::AcqRel) != on as u32 {
                    info!("freewheel {}", if on { "on" } else { "off" });
                    Self::notify(st, Notification::Freewheel(on));
                }
                Ok(Reply::Ok)
            }
            Request::SetSyncClient { on } => {
                let me = Self::need_client(slot)?;
                self.set_sync_client(me, on);
                Ok(Reply::Ok)
            }
            Request::SetSyncTimeout { usecs } => {
                h.sync_timeout_us.store(usecs, Ordering::Relaxed);
                Ok(Reply::Ok)
            }
            Request::SetTimebase { conditional } => {
                let me = Self::need_client(slot)?;
                let cur = h.timebase_master.load(Ordering::Acquire);
                if conditional && cur != 0 && cur != me {
                    return Err(werr(
                        ErrorCode::Exists,
                        "another client is already timebase master",
                    ));
                }
                h.timebase_master.store(me, Ordering::Release);
                h.timebase_gen.fetch_add(1, Ordering::AcqRel);
                Ok(Reply::Ok)
            }
            Request::ReleaseTimebase => {
                let me = Self::need_client(slot)?;
                if h.timebase_master.load(Ordering::Acquire) != me {
                    return Err(werr(
                        ErrorCode::NotFound,
                        "this client is not the timebase master",
                    ));
                }
                self.leave_timebase(me);
                Ok(Reply::Ok)
            }
            Request::ResetMaxDelayed => {
                h.max_delayed_us.store(0, Ordering::Relaxed);
                Ok(Reply::Ok)
            }
            Request::SetProperty {
                subject,
                key,
                value,
                type_name,
            } => {
                let change = st.metadata.set(
                    subject,
                    Property {
                        key: key.clone(),
                        value,
                        type_name,
                    },
                )?;
                Self::notify(
                    st,
                    Notification::PropertyChange {
                        subject,
                        key,
                        change,
                    },
                );
                Ok(Reply::Ok)
            }
            Request::GetProperty { subject, key } => {
                Ok(Reply::Property(st.metadata.get(subject, &key)))
            }
            Request::GetProperties { subject } => {
                Ok(Reply::Properties(st.metadata.get_all(subject)))
            }
            Request::GetAllProperties => Ok(Reply::AllProperties(st.metadata.all())),
            Request::RemoveProperty { subject, key } => {
                if !st.metadata.remove(subject, &key) {
                    return Err(werr(
                        ErrorCode::NotFound,
                        format!("subject {subject} has no property {key:?}"),
                    ));
                }
                Self::notify(
                    st,
                    Notification::PropertyChange {
                        subject,
                        key,
                        change: property_change::DELETED,
                    },
                );
                Ok(Reply::Ok)
            }
            Request::RemoveProperties { subject } => {
                let keys = st.metadata.get_all(subject).len() as u32;
                Self::forget_subject(st, subject);
                Ok(Reply::Count(keys))
            }
            Request::RemoveAllProperties => {
                st.metadata.remove_all();
                Self::notify(
                    st,
                    Notification::PropertyChange {
                        subject: 0,
                        key: String::new(),
                        change: property_change::DELETED,
                    },
                );
                Ok(Reply::Ok)
            }
            other => Err(werr(
                ErrorCode::Protocol,
                format!("unexpected request {other:?}"),
            )),
        }
    }
}
