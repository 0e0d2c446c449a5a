//! MIDI event buffers: the layout of a MIDI port's buffer in the shared
//! segment, and the operations on it (JACK's `jack_midi_*` semantics).
//!
//! A MIDI port uses the first [`MIDI_BUFFER_BYTES`] of its port buffer
//! (every port buffer is at least that large, see [`crate::Layout`]):
//!
//! ```text
//!   0    header (32 bytes, u32 fields):
//!          magic        MIDI_MAGIC once initialised (a zeroed buffer is "empty")
//!          capacity     MIDI_BUFFER_BYTES
//!          nframes      frames of the cycle the events belong to
//!          event_count  number of event records
//!          data_used    bytes of event data stored at the end of the buffer
//!          lost         events dropped because the buffer was full
//!          2 x padding
//!   32   event records, 12 bytes each, in time order:
//!          time  frame offset in the cycle (< nframes)
//!          size  bytes of MIDI data
//!          data  size <= 4: the bytes themselves (inline);
//!                otherwise the byte offset of the data from the buffer start
//!   ...  free space
//!   capacity - data_used .. capacity: event data, growing downwards
//! ```
//!
//! The owner of an output port writes its buffer; readers (other clients'
//! inputs) read it in place when it is the only source (zero copy), or merge
//! several sources into the input port's own buffer in time order
//! ([`merge`]). A buffer lives in memory every client can write, so every
//! reader *sanitises*: counts are clamped to what fits, data ranges are
//! checked against the buffer, and an event that does not check out is
//! skipped. A garbage buffer yields wrong or missing events, never an access
//! outside it.
//!
//! All functions are real-time safe (no allocation, no lock, no syscall).
//! They take raw pointers because the C API hands buffers around as
//! `void *`; each states what it requires of the pointer.

/// Bytes of a MIDI buffer (header, records and data).
pub const MIDI_BUFFER_BYTES: usize = 16384;
/// `b"rsMI"` as a little-endian u32: marks an initialised buffer.
pub const MIDI_MAGIC: u32 = u32::from_le_bytes(*b"rsMI");
/// Header size in bytes.
pub const HEADER_BYTES: usize = 32;
/// Size of one event record in bytes.
pub const EVENT_BYTES: usize = 12;
/// Largest event whose data is stored inline in its record.
pub const INLINE_MAX: usize = 4;
/// Most events a buffer can hold.
pub const MAX_EVENTS: usize = (MIDI_BUFFER_BYTES - HEADER_BYTES) / EVENT_BYTES;

const F_MAGIC: usize = 0;
const F_CAPACITY: usize = 1;
const F_NFRAMES: usize = 2;
const F_COUNT: usize = 3;
const F_DATA_USED: usize = 4;
const F_LOST: usize = 5;

/// One event as read from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Frame offset within the cycle.
    pub time: u32,
    /// Bytes of data.
    pub size: u32,
    /// The data (inside the buffer).
    pub data: *const u8,
}

/// Why an event could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// Not an initialised buffer, time not below nframes, or earlier than the last event.
    Invalid,
    /// No room left (counted as a lost event).
    NoSpace,
}

#[inline]
unsafe fn rd(buf: *const u8, field: usize) -> u32 {
    // SAFETY: the caller guarantees `buf` points to MIDI_BUFFER_BYTES readable
    // bytes aligned for u32; the header fields are within them. Volatile:
    // another process may write the buffer concurrently.
    unsafe { std::ptr::read_volatile((buf as *const u32).add(field)) }
}

#[inline]
unsafe fn wr(buf: *mut u8, field: usize, v: u32) {
    // SAFETY: as in `rd`, and the caller guarantees the bytes are writable.
    unsafe { std::ptr::write_volatile((buf as *mut u32).add(field), v) }
}

#[inline]
unsafe fn rec(buf: *const u8, i: usize) -> *const u32 {
    // SAFETY: callers pass i < MAX_EVENTS, so the record lies in the buffer.
    unsafe { buf.add(HEADER_BYTES + i * EVENT_BYTES) as *const u32 }
}

/// Initialises an empty buffer for a cycle of `nframes` frames.
///
/// # Safety
/// `buf` points to [`MIDI_BUFFER_BYTES`] writable bytes, 4-byte aligned.
pub unsafe fn init(buf: *mut u8, nframes: u32) {
    // SAFETY: per the function contract.
    unsafe {
        wr(buf, F_CAPACITY, MIDI_BUFFER_BYTES as u32);
        wr(buf, F_NFRAMES, nframes);
        wr(buf, F_COUNT, 0);
        wr(buf, F_DATA_USED, 0);
        wr(buf, F_LOST, 0);
        wr(buf, F_MAGIC, MIDI_MAGIC);
    }
}

/// Whether the buffer has been initialised.
///
/// # Safety
/// `buf` points to [`MIDI_BUFFER_BYTES`] readable bytes, 4-byte aligned.
pub unsafe fn is_valid(buf: *const u8) -> bool {
    // SAFETY: per the function contract.
    unsafe { rd(buf, F_MAGIC) == MIDI_MAGIC }
}

/// Frames of the cycle the buffer was initialised for (0 if not initialised).
///
/// # Safety
/// As [`is_valid`].
pub unsafe fn nframes(buf: *const u8) -> u32 {
    // SAFETY: per the function contract.
    unsafe {
        if is_valid(buf) {
            rd(buf, F_NFRAMES)
        } else {
            0
        }
    }
}

/// Removes every event (keeps nframes); a no-op on an uninitialised buffer.
///
/// # Safety
/// As [`init`].
pub unsafe fn clear(buf: *mut u8) {
    // SAFETY: per the function contract.
    unsafe {
        if is_valid(buf) {
            wr(buf, F_COUNT, 0);
            wr(buf, F_DATA_USED, 0);
            wr(buf, F_LOST, 0);
        }
    }
}

/// (event count, data bytes used), clamped to what the buffer can hold.
unsafe fn counts(buf: *const u8) -> (usize, usize) {
    // SAFETY: per the caller's contract (as `is_valid`).
    unsafe {
        if !is_valid(buf) {
            return (0, 0);
        }
        let n = (rd(buf, F_COUNT) as usize).min(MAX_EVENTS);
        let room = MIDI_BUFFER_BYTES - HEADER_BYTES - n * EVENT_BYTES;
        let used = (rd(buf, F_DATA_USED) as usize).min(room);
        (n, used)
    }
}

/// Number of events (0 for an uninitialised buffer).
///
/// # Safety
/// As [`is_valid`].
pub unsafe fn event_count(buf: *const u8) -> u32 {
    // SAFETY: per the function contract.
    unsafe { counts(buf).0 as u32 }
}

/// Events dropped because the buffer was full.
///
/// # Safety
/// As [`is_valid`].
pub unsafe fn lost_count(buf: *const u8) -> u32 {
    // SAFETY: per the function contract.
    unsafe {
        if is_valid(buf) {
            rd(buf, F_LOST)
        } else {
            0
        }
    }
}

/// The `i`-th event, or None when out of range or not well formed.
///
/// # Safety
/// As [`is_valid`]. The returned data pointer points into `buf`.
pub unsafe fn event(buf: *const u8, i: u32) -> Option<Event> {
    // SAFETY: per the function contract; i < n ≤ MAX_EVENTS keeps the record
    // inside the buffer, and the data range is checked before use.
    unsafe {
        let (n, _) = counts(buf);
        let i = i as usize;
        if i >= n {
            return None;
        }
        let r = rec(buf, i);
        let time = std::ptr::read_volatile(r);
        let size = std::ptr::read_volatile(r.add(1));
        let data = if size as usize <= INLINE_MAX {
            r.add(2) as *const u8
        } else {
            let off = std::ptr::read_volatile(r.add(2)) as usize;
            let lo = HEADER_BYTES + n * EVENT_BYTES;
            if off < lo || off.checked_add(size as usize)? > MIDI_BUFFER_BYTES {
                return None;
            }
            buf.add(off)
        };
        Some(Event { time, size, data })
    }
}

/// Largest event that can still be written (0: none).
///
/// # Safety
/// As [`is_valid`].
pub unsafe fn max_event_size(buf: *const u8) -> usize {
    // SAFETY: per the function contract.
    unsafe {
        if !is_valid(buf) {
            return 0;
        }
        let (n, used) = counts(buf);
        let need = HEADER_BYTES + EVENT_BYTES * (n + 1) + used;
        if need > MIDI_BUFFER_BYTES {
            0
        } else {
            (MIDI_BUFFER_BYTES - need).max(INLINE_MAX)
        }
    }
}

/// Appends an event record without ordering checks; returns where its data goes.
unsafe fn push(buf: *mut u8, time: u32, size: usize) -> Result<*mut u8, WriteError> {
    // SAFETY: per the callers' contract (as `init`); offsets are computed
    // from clamped counts, so everything written lies in the buffer.
    unsafe {
        let (n, used) = counts(buf);
        let need = HEADER_BYTES + EVENT_BYTES * (n + 1) + used;
        let space = if need > MIDI_BUFFER_BYTES {
            0
        } else {
            (MIDI_BUFFER_BYTES - need).max(INLINE_MAX)
        };
        if need > MIDI_BUFFER_BYTES || size > space {
            wr(buf, F_LOST, rd(buf, F_LOST).wrapping_add(1));
            return Err(WriteError::NoSpace);
        }
        let r = rec(buf, n) as *mut u32;
        std::ptr::write_volatile(r, time);
        std::ptr::write_volatile(r.add(1), size as u32);
        let data = if size <= INLINE_MAX {
            std::ptr::write_volatile(r.add(2), 0);
            r.add(2) as *mut u8
        } else {
            let off = MIDI_BUFFER_BYTES - used - size;
            std::ptr::write_volatile(r.add(2), off as u32);
            wr(buf, F_DATA_USED, (used + size) as u32);
            buf.add(off)
        };
        wr(buf, F_COUNT, (n + 1) as u32);
        Ok(data)
    }
}

/// Reserves room for an event of `size` bytes at frame `time` and returns
/// where to write its data (JACK's `jack_midi_event_reserve`). Events must be
/// written in time order, at a time below the buffer's nframes.
///
/// # Safety
/// As [`init`].
pub unsafe fn reserve(buf: *mut u8, time: u32, size: usize) -> Result<*mut u8, WriteError> {
    // SAFETY: per the function contract.
    unsafe {
        if !is_valid(buf) || time >= rd(buf, F_NFRAMES) {
            return Err(WriteError::Invalid);
        }
        let (n, _) = counts(buf);
        if n > 0 && std::ptr::read_volatile(rec(buf, n - 1)) > time {
            return Err(WriteError::Invalid);
        }
        push(buf, time, size)
    }
}

/// Writes an event (JACK's `jack_midi_event_write`).
///
/// # Safety
/// As [`init`]; `data` points to `size` readable bytes (it may be NULL
/// when `size` is 0: it is then not used).
pub unsafe fn write(
    buf: *mut u8,
    time: u32,
    data: *const u8,
    size: usize,
) -> Result<(), WriteError> {
    // SAFETY: per the function contract; `reserve` returned room for `size`
    // bytes. No copy for an empty event: Rust allows zero-sized copies from
    // NULL only since late 2024 (rust-lang/rust#117329); before (our minimum
    // is 1.80) copy_nonoverlapping(NULL, _, 0) is undefined behaviour.
    unsafe {
        let dst = reserve(buf, time, size)?;
        if size > 0 {
            std::ptr::copy_nonoverlapping(data, dst, size);
        }
        Ok(())
    }
}

/// Merges the events of `sources` (in time order; events at equal times keep
/// the order of the sources) into `out`, initialised for `nframes`. Sources
/// that are not initialised contribute nothing; events at or after
/// `nframes`, events earlier than the previous event of the same source
/// (JACK requires each buffer in time order; a source that breaks the rule
/// loses those events) and malformed events are skipped; what does not fit
/// is counted as lost.
///
/// Work is O(n log k) for n events from k sources and needs no allocation:
/// each source is appended as one sorted run, then adjacent runs are merged
/// pairwise, back and forth between `out` and a scratch array on the stack
/// (16 KiB), until one run is left.
///
/// # Safety
/// `out` as in [`init`], each source as in [`is_valid`]; `out` is none of the sources.
pub unsafe fn merge(out: *mut u8, nframes: u32, sources: impl Iterator<Item = *const u8>) {
    // SAFETY: per the function contract.
    unsafe {
        merge_counted(out, nframes, sources);
    }
}

/// A record as stored: time, size, inline data or data offset.
type Record = [u32; 3];

/// Bound on merge passes: 2^11 > MAX_EVENTS runs. Only a buffer rewritten
/// by someone else during the merge could need more; it then stays
/// partly unsorted (wrong order at worst, never unbounded work).
const MAX_MERGE_PASSES: u32 = 12;

/// [`merge`], returning the number of merge passes over the records.
///
/// # Safety
/// As [`merge`].
unsafe fn merge_counted(
    out: *mut u8,
    nframes: u32,
    sources: impl Iterator<Item = *const u8>,
) -> u32 {
    // SAFETY: per the function contract; every record index below is < n,
    // the clamped count of `out`, so every access lies inside `out` or the
    // scratch array of MAX_EVENTS records.
    unsafe {
        init(out, nframes);
        for src in sources {
            let mut last = 0u32;
            for i in 0..event_count(src) {
                let Some(e) = event(src, i) else { continue };
                if e.time >= nframes || e.time < last {
                    continue;
                }
                last = e.time;
                if let Ok(dst) = push(out, e.time, e.size as usize) {
                    std::ptr::copy(e.data, dst, e.size as usize);
                }
            }
        }
        // `out` now holds one sorted run per source. Merge adjacent runs
        // (stably: the left run first at equal times), out -> scratch ->
        // out ..., until one run is left. Inline data moves with its record;
        // out-of-line data stays where it is.
        let (n, _) = counts(out);
        let recs = rec(out, 0) as *mut Record;
        let mut scratch = std::mem::MaybeUninit::<[Record; MAX_EVENTS]>::uninit();
        let tmp = scratch.as_mut_ptr() as *mut Record;
        let (mut src, mut dst) = (recs, tmp);
        let mut passes = 0;
        while passes < MAX_MERGE_PASSES {
            let mut i = 0;
            let mut runs = 0;
            while i < n {
                let mid = run_end(src, i, n);
                if runs == 0 && mid == n {
                    break; // one run: sorted
                }
                let end = run_end(src, mid, n);
                merge_two(src, i, mid, end, dst);
                runs += 1;
                i = end;
            }
            if runs == 0 {
                break;
            }
            passes += 1;
            std::mem::swap(&mut src, &mut dst);
            if runs == 1 {
                break;
            }
        }
        if src != recs {
            for i in 0..n {
                std::ptr::write_volatile(recs.add(i), *src.add(i));
            }
        }
        passes
    }
}

/// End of the non-decreasing run of records starting at `i` (< `n`), or `n`.
///
/// # Safety
/// `r` points to `n` records.
unsafe fn run_end(r: *const Record, i: usize, n: usize) -> usize {
    // SAFETY: per the function contract; j < n.
    unsafe {
        if i >= n {
            return n;
        }
        let mut prev = std::ptr::read_volatile(r.add(i))[0];
        let mut j = i + 1;
        while j < n {
            let t = std::ptr::read_volatile(r.add(j))[0];
            if t < prev {
                break;
            }
            prev = t;
            j += 1;
        }
        j
    }
}

/// Merges the runs `src[lo..mid]` and `src[mid..hi]` into `dst[lo..hi]`,
/// stably (at equal times the left run first).
///
/// # Safety
/// `src` and `dst` point to at least `hi` records each and do not overlap.
unsafe fn merge_two(src: *const Record, lo: usize, mid: usize, hi: usize, dst: *mut Record) {
    // SAFETY: per the function contract; a < mid ≤ hi, b < hi, k < hi.
    unsafe {
        let (mut a, mut b) = (lo, mid);
        for k in lo..hi {
            let take_a = if a >= mid {
                false
            } else if b >= hi {
                true
            } else {
                std::ptr::read_volatile(src.add(a))[0] <= std::ptr::read_volatile(src.add(b))[0]
            };
            let from = if take_a {
                a += 1;
                a - 1
            } else {
                b += 1;
                b - 1
            };
            std::ptr::write_volatile(dst.add(k), std::ptr::read_volatile(src.add(from)));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Buf([u8; MIDI_BUFFER_BYTES]);

    fn buf() -> Box<Buf> {
        Box::new(Buf([0; MIDI_BUFFER_BYTES]))
    }

    fn events(b: &Buf) -> Vec<(u32, Vec<u8>)> {
        let p = b.0.as_ptr();
        // SAFETY: a full-size buffer.
        unsafe {
            (0..event_count(p))
                .map(|i| {
                    let e = event(p, i).unwrap();
                    (
                        e.time,
                        std::slice::from_raw_parts(e.data, e.size as usize).to_vec(),
                    )
                })
                .collect()
        }
    }

    #[test]
    fn write_read_and_order_rules() {
        let mut b = buf();
        let p = b.0.as_mut_ptr();
        // SAFETY: a full-size buffer.
        unsafe {
            assert_eq!(event_count(p), 0, "a zeroed buffer is empty");
            assert_eq!(
                write(p, 0, [0x90, 60, 100].as_ptr(), 3),
                Err(WriteError::Invalid)
            );
            init(p, 128);
            write(p, 0, [0x90, 60, 100].as_ptr(), 3).unwrap();
            let sysex: Vec<u8> = (0..40).collect();
            write(p, 5, sysex.as_ptr(), sysex.len()).unwrap();
            assert_eq!(
                write(p, 4, [0x80, 60, 0].as_ptr(), 3),
                Err(WriteError::Invalid)
            );
            assert_eq!(
                write(p, 128, [0x80, 60, 0].as_ptr(), 3),
                Err(WriteError::Invalid)
            );
            write(p, 5, [0x80, 60, 0].as_ptr(), 3).unwrap();
        }
        let ev = events(&b);
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0], (0, vec![0x90, 60, 100]));
        assert_eq!(ev[1].0, 5);
        assert_eq!(ev[1].1.len(), 40);
        assert_eq!(ev[2], (5, vec![0x80, 60, 0]));
        // SAFETY: `b` is a full-size buffer we own.
        unsafe {
            clear(b.0.as_mut_ptr());
            assert_eq!(event_count(b.0.as_ptr()), 0);
            assert_eq!(nframes(b.0.as_ptr()), 128);
        }
    }

    #[test]
    fn full_buffers_count_lost_events() {
        let mut b = buf();
        let p = b.0.as_mut_ptr();
        let big = vec![0xf0u8; 1000];
        let mut ok = 0;
        // SAFETY: a full-size buffer.
        unsafe {
            init(p, 64);
            while write(p, 1, big.as_ptr(), big.len()).is_ok() {
                ok += 1;
            }
            assert!(ok >= 15);
            assert_eq!(lost_count(p), 1);
            while write(p, 1, [1u8, 2, 3].as_ptr(), 3).is_ok() {}
            assert!(max_event_size(p) <= INLINE_MAX);
            assert!(event_count(p) as usize <= MAX_EVENTS);
        }
    }

    #[test]
    fn merge_is_time_ordered_and_stable() {
        let (mut a, mut b, mut out, empty) = (buf(), buf(), buf(), buf());
        // SAFETY: full-size buffers.
        unsafe {
            init(a.0.as_mut_ptr(), 64);
            init(b.0.as_mut_ptr(), 64);
            for t in [0u32, 10, 20] {
                write(a.0.as_mut_ptr(), t, [0xa0, t as u8].as_ptr(), 2).unwrap();
            }
            for t in [5u32, 10, 63] {
                let long = [0xb0u8; 8];
                write(b.0.as_mut_ptr(), t, long.as_ptr(), 8).unwrap();
            }
            merge(
                out.0.as_mut_ptr(),
                32,
                [a.0.as_ptr(), b.0.as_ptr(), empty.0.as_ptr()].into_iter(),
            );
        }
        let ev = events(&out);
        let times: Vec<u32> = ev.iter().map(|e| e.0).collect();
        assert_eq!(times, vec![0, 5, 10, 10, 20], "63 is beyond nframes=32");
        assert_eq!(ev[2].1, vec![0xa0, 10], "a's event at 10 comes first");
        assert_eq!(ev[3].1, vec![0xb0; 8]);
    }

    /// Writes records directly, as a hostile client can (no order check).
    unsafe fn put_raw(p: *mut u8, recs: &[(u32, u8)]) {
        // SAFETY: a full-size buffer; at most MAX_EVENTS records.
        unsafe {
            init(p, 4096);
            for (i, &(time, byte)) in recs.iter().enumerate() {
                let r = rec(p, i) as *mut u32;
                *r = time;
                *r.add(1) = 1;
                *r.add(2) = byte as u32;
            }
            wr(p, F_COUNT, recs.len() as u32);
        }
    }

    #[test]
    fn merge_drops_out_of_order_events_of_a_hostile_source_in_bounded_work() {
        // A full buffer of records in descending time (1362 of them): the
        // old insertion sort did ~900k record moves for it in every reader.
        let (mut hostile, mut good, mut out) = (buf(), buf(), buf());
        let desc: Vec<(u32, u8)> = (0..MAX_EVENTS as u32)
            .map(|i| (MAX_EVENTS as u32 - i, 0xee))
            .collect();
        // SAFETY: full-size buffers.
        let passes = unsafe {
            put_raw(hostile.0.as_mut_ptr(), &desc);
            init(good.0.as_mut_ptr(), 4096);
            for t in [0u32, 100, 2000] {
                write(good.0.as_mut_ptr(), t, [0x90, t as u8].as_ptr(), 2).unwrap();
            }
            merge_counted(
                out.0.as_mut_ptr(),
                4096,
                [hostile.0.as_ptr(), good.0.as_ptr()].into_iter(),
            )
        };
        let ev = events(&out);
        let times: Vec<u32> = ev.iter().map(|e| e.0).collect();
        // JACK's in-order rule: after its first event (the latest), every
        // later event of the hostile source is earlier, so dropped.
        assert_eq!(times, vec![0, 100, MAX_EVENTS as u32, 2000], "{times:?}");
        assert_eq!(ev[2].1, vec![0xee]);
        assert!(passes <= 1, "two runs need one merge pass, took {passes}");
        // A sawtooth keeps what is in order (its first ramp, then only
        // events at the ramp's top or later).
        let saw: Vec<(u32, u8)> = (0..MAX_EVENTS as u32)
            .map(|i| ((i % 10) * 7 + i / 100, i as u8))
            .collect();
        let mut last = 0;
        let want: Vec<u32> = saw
            .iter()
            .map(|e| e.0)
            .filter(|&t| {
                t >= last && {
                    last = t;
                    true
                }
            })
            .collect();
        assert!(want.len() < 200, "{}", want.len());
        // SAFETY: `hostile` and `out` are full-size buffers we own; `saw`
        // has MAX_EVENTS records, what put_raw can hold.
        unsafe {
            put_raw(hostile.0.as_mut_ptr(), &saw);
            merge(
                out.0.as_mut_ptr(),
                4096,
                std::iter::once(hostile.0.as_ptr()),
            );
        }
        let t: Vec<u32> = events(&out).iter().map(|e| e.0).collect();
        assert_eq!(t, want);
    }

    #[test]
    fn merge_of_many_sources_is_stable_and_takes_log_passes() {
        // 16 sources, each in order, interleaved in time: the result is in
        // time order, equal times in source order, in log2(16) = 4 passes.
        let mut srcs: Vec<Box<Buf>> = (0..16).map(|_| buf()).collect();
        let mut out = buf();
        // SAFETY: full-size buffers.
        let passes = unsafe {
            for (k, b) in srcs.iter_mut().enumerate() {
                let p = b.0.as_mut_ptr();
                init(p, 1024);
                for j in 0..40u32 {
                    let t = (j * 25 + (k as u32 * 7) % 25).min(1023);
                    write(p, t, [k as u8, j as u8].as_ptr(), 2).unwrap();
                }
            }
            merge_counted(out.0.as_mut_ptr(), 1024, srcs.iter().map(|b| b.0.as_ptr()))
        };
        let ev = events(&out);
        assert_eq!(ev.len(), 16 * 40);
        assert!(passes <= 4, "{passes} passes for 16 runs");
        for w in ev.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            assert!(a.0 <= b.0, "not in time order: {a:?} {b:?}");
            if a.0 == b.0 {
                assert!(a.1 < b.1, "equal times not in source order: {a:?} {b:?}");
            }
        }
        // Every source's events, in its own order.
        for k in 0..16u8 {
            let mine: Vec<u8> = ev.iter().filter(|e| e.1[0] == k).map(|e| e.1[1]).collect();
            assert_eq!(mine, (0..40).collect::<Vec<u8>>());
        }
    }

    #[test]
    fn writing_an_empty_event_needs_no_data_pointer() {
        let mut b = buf();
        let p = b.0.as_mut_ptr();
        // SAFETY: a full-size buffer; a NULL data pointer with size 0 (as
        // jack_midi_event_write(buf, t, NULL, 0) passes it) is never read.
        unsafe {
            init(p, 64);
            write(p, 3, std::ptr::null(), 0).unwrap();
        }
        assert_eq!(events(&b), vec![(3, vec![])]);
    }

    #[test]
    fn garbage_never_reads_outside() {
        let mut b = buf();
        let p = b.0.as_mut_ptr();
        // SAFETY: a full-size buffer; we scribble on it like a hostile client.
        unsafe {
            init(p, 64);
            wr(p, F_COUNT, u32::MAX);
            wr(p, F_DATA_USED, u32::MAX);
            let r = rec(p, 0) as *mut u32;
            *r.add(1) = 1000;
            *r.add(2) = (MIDI_BUFFER_BYTES - 10) as u32;
            assert_eq!(event_count(p) as usize, MAX_EVENTS);
            assert!(event(p, 0).is_none(), "data range outside the buffer");
            assert_eq!(max_event_size(p), 0);
            let mut out = buf();
            merge(out.0.as_mut_ptr(), 64, std::iter::once(p as *const u8));
        }
    }
}
