//! The per-cycle operations both the driver and the clients' process threads
//! perform: releasing a cycle to the nodes downstream, finding whether a
//! node's inputs are ready (and which upstream node to sleep on if not),
//! and resolving an input port's buffer (zero copy for one live connection,
//! mixing for several; for MIDI ports, merging the sources' events in time
//! order). Real-time safe.

use crate::sync::{futex, AtomicU32, Ordering};
use crate::time::monotonic_ns;
use crate::{client_state, port_flags, ActivationRecord, NodeStatus, Table, View};

/// Releases `cycle` to every node downstream of the owner of `r`: stamps
/// the release time, stores the cycle's tag in the done word (release: the
/// outputs written before are visible to whoever sees the tag) and wakes
/// every node sleeping on it, with one `FUTEX_WAKE`. The caller is the
/// record's owner. Real-time safe.
#[inline]
pub fn release(r: &ActivationRecord, cycle: u64) {
    publish_release(r, cycle);
    futex::wake_all(&r.done);
}

/// The stores of a release of `cycle` in the owner's record `r`, without
/// the wake: the release time, then the cycle's tag in the done word
/// (release order: the outputs written before are visible to whoever sees
/// the tag). Real-time safe.
#[inline]
fn publish_release(r: &ActivationRecord, cycle: u64) {
    r.release_ns.store(monotonic_ns(), Ordering::Relaxed);
    r.done.store(cycle as u32, Ordering::Release);
}

/// The driver's release of `cycle` (its record `r`): as [`release`], but
/// the `FUTEX_WAKE` is made only when some node of `view` says it sleeps on
/// the driver's word ([`sleeper_on_driver`]), looked at after the store and
/// a full fence (the other half of the protocol is
/// [`mark_asleep_on_driver`]). When the nodes downstream of the driver are
/// already awake (woken by their own timer, spinning for the release) the
/// cycle start then makes no syscall at all. Returns whether it woke.
/// Real-time safe.
#[inline]
pub fn release_to_sleepers(
    view: &View,
    table: &Table<'_>,
    r: &ActivationRecord,
    cycle: u64,
) -> bool {
    publish_release(r, cycle);
    crate::sync::fence_full();
    let wake = sleeper_on_driver(view, table);
    if wake {
        futex::wake_all(&r.done);
    }
    wake
}

/// Whether any client node of `table` (active or not: any thread that may
/// still sleep on the driver's word) says it sleeps on the driver's `done`
/// word. Real-time safe.
#[inline]
pub fn sleeper_on_driver(view: &View, table: &Table<'_>) -> bool {
    (1..table.client_hw())
        .filter_map(|slot| view.record(slot))
        .any(|r| r.sleeps_on_driver.load(Ordering::Relaxed) != 0)
}

/// A process thread about to sleep on the driver's `done` word says so in
/// its own record `me` (then a full fence, so the futex wait's look at the
/// word comes after the driver can see the flag); `false` takes it back
/// after the sleep. Real-time safe.
#[inline]
pub fn mark_asleep_on_driver(me: &ActivationRecord, asleep: bool) {
    if asleep {
        me.sleeps_on_driver.store(1, Ordering::SeqCst);
        crate::sync::fence_full();
    } else {
        me.sleeps_on_driver.store(0, Ordering::Relaxed);
    }
}

/// Whether a node's inputs are ready for a cycle ([`readiness`]).
#[derive(Debug, Clone, Copy)]
pub enum Readiness<'a> {
    /// Every upstream node released the cycle; the latest did at `signal_ns`.
    Ready {
        /// Latest release time of the upstream nodes (CLOCK_MONOTONIC ns).
        signal_ns: u64,
    },
    /// This upstream done word still holds `seen`, another cycle's tag:
    /// sleep on it.
    Behind(&'a AtomicU32, u32),
    /// An upstream node claims a later cycle than the one asked about: the
    /// cycle moved on (or the upstream scribbles); look again at the
    /// driver's word.
    Ahead,
}

/// The activation records of the upstream nodes of `slot` that are mapped
/// here, in table order (one not mapped is skipped: its outputs read as
/// silence). Real-time safe (no allocation).
#[inline]
pub fn up_records<'v, 't>(
    view: &'v View,
    table: &Table<'t>,
    slot: u32,
) -> impl Iterator<Item = &'v ActivationRecord> + use<'v, 't> {
    table.ups(slot).filter_map(|u| view.record(u))
}

/// Whether cycle tag `a` comes after tag `b`. Tags are the low 32 bits of
/// the cycle number and wrap; within half their range of each other the
/// difference tells which is later. Real-time safe.
#[inline]
fn tag_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Whether every upstream node of `slot` in `table` (its range in the
/// table's edges: the driver, for a node fed by it or by nobody, and the
/// clients feeding it) has released the cycle with tag `tag`. An upstream
/// node whose segment is not mapped here counts as released (its outputs
/// then read as silence), so a missing segment never stalls a node.
/// Real-time safe.
#[inline]
pub fn readiness<'v>(view: &'v View, table: &Table<'_>, slot: u32, tag: u32) -> Readiness<'v> {
    let mut signal_ns = 0;
    for r in up_records(view, table, slot) {
        let done = r.done.load(Ordering::Acquire);
        if done != tag {
            if tag_after(done, tag) {
                return Readiness::Ahead;
            }
            return Readiness::Behind(&r.done, done);
        }
        signal_ns = signal_ns.max(r.release_ns.load(Ordering::Relaxed));
    }
    Readiness::Ready { signal_ns }
}

/// What a node's process thread does next ([`next_step`]).
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// Run the cycle with this tag: every upstream node released it, the
    /// latest at `signal_ns` (CLOCK_MONOTONIC ns).
    Run {
        /// Low 32 bits of the cycle to run.
        tag: u32,
        /// Latest release time of the upstream nodes.
        signal_ns: u64,
    },
    /// Sleep while this word still holds this value, then look again.
    Sleep(&'a AtomicU32, u32),
}

/// The next cycle node `slot` runs, given the tag of the cycle the driver
/// started last (`started`, its done word `driver_done`) and the tag of the
/// last cycle this node ran (`last`, None before its first):
///
/// - **catching up**: a node that fell behind (it woke or ran late, or its
///   upstream did) runs the cycle its upstream nodes released last, if that
///   cycle is after the one it ran last and at most
///   [`MAX_CATCH_UP_CYCLES`] before the started one, no upstream node has
///   begun a later one (so the outputs it reads still hold that cycle's
///   data), and every client it feeds can still use that block
///   (`joinable_downstream`). A block late anywhere in a chain thus goes
///   on down it, late, instead of being dropped, as with jackd's
///   activation counters; the driver (its capture is already the new
///   cycle's) and a node fed only by it never catch up;
/// - otherwise the started cycle, once every upstream node released it;
/// - otherwise, the word to sleep on: an upstream done word not yet at the
///   started cycle, or the driver's, when this node already ran it.
///
/// Real-time safe.
#[inline]
pub fn next_step<'v>(
    view: &'v View,
    table: &Table<'_>,
    slot: u32,
    driver_done: &'v AtomicU32,
    started: u32,
    last: Option<u32>,
) -> Step<'v> {
    if let Some(tag) = late_cycle(view, table, slot, started, last) {
        if let Readiness::Ready { signal_ns } = readiness(view, table, slot, tag) {
            if upstream_still_holds(view, table, slot, tag)
                && joinable_downstream(view, table, slot, tag)
            {
                return Step::Run { tag, signal_ns };
            }
        }
    }
    // The started cycle, unless this node ran it already: then the next one.
    let want = match last {
        Some(l) if l == started => started.wrapping_add(1),
        _ => started,
    };
    match readiness(view, table, slot, want) {
        Readiness::Behind(word, seen) => Step::Sleep(word, seen),
        Readiness::Ready { signal_ns } if want == started => Step::Run {
            tag: started,
            signal_ns,
        },
        // Ready for a cycle the driver has not started (an upstream node
        // ahead of it, or scribbling): wait for the driver.
        Readiness::Ready { .. } | Readiness::Ahead => Step::Sleep(driver_done, started),
    }
}

/// How many cycles before the started one a node may still catch up on
/// ([`next_step`]). A real upstream node releases one cycle per run, so a
/// late node catches up on one cycle and is on time again; the bound only
/// limits how many extra runs an upstream node scribbling its done word can
/// draw from a node that fell far behind.
pub const MAX_CATCH_UP_CYCLES: u32 = 8;

/// The cycle a node that fell behind may still run ([`next_step`]): the one
/// its first mapped upstream node released last, when this node ran an
/// earlier one (and ran one already) and the driver started a later one, at
/// most [`MAX_CATCH_UP_CYCLES`] later. Whether the other upstream nodes
/// released it too, [`readiness`] says. Real-time safe.
#[inline]
fn late_cycle(
    view: &View,
    table: &Table<'_>,
    slot: u32,
    started: u32,
    last: Option<u32>,
) -> Option<u32> {
    let last = last?;
    let tag = up_records(view, table, slot)
        .next()?
        .done
        .load(Ordering::Acquire);
    let in_reach = (1..=MAX_CATCH_UP_CYCLES).contains(&started.wrapping_sub(tag));
    (tag_after(tag, last) && in_reach).then_some(tag)
}

/// Whether cycle `tag`'s block from node `slot` can still be used by every
/// client it feeds: none of them has another upstream node (or the
/// driver's capture) that released a later cycle already, whose outputs no
/// longer hold `tag`'s data. A join of a late branch and an on-time one can
/// never run `tag`; catching up on it in the late branch would only make
/// that branch, and the join, late for the next cycle too. The driver's
/// playback is not a join (it plays what each end of the graph holds).
/// Scans the table's edges; only a node that fell behind asks. Real-time
/// safe.
fn joinable_downstream(view: &View, table: &Table<'_>, slot: u32, tag: u32) -> bool {
    (1..table.client_hw())
        .filter(|&d| table.client_state(d) == client_state::ACTIVE)
        .filter(|&d| table.ups(d).any(|u| u == slot))
        .all(|d| {
            table
                .ups(d)
                .filter(|&u| u != slot)
                .filter_map(|u| view.record(u))
                .all(|r| !tag_after(r.done.load(Ordering::Acquire), tag))
        })
}

/// Whether no upstream node of `slot` has begun a cycle after `tag` (none
/// is running another cycle), so their outputs still hold `tag`'s data.
/// A racy check by nature (an upstream node may begin right after it); it
/// keeps a catching-up node from reading a buffer being rewritten, in all
/// but that window. Real-time safe.
#[inline]
fn upstream_still_holds(view: &View, table: &Table<'_>, slot: u32, tag: u32) -> bool {
    up_records(view, table, slot).all(|r| {
        let running = r.status.load(Ordering::Acquire) == NodeStatus::Running as u32;
        !running || r.cycle.load(Ordering::Relaxed) as u32 == tag
    })
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
    let (Some(first), Some(own)) = (first, view.port_buffer(me, port)) else {
        return Source::Nothing;
    };
    let first_is_mine = matches!(table.port_info(first), Some((_, owner, _, _)) if owner == me);
    if live == 1 && !first_is_mine {
        return view
            .port_buffer_in(table, first)
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
    // SAFETY: `own` is this input port's buffer (max_frames f32) in the
    // caller's own node segment, which only the caller writes.
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
        let Some(p) = view.port_buffer_in(table, s) else {
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
        .filter_map(|s| view.port_buffer_in(table, s))
        .map(|p| p as *const u8);
    // SAFETY: `own` is this input port's buffer (≥ MIDI_BUFFER_BYTES, 64-byte
    // aligned) written only by its owner, the caller; every source is another
    // port's buffer of the same size (a port is never its own source).
    unsafe { crate::midi::merge(own as *mut u8, frames as u32, sources) };
    own as *const u8
}

#[cfg(test)]
mod tests {
    use super::*;
    /// A view with `n` active clients in slots 1..=n.
    fn view_with_clients(n: u32) -> View {
        crate::fixture::view_with_active_clients(crate::fixture::SMALL_CAPS, 128, n)
    }

    #[test]
    fn the_driver_wakes_its_word_only_when_a_node_says_it_sleeps_there() {
        let v = view_with_clients(3);
        let table = v.table(v.current_index());
        let driver = v.record(0).unwrap();
        assert!(!release_to_sleepers(&v, &table, driver, 7));
        assert_eq!(driver.done.load(Ordering::Acquire), 7, "released anyway");
        assert!(driver.release_ns.load(Ordering::Relaxed) > 0);

        let third = v.record(3).unwrap();
        mark_asleep_on_driver(third, true);
        assert!(sleeper_on_driver(&v, &table));
        assert!(release_to_sleepers(&v, &table, driver, 8));
        mark_asleep_on_driver(third, false);
        assert!(!release_to_sleepers(&v, &table, driver, 9));
    }

    #[test]
    fn any_value_but_zero_counts_as_asleep() {
        // A client that scribbles on its flag costs the driver a syscall.
        let v = view_with_clients(2);
        let table = v.table(v.current_index());
        v.record(1)
            .unwrap()
            .sleeps_on_driver
            .store(0xdead_beef, Ordering::Relaxed);
        assert!(sleeper_on_driver(&v, &table));
    }
}
