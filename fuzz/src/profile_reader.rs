//! Target `profile_reader`: a profile ring segment filled with the fuzzer's
//! bytes, opened and read the way `resound profile` and `resound monitor`
//! read it: [`ProfileRing::open`] validates the header, then
//! [`Profile::from_ring`] (the record range, [`ProfileRing::read_from`],
//! the name records) and the profiler's summary and text table;
//! [`ProfileRing::read_cycle`] also runs into a small row buffer, as the
//! in-process profiler does.
//!
//! Input: three bytes of capacities (cycles, node rows, names), a byte of
//! options (keep a valid header so the records are reached; how much
//! history to ask for), then the segment's bytes from the header's
//! counters on (or from its start).
//!
//! Checks: no panic (arithmetic overflow included: fuzz builds check it),
//! no read outside the segment; a valid header opens; no more cycles, rows
//! or names come back than the ring holds; the profile has one row per
//! record read.

use resound_profiler::{Profile, ServerInfo};
use resound_shm::profile::{
    NodeData, ProfileLayout, ProfileRing, MAX_ROWS_PER_CYCLE, PROFILE_MAGIC, PROFILE_VERSION,
};
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// Offset of `cycles_written` in the header: what the input writes first
/// when the header is kept valid.
const COUNTERS_AT: usize = 32;

/// A page-aligned zeroed block, as a mapping is.
struct Pages {
    ptr: *mut u8,
    layout: Layout,
}

impl Pages {
    fn new(len: usize) -> Pages {
        let layout = Layout::from_size_align(len, 4096).expect("layout");
        // SAFETY: len > 0 (a profile layout is at least one page).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        Pages { ptr, layout }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to layout.size() bytes we own.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Opens and reads the ring described by `data`.
pub fn run(data: &[u8]) {
    let [c, n, k, opts, rest @ ..] = data else {
        return;
    };
    let Ok(layout) = ProfileLayout::new(
        1 + (*c as u32 % 16),
        1 + (*n as u32 % 64),
        1 + (*k as u32 % 8),
    ) else {
        return;
    };
    let mut seg = Pages::new(layout.bytes);
    let valid = opts & 1 != 0;
    let bytes = seg.bytes();
    let at = if valid {
        bytes[..8].copy_from_slice(&PROFILE_MAGIC.to_le_bytes());
        bytes[8..12].copy_from_slice(&PROFILE_VERSION.to_le_bytes());
        let hs = std::mem::size_of::<resound_shm::profile::ProfileHeader>() as u32;
        bytes[12..16].copy_from_slice(&hs.to_le_bytes());
        bytes[16..20].copy_from_slice(&layout.cycle_capacity.to_le_bytes());
        bytes[20..24].copy_from_slice(&layout.node_capacity.to_le_bytes());
        bytes[24..28].copy_from_slice(&layout.name_capacity.to_le_bytes());
        COUNTERS_AT
    } else {
        0
    };
    let len = rest.len().min(bytes.len() - at);
    bytes[at..at + len].copy_from_slice(&rest[..len]);
    // SAFETY: a readable, page-aligned block of layout.bytes that outlives `ring`.
    let ring = match unsafe { ProfileRing::open(seg.ptr, layout.bytes) } {
        Ok(r) => r,
        Err(e) => {
            assert!(!valid, "a valid header was refused: {e}");
            return;
        }
    };
    if valid {
        assert_eq!(ring.layout(), &layout);
    }
    // A scribbled header may describe other capacities of the same size.
    let layout = *ring.layout();
    let last = match opts >> 1 {
        0 => None,
        s => Some(f64::from(s) * 0.01),
    };
    let info = ServerInfo {
        sample_rate: 48_000,
        buffer_frames: 256,
        ..Default::default()
    };
    let p = Profile::from_ring(&ring, info, 5_333_333, last, &[(1, "a".into())]);
    assert!(p.cycles.len() <= layout.cycle_capacity as usize);
    let rows_max = MAX_ROWS_PER_CYCLE.min(layout.node_capacity) as usize;
    assert!(p.cycles.iter().all(|c| c.nodes.len() <= rows_max));
    let names = ring.names();
    assert!(names.len() <= layout.name_capacity as usize);
    let _ = (p.summary().to_text(), p.xruns(), p.period_ns());
    let _ = p.series(|r| r.awake_ns);
    let mut rows = [NodeData::default(); 4];
    let written = ring.cycles_written();
    for i in written.saturating_sub(2)..written.saturating_add(1) {
        if let Ok((_, k)) = ring.read_cycle(i, &mut rows) {
            assert!(k <= rows.len());
        }
    }
}
