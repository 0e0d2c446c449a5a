//! The transport as a client sees it: reading the published state
//! ([`Client::transport`]), commands and relocations written to the
//! client's mailbox, slow-sync and timebase registration requests, and the
//! process thread's slow-sync and timebase steps ([`RtContext::sync_due`],
//! [`RtContext::timebase_due`] & co).
//!
//! Threads: the reads, commands and relocations and the [`RtContext`] steps
//! are real-time safe (shared-memory reads and writes); the registration
//! requests talk to the server (non-real-time threads).

use crate::client::Client;
use crate::error::{Error, Result};
use crate::process::RtContext;
use resound_protocol::wire::Request;
use resound_shm::sync::Ordering;
use resound_shm::transport::{command, state, valid, RT_TRIES};
pub use resound_shm::transport::{Position, Transport};

impl Client {
    /// The transport as published for the current cycle. Real-time safe.
    /// Bounded: if the published cell cannot be read consistently in a
    /// few dozen spins (the server was preempted or killed in the middle of
    /// publishing it), the last value this client read is returned.
    pub fn transport(&self) -> Transport {
        let last = &self.inner.transport_last;
        match self.inner.view.header().transport.try_load(RT_TRIES) {
            Some(t) => {
                // Several threads may read at once: a busy local cell just
                // keeps its (equally recent) value.
                last.put(&t, 4);
                t
            }
            None => last.try_load(RT_TRIES).unwrap_or_default(),
        }
    }

    /// Posts transport command `cmd` in this client's mailbox (a new
    /// sequence number in the upper bits). Real-time safe.
    fn transport_command(&self, cmd: u32) {
        if let Some(mb) = self.inner.view.mailbox(self.inner.slot) {
            let mut w = mb.transport_cmd.load(Ordering::Relaxed);
            loop {
                let nw = ((w >> 8).wrapping_add(1) << 8) | cmd as u64;
                match mb.transport_cmd.compare_exchange_weak(
                    w,
                    nw,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(x) => w = x,
                }
            }
        }
    }

    /// Starts the transport. Real-time safe (a write into shared memory).
    pub fn transport_start(&self) {
        self.transport_command(command::START);
    }

    /// Stops the transport. Real-time safe.
    pub fn transport_stop(&self) {
        self.transport_command(command::STOP);
    }

    /// Requests a new transport position (real-time safe). Only the frame and
    /// the BBT/timecode fields named in `pos.valid` count; other valid bits
    /// are an error (as JACK's EINVAL). Real-time safe.
    pub fn transport_reposition(&self, pos: &Position) -> Result<()> {
        if pos.valid & !valid::REQUESTABLE != 0 {
            return Err(Error::State(
                "a reposition may only carry BBT and timecode fields",
            ));
        }
        let mb = self
            .inner
            .view
            .mailbox(self.inner.slot)
            .ok_or(Error::State("no mailbox"))?;
        if !mb.locate_pos.put(pos, 1024) {
            return Err(Error::State("transport request cell busy"));
        }
        mb.locate_req.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Locates the transport to a frame. Real-time safe.
    pub fn transport_locate(&self, frame: u32) -> Result<()> {
        self.transport_reposition(&Position {
            frame,
            ..Default::default()
        })
    }

    /// Declares whether this client is a slow-sync client (has a sync callback).
    pub fn set_sync_client(&self, on: bool) -> Result<()> {
        self.ok(Request::SetSyncClient { on })
    }

    /// Sets the slow-sync timeout (µs).
    pub fn set_sync_timeout(&self, usecs: u64) -> Result<()> {
        self.ok(Request::SetSyncTimeout { usecs })
    }

    /// Becomes the timebase master (`conditional`: fail if there is one).
    pub fn set_timebase(&self, conditional: bool) -> Result<()> {
        self.ok(Request::SetTimebase { conditional })
    }

    /// Stops being the timebase master.
    pub fn release_timebase(&self) -> Result<()> {
        self.ok(Request::ReleaseTimebase)
    }

    /// Whether this client is the timebase master. Real-time safe.
    pub fn is_timebase_master(&self) -> bool {
        self.inner
            .view
            .header()
            .timebase_master
            .load(Ordering::Acquire)
            == self.inner.slot
    }
}

impl RtContext {
    /// Slow-sync step, before the process callback: the transport, if this
    /// client still has to report ready for it (JACK calls the sync callback
    /// once after activation, then after every relocation and whenever the
    /// transport enters Starting, until it returns true). Real-time safe.
    pub fn sync_due(&mut self) -> Option<Transport> {
        let t = self.transport.read(&self.inner.view.header().transport);
        let mb = self.inner.view.mailbox(self.inner.slot)?;
        if !self.synced || mb.sync_ready.load(Ordering::Acquire) != t.sync_gen {
            Some(t)
        } else {
            None
        }
    }

    /// The sync callback returned true for `t`. Real-time safe.
    pub fn sync_ready(&mut self, t: &Transport) {
        self.synced = true;
        if let Some(mb) = self.inner.view.mailbox(self.inner.slot) {
            mb.sync_ready.store(t.sync_gen, Ordering::Release);
        }
    }

    /// Timebase step, after the process callback: if this client is the
    /// timebase master and its callback is due (a new position — first cycle
    /// as master, or a relocation — or the transport rolls), returns the
    /// transport state, the position for the *next* cycle (extended fields of
    /// this one, frame advanced when rolling) and `new_pos`. Real-time safe.
    pub fn timebase_due(&mut self) -> Option<(u32, Position, bool)> {
        let h = self.inner.view.header();
        if h.timebase_master.load(Ordering::Acquire) != self.inner.slot {
            self.tb_gen = None;
            return None;
        }
        let c = self.current?;
        let t = self.transport.read(&h.transport);
        let gen = h.timebase_gen.load(Ordering::Acquire);
        let new_pos = self.tb_gen != Some(gen) || self.tb_locate != t.locate_gen;
        self.tb_gen = Some(gen);
        self.tb_locate = t.locate_gen;
        if !new_pos && t.state != state::ROLLING {
            return None;
        }
        let mut next = t.pos;
        if t.state == state::ROLLING {
            next.frame = next.frame.wrapping_add(c.frames as u32);
        }
        Some((t.state, next, new_pos))
    }

    /// Hands the timebase master's position for the next cycle to the
    /// driver. Real-time safe.
    pub fn timebase_commit(&self, pos: &Position) {
        let (Some(c), Some(mb)) = (self.current, self.inner.view.mailbox(self.inner.slot)) else {
            return;
        };
        if mb.timebase_pos.put(pos, 64) {
            mb.timebase_cycle.store(c.cycle, Ordering::Release);
        }
    }
}
