//! Target `transport_mailbox`: every client's transport mailbox
//! ([`resound_shm::Mailbox`], in the shared segment every client can
//! write) overwritten with the fuzzer's bytes between cycles, and the
//! driver's transport step ([`TransportEngine::cycle`]) run over a real
//! control and shared segment, as the engine's own tests build one.
//!
//! Input: one byte of setup (which clients are active, which are slow-sync,
//! the timebase master, a short sync timeout), then per cycle a byte saying
//! which mailboxes are overwritten (and whether the master's position is
//! stamped for this cycle, so the driver reads it), followed by their bytes.
//!
//! Checks after every cycle: no panic; the published transport is the
//! driver's (`current()`), for this cycle, at the server's rate, in a known
//! state, with only valid bits the driver allows and only finite numbers.

use resound_engine::transport::TransportEngine;
use resound_shm::fixture::publish_client_states;
use resound_shm::sync::Ordering;
use resound_shm::transport::{state, valid, Position};
use resound_shm::{client_state, Capacities, Mailbox, View};

/// Client slots (the driver's included).
const CLIENTS: u32 = 4;
/// Sample rate of the segment.
const RATE: u32 = 48_000;
/// Most cycles one input runs.
const MAX_CYCLES: u64 = 16;
/// Bytes of one mailbox.
const MAILBOX: usize = std::mem::size_of::<Mailbox>();

thread_local! {
    /// One pair of segments per thread, reset for every input.
    static VIEW: View = {
        let v = View::create(
            Capacities { max_clients: CLIENTS, max_ports: 4, max_connections: 4, max_frames: 256 },
            RATE, 256, true, 0,
        ).expect("segments");
        v.own_nodes(1..CLIENTS).expect("node segments");
        v
    };
}

/// Runs the transport over the mailboxes `data` writes.
pub fn run(data: &[u8]) {
    let Some((&setup, mut rest)) = data.split_first() else {
        return;
    };
    VIEW.with(|v| {
        prepare(v, setup);
        let table = v.table(v.current_index());
        let mut te = TransportEngine::new(CLIENTS);
        let mut cycle = 1u64;
        while let Some((&mask, more)) = rest.split_first() {
            rest = more;
            for slot in 1..CLIENTS {
                if mask & (1 << slot) != 0 {
                    let n = rest.len().min(MAILBOX);
                    scribble(v, slot, &rest[..n]);
                    rest = &rest[n..];
                }
            }
            let master = v.header().timebase_master.load(Ordering::Relaxed);
            if mask & 1 != 0 {
                if let Some(mb) = v.mailbox(master) {
                    mb.timebase_cycle.store(cycle - 1, Ordering::Release);
                }
            }
            let frames = 16 << (mask >> 5);
            te.cycle(v, &table, cycle, frames, cycle * 5_000_000);
            check(v, &te, cycle);
            cycle += 1;
            if cycle > MAX_CYCLES {
                break;
            }
        }
    });
}

/// Zeroes every mailbox and sets up the header and the table from `setup`.
fn prepare(v: &View, setup: u8) {
    for slot in 1..CLIENTS {
        scribble(v, slot, &[]);
    }
    let h = v.header();
    h.timebase_master
        .store(((setup >> 3) & 3) as u32, Ordering::Release);
    h.sync_clients[0].store(((setup >> 5) as u64 & 7) << 1, Ordering::Release);
    h.sync_timeout_us.store(
        if setup & 0x80 != 0 { 2_000_000 } else { 1_000 },
        Ordering::Relaxed,
    );
    let states: Vec<u32> = (1..CLIENTS)
        .map(|slot| {
            if setup & (1 << slot) != 0 {
                client_state::ACTIVE
            } else {
                client_state::OPEN
            }
        })
        .collect();
    // SAFETY: this thread's own segments (`VIEW` is thread-local), and
    // their only writer.
    unsafe { publish_client_states(v, &states) };
}

/// Writes `bytes` over the start of `slot`'s mailbox (the rest zeroed), as
/// a client process can.
fn scribble(v: &View, slot: u32, bytes: &[u8]) {
    let mb = v.mailbox(slot).expect("slot in range");
    // SAFETY: the mailbox lies inside this process's own read-write mapping
    // of the slot's node segment (`own_nodes`), MAILBOX bytes long; every
    // field is an atomic (interior mutability), valid for any bytes, and
    // written here as the client process would.
    unsafe {
        let p = mb as *const Mailbox as *mut u8;
        std::ptr::write_bytes(p, 0, MAILBOX);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len().min(MAILBOX));
    }
}

/// The published transport's invariants.
fn check(v: &View, te: &TransportEngine, cycle: u64) {
    let t = v.header().transport.load();
    assert_eq!(&t, te.current(), "published transport is not the driver's");
    assert_eq!(t.cycle, cycle);
    assert_eq!(t.pos.frame_rate, RATE);
    assert!(
        matches!(t.state, state::STOPPED | state::ROLLING | state::STARTING),
        "state {}",
        t.state
    );
    assert_eq!(
        t.pos.valid & !valid::EXTENDED,
        0,
        "valid bits {:#x}",
        t.pos.valid
    );
    assert_finite(&t.pos);
}

fn assert_finite(p: &Position) {
    for x in [
        p.bar_start_tick,
        p.ticks_per_beat,
        p.beats_per_minute,
        p.frame_time,
        p.next_time,
        p.tick_double,
    ] {
        assert!(x.is_finite(), "{p:?}");
    }
    for x in [p.beats_per_bar, p.beat_type, p.audio_frames_per_video_frame] {
        assert!(x.is_finite(), "{p:?}");
    }
}
