//! MIDI event buffers: the layout of a MIDI port's buffer in the shared
//! segment, and the operations on it (JACK's `jack_midi_*` semantics).
//!
//! A MIDI port uses the first [`MIDI_BUFFER_BYTES`] of its port buffer
//! (every port buffer is at least that large, see [`crate::shm::Layout`]):
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
/// As [`init`]; `data` points to `size` readable bytes.
pub unsafe fn write(
    buf: *mut u8,
    time: u32,
    data: *const u8,
    size: usize,
) -> Result<(), WriteError> {
    // SAFETY: per the function contract; `reserve` returned room for `size` bytes.
    unsafe {
        let dst = reserve(buf, time, size)?;
        std::ptr::copy_nonoverlapping(data, dst, size);
        Ok(())
    }
}

/// Merges the events of `sources` (in time order; events at equal times keep
/// the order of the sources) into `out`, initialised for `nframes`. Sources
/// that are not initialised contribute nothing; events at or after
/// `nframes` and malformed events are skipped; what does not fit is counted
/// as lost.
///
/// # Safety
/// `out` as in [`init`], each source as in [`is_valid`]; `out` is none of the sources.
pub unsafe fn merge(out: *mut u8, nframes: u32, sources: impl Iterator<Item = *const u8>) {
    // SAFETY: per the function contract.
    unsafe {
        init(out, nframes);
        for src in sources {
            for i in 0..event_count(src) {
                let Some(e) = event(src, i) else { continue };
                if e.time >= nframes {
                    continue;
                }
                if let Ok(dst) = push(out, e.time, e.size as usize) {
                    std::ptr::copy(e.data, dst, e.size as usize);
                }
            }
        }
        // Stable insertion sort of the records by time. Each source is
        // already sorted, so this is cheap; inline data moves with its
        // record, out-of-line data stays where it is.
        let (n, _) = counts(out);
        for i in 1..n {
            let cur = std::ptr::read(rec(out, i) as *const [u32; 3]);
            let mut j = i;
            while j > 0 {
                let prev = std::ptr::read(rec(out, j - 1) as *const [u32; 3]);
                if prev[0] <= cur[0] {
                    break;
                }
                std::ptr::write(rec(out, j) as *mut [u32; 3], prev);
                j -= 1;
            }
            std::ptr::write(rec(out, j) as *mut [u32; 3], cur);
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
        // SAFETY: as above.
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
