//! Target `midi_buffer`: MIDI port buffers in the shared segment, which any
//! client can write, filled with the fuzzer's bytes and read the way the
//! driver and libjack read them ([`resound_shm::midi`]: `is_valid`,
//! `event_count`, `event`, `max_event_size`, `lost_count`), then merged
//! into an input port's buffer by [`midi::merge`] (what
//! `resound_shm::cycle::midi_input_buffer` does for an input with several
//! sources), and the merged buffer read back and written to as a client
//! would (`reserve`, `write`, `clear`).
//!
//! Input: one byte of frames and source count, then each source's bytes
//! (the rest of a source stays zero; a source may start with a valid header
//! so the fuzzer reaches the event records quickly).
//!
//! Checks: no panic, no access outside a buffer (the address sanitizer
//! watches); every event read lies inside its buffer; the merged buffer is
//! valid, in time order, below its frame count, and holds at most the
//! sources' well-formed events, each equal to one of a source's.

use resound_shm::midi::{self, HEADER_BYTES, MIDI_BUFFER_BYTES, MIDI_MAGIC};

/// A MIDI buffer as the shared segment lays one out (64-byte aligned).
#[repr(C, align(64))]
pub struct Buf(pub [u8; MIDI_BUFFER_BYTES]);

impl Buf {
    /// A zeroed (uninitialised, "empty") buffer on the heap.
    pub fn zeroed() -> Box<Buf> {
        Box::new(Buf([0; MIDI_BUFFER_BYTES]))
    }
}

/// Most sources one input merges here.
const MAX_SOURCES: usize = 4;

/// Reads, merges and checks the buffers described by `data`.
pub fn run(data: &[u8]) {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let nframes = [0u32, 1, 16, 64, 256, 1024, 8192, u32::MAX][(ctl & 7) as usize];
    let n_sources = 1 + ((ctl >> 3) as usize & 3).min(MAX_SOURCES - 1);
    let headed = ctl & 0x20 != 0;
    let chunk = rest.len().div_ceil(n_sources).max(1);
    let sources: Vec<Box<Buf>> = rest
        .chunks(chunk)
        .chain(std::iter::repeat(&[][..]))
        .take(n_sources)
        .map(|bytes| source(bytes, nframes, headed))
        .collect();
    let mut count = 0;
    for s in &sources {
        count += read_all(s);
    }
    let mut out = Buf::zeroed();
    let ptrs: Vec<*const u8> = sources.iter().map(|s| s.0.as_ptr()).collect();
    // SAFETY: every buffer is MIDI_BUFFER_BYTES, 64-byte aligned; `out` is
    // none of the sources.
    unsafe { midi::merge(out.0.as_mut_ptr(), nframes, ptrs.into_iter()) };
    check_merged(&out, nframes, count, &sources);
    // A client then writes into the merged buffer, and clears it.
    let p = out.0.as_mut_ptr();
    // SAFETY: as above.
    unsafe {
        let last = (0..midi::event_count(p))
            .filter_map(|i| midi::event(p, i))
            .map(|e| e.time)
            .max()
            .unwrap_or(0);
        let room = midi::max_event_size(p) >= 3;
        let r = midi::write(p, last, [0x90, 60, 100].as_ptr(), 3);
        if last < nframes && room {
            assert_eq!(r, Ok(()), "no room for an event the buffer said fits");
        }
        midi::clear(p);
        assert_eq!(midi::event_count(p), 0);
    }
}

/// A source buffer: `bytes` copied in; with `headed`, a valid header for
/// `nframes` first, whose counts the bytes that follow then set.
fn source(bytes: &[u8], nframes: u32, headed: bool) -> Box<Buf> {
    let mut b = Buf::zeroed();
    if headed {
        // SAFETY: a full, aligned buffer.
        unsafe { midi::init(b.0.as_mut_ptr(), nframes) };
        // The bytes give event_count, data_used, lost and the records on.
        let at = 12;
        let n = bytes.len().min(MIDI_BUFFER_BYTES - at);
        b.0[at..at + n].copy_from_slice(&bytes[..n]);
        b.0[..4].copy_from_slice(&MIDI_MAGIC.to_le_bytes());
    } else {
        let n = bytes.len().min(MIDI_BUFFER_BYTES);
        b.0[..n].copy_from_slice(&bytes[..n]);
    }
    b
}

/// Reads every event of `b` as libjack's `jack_midi_event_get` does;
/// returns how many were well formed.
fn read_all(b: &Buf) -> usize {
    let p = b.0.as_ptr();
    let range = p as usize..p as usize + MIDI_BUFFER_BYTES;
    // SAFETY: a full, aligned buffer.
    unsafe {
        let n = midi::event_count(p);
        assert!(n as usize <= midi::MAX_EVENTS);
        assert!(midi::is_valid(p) || n == 0);
        let _ = (
            midi::nframes(p),
            midi::lost_count(p),
            midi::max_event_size(p),
        );
        let mut ok = 0;
        for i in 0..n.saturating_add(2) {
            let Some(e) = midi::event(p, i) else { continue };
            assert!(i < n, "event {i} past the count {n}");
            let (lo, hi) = (e.data as usize, e.data as usize + e.size as usize);
            assert!(
                range.contains(&lo) && hi <= range.end,
                "event {i} outside the buffer"
            );
            assert!(e.size as usize <= midi::INLINE_MAX || lo >= range.start + HEADER_BYTES);
            ok += 1;
        }
        ok
    }
}

/// The merged buffer's invariants.
fn check_merged(out: &Buf, nframes: u32, well_formed: usize, sources: &[Box<Buf>]) {
    let p = out.0.as_ptr();
    // SAFETY: a full, aligned buffer; event data pointers are checked to lie
    // in their buffers by `read_all` before they are read.
    unsafe {
        assert!(midi::is_valid(p), "merge leaves an invalid buffer");
        assert_eq!(midi::nframes(p), nframes);
        let n = midi::event_count(p);
        assert!(n as usize <= well_formed, "merge made up events");
        assert_eq!(read_all(out), n as usize, "merge wrote a malformed event");
        let mut last = 0;
        for i in 0..n {
            let e = midi::event(p, i).unwrap();
            assert!(e.time < nframes, "event at {} of {nframes} frames", e.time);
            assert!(e.time >= last, "merged events out of order");
            last = e.time;
            let data = std::slice::from_raw_parts(e.data, e.size as usize);
            assert!(
                sources.iter().any(|s| has_event(s, e.time, data)),
                "merged event at {} is no source's",
                e.time
            );
        }
    }
}

/// Whether `s` holds a well-formed event at `time` with `data`.
fn has_event(s: &Buf, time: u32, data: &[u8]) -> bool {
    let p = s.0.as_ptr();
    // SAFETY: a full, aligned buffer; `event` checks data ranges.
    unsafe {
        (0..midi::event_count(p)).any(|i| {
            midi::event(p, i).is_some_and(|e| {
                e.time == time
                    && e.size as usize == data.len()
                    && std::slice::from_raw_parts(e.data, data.len()) == data
            })
        })
    }
}
