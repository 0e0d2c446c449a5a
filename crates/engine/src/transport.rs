//! The transport state machine, run by the driver thread at every cycle start.
//!
//! JACK semantics (jackd's transport engine):
//!
//! * **Commands** (jack_transport_start/stop) and **relocations**
//!   (jack_transport_locate/reposition) come from any client, real-time safe,
//!   through its [`Mailbox`](resound_shm::Mailbox) in the shared segment; the last command of a
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

use resound_shm::sync::Ordering;
use resound_shm::transport::{command, state, valid, Position, Transport};
use resound_shm::{client_state, Table, View};

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
    /// Node segment installs of the slot when those were seen
    /// (`View::node_installs`): a new client's mailbox starts from zero
    /// words.
    last_mailbox: Vec<u64>,
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
            last_mailbox: vec![0; max_clients as usize],
            starting_since: 0,
            master: 0,
        }
    }

    /// The state published for the current cycle. Real-time safe.
    pub fn current(&self) -> &Transport {
        &self.t
    }

    /// Runs the state machine for `cycle` (of `frames` frames, starting at
    /// `start_ns`) and publishes the result. Driver thread, before any client
    /// of the cycle is woken. Real-time safe.
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
        // A request is a word that changed since the last cycle. A client
        // that left keeps its mailbox readable for a while (the view's
        // RETIRE_AFTER), so a command posted just before closing counts; a
        // new client of the slot brings a new mailbox, whose words start
        // from zero (a request it posted before this cycle counts).
        let mut cmd = command::NONE;
        let mut locate: Option<Position> = None;
        for slot in 1..view.layout().caps.max_clients {
            let Some(mb) = view.mailbox(slot) else {
                continue;
            };
            let s = slot as usize;
            let installs = view.node_installs(slot);
            if installs != self.last_mailbox[s] {
                self.last_mailbox[s] = installs;
                (self.last_cmd[s], self.last_locate[s]) = (0, 0);
            }
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
                    // A locate in the same cycle is kept (jackd does).
                    t.state = state::STOPPED;
                    if let Some(p) = locate {
                        Self::relocate(t, &p);
                    }
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
                    if let Some(p) = locate {
                        Self::relocate(t, &p);
                    }
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

    /// Takes position `p` as the transport's new position (keeping the
    /// driver's own time fields) and bumps the relocation counters. Real-time safe.
    fn relocate(t: &mut Transport, p: &Position) {
        let keep = (t.pos.usecs, t.pos.frame_rate);
        t.pos = *p;
        (t.pos.usecs, t.pos.frame_rate) = keep;
        t.sync_gen += 1;
        t.locate_gen += 1;
    }

    /// Whether every active slow-sync client acknowledged `gen`. Real-time safe.
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

#[cfg(test)]
mod tests {
    use super::*;
    use resound_shm::Capacities;

    fn view_with_active_client() -> View {
        let caps = Capacities {
            max_clients: 8,
            max_ports: 8,
            max_connections: 8,
            max_frames: 4096,
        };
        resound_shm::fixture::view_with_active_clients(caps, 256, 1)
    }

    #[test]
    fn start_locate_roll_stop() {
        let v = view_with_active_client();
        let table = v.table(v.current_index());
        let mut te = TransportEngine::new(8);
        let mb = v.mailbox(1).unwrap();
        let post = |cmd: u32| {
            let w = mb.transport_cmd.load(Ordering::Relaxed);
            mb.transport_cmd
                .store((((w >> 8) + 1) << 8) | cmd as u64, Ordering::Release);
        };
        te.cycle(&v, &table, 1, 256, 1_000);
        assert_eq!(v.header().transport.load().state, state::STOPPED);
        post(command::START);
        te.cycle(&v, &table, 2, 256, 2_000);
        assert_eq!(te.current().state, state::STARTING);
        te.cycle(&v, &table, 3, 256, 3_000);
        let t = v.header().transport.load();
        assert_eq!((t.state, t.pos.frame, t.cycle), (state::ROLLING, 0, 3));
        te.cycle(&v, &table, 4, 256, 4_000);
        assert_eq!(v.header().transport.load().pos.frame, 256);
        assert!(mb.locate_pos.put(
            &Position {
                frame: 48_000,
                ..Default::default()
            },
            4
        ));
        mb.locate_req.fetch_add(1, Ordering::AcqRel);
        te.cycle(&v, &table, 5, 256, 5_000);
        let t = v.header().transport.load();
        assert_eq!(
            (t.state, t.pos.frame, t.locate_gen),
            (state::ROLLING, 48_000, 1)
        );
        post(command::STOP);
        te.cycle(&v, &table, 6, 256, 6_000);
        te.cycle(&v, &table, 7, 256, 7_000);
        let t = v.header().transport.load();
        assert_eq!((t.state, t.pos.frame), (state::STOPPED, 48_256));
        // Start, roll, then a stop and a locate in the same cycle: both
        // count (`stop(); locate(10000)` ends stopped at 10000, as on jackd).
        post(command::START);
        for c in 8..11 {
            te.cycle(&v, &table, c, 256, c * 1_000);
        }
        assert_eq!(te.current().state, state::ROLLING);
        post(command::STOP);
        assert!(mb.locate_pos.put(
            &Position {
                frame: 10_000,
                ..Default::default()
            },
            4
        ));
        mb.locate_req.fetch_add(1, Ordering::AcqRel);
        te.cycle(&v, &table, 11, 256, 11_000);
        te.cycle(&v, &table, 12, 256, 12_000);
        let t = v.header().transport.load();
        assert_eq!((t.state, t.pos.frame), (state::STOPPED, 10_000));
    }

    /// A slot taken by a new client (a new node segment, its mailbox
    /// zeroed) must not make the new client's first request look like the
    /// previous occupant's last one, which the driver has already applied.
    #[test]
    fn a_reused_slot_never_loses_the_new_clients_first_request() {
        let v = view_with_active_client();
        let table = v.table(v.current_index());
        let mut te = TransportEngine::new(8);
        // As resound-client posts them: the sequence advances from the current word.
        let post = |slot: u32, cmd: u32| {
            let mb = v.mailbox(slot).unwrap();
            let w = mb.transport_cmd.load(Ordering::Relaxed);
            mb.transport_cmd
                .store((((w >> 8) + 1) << 8) | cmd as u64, Ordering::Release);
        };
        let locate = |slot: u32, frame: u32| {
            let mb = v.mailbox(slot).unwrap();
            assert!(mb.locate_pos.put(
                &Position {
                    frame,
                    ..Default::default()
                },
                4
            ));
            mb.locate_req.fetch_add(1, Ordering::AcqRel);
        };
        // The first occupant of slot 1 starts the transport and relocates once.
        post(1, command::START);
        locate(1, 1000);
        te.cycle(&v, &table, 1, 256, 1_000);
        te.cycle(&v, &table, 2, 256, 2_000);
        assert_eq!(te.current().state, state::ROLLING);
        assert_eq!(te.current().locate_gen, 1);
        // Another client stops it; slot 1's client leaves and a new one
        // takes the slot (with a node segment of its own) before the driver
        // runs again.
        post(2, command::STOP);
        te.cycle(&v, &table, 3, 256, 3_000);
        assert_eq!(te.current().state, state::STOPPED);
        assert!(v.install_node(1, 100, v.create_node().unwrap()));
        // The new client's first start and first relocation both count.
        post(1, command::START);
        locate(1, 5000);
        te.cycle(&v, &table, 4, 256, 4_000);
        let t = te.current();
        assert_eq!(
            (t.state, t.pos.frame, t.locate_gen),
            (state::STARTING, 5000, 2),
            "the new occupant's first requests were ignored"
        );
    }

    #[test]
    fn slow_sync_clients_hold_starting_until_ready_or_timeout() {
        let v = view_with_active_client();
        let table = v.table(v.current_index());
        let h = v.header();
        h.sync_clients[0].store(1 << 1, Ordering::Release);
        h.sync_timeout_us.store(1_000, Ordering::Relaxed);
        let mut te = TransportEngine::new(8);
        let mb = v.mailbox(1).unwrap();
        mb.transport_cmd
            .store((1 << 8) | command::START as u64, Ordering::Release);
        te.cycle(&v, &table, 1, 256, 1_000_000);
        let gen = te.current().sync_gen;
        te.cycle(&v, &table, 2, 256, 1_500_000);
        assert_eq!(te.current().state, state::STARTING, "not ready yet");
        mb.sync_ready.store(gen, Ordering::Release);
        te.cycle(&v, &table, 3, 256, 1_600_000);
        assert_eq!(te.current().state, state::ROLLING, "ready");
        // A relocation while rolling goes back to Starting; the timeout ends it.
        assert!(mb.locate_pos.put(&Position::default(), 4));
        mb.locate_req.fetch_add(1, Ordering::AcqRel);
        te.cycle(&v, &table, 4, 256, 2_000_000);
        assert_eq!(te.current().state, state::STARTING);
        te.cycle(&v, &table, 5, 256, 2_500_000);
        assert_eq!(te.current().state, state::STARTING);
        te.cycle(&v, &table, 6, 256, 3_100_000);
        assert_eq!(te.current().state, state::ROLLING, "sync timeout (1 ms)");
    }

    #[test]
    fn hostile_mailboxes_are_sanitised() {
        let v = view_with_active_client();
        let table = v.table(v.current_index());
        let h = v.header();
        let mut te = TransportEngine::new(8);
        let mb = v.mailbox(1).unwrap();
        // An unknown command, a relocation cell stuck mid-write, and a
        // timebase output full of invalid bits and NaNs.
        mb.transport_cmd.store(0x00de_adbe_ef77, Ordering::Release);
        mb.locate_req.store(5, Ordering::Release);
        mb.locate_pos.seq.store(1, Ordering::Release);
        h.timebase_master.store(1, Ordering::Release);
        assert!(mb.timebase_pos.put(
            &Position {
                valid: u32::MAX,
                frame: 999,
                bar: 7,
                beats_per_minute: f64::NAN,
                beat_type: f32::INFINITY,
                ..Default::default()
            },
            4
        ));
        mb.timebase_cycle.store(0, Ordering::Release);
        te.cycle(&v, &table, 1, 256, 1_000);
        let t = h.transport.load();
        assert_eq!(t.state, state::STOPPED, "unknown command ignored");
        assert_eq!(
            t.pos.frame, 0,
            "the frame is the server's, not the master's"
        );
        assert_eq!(t.pos.valid, valid::EXTENDED);
        assert_eq!(t.pos.bar, 7);
        assert_eq!((t.pos.beats_per_minute, t.pos.beat_type), (0.0, 0.0));
        // The stuck cell is retried, and applied once consistent.
        mb.locate_pos.seq.store(0, Ordering::Release);
        assert!(mb.locate_pos.put(
            &Position {
                frame: 1234,
                valid: u32::MAX,
                ..Default::default()
            },
            4
        ));
        te.cycle(&v, &table, 2, 256, 2_000);
        let t = h.transport.load();
        assert_eq!(t.pos.frame, 1234);
        assert_eq!(t.pos.valid & !valid::EXTENDED, 0);
    }
}
