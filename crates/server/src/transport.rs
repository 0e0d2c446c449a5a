//! The transport state machine, run by the driver thread at every cycle start.
//!
//! JACK semantics (jackd's transport engine):
//!
//! * **Commands** (jack_transport_start/stop) and **relocations**
//!   (jack_transport_locate/reposition) come from any client, real-time safe,
//!   through its [`Mailbox`] in the shared segment; the last command of a
//!   cycle wins, clients in slot order.
//! * **Stopped → Starting** on start. **Starting → Rolling** once every
//!   active slow-sync client (one with a sync callback, flagged in
//!   `ControlHeader::sync_clients` by the control thread) has acknowledged the
//!   current `sync_gen` in its mailbox, or when the sync timeout expired.
//!   With no slow-sync client this takes one cycle, as in jackd.
//! * A relocation bumps `sync_gen` (slow-sync clients are called again) and
//!   `locate_gen` (the timebase master gets `new_pos`); while rolling with
//!   slow-sync clients it goes back to Starting.
//! * While rolling the frame advances by the previous cycle's length.
//! * The **timebase master** (slot in `ControlHeader::timebase_master`, set by
//!   the control thread) writes the extended position of the next cycle into
//!   its mailbox after its process callback; the driver takes it (sanitised:
//!   only extended bits, finite numbers) at the next cycle start. When the
//!   master goes, the extended fields become invalid.
//!
//! The result is published in `ControlHeader::transport` for clients
//! (jack_transport_query, sync and timebase callbacks).
//!
//! Real-time: preallocated state only; no allocation, lock or syscall.

use resound_protocol::shm::{client_state, Table, View};
use resound_protocol::sync::Ordering;
use resound_protocol::transport::{command, state, valid, Position, Transport};

/// How often a reader retries a client-written cell before giving up for this cycle.
const TRIES: u32 = 4;

/// Driver-side transport state.
pub struct TransportEngine {
    t: Transport,
    /// Frames to advance at the next cycle start (the length of a rolling cycle).
    advance: u32,
    /// Last command word seen per slot.
    last_cmd: Vec<u64>,
    /// Last relocation counter seen per slot.
    last_locate: Vec<u64>,
    /// When the transport entered Starting (ns).
    starting_since: u64,
    /// Timebase master seen at the last cycle.
    master: u32,
}

impl TransportEngine {
    /// State for `max_clients` slots (allocates; call before the driver loop).
    pub fn new(max_clients: u32) -> TransportEngine {
        TransportEngine {
            t: Transport::default(),
            advance: 0,
            last_cmd: vec![0; max_clients as usize],
            last_locate: vec![0; max_clients as usize],
            starting_since: 0,
            master: 0,
        }
    }

    /// The state published for the current cycle.
    pub fn current(&self) -> &Transport {
        &self.t
    }

    /// Runs the state machine for `cycle` (of `frames` frames, starting at
    /// `start_ns`) and publishes the result. Driver thread, before any client
    /// of the cycle is woken.
    pub fn cycle(
        &mut self,
        view: &View,
        table: &Table<'_>,
        cycle: u64,
        frames: u32,
        start_ns: u64,
    ) {
        let h = view.header();
        let t = &mut self.t;
        if t.state == state::ROLLING {
            t.pos.frame = t.pos.frame.wrapping_add(self.advance);
        }
        self.advance = 0;

        // Extended position from the timebase master, written last cycle.
        let master = h.timebase_master.load(Ordering::Acquire);
        if master != self.master {
            self.master = master;
            if master == 0 {
                t.pos.valid = 0;
            }
        }
        if master != 0 && table.client_state(master) == client_state::ACTIVE {
            if let Some(mb) = view.mailbox(master) {
                if mb.timebase_cycle.load(Ordering::Acquire) == cycle.wrapping_sub(1) {
                    if let Some(p) = mb.timebase_pos.get(TRIES) {
                        t.pos.take_extended(&p.sanitised(valid::EXTENDED));
                    }
                }
            }
        }

        // Requests from every slot, open or not: a command posted just before
        // its client closed still counts (jack_transport does exactly that).
        // A slot's mailbox is reset to zero when a new client takes it, which
        // reads as "no command".
        let mut cmd = command::NONE;
        let mut locate: Option<Position> = None;
        for slot in 1..view.layout().caps.max_clients {
            let Some(mb) = view.mailbox(slot) else {
                continue;
            };
            let s = slot as usize;
            let w = mb.transport_cmd.load(Ordering::Acquire);
            if w != self.last_cmd[s] {
                self.last_cmd[s] = w;
                let c = (w & 0xff) as u32;
                if c == command::START || c == command::STOP {
                    cmd = c;
                }
            }
            let l = mb.locate_req.load(Ordering::Acquire);
            if l != self.last_locate[s] {
                // A cell that stays busy is retried next cycle.
                if let Some(p) = mb.locate_pos.get(TRIES) {
                    self.last_locate[s] = l;
                    if l != 0 {
                        locate = Some(p.sanitised(valid::REQUESTABLE));
                    }
                }
            }
        }

        let any_sync = (1..table.client_hw())
            .any(|s| view.is_sync_client(s) && table.client_state(s) == client_state::ACTIVE);
        let timeout_ns = h
            .sync_timeout_us
            .load(Ordering::Relaxed)
            .saturating_mul(1000);
        match t.state {
            state::STOPPED => {
                if let Some(p) = locate {
                    Self::relocate(t, &p);
                }
                if cmd == command::START {
                    t.state = state::STARTING;
                    t.sync_gen += 1;
                    self.starting_since = start_ns;
                }
            }
            state::STARTING => {
                if cmd == command::STOP {
                    t.state = state::STOPPED;
                } else if let Some(p) = locate {
                    Self::relocate(t, &p);
                    self.starting_since = start_ns;
                } else if Self::all_ready(view, table, t.sync_gen)
                    || start_ns.saturating_sub(self.starting_since) >= timeout_ns
                {
                    t.state = state::ROLLING;
                }
            }
            _ => {
                if cmd == command::STOP {
                    t.state = state::STOPPED;
                } else if let Some(p) = locate {
                    Self::relocate(t, &p);
                    if any_sync {
                        t.state = state::STARTING;
                        self.starting_since = start_ns;
                    }
                }
            }
        }
        if t.state == state::ROLLING {
            self.advance = frames;
        }
        t.cycle = cycle;
        t.pos.usecs = start_ns / 1000;
        t.pos.frame_rate = h.sample_rate.load(Ordering::Relaxed);
        h.transport.publish(t);
    }

    fn relocate(t: &mut Transport, p: &Position) {
        let keep = (t.pos.usecs, t.pos.frame_rate);
        t.pos = *p;
        (t.pos.usecs, t.pos.frame_rate) = keep;
        t.sync_gen += 1;
        t.locate_gen += 1;
    }

    /// Whether every active slow-sync client acknowledged `gen`.
    fn all_ready(view: &View, table: &Table<'_>, gen: u64) -> bool {
        (1..table.client_hw()).all(|s| {
            !view.is_sync_client(s)
                || table.client_state(s) != client_state::ACTIVE
                || view
                    .mailbox(s)
                    .is_some_and(|m| m.sync_ready.load(Ordering::Acquire) == gen)
        })
    }
}
