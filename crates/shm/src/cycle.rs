//! The per-cycle operations both the driver and the clients' process threads
//! perform: waking downstream nodes, and resolving an input port's buffer
//! (zero copy for one live connection, mixing for several; for MIDI ports,
//! merging the sources' events in time order). Real-time safe.

use crate::sync::{activation, futex, Ordering};
use crate::time::monotonic_ns;
use crate::{client_state, port_flags, ActivationRecord, NodeStatus, Table, View};

/// Decrements node `d`'s counter for `cycle` and wakes it if that was its last input.
#[inline]
pub fn signal(view: &View, d: u32, cycle: u64) {
    let Some(r) = view.record(d) else { return };
    if activation::decrement(&r.counter, cycle as u32) {
        trigger(r, cycle);
    }
}

/// Wakes a node for `cycle`: stamps signal time and cycle, then bumps its futex word.
#[inline]
pub fn trigger(r: &ActivationRecord, cycle: u64) {
    r.cycle.store(cycle, Ordering::Relaxed);
    r.signal_ns.store(monotonic_ns(), Ordering::Relaxed);
    r.status
        .store(NodeStatus::Triggered as u32, Ordering::Relaxed);
    // The Release in the bump publishes the stores above to the woken thread.
    futex::bump_and_wake(&r.trigger);
}

/// Signals every downstream node of `slot` in `table` for `cycle`.
#[inline]
pub fn signal_downstream(view: &View, table: &Table<'_>, slot: u32, cycle: u64) {
    for i in 0..table.down_count(slot) {
        if let Some(d) = table.down_at(slot, i) {
            signal(view, d, cycle);
        }
    }
}

/// Whether output port `src` is produced this cycle (its owner runs).
#[inline]
pub fn source_is_live(table: &Table<'_>, src: u32) -> bool {
    match table.port_info(src) {
        Some((1, owner, flags, _)) => {
            flags & port_flags::IS_OUTPUT != 0 && table.client_state(owner) == client_state::ACTIVE
        }
        _ => false,
    }
}

/// Where the data of input port `port` comes from this cycle.
enum Source {
    /// Nothing live is connected.
    Nothing,
    /// Exactly one live source, not owned by the reader: read its buffer (zero copy).
    Direct(*mut f32),
    /// Several live sources, or one the reader owns: combine them into the
    /// input port's own buffer.
    Combine(*mut f32),
}

/// Decides, for input `port` read by client `me`, between silence, zero copy
/// and combining (the rule shared by audio mixing and MIDI merging).
#[inline]
fn resolve(view: &View, table: &Table<'_>, port: u32, me: u32) -> Source {
    let mut first = None;
    let mut live = 0;
    for i in 0..table.source_count(port) {
        if let Some(s) = table.source_at(port, i) {
            if source_is_live(table, s) {
                live += 1;
                first.get_or_insert(s);
            }
        }
    }
    let (Some(first), Some(own)) = (first, view.port_buffer(port)) else {
        return Source::Nothing;
    };
    let first_is_mine = matches!(table.port_info(first), Some((_, owner, _, _)) if owner == me);
    if live == 1 && !first_is_mine {
        return view
            .port_buffer(first)
            .map_or(Source::Nothing, Source::Direct);
    }
    Source::Combine(own)
}

/// Pointer to `frames` samples carrying the signal at input port `port` this
/// cycle: the silence buffer when nothing live is connected, the source's own
/// buffer for one live source (zero copy), else the sum of the sources mixed
/// into the input port's own buffer. A single source owned by the caller
/// (`me`, a client reading its own output through a feedback connection) is
/// copied too, so the caller never holds its output buffer twice.
#[inline]
pub fn input_buffer(
    view: &View,
    table: &Table<'_>,
    port: u32,
    me: u32,
    frames: usize,
) -> *const f32 {
    let frames = frames.min(view.layout().caps.max_frames as usize);
    let own = match resolve(view, table, port, me) {
        Source::Nothing => return view.silence(),
        Source::Direct(p) => return p,
        Source::Combine(own) => own,
    };
    // SAFETY: `own` is this input port's buffer (max_frames f32) in the shared
    // segment, written only by the port's owner, which is the caller.
    let out = unsafe { std::slice::from_raw_parts_mut(own, frames) };
    out.fill(0.0);
    mix_sources(view, table, port, out);
    own
}

/// Adds every live source of `port` into `out`.
#[inline]
pub fn mix_sources(view: &View, table: &Table<'_>, port: u32, out: &mut [f32]) {
    for i in 0..table.source_count(port) {
        let Some(s) = table.source_at(port, i) else {
            continue;
        };
        if !source_is_live(table, s) {
            continue;
        }
        let Some(p) = view.port_buffer(s) else {
            continue;
        };
        // SAFETY: a port buffer holds max_frames ≥ out.len() f32. Its owner may
        // be writing it only if late, which gives wrong samples, never invalid
        // memory (every bit pattern is an f32).
        let src = unsafe { std::slice::from_raw_parts(p as *const f32, out.len()) };
        for (o, x) in out.iter_mut().zip(src) {
            *o += *x;
        }
    }
}

/// MIDI counterpart of [`input_buffer`]: a pointer to the MIDI buffer
/// ([`crate::midi`]) carrying the events at input port `port` this cycle: the
/// silence buffer (an empty MIDI buffer) when nothing live is connected, the
/// source's own buffer for one live source not owned by `me` (zero copy),
/// else the sources' events merged in time order into the input port's own
/// buffer.
#[inline]
pub fn midi_input_buffer(
    view: &View,
    table: &Table<'_>,
    port: u32,
    me: u32,
    frames: usize,
) -> *const u8 {
    let own = match resolve(view, table, port, me) {
        Source::Nothing => return view.silence() as *const u8,
        Source::Direct(p) => return p as *const u8,
        Source::Combine(own) => own,
    };
    let sources = (0..table.source_count(port))
        .filter_map(|i| table.source_at(port, i))
        .filter(|&s| source_is_live(table, s) && s != port)
        .filter_map(|s| view.port_buffer(s))
        .map(|p| p as *const u8);
    // SAFETY: `own` is this input port's buffer (≥ MIDI_BUFFER_BYTES, 64-byte
    // aligned) written only by its owner, the caller; every source is another
    // port's buffer of the same size (a port is never its own source).
    unsafe { crate::midi::merge(own as *mut u8, frames as u32, sources) };
    own as *const u8
}
