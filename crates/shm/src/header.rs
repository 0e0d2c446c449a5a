//! The control header: the server's global state in the first page of the
//! control segment (sealed: only the server writes it), and the timer of
//! the current cycle, published by the driver under [`crate::seqlock`].
//! The driver thread writes the per-cycle fields, the control thread the
//! others; every thread of every process reads it.

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::transport::TransportCell;

/// The server's global state, first page of the control segment.
///
/// Writers: the server only (the segment is sealed against writable
/// mappings, so clients cannot scribble here): its control thread at
/// creation and on configuration changes, its driver thread at every cycle
/// start. Readers: every thread of every process, without sanitising beyond
/// bounds checks (the values are the server's).
///
/// Order at a cycle start: the driver switches the graph (`switch`), then
/// publishes the timer ([`ControlHeader::publish_timer`]: `cycle`,
/// `cycle_start_ns`, `frame_time`, `next_start_ns`, `cycle_frames` under
/// `timer_seq`), then the transport (`transport`), then triggers the graph.
/// Fields marked *once* are written by [`crate::View::create`] before any
/// client maps the segment.
#[repr(C)]
pub struct ControlHeader {
    /// [`crate::MAGIC`]. Once.
    pub magic: u64,
    /// [`crate::LAYOUT_VERSION`]. Once.
    pub version: u32,
    /// `size_of::<ControlHeader>()` in bytes, to catch mismatched builds. Once.
    pub header_size: u32,
    /// Client slots, the driver's slot 0 included. Once.
    pub max_clients: u32,
    /// Port slots. Once.
    pub max_ports: u32,
    /// Capacity of the `sources` array of each table (port-to-port connections). Once.
    pub max_connections: u32,
    /// Frames each port buffer can hold (the largest period the server allows). Once.
    pub max_frames: u32,
    /// Sample rate in Hz. Once (an atomic for readers' convenience).
    pub sample_rate: AtomicU32,
    /// Requested period in frames (≤ `max_frames`). Writer: control thread
    /// (release, after `period_ns`) on a buffer-size change. Reader: the
    /// driver at its next cycle start, which copies it into `cycle_frames`;
    /// clients use `cycle_frames` for the current cycle.
    pub buffer_frames: AtomicU32,
    /// 1 in sync mode (cycle ends when the graph has finished), 0 in async mode. Once.
    pub sync_mode: u32,
    /// SCHED_FIFO priority for client process threads; 0: not real-time. Once.
    pub client_priority: i32,
    /// Early wake-up bound (µs; 0: off). A client process thread whose
    /// last cycle ran (wake-up to finish) shorter than this wakes its
    /// downstream threads as it starts a cycle, not only as it ends it, and
    /// a thread woken that way spins at most this long for its inputs
    /// before it sleeps again. Writer: the server, once at start-up, before
    /// any client maps the header. Readers: client process threads, every
    /// cycle (an absurd value costs only the reader's own spinning).
    pub early_wake_us: AtomicU32,
    /// 1 while the server runs; 0 once it is stopping (client threads then
    /// exit). Writer: control thread. Readers: client threads, every wake-up.
    pub running: AtomicU32,
    /// The graph switch word, see [`crate::sync::switch`]. Writers: the
    /// control thread (begin/end of a table write) and the driver (the
    /// switch, at cycle start). Readers: everybody, before reading a table.
    pub switch: AtomicU32,
    /// Number of the current cycle (first cycle is 1). Writer: driver, under
    /// `timer_seq`. Readers: [`ControlHeader::try_timer`].
    pub cycle: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the current cycle began (its nominal
    /// deadline). Writer: driver, under `timer_seq`.
    pub cycle_start_ns: AtomicU64,
    /// Frames processed before the current cycle (JACK frame time of its
    /// first frame). Writer: driver, under `timer_seq`.
    pub frame_time: AtomicU64,
    /// Requested period in ns (`buffer_frames` / `sample_rate`). Writer:
    /// control thread, before `buffer_frames`. Readers: the driver (its
    /// reservation controller), status displays.
    pub period_ns: AtomicU64,
    /// Expected start of the next cycle, CLOCK_MONOTONIC ns. Writer: driver,
    /// under `timer_seq`.
    pub next_start_ns: AtomicU64,
    /// Xruns since the server started (count). Writer: driver (fetch_add).
    /// Readers: libjack statistics, status.
    pub xruns: AtomicU64,
    /// Sequence word of the timer fields (`cycle`, `cycle_start_ns`,
    /// `frame_time`, `next_start_ns`, `cycle_frames`), [`crate::seqlock`]:
    /// odd while the driver writes them. Writer: driver
    /// ([`ControlHeader::publish_timer`]). Readers:
    /// [`ControlHeader::try_timer`], [`crate::View::timer`].
    pub timer_seq: AtomicU32,
    /// Frames of the current cycle: `buffer_frames` as the driver read it at
    /// cycle start (a buffer-size change takes effect at the next cycle).
    /// Writer: driver, under `timer_seq`.
    pub cycle_frames: AtomicU32,
    // ---- layout 3: transport, freewheel, statistics (libjack) ----
    /// Transport state and position of the current cycle
    /// ([`crate::transport::Transport`]). Writer: driver, every cycle start.
    pub transport: TransportCell,
    /// Slot of the timebase master client; 0: none. Writer: control thread.
    /// Readers: the driver (whose mailbox to take the position from), clients.
    pub timebase_master: AtomicU32,
    /// Incremented by the control thread whenever a client becomes timebase
    /// master, so the master calls its callback with `new_pos` once.
    pub timebase_gen: AtomicU32,
    /// Slow-sync timeout in microseconds (JACK default 2 s). Writer: control thread.
    pub sync_timeout_us: AtomicU64,
    /// Bitmap of slow-sync client slots (bit `slot % 64` of word `slot / 64`):
    /// clients with a sync callback the driver waits for in Starting.
    /// Writer: control thread.
    pub sync_clients: [AtomicU64; 16],
    /// 1 while freewheeling (the driver runs cycles back to back without the
    /// clock, each waiting for the whole graph). Writer: control thread.
    pub freewheel: AtomicU32,
    /// DSP load in percent as f32 bits: the graph's busy time over the
    /// period, smoothed like jackd. Writer: driver, once per cycle. Reader:
    /// `jack_cpu_load`.
    pub cpu_load: AtomicU32,
    /// Largest wake-up delay of the driver (µs) since start or the last
    /// reset. Writer: driver (fetch_max), control thread (reset to 0).
    pub max_delayed_us: AtomicU32,
    /// Wake-up delay (µs) of the driver in the last cycle with an xrun. Writer: driver.
    pub xrun_delayed_us: AtomicU32,
    // ---- layout 5: node segments ----
    /// Futex word every client process thread also sleeps on, besides the
    /// `done` word of the upstream node it waits for: bumped by the driver
    /// after a cycle start that switched the graph table (a sleeper may
    /// wait for a node that is no longer upstream of it, or no longer
    /// runs), and by the control thread when the server stops. Only its
    /// changes matter.
    pub epoch: AtomicU32,
    // ---- layout 7 ----
    /// `freewheel` as the driver has acted on it: set to 1 (0) at the start
    /// of the first cycle the driver runs freewheeling (on the clock again),
    /// after it has stopped (resumed) updating client reservations. Client
    /// process threads follow this word, not the request in `freewheel`,
    /// when they drop or take back their real-time scheduling: a thread
    /// that drops it on seeing 1 cannot be given its reservation again by
    /// an update still in flight. Writer: driver, at cycle start. Readers:
    /// client process threads, every wake-up.
    pub freewheel_in_effect: AtomicU32,
    // ---- layout 8 ----
    /// Each slot's reservation budget per audio cycle, in µs (saturated at
    /// 65,535), two slots per word: slot `s` in the low half of word
    /// `s / 2` when `s` is even, in the high half when odd
    /// ([`ControlHeader::cycle_budget_us`]). 0: no reservation known (the
    /// slot runs under SCHED_FIFO or SCHED_OTHER, or is not attached yet;
    /// while freewheeling the last budget stays, though the thread has
    /// left SCHED_DEADLINE: it then only spins less). A client's process thread bounds its
    /// early wake-up spin by it, so that spinning never eats the budget its
    /// own work needs. Writer: the driver, whenever it applies a slot's
    /// reservation (sole writer: a plain load and store per update).
    /// Readers: client process threads, once per cycle at most; a wrong
    /// value only changes how long that reader spins.
    pub cycle_budget_us: [AtomicU32; crate::limits::HARD_MAX_CLIENTS as usize / 2],
    // ---- layout 9 ----
    /// 1: the first client in the activation order sleeps with a timer set
    /// to its early wake-up bound before the driver is expected to release
    /// the next cycle, and spins for the release (only while
    /// `early_wake_us` is not 0); 0: it sleeps until the release. Writer:
    /// the server, once at start-up, before any client maps the header.
    /// Readers: client process threads, before each sleep on the driver's
    /// done word (a wrong value changes only when that reader wakes).
    pub first_wake_timer: AtomicU32,
}

/// The timer fields of the current cycle, as the driver publishes them
/// ([`ControlHeader::publish_timer`]) and readers copy them
/// ([`ControlHeader::try_timer`], [`crate::View::timer`]). Not shared
/// memory itself: a plain copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer {
    /// Cycle number.
    pub cycle: u64,
    /// CLOCK_MONOTONIC ns at which it began (its nominal deadline).
    pub start_ns: u64,
    /// Frame time of its first frame.
    pub frame_time: u64,
    /// Expected start of the next cycle.
    pub next_start_ns: u64,
    /// Frames in this cycle.
    pub frames: u32,
}

impl ControlHeader {
    /// The early wake-up bound (ns; 0: off; see `early_wake_us`).
    /// Real-time safe.
    pub fn early_wake_ns(&self) -> u64 {
        u64::from(self.early_wake_us.load(Ordering::Relaxed)) * 1000
    }

    /// Slot `slot`'s reservation budget per audio cycle (µs; 0: none
    /// known, or a slot out of range). Real-time safe.
    pub fn cycle_budget_us(&self, slot: u32) -> u32 {
        let Some(word) = self.cycle_budget_us.get(slot as usize / 2) else {
            return 0;
        };
        let v = word.load(Ordering::Relaxed);
        if slot.is_multiple_of(2) {
            v & 0xffff
        } else {
            v >> 16
        }
    }

    /// Writer side, the driver only (sole writer of these words): sets
    /// slot `slot`'s budget per audio cycle to `ns` (rounded down to µs,
    /// saturated at 65,535 µs; 0: none). A slot out of range is ignored.
    /// Real-time safe.
    pub fn set_cycle_budget(&self, slot: u32, ns: u64) {
        let Some(word) = self.cycle_budget_us.get(slot as usize / 2) else {
            return;
        };
        let us = (ns / 1000).min(0xffff) as u32;
        let v = word.load(Ordering::Relaxed);
        let v = if slot.is_multiple_of(2) {
            (v & 0xffff_0000) | us
        } else {
            (v & 0xffff) | (us << 16)
        };
        word.store(v, Ordering::Relaxed);
    }

    /// Writer side, the driver only (sole writer of the timer fields), at
    /// cycle start: publishes the timer of the new cycle under `timer_seq`
    /// ([`crate::seqlock::write_exclusive`]). Real-time safe.
    pub fn publish_timer(&self, t: &Timer) {
        crate::seqlock::write_exclusive(&self.timer_seq, || {
            self.cycle.store(t.cycle, Ordering::Relaxed);
            self.cycle_start_ns.store(t.start_ns, Ordering::Relaxed);
            self.frame_time.store(t.frame_time, Ordering::Relaxed);
            self.next_start_ns.store(t.next_start_ns, Ordering::Relaxed);
            self.cycle_frames.store(t.frames, Ordering::Relaxed);
        });
    }

    /// Reader side: a consistent copy of the timer in at most `tries`
    /// attempts ([`crate::seqlock::read`]); None if the driver was
    /// publishing (or died publishing) all along. Real-time safe.
    pub fn try_timer(&self, tries: u32) -> Option<Timer> {
        crate::seqlock::read(&self.timer_seq, tries, || self.timer_fields())
    }

    /// The timer fields as they are, without the sequence check (possibly
    /// from two cycles): the fallback of readers that must return something.
    /// Real-time safe.
    pub fn timer_fields(&self) -> Timer {
        Timer {
            cycle: self.cycle.load(Ordering::Relaxed),
            start_ns: self.cycle_start_ns.load(Ordering::Relaxed),
            frame_time: self.frame_time.load(Ordering::Relaxed),
            next_start_ns: self.next_start_ns.load(Ordering::Relaxed),
            frames: self.cycle_frames.load(Ordering::Relaxed),
        }
    }
}

/// Attempts of [`crate::View::timer`] before it gives up on a consistent copy.
pub const TIMER_TRIES: u32 = 100_000;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::test_caps as caps;
    use crate::View;

    #[test]
    fn a_timer_left_half_published_does_not_hang_readers() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        v.header().cycle.store(7, Ordering::Relaxed);
        // A driver killed between the two increments of the sequence.
        v.header().timer_seq.store(1, Ordering::Relaxed);
        assert_eq!(v.timer().cycle, 7);
        v.header().timer_seq.store(2, Ordering::Relaxed);
        assert_eq!(v.timer().cycle, 7);
    }

    #[test]
    fn a_published_timer_reads_back_whole() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        let t = Timer {
            cycle: 9,
            start_ns: 1_000,
            frame_time: 1_152,
            next_start_ns: 3_666,
            frames: 128,
        };
        v.header().publish_timer(&t);
        assert_eq!(v.header().try_timer(1), Some(t));
        assert_eq!(v.timer(), t);
        assert_eq!(v.header().timer_seq.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn cycle_budgets_pack_two_slots_per_word_and_saturate() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        let h = v.header();
        assert_eq!(h.cycle_budget_us(3), 0, "a fresh header knows no budget");
        h.set_cycle_budget(2, 133_333);
        h.set_cycle_budget(3, 70_000_000);
        assert_eq!((h.cycle_budget_us(2), h.cycle_budget_us(3)), (133, 0xffff));
        h.set_cycle_budget(2, 0);
        assert_eq!((h.cycle_budget_us(2), h.cycle_budget_us(3)), (0, 0xffff));
        let last = crate::limits::HARD_MAX_CLIENTS - 1;
        h.set_cycle_budget(last, 5_000);
        assert_eq!(h.cycle_budget_us(last), 5);
        h.set_cycle_budget(last + 1, 5_000);
        assert_eq!(h.cycle_budget_us(last + 1), 0, "out of range");
    }
}
