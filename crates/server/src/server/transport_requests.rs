//! Transport and engine-setting requests: the buffer size, freewheeling,
//! slow-sync clients and their timeout, timebase mastership, the
//! max-delayed statistic.
//!
//! Threads: session threads, under the state lock; the values themselves
//! live in the shared header, read by the driver thread.

use super::dispatch::{need_client, werr};
use super::{Server, State};
use resound_protocol::wire::{ErrorCode, Notification, Reply, Request, WireError};
use resound_shm::limits;
use resound_shm::sync::Ordering;
use resound_shm::time::frames_to_ns;
use tracing::{info, warn};

impl Server {
    /// Handles one transport or engine-setting request.
    pub(super) fn transport_request(
        &self,
        st: &mut State,
        slot: Option<u32>,
        req: Request,
    ) -> Result<Reply, WireError> {
        let h = self.view.header();
        match req {
            Request::SetBufferSize { frames } => return self.set_buffer_size(st, frames),
            Request::SetFreewheel { on } => {
                if h.freewheel.swap(on as u32, Ordering::AcqRel) != on as u32 {
                    info!("freewheel {}", if on { "on" } else { "off" });
                    Self::notify(st, Notification::Freewheel(on));
                }
            }
            Request::SetSyncClient { on } => self.set_sync_client(need_client(slot)?, on),
            Request::SetSyncTimeout { usecs } => {
                h.sync_timeout_us.store(usecs, Ordering::Relaxed);
            }
            Request::SetTimebase { conditional } => {
                self.take_timebase(need_client(slot)?, conditional)?
            }
            Request::ReleaseTimebase => {
                let me = need_client(slot)?;
                if h.timebase_master.load(Ordering::Acquire) != me {
                    return Err(werr(
                        ErrorCode::NotFound,
                        "this client is not the timebase master",
                    ));
                }
                self.leave_timebase(me);
            }
            Request::ResetMaxDelayed => h.max_delayed_us.store(0, Ordering::Relaxed),
            other => {
                return Err(werr(
                    ErrorCode::Protocol,
                    format!("unexpected request {other:?}"),
                ))
            }
        }
        Ok(Reply::Ok)
    }

    /// Changes the buffer size; the driver picks it up at its next cycle.
    fn set_buffer_size(&self, st: &mut State, frames: u32) -> Result<Reply, WireError> {
        let h = self.view.header();
        let max = self.view.layout().caps.max_frames;
        if !(limits::MIN_BUFFER_FRAMES..=max).contains(&frames) {
            return Err(werr(
                ErrorCode::NotAllowed,
                format!(
                    "buffer size {frames} is outside {}..={max} frames",
                    limits::MIN_BUFFER_FRAMES
                ),
            ));
        }
        if h.buffer_frames.load(Ordering::Relaxed) != frames {
            if let Some(device) = &self.device_period {
                // A sound card is set up at the new period first; a refusal
                // keeps the old one.
                device
                    .request(frames, std::time::Duration::from_secs(5))
                    .map_err(|why| {
                        warn!("buffer size {frames} refused: {why}");
                        werr(
                            ErrorCode::NotAllowed,
                            format!("buffer size {frames}: {why}"),
                        )
                    })?;
            }
            let rate = h.sample_rate.load(Ordering::Relaxed).max(1);
            // The driver reads both at its next cycle start.
            h.period_ns
                .store(frames_to_ns(frames as u64, rate), Ordering::Relaxed);
            h.buffer_frames.store(frames, Ordering::Release);
            info!("buffer size now {frames} frames");
            Self::notify(st, Notification::BufferSize(frames));
            // Device latencies are in periods.
            self.publish(st);
            Self::graph_order(st);
        }
        Ok(Reply::Ok)
    }

    /// Makes client `me` timebase master (`conditional`: only if nobody is).
    fn take_timebase(&self, me: u32, conditional: bool) -> Result<(), WireError> {
        let h = self.view.header();
        let cur = h.timebase_master.load(Ordering::Acquire);
        if conditional && cur != 0 && cur != me {
            return Err(werr(
                ErrorCode::Exists,
                "another client is already timebase master",
            ));
        }
        h.timebase_master.store(me, Ordering::Release);
        h.timebase_gen.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A client that is timebase master stops being it.
    pub(super) fn leave_timebase(&self, slot: u32) {
        let h = self.view.header();
        let _ = h
            .timebase_master
            .compare_exchange(slot, 0, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Sets or clears a client's slow-sync flag.
    pub(super) fn set_sync_client(&self, slot: u32, on: bool) {
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
}
