//! Seed inputs for the corpora, made with the project's own encoders and
//! writers: frames from `resound_protocol::wire::encode`, MIDI buffers from
//! `resound_shm::midi::write`, mailboxes from the client library's way of
//! posting transport requests, a profile ring from the driver's
//! `ProfileRing::write_cycle`. The two targets whose input is a list of
//! operations decoded with `arbitrary` (`graph_requests`, `metadata`) get a
//! few short byte patterns: any bytes are a valid operation list there.
//!
//! `cargo run --no-default-features --example seeds` (in `fuzz/`) writes
//! them into `fuzz/corpus/<target>/seed-*`.

use crate::midi_buffer::Buf;
use resound_protocol::wire::{encode, Envelope, Hello, HelloKind, Request, PROTOCOL_VERSION};
use resound_shm::limits::{AUDIO_TYPE, MIDI_TYPE};
use resound_shm::profile::{CycleData, NodeData, ProfileLayout, ProfileSegment};
use resound_shm::sync::Ordering;
use resound_shm::transport::{command, valid, Position};
use resound_shm::{Capacities, Mailbox};

/// Every target's seeds: (target, file name, bytes).
pub fn all() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut add = |t: &'static str, v: Vec<(String, Vec<u8>)>| {
        out.extend(v.into_iter().map(|(n, b)| (t, n, b)));
    };
    add("wire_frame", wire());
    add("graph_requests", patterns());
    add("metadata", patterns());
    add("midi_buffer", midi());
    add("transport_mailbox", transport());
    add("profile_reader", profile());
    out
}

/// A client session: its Hello, then requests, each a frame.
fn wire() -> Vec<(String, Vec<u8>)> {
    let hello = |kind| {
        encode(&Hello {
            protocol: PROTOCOL_VERSION,
            kind,
        })
        .unwrap()
    };
    let env = |seq, req| encode(&Envelope { seq, req }).unwrap();
    let mut client = hello(HelloKind::Client {
        name: "synth".into(),
        exact_name: false,
    });
    for (i, req) in [
        Request::RegisterPort {
            name: "out".into(),
            port_type: AUDIO_TYPE.into(),
            flags: 2,
        },
        Request::RegisterPort {
            name: "midi_in".into(),
            port_type: MIDI_TYPE.into(),
            flags: 1,
        },
        Request::Activate { tid: 1234 },
        Request::Connect {
            src: "synth:out".into(),
            dst: "system:playback_1".into(),
        },
        Request::Disconnect {
            src: "synth:out".into(),
            dst: "system:playback_1".into(),
        },
        Request::Deactivate,
    ]
    .into_iter()
    .enumerate()
    {
        client.extend(env(i as u32, req));
    }
    let mut control = hello(HelloKind::Control);
    control.extend(env(
        7,
        Request::Connect {
            src: "a:out".into(),
            dst: "b:in".into(),
        },
    ));
    vec![
        ("seed-client-session".into(), client),
        ("seed-control-session".into(), control),
        ("seed-profile-hello".into(), hello(HelloKind::Profile)),
    ]
}

/// Byte patterns for the `arbitrary`-decoded targets.
fn patterns() -> Vec<(String, Vec<u8>)> {
    vec![
        ("seed-counting".into(), (0..=255u8).collect()),
        (
            "seed-sparse".into(),
            (0..512u32).map(|i| (i * 37 % 7) as u8).collect(),
        ),
    ]
}

/// MIDI buffers written with `midi::write`: a control byte (frames,
/// sources; header not forced) then each source's bytes.
fn midi() -> Vec<(String, Vec<u8>)> {
    let buffer = |events: &[(u32, &[u8])]| {
        let mut b = Buf::zeroed();
        let p = b.0.as_mut_ptr();
        // SAFETY: a full, aligned buffer.
        unsafe {
            resound_shm::midi::init(p, 256);
            for (t, d) in events {
                resound_shm::midi::write(p, *t, d.as_ptr(), d.len()).unwrap();
            }
        }
        b.0.to_vec()
    };
    let inline = |events: &[(u32, &[u8])]| {
        let mut v = buffer(events);
        v.truncate(resound_shm::midi::HEADER_BYTES + events.len() * resound_shm::midi::EVENT_BYTES);
        v
    };
    // Control byte: frames index 4 (256), (sources - 1) << 3.
    let one = [
        vec![4u8],
        inline(&[(0, &[0x90, 60, 100]), (10, &[0x80, 60, 0])]),
    ]
    .concat();
    let a = inline(&[(0, &[0x90, 60, 100]), (100, &[0x80, 60, 0])]);
    let b = inline(&[(5, &[0xb0, 7, 64]), (100, &[0xf8]), (200, &[0xfc])]);
    let two = [vec![4u8 | 1 << 3], a.clone(), vec![0; b.len() - a.len()], b].concat();
    let sysex: Vec<u8> = [0xf0].into_iter().chain(1..40).chain([0xf7]).collect();
    let long = [vec![4u8], buffer(&[(3, &sysex), (4, &[0x90, 61, 1])])].concat();
    vec![
        ("seed-one-source".into(), one),
        ("seed-two-sources".into(), two),
        ("seed-sysex".into(), long),
    ]
}

/// Mailboxes as the client library fills them: a setup byte (clients 1-3
/// active, client 1 timebase master), then cycles of (mask, mailboxes).
fn transport() -> Vec<(String, Vec<u8>)> {
    let caps = Capacities {
        max_clients: 4,
        max_ports: 4,
        max_connections: 4,
        max_frames: 256,
    };
    let v = resound_shm::fixture::view_with_active_clients(caps, 256, 0);
    let mb = v.mailbox(1).unwrap();
    let bytes = |mb: &Mailbox| {
        // SAFETY: the mailbox lies inside the mapping of slot 1's node
        // segment, size_of::<Mailbox>() bytes; nobody writes it now.
        unsafe {
            std::slice::from_raw_parts(
                mb as *const Mailbox as *const u8,
                std::mem::size_of::<Mailbox>(),
            )
        }
        .to_vec()
    };
    let setup = 0b0000_1110u8 | 1 << 3;
    let mut input = vec![setup];
    // Cycle 1: start. Cycle 2: relocate with BBT. Cycle 3: the master's
    // position (stamped). Cycle 4: stop.
    mb.transport_cmd
        .store(1 << 8 | command::START as u64, Ordering::Release);
    input.extend([0b10]);
    input.extend(bytes(mb));
    let pos = Position {
        frame: 48_000,
        valid: valid::BBT,
        bar: 3,
        beat: 2,
        beats_per_minute: 120.0,
        beats_per_bar: 4.0,
        beat_type: 4.0,
        ticks_per_beat: 1920.0,
        ..Default::default()
    };
    assert!(mb.locate_pos.put(&pos, 4));
    mb.locate_req.fetch_add(1, Ordering::AcqRel);
    input.extend([0b10]);
    input.extend(bytes(mb));
    assert!(mb.timebase_pos.put(
        &Position {
            valid: valid::BBT | valid::TIMECODE,
            frame_time: 1.5,
            next_time: 1.6,
            ..pos
        },
        4
    ));
    input.extend([0b11]);
    input.extend(bytes(mb));
    mb.transport_cmd
        .store(2 << 8 | command::STOP as u64, Ordering::Release);
    input.extend([0b10]);
    input.extend(bytes(mb));
    vec![("seed-start-locate-master-stop".into(), input)]
}

/// A profile ring written by the driver's writer: capacities, options
/// (header as written, whole history), then the segment's bytes.
fn profile() -> Vec<(String, Vec<u8>)> {
    let (c, n, k) = (4u32, 16u32, 4u32);
    let seg = ProfileSegment::create(ProfileLayout::new(c, n, k).unwrap()).unwrap();
    let ring = seg.ring();
    ring.write_name(0x2_0000_0001, 1, 100, "synth");
    ring.write_name(0x2_0000_0002, 2, 101, "fx");
    for i in 0..6u64 {
        let start = 1_000_000_000 + i * 5_333_333;
        let rows = (1..3u32).map(|s| NodeData {
            uuid: 0x2_0000_0000 + s as u64,
            slot: s,
            flags: 7 | 3 << 8,
            signal_ns: start + 20_000 * s as u64,
            awake_ns: start + 30_000 * s as u64,
            finish_ns: start + 90_000 * s as u64,
            cpu_ns: 50_000,
            budget_ns: 100_000,
            predicted_ns: 60_000,
        });
        let cd = CycleData {
            cycle: i,
            start_ns: start,
            awake_ns: start + 10_000,
            end_ns: start + 300_000,
            cpu_ns: 20_000,
            period_ns: 5_333_333,
            frames: 256,
            flags: (i == 4) as u32,
            budget_ns: 50_000,
            predicted_ns: 25_000,
        };
        ring.write_cycle(&cd, rows);
    }
    let len = ring.layout().bytes;
    // SAFETY: the segment's own mapping of `len` bytes, alive here.
    let bytes = unsafe { std::slice::from_raw_parts(seg_base(&seg), len) }.to_vec();
    let caps = [(c - 1) as u8, (n - 1) as u8, (k - 1) as u8];
    vec![
        ("seed-ring-raw".into(), [&caps[..], &[0u8], &bytes].concat()),
        (
            "seed-ring-last".into(),
            [&caps[..], &[1u8 | 20 << 1], &bytes[32..]].concat(),
        ),
    ]
}

/// Where a profile segment is mapped.
fn seg_base(seg: &ProfileSegment) -> *const u8 {
    seg.ring().header() as *const _ as *const u8
}
