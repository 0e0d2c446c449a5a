//! Transport: the JACK transport state and position, as both sides store
//! them in shared memory.
//!
//! * The driver publishes the state and position of every cycle in
//!   [`crate::ControlHeader::transport`] (read-only for clients).
//! * Clients make requests through their own [`crate::Mailbox`] in the
//!   shared segment: start/stop commands, relocations, the slow-sync "ready"
//!   acknowledgement and, for the timebase master, the extended position of
//!   the next cycle. Everything there is sanitised by the driver.
//!
//! Both kinds of record are [`SeqCell`]s ([`crate::seqlock`]): a sequence
//! counter plus words, all atomics, so readers never see torn data and never
//! read non-atomic memory another process writes. Readers of client-written
//! cells give up after a few tries, so a client that leaves its counter odd
//! cannot stall the driver.
//!
//! Real-time safe: no allocation, no lock, no syscall.

/// Transport states, with JACK's `jack_transport_state_t` values.
pub mod state {
    /// JackTransportStopped.
    pub const STOPPED: u32 = 0;
    /// JackTransportRolling.
    pub const ROLLING: u32 = 1;
    /// JackTransportStarting: waiting for the slow-sync clients.
    pub const STARTING: u32 = 3;
}

/// Transport commands a client posts in its mailbox (low byte of `transport_cmd`).
pub mod command {
    /// Nothing (the initial value).
    pub const NONE: u32 = 0;
    /// jack_transport_start.
    pub const START: u32 = 1;
    /// jack_transport_stop.
    pub const STOP: u32 = 2;
}

/// `jack_position_bits_t` values.
pub mod valid {
    /// JackPositionBBT.
    pub const BBT: u32 = 0x10;
    /// JackPositionTimecode.
    pub const TIMECODE: u32 = 0x20;
    /// JackBBTFrameOffset.
    pub const BBT_FRAME_OFFSET: u32 = 0x40;
    /// JackAudioVideoRatio.
    pub const AUDIO_VIDEO_RATIO: u32 = 0x80;
    /// JackVideoFrameOffset.
    pub const VIDEO_FRAME_OFFSET: u32 = 0x100;
    /// JackTickDouble.
    pub const TICK_DOUBLE: u32 = 0x200;
    /// What jack_transport_reposition accepts (JACK_POSITION_MASK).
    pub const REQUESTABLE: u32 = BBT | TIMECODE;
    /// Every extended field a timebase master may provide.
    pub const EXTENDED: u32 =
        BBT | TIMECODE | BBT_FRAME_OFFSET | AUDIO_VIDEO_RATIO | VIDEO_FRAME_OFFSET | TICK_DOUBLE;
}

/// The fields of JACK's `jack_position_t` except the `unique_1/unique_2`
/// consistency pair (a [`SeqCell`] provides consistency).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Position {
    /// Monotonic time of the cycle start, microseconds.
    pub usecs: u64,
    /// Sample rate (Hz).
    pub frame_rate: u32,
    /// Transport frame of the cycle's first frame.
    pub frame: u32,
    /// [`valid`] bits: which fields below are meaningful.
    pub valid: u32,
    /// BBT: bar (1-based).
    pub bar: i32,
    /// BBT: beat within the bar (1-based).
    pub beat: i32,
    /// BBT: tick within the beat.
    pub tick: i32,
    /// BBT: ticks from the song start to the bar start.
    pub bar_start_tick: f64,
    /// BBT: time signature numerator.
    pub beats_per_bar: f32,
    /// BBT: time signature denominator.
    pub beat_type: f32,
    /// BBT: ticks per beat.
    pub ticks_per_beat: f64,
    /// BBT: tempo.
    pub beats_per_minute: f64,
    /// Timecode: current time in seconds.
    pub frame_time: f64,
    /// Timecode: next sequential frame_time.
    pub next_time: f64,
    /// Frame offset of the BBT fields.
    pub bbt_offset: u32,
    /// Audio frames per video frame.
    pub audio_frames_per_video_frame: f32,
    /// Audio frame of the first video frame in this cycle.
    pub video_offset: u32,
    /// Tick in double resolution.
    pub tick_double: f64,
}

/// Words a [`Position`] occupies in a [`SeqCell`].
pub const POSITION_WORDS: usize = 13;
/// Words of the published transport: position, state, sync and locate generations, cycle.
pub const TRANSPORT_WORDS: usize = POSITION_WORDS + 4;

fn lo_hi(lo: u32, hi: u32) -> u64 {
    lo as u64 | ((hi as u64) << 32)
}

impl Position {
    /// Packs into words.
    pub fn to_words(&self, w: &mut [u64]) {
        w[0] = self.usecs;
        w[1] = lo_hi(self.frame_rate, self.frame);
        w[2] = lo_hi(self.valid, self.bar as u32);
        w[3] = lo_hi(self.beat as u32, self.tick as u32);
        w[4] = self.bar_start_tick.to_bits();
        w[5] = lo_hi(self.beats_per_bar.to_bits(), self.beat_type.to_bits());
        w[6] = self.ticks_per_beat.to_bits();
        w[7] = self.beats_per_minute.to_bits();
        w[8] = self.frame_time.to_bits();
        w[9] = self.next_time.to_bits();
        w[10] = lo_hi(self.bbt_offset, self.audio_frames_per_video_frame.to_bits());
        w[11] = self.video_offset as u64;
        w[12] = self.tick_double.to_bits();
    }

    /// Unpacks from words.
    pub fn from_words(w: &[u64]) -> Position {
        let lo = |x: u64| x as u32;
        let hi = |x: u64| (x >> 32) as u32;
        Position {
            usecs: w[0],
            frame_rate: lo(w[1]),
            frame: hi(w[1]),
            valid: lo(w[2]),
            bar: hi(w[2]) as i32,
            beat: lo(w[3]) as i32,
            tick: hi(w[3]) as i32,
            bar_start_tick: f64::from_bits(w[4]),
            beats_per_bar: f32::from_bits(lo(w[5])),
            beat_type: f32::from_bits(hi(w[5])),
            ticks_per_beat: f64::from_bits(w[6]),
            beats_per_minute: f64::from_bits(w[7]),
            frame_time: f64::from_bits(w[8]),
            next_time: f64::from_bits(w[9]),
            bbt_offset: lo(w[10]),
            audio_frames_per_video_frame: f32::from_bits(hi(w[10])),
            video_offset: lo(w[11]),
            tick_double: f64::from_bits(w[12]),
        }
    }

    /// Keeps only the extended fields named in `allowed` (and in `self.valid`),
    /// replacing non-finite numbers by 0: what the driver does with any
    /// position a client wrote before publishing it.
    pub fn sanitised(mut self, allowed: u32) -> Position {
        self.valid &= allowed;
        let f = |x: f64| if x.is_finite() { x } else { 0.0 };
        let g = |x: f32| if x.is_finite() { x } else { 0.0 };
        self.bar_start_tick = f(self.bar_start_tick);
        self.ticks_per_beat = f(self.ticks_per_beat);
        self.beats_per_minute = f(self.beats_per_minute);
        self.frame_time = f(self.frame_time);
        self.next_time = f(self.next_time);
        self.tick_double = f(self.tick_double);
        self.beats_per_bar = g(self.beats_per_bar);
        self.beat_type = g(self.beat_type);
        self.audio_frames_per_video_frame = g(self.audio_frames_per_video_frame);
        self
    }

    /// Copies the extended fields named by `self.valid` from `src`'s
    /// (frame, usecs and rate stay).
    pub fn take_extended(&mut self, src: &Position) {
        let keep = (self.usecs, self.frame_rate, self.frame);
        *self = *src;
        (self.usecs, self.frame_rate, self.frame) = keep;
    }
}

/// The published transport of one cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Transport {
    /// [`state`] value.
    pub state: u32,
    /// Position of the cycle's first frame.
    pub pos: Position,
    /// Cycle this was published for.
    pub cycle: u64,
    /// Incremented whenever the slow-sync clients must (re)sync: a
    /// relocation or entering Starting. A slow-sync client calls its sync
    /// callback until it has acknowledged the current value.
    pub sync_gen: u64,
    /// Incremented on every applied relocation (the timebase master's
    /// `new_pos`).
    pub locate_gen: u64,
}

impl Transport {
    /// Packs into words.
    pub fn to_words(&self, w: &mut [u64; TRANSPORT_WORDS]) {
        self.pos.to_words(&mut w[..POSITION_WORDS]);
        w[POSITION_WORDS] = lo_hi(self.state, 0);
        w[POSITION_WORDS + 1] = self.sync_gen;
        w[POSITION_WORDS + 2] = self.locate_gen;
        w[POSITION_WORDS + 3] = self.cycle;
    }
}

/// A sequence-counted group of atomic words: the crate's one seqlock
/// ([`crate::seqlock::SeqArray`]) under the name the transport code uses.
pub type SeqCell<const N: usize> = crate::seqlock::SeqArray<N>;

/// A [`SeqCell`] holding a [`Position`].
pub type PositionCell = SeqCell<POSITION_WORDS>;
/// A [`SeqCell`] holding the published [`Transport`].
pub type TransportCell = SeqCell<TRANSPORT_WORDS>;

impl PositionCell {
    /// Writer side (a client's threads, several writers): stores a
    /// position, spinning at most `tries` times for another writer (see
    /// [`SeqCell::try_write`]); false if nothing was written. Real-time safe.
    pub fn put(&self, p: &Position, tries: u32) -> bool {
        let mut w = [0u64; POSITION_WORDS];
        p.to_words(&mut w);
        self.try_write(&w, tries)
    }

    /// Reader side (the driver): a consistent copy in at most `tries`
    /// attempts (see [`SeqCell::try_read`]); the caller sanitises it
    /// ([`Position::sanitised`]). Real-time safe.
    pub fn get(&self, tries: u32) -> Option<Position> {
        self.try_read(tries).map(|w| Position::from_words(&w))
    }
}

/// How many times a real-time reader tries the published transport before
/// it falls back to the last value it read. The driver's publication is a
/// few dozen stores, so 64 tries see it through unless the driver was
/// preempted or killed in the middle of one.
pub const RT_TRIES: u32 = 64;

impl TransportCell {
    /// Writer side, sole writer (the driver, for the header's cell):
    /// publishes `t`. Real-time safe.
    pub fn publish(&self, t: &Transport) {
        let mut w = [0u64; TRANSPORT_WORDS];
        t.to_words(&mut w);
        self.write_exclusive(&w);
    }

    /// Writer side, one of several: stores `t`, spinning at most `tries`
    /// times for another writer (see [`SeqCell::try_write`]); false if
    /// nothing was written. Real-time safe.
    pub fn put(&self, t: &Transport, tries: u32) -> bool {
        let mut w = [0u64; TRANSPORT_WORDS];
        t.to_words(&mut w);
        self.try_write(&w, tries)
    }

    /// A consistent copy, trying at most `tries` times (spin hints only:
    /// no syscall, real-time safe); None if the counter stayed odd or kept
    /// moving, as when the server was killed in the middle of a publication.
    pub fn try_load(&self, tries: u32) -> Option<Transport> {
        let w = self.try_read(tries)?;
        Some(Transport {
            pos: Position::from_words(&w[..POSITION_WORDS]),
            state: w[POSITION_WORDS] as u32,
            cycle: w[POSITION_WORDS + 3],
            sync_gen: w[POSITION_WORDS + 1],
            locate_gen: w[POSITION_WORDS + 2],
        })
    }

    /// The current transport, retrying until a consistent copy comes. Only
    /// for the server itself (the writer, which cannot stall under its own
    /// reader) and tests; clients read with [`TransportCell::try_load`] or
    /// a [`TransportReader`], which never spin without bound.
    pub fn load(&self) -> Transport {
        loop {
            if let Some(t) = self.try_load(RT_TRIES) {
                return t;
            }
            std::thread::yield_now();
        }
    }
}

/// A real-time reader of the published transport (one per reader, e.g. per
/// process thread): bounded reads ([`RT_TRIES`], spin hints only) that fall
/// back to the last consistent value this reader saw, so a publication cut
/// short (a server killed mid-write leaves the counter odd forever) can
/// neither stall nor hang the reader.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransportReader {
    last: Transport,
}

impl TransportReader {
    /// The current transport, or the last one read if no consistent copy
    /// came in [`RT_TRIES`] tries.
    pub fn read(&mut self, cell: &TransportCell) -> Transport {
        if let Some(t) = cell.try_load(RT_TRIES) {
            self.last = t;
        }
        self.last
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Ordering;

    fn sample() -> Position {
        Position {
            usecs: 123_456_789,
            frame_rate: 48000,
            frame: 96000,
            valid: valid::BBT | valid::TICK_DOUBLE,
            bar: 3,
            beat: -2,
            tick: 960,
            bar_start_tick: 7680.5,
            beats_per_bar: 4.0,
            beat_type: 4.0,
            ticks_per_beat: 1920.0,
            beats_per_minute: 120.0,
            frame_time: 2.0,
            next_time: 2.1,
            bbt_offset: 7,
            audio_frames_per_video_frame: 1600.0,
            video_offset: 5,
            tick_double: 960.25,
        }
    }

    #[test]
    fn position_words_roundtrip() {
        let p = sample();
        let mut w = [0u64; POSITION_WORDS];
        p.to_words(&mut w);
        assert_eq!(Position::from_words(&w), p);
    }

    #[test]
    fn sanitising_drops_bits_and_non_finite_numbers() {
        let mut p = sample();
        p.valid = 0xffff_ffff;
        p.beats_per_minute = f64::NAN;
        p.beat_type = f32::INFINITY;
        let s = p.sanitised(valid::REQUESTABLE);
        assert_eq!(s.valid, valid::REQUESTABLE);
        assert_eq!(s.beats_per_minute, 0.0);
        assert_eq!(s.beat_type, 0.0);
        assert_eq!(s.bar, 3);
    }

    #[test]
    fn seqcell_reads_are_never_torn() {
        let cell: std::sync::Arc<PositionCell> = std::sync::Arc::new(PositionCell::new());
        let c2 = cell.clone();
        let writer = std::thread::spawn(move || {
            for i in 0..20_000u32 {
                let mut p = sample();
                p.frame = i;
                p.bar = i as i32;
                p.tick = i as i32;
                assert!(c2.put(&p, u32::MAX));
            }
        });
        let mut seen = 0;
        while !writer.is_finished() {
            if let Some(p) = cell.get(16) {
                assert_eq!(p.frame as i32, p.bar);
                assert_eq!(p.bar, p.tick);
                seen += 1;
            }
        }
        writer.join().unwrap();
        assert!(seen > 0);
        // A stuck (odd) counter makes bounded readers give up instead of spinning.
        cell.seq.store(1, Ordering::Relaxed);
        assert!(cell.get(3).is_none());
        assert!(!cell.put(&sample(), 3));
    }

    /// A publication cut short (the server killed between its two counter
    /// stores) leaves the counter odd forever: real-time readers must
    /// return, with the last consistent value they saw.
    #[test]
    fn transport_readers_return_with_the_last_good_value_from_a_stuck_cell() {
        let cell = TransportCell::new();
        let good = Transport {
            state: state::ROLLING,
            pos: sample(),
            cycle: 42,
            sync_gen: 3,
            locate_gen: 2,
        };
        cell.publish(&good);
        let mut reader = TransportReader::default();
        assert_eq!(reader.read(&cell), good);
        // A writer that died mid-publication: counter odd, words half new.
        let s = cell.seq.load(Ordering::Relaxed);
        cell.seq.store(s + 1, Ordering::Relaxed);
        cell.words[0].store(0xdead, Ordering::Relaxed);
        cell.words[TRANSPORT_WORDS - 1].store(43, Ordering::Relaxed);
        assert_eq!(cell.try_load(RT_TRIES), None);
        for _ in 0..1000 {
            assert_eq!(reader.read(&cell), good, "not the last good value");
        }
        // A reader that never saw a good value gets the default (stopped at 0).
        assert_eq!(TransportReader::default().read(&cell), Transport::default());
        // A counter that moves on is picked up again.
        cell.seq.store(s + 2, Ordering::Relaxed);
        assert_eq!(reader.read(&cell).cycle, 43);
    }
}
