//! Tests of the profile ring: round trips, overwrite detection, names,
//! a concurrent reader, sizing.

use super::*;
use crate::sync::Ordering;

#[repr(C, align(4096))]
struct Page([u8; 4096]);

struct Mem(Vec<Page>);

fn ring(cycles: u32, nodes: u32) -> (Mem, ProfileRing) {
    let l = ProfileLayout::new(cycles, nodes, 4).unwrap();
    let mut m = Mem((0..l.bytes / 4096).map(|_| Page([0; 4096])).collect());
    // SAFETY: zeroed, page-aligned, private, and it lives as long as the ring in each test.
    let r = unsafe { ProfileRing::init(m.0.as_mut_ptr() as *mut u8, l) };
    (m, r)
}

fn row(uuid: u64, t: u64) -> NodeData {
    NodeData {
        uuid,
        slot: uuid as u32,
        flags: node_flags::FINISHED,
        signal_ns: t,
        awake_ns: t + 1,
        finish_ns: t + 2,
        cpu_ns: 3,
        budget_ns: 4,
        predicted_ns: 5,
    }
}

#[test]
fn records_round_trip_and_old_ones_are_reported_overwritten() {
    let (_m, r) = ring(8, 16);
    for k in 0..20u64 {
        let rows = [row(1, k * 10), row(2, k * 10 + 5)];
        r.write_cycle(
            &CycleData {
                cycle: k + 1,
                start_ns: k * 100,
                ..Default::default()
            },
            rows.into_iter(),
        );
    }
    assert_eq!(r.cycles_written(), 20);
    let mut buf = [NodeData::default(); 4];
    let (c, n) = r.read_cycle(19, &mut buf).unwrap();
    assert_eq!((c.cycle, n), (20, 2));
    assert_eq!(buf[1], row(2, 195));
    assert_eq!(r.read_cycle(3, &mut buf), Err(ReadError::Overwritten));
    assert_eq!(r.read_cycle(20, &mut buf), Err(ReadError::NotYet));
    let (got, lost) = r.read_from(0, usize::MAX);
    assert_eq!(got.len(), 8, "the ring holds 8 cycles");
    assert_eq!(lost, 12, "12 older cycles were overwritten");
    assert_eq!(got[0].0.cycle, 13);
    assert_eq!(got[7].1, vec![row(1, 190), row(2, 195)]);
    let (got, lost) = r.read_from(18, 100);
    assert_eq!((got.len(), lost), (2, 0));
    let (got, _) = r.read_from(0, 3);
    assert_eq!(got.first().map(|c| c.0.cycle), Some(18));
}

#[test]
fn rows_overwritten_before_their_cycle_are_detected() {
    // 8 cycle slots but only 4 row slots: cycle records outlive their rows.
    let (_m, r) = ring(8, 4);
    for k in 0..4u64 {
        r.write_cycle(
            &CycleData {
                cycle: k + 1,
                ..Default::default()
            },
            [row(1, k), row(2, k)].into_iter(),
        );
    }
    let mut buf = [NodeData::default(); 4];
    assert!(r.read_cycle(3, &mut buf).is_ok());
    assert!(r.read_cycle(2, &mut buf).is_ok());
    assert_eq!(r.read_cycle(1, &mut buf), Err(ReadError::Overwritten));
    assert_eq!(
        r.read_cycle(3, &mut buf[..1]),
        Err(ReadError::RowsDontFit(2))
    );
}

#[test]
fn names_survive_and_are_truncated_to_63_bytes() {
    let (_m, r) = ring(4, 4);
    r.write_name(7, 3, 99, "synth");
    let long = "x".repeat(80);
    r.write_name(8, 4, 99, &long);
    let n = r.names();
    assert_eq!(n[0], (7, 3, 99, "synth".to_string()));
    assert_eq!(n[1].3.len(), 63);
    for i in 0..10 {
        r.write_name(100 + i, 1, 1, "later");
    }
    assert_eq!(r.names().len(), 4, "the name ring keeps its capacity");
}

#[test]
fn concurrent_reader_never_sees_a_torn_record() {
    let (_m, r) = ring(4, 8);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..200_000u64 {
                // Every field of cycle k and of its rows derives from k.
                r.write_cycle(
                    &CycleData {
                        cycle: k,
                        start_ns: k,
                        awake_ns: k,
                        end_ns: k,
                        cpu_ns: k,
                        period_ns: k,
                        frames: k as u32,
                        flags: 0,
                        budget_ns: k,
                        predicted_ns: k,
                    },
                    [row(k, k), row(k, k)].into_iter(),
                );
            }
            stop.store(true, Ordering::Release);
        });
        let mut buf = [NodeData::default(); 4];
        let mut ok = 0u64;
        while !stop.load(Ordering::Acquire) {
            let w = r.cycles_written();
            if w == 0 {
                continue;
            }
            for n in w.saturating_sub(4)..w {
                if let Ok((c, k)) = r.read_cycle(n, &mut buf) {
                    assert_eq!(c.cycle, n);
                    assert!(c.start_ns == n && c.end_ns == n && c.predicted_ns == n);
                    assert_eq!(k, 2);
                    assert_eq!(buf[0], row(n, n));
                    assert_eq!(buf[1], row(n, n));
                    ok += 1;
                }
            }
        }
        assert!(ok > 0);
    });
}

#[test]
fn sizing_by_seconds_and_cap() {
    let l = ProfileLayout::for_history(30.0, 48000, 128, 16, 64);
    assert_eq!(l.cycle_capacity, 11250);
    assert!((l.seconds(48000, 128) - 30.0).abs() < 0.01);
    let huge = ProfileLayout::for_history(1e6, 192000, 16, 64, 1024);
    assert!(huge.bytes <= MAX_PROFILE_BYTES);
    let mem = [Page([0; 4096])];
    // SAFETY: one readable, aligned page that outlives the call.
    let e = unsafe { ProfileRing::open(mem.as_ptr() as *const u8, 4096) };
    assert!(e.unwrap_err().contains("version 0"));
}
