//! What `resound hostile` sends: every frame it writes on a session, drawn
//! from one seeded generator, so a run can be repeated with its seed.
//!
//! * well-formed requests ([`Request`] in an [`Envelope`]) with random
//!   field values: names empty, short, at and over their length limits,
//!   with odd characters; ids, slots and port indices small, huge or
//!   random; numbers at their extremes (NaN and infinities for floats);
//! * undecodable payloads: random bytes behind a valid length prefix,
//!   checked not to decode as a request;
//! * truncated frames: a length prefix larger than the bytes that follow
//!   (the caller then closes the socket);
//! * oversized frames: a length prefix over the server's request limit;
//! * out-of-order protocol: a request, a wrong protocol version or an
//!   unknown session kind where the `Hello` belongs, a second `Hello`
//!   inside a session.
//!
//! Left out on purpose: what any well-behaved JACK client may do to the
//! whole server, since the chain watched around this tool is rightly
//! disturbed by it and it attacks nothing: a valid buffer size
//! (`SetBufferSize` only gets sizes outside every server's range),
//! freewheeling on (`SetFreewheel` only asks it off), a thread that
//! exists in the admission ledger or under a reservation (`Activate`,
//! `ReserveThread` and `ReserveExternal` name no live thread, except the
//! graph-node sessions' own parked thread), a built-in internal client
//! (`LoadInternal` gets random names), and `Close` (a session end, sent
//! only as one, see [`Gen::close`]).
//!
//! Runs on the command's main thread.

use fastrand::Rng;
use resound_protocol::hello::check_hello;
use resound_protocol::wire::{self, Envelope, Hello, HelloKind, Request, PROTOCOL_VERSION};
use resound_shm::{limits, port_flags};

/// What a frame is, for the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A well-formed request (or `Hello` in its place).
    WellFormed,
    /// Random payload bytes behind a valid length prefix.
    Undecodable,
    /// A length prefix larger than what follows; the socket closes next.
    Truncated,
    /// A length prefix over the server's request limit.
    Oversized,
    /// Protocol out of order: no `Hello` first, a wrong one, or a second one.
    OutOfOrder,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 5] = [
        Kind::WellFormed,
        Kind::Undecodable,
        Kind::Truncated,
        Kind::Oversized,
        Kind::OutOfOrder,
    ];

    /// Its row in the report.
    pub fn label(self) -> &'static str {
        match self {
            Kind::WellFormed => "well-formed request",
            Kind::Undecodable => "undecodable payload",
            Kind::Truncated => "truncated frame",
            Kind::Oversized => "oversized frame",
            Kind::OutOfOrder => "out-of-order protocol",
        }
    }
}

/// One frame's bytes, length prefix included, and its kind.
#[derive(Debug, Clone)]
pub struct Frame {
    /// What it is.
    pub kind: Kind,
    /// What goes on the socket.
    pub bytes: Vec<u8>,
}

/// How a session begins.
pub enum Opening {
    /// A well-formed `Hello` of this kind; `node`: the session then
    /// registers ports and activates (a client with a graph node).
    Hello {
        /// The frame.
        frame: Frame,
        /// Its session kind.
        kind: HelloKind,
        /// Whether it becomes a graph node.
        node: bool,
    },
    /// Anything but a valid `Hello` (the server refuses and closes).
    Wrong(Frame),
}

/// How a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// An oversized frame: the server must drop the session.
    Oversized,
    /// A truncated frame, then the socket closed.
    Truncated,
    /// A `Close` request.
    Close,
    /// The socket closed between two frames.
    Hangup,
}

/// Request variants (by index in [`Gen::request`]) whose success makes the
/// server publish a graph table and wait for the driver to take it (up to
/// a period, under the state lock every request takes), or build a large
/// reply: drawn [`SLOW_ODDS`] times less often, so that the run's rate is
/// that of the server's parsing and checking, not of its cycle.
const SLOW: [usize; 12] = [0, 2, 4, 9, 10, 13, 15, 16, 17, 18, 19, 29];

/// How much less often a [`SLOW`] variant is drawn.
const SLOW_ODDS: u32 = 200;

/// Number of request variants [`Gen::request`] draws from.
const VARIANTS: usize = 35;

/// Thread ids no process can have (Linux's pid_max is at most 2^22).
const PID_MAX_LIMIT: i32 = 1 << 22;

/// The seeded generator of every frame.
pub struct Gen {
    rng: Rng,
    seq: u32,
}

impl Gen {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng::with_seed(seed),
            seq: 0,
        }
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.rng.f64() < p
    }

    // ---- sessions ----

    /// How the next session begins: mostly a client, some control and
    /// profile sessions, one in ten something else.
    pub fn opening(&mut self) -> Opening {
        if self.chance(0.1) {
            return Opening::Wrong(self.wrong_opening());
        }
        let (kind, node) = match self.rng.u32(0..100) {
            0..=69 => {
                let node = self.chance(0.05);
                let name = if node {
                    format!("hostile-node-{}", self.rng.u32(..))
                } else {
                    self.text(limits::CLIENT_NAME_MAX)
                };
                let exact_name = node || self.rng.bool();
                (HelloKind::Client { name, exact_name }, node)
            }
            70..=92 => (HelloKind::Control, false),
            _ => (HelloKind::Profile, false),
        };
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            kind: kind.clone(),
        };
        Opening::Hello {
            frame: frame(Kind::WellFormed, &hello),
            kind,
            node,
        }
    }

    /// Frames sent in the session after the opening (before its ending):
    /// a few now and then, mostly thousands (a client session costs the
    /// server two graph publications, which wait for its cycle).
    pub fn body_len(&mut self) -> usize {
        if self.chance(0.05) {
            self.rng.usize(0..20)
        } else {
            self.rng.usize(20..8000)
        }
    }

    /// One frame of a session's body: mostly requests, a quarter
    /// undecodable, some `Hello`s out of place.
    pub fn body(&mut self) -> Frame {
        match self.rng.u32(0..100) {
            0..=59 => self.well_formed(),
            60..=87 => self.undecodable(),
            _ => self.stray_hello(),
        }
    }

    /// How the session ends.
    pub fn ending(&mut self) -> Ending {
        match self.rng.u32(0..100) {
            0..=34 => Ending::Oversized,
            35..=59 => Ending::Truncated,
            60..=74 => Ending::Close,
            _ => Ending::Hangup,
        }
    }

    // ---- frames ----

    /// A random well-formed request.
    pub fn well_formed(&mut self) -> Frame {
        let req = self.request();
        self.envelope(req)
    }

    /// `req` in an envelope with the next sequence number.
    pub fn envelope(&mut self, req: Request) -> Frame {
        self.seq = self.seq.wrapping_add(1);
        frame(Kind::WellFormed, &Envelope { seq: self.seq, req })
    }

    /// A `Close` request (only ever sent as a session's end).
    pub fn close(&mut self) -> Frame {
        self.envelope(Request::Close)
    }

    /// Random bytes that do not decode as a request, behind a valid prefix.
    pub fn undecodable(&mut self) -> Frame {
        let len = match self.rng.u32(0..100) {
            0..=69 => self.rng.usize(0..16),
            70..=98 => self.rng.usize(16..512),
            _ => self.rng.usize(512..=limits::MAX_REQUEST_BYTES),
        };
        let mut payload = vec![0u8; len];
        loop {
            self.rng.fill(&mut payload);
            if wire::decode::<Envelope>(&payload).is_err() {
                return Frame {
                    kind: Kind::Undecodable,
                    bytes: prefixed(len as u32, &payload),
                };
            }
        }
    }

    /// A frame whose prefix announces more bytes than follow (at most the
    /// request limit, so it is not also oversized).
    pub fn truncated(&mut self) -> Frame {
        let whole = self.well_formed().bytes;
        let body = &whole[4..];
        let claimed = (body.len() + self.rng.usize(1..=1024)).min(limits::MAX_REQUEST_BYTES);
        let kept = self.rng.usize(0..=body.len()).min(claimed - 1);
        Frame {
            kind: Kind::Truncated,
            bytes: prefixed(claimed as u32, &body[..kept]),
        }
    }

    /// A prefix over the server's request limit, then a few random bytes.
    pub fn oversized(&mut self) -> Frame {
        let claimed = self
            .rng
            .u32(limits::MAX_REQUEST_BYTES as u32 + 1..=u32::MAX);
        let mut tail = vec![0u8; self.rng.usize(0..64)];
        self.rng.fill(&mut tail);
        Frame {
            kind: Kind::Oversized,
            bytes: prefixed(claimed, &tail),
        }
    }

    /// A `Hello` inside a session: valid, of another version, or of an
    /// unknown kind. Some read as a request: never as one left out.
    pub fn stray_hello(&mut self) -> Frame {
        loop {
            let mut f = match self.rng.u32(0..3) {
                0 => {
                    let kind = self.hello_kind();
                    frame(
                        Kind::OutOfOrder,
                        &Hello {
                            protocol: PROTOCOL_VERSION,
                            kind,
                        },
                    )
                }
                1 => self.wrong_version(),
                _ => self.unknown_kind(),
            };
            if !reads_as_left_out(&f.bytes[4..]) {
                f.kind = Kind::OutOfOrder;
                return f;
            }
        }
    }

    /// Where the `Hello` belongs: a request, a wrong version, an unknown
    /// session kind, or undecodable bytes. The server must refuse it.
    fn wrong_opening(&mut self) -> Frame {
        loop {
            let mut f = match self.rng.u32(0..4) {
                0 => {
                    let req = self.request();
                    let seq = self.rng.u32(..);
                    frame(Kind::OutOfOrder, &Envelope { seq, req })
                }
                1 => self.wrong_version(),
                2 => self.unknown_kind(),
                _ => self.undecodable(),
            };
            // Bytes that happen to read as a good `Hello` are drawn again.
            if check_hello(&f.bytes[4..]).is_err() {
                f.kind = Kind::OutOfOrder;
                return f;
            }
        }
    }

    /// A `Hello` of a protocol version other than ours.
    fn wrong_version(&mut self) -> Frame {
        let protocol = loop {
            let v = self.num32();
            if v != PROTOCOL_VERSION {
                break v;
            }
        };
        let kind = self.hello_kind();
        frame(Kind::OutOfOrder, &Hello { protocol, kind })
    }

    /// Our protocol version, then a session kind no server knows and
    /// random bytes.
    fn unknown_kind(&mut self) -> Frame {
        let known = 3; // Client, Control, Profile
        let mut payload = vec![PROTOCOL_VERSION as u8, self.rng.u8(known..128)];
        let mut tail = vec![0u8; self.rng.usize(0..32)];
        self.rng.fill(&mut tail);
        payload.extend(tail);
        Frame {
            kind: Kind::OutOfOrder,
            bytes: prefixed(payload.len() as u32, &payload),
        }
    }

    /// A random session kind with a random client name.
    fn hello_kind(&mut self) -> HelloKind {
        match self.rng.u32(0..3) {
            0 => HelloKind::Client {
                name: self.text(limits::CLIENT_NAME_MAX),
                exact_name: self.rng.bool(),
            },
            1 => HelloKind::Control,
            _ => HelloKind::Profile,
        }
    }

    // ---- requests ----

    /// A random request (never `Close`), slow ones drawn less often.
    pub fn request(&mut self) -> Request {
        let i = loop {
            let i = self.rng.usize(0..VARIANTS);
            if !SLOW.contains(&i) || self.rng.u32(0..SLOW_ODDS) == 0 {
                break i;
            }
        };
        match i {
            0..=4 => self.port_request(i),
            5..=12 => self.graph_request(i),
            13..=25 => self.setting_request(i),
            _ => self.property_request(i),
        }
    }

    /// Port registration and activation requests (variants 0 to 4).
    fn port_request(&mut self, i: usize) -> Request {
        match i {
            0 => Request::RegisterPort {
                name: self.text(limits::PORT_NAME_MAX),
                port_type: self.port_type(),
                flags: self.flags(),
            },
            1 => Request::UnregisterPort { port: self.num32() },
            2 => Request::RenamePort {
                port: self.num32(),
                name: self.text(limits::PORT_NAME_MAX),
            },
            3 => Request::Activate {
                tid: self.dead_tid(),
            },
            _ => Request::Deactivate,
        }
    }

    /// Connections, queries and internal clients (variants 5 to 12).
    fn graph_request(&mut self, i: usize) -> Request {
        match i {
            5 => Request::Connect {
                src: self.port_name(),
                dst: self.port_name(),
            },
            6 => Request::Disconnect {
                src: self.port_name(),
                dst: self.port_name(),
            },
            7 => Request::DisconnectAll {
                port: self.port_name(),
            },
            8 => Request::SetBufferSize {
                frames: self.bad_buffer_size(),
            },
            9 => Request::Status,
            10 => Request::ListPorts,
            11 => Request::LoadInternal {
                client_name: self.text(limits::CLIENT_NAME_MAX),
                load_name: format!("hostile-{}", self.text(32)),
                init: self.text(200),
            },
            _ => Request::UnloadInternal { uuid: self.num64() },
        }
    }

    /// Aliases, latencies, monitors, transport and scheduling (13 to 25).
    fn setting_request(&mut self, i: usize) -> Request {
        match i {
            13 => Request::SetPortAlias {
                port: self.num32(),
                alias: self.text(limits::PORT_NAME_MAX),
            },
            14 => Request::UnsetPortAlias {
                port: self.num32(),
                alias: self.text(limits::PORT_NAME_MAX),
            },
            15 => Request::SetLatencyRange {
                port: self.num32(),
                mode: self.num32(),
                min: self.num32(),
                max: self.num32(),
            },
            16 => Request::SetLatencyCallback {
                on: self.rng.bool(),
            },
            17 => Request::RecomputeLatencies,
            18 => Request::RequestMonitor {
                port: self.num32(),
                on: self.rng.bool(),
            },
            19 => Request::EnsureMonitor {
                port: self.num32(),
                on: self.rng.bool(),
            },
            20 => Request::SetFreewheel { on: false },
            21 => Request::SetSyncClient {
                on: self.rng.bool(),
            },
            22 => Request::SetSyncTimeout {
                usecs: self.num64(),
            },
            23 => Request::SetTimebase {
                conditional: self.rng.bool(),
            },
            24 => Request::ReleaseTimebase,
            _ => Request::ResetMaxDelayed,
        }
    }

    /// Metadata and reservations (variants 26 to 34).
    fn property_request(&mut self, i: usize) -> Request {
        match i {
            26 => Request::SetProperty {
                subject: self.num64(),
                key: self.text(400),
                value: self.text(2000),
                type_name: self.text(64),
            },
            27 => Request::GetProperty {
                subject: self.num64(),
                key: self.text(400),
            },
            28 => Request::GetProperties {
                subject: self.num64(),
            },
            29 => Request::GetAllProperties,
            30 => Request::RemoveProperty {
                subject: self.num64(),
                key: self.text(400),
            },
            31 => Request::RemoveProperties {
                subject: self.num64(),
            },
            32 => Request::RemoveAllProperties,
            33 => Request::ReserveExternal {
                tid: self.dead_tid(),
                bandwidth: self.real(),
            },
            _ => Request::ReserveThread {
                tid: self.dead_tid(),
                on: self.rng.bool(),
            },
        }
    }

    // ---- field values ----

    /// A u32: zero, one, a small index, an extreme or anything.
    fn num32(&mut self) -> u32 {
        match self.rng.u32(0..8) {
            0 => 0,
            1 => 1,
            2 | 3 => self.rng.u32(0..64),
            4 => u32::MAX - self.rng.u32(0..2),
            5 => 1 << self.rng.u32(0..32),
            _ => self.rng.u32(..),
        }
    }

    /// A u64: small, an extreme or anything.
    fn num64(&mut self) -> u64 {
        match self.rng.u32(0..6) {
            0 => 0,
            1 | 2 => self.rng.u64(0..256),
            3 => u64::MAX - self.rng.u64(0..2),
            _ => self.rng.u64(..),
        }
    }

    /// A float: NaN, an infinity, negative, zero, in range or huge.
    fn real(&mut self) -> f64 {
        match self.rng.u32(0..8) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -self.rng.f64() * 10.0,
            4 => 0.0,
            5 => f64::MAX,
            6 => f64::MIN_POSITIVE,
            _ => self.rng.f64() * 2.0,
        }
    }

    /// A thread id that no thread has: zero, negative or past pid_max.
    fn dead_tid(&mut self) -> i32 {
        match self.rng.u32(0..3) {
            0 => 0,
            1 => self.rng.i32(i32::MIN..0),
            _ => self.rng.i32(PID_MAX_LIMIT + 1..=i32::MAX),
        }
    }

    /// A buffer size no server accepts.
    fn bad_buffer_size(&mut self) -> u32 {
        if self.rng.bool() {
            self.rng.u32(0..limits::MIN_BUFFER_FRAMES)
        } else {
            self.rng.u32(limits::MAX_BUFFER_FRAMES + 1..)
        }
    }

    /// JACK port flags: a direction or both or neither, with other bits.
    fn flags(&mut self) -> u32 {
        match self.rng.u32(0..4) {
            0 => port_flags::IS_INPUT,
            1 => port_flags::IS_OUTPUT,
            2 => port_flags::IS_INPUT | port_flags::IS_OUTPUT,
            _ => self.rng.u32(..),
        }
    }

    /// A port type: one of the two, or a made-up one.
    fn port_type(&mut self) -> String {
        match self.rng.u32(0..4) {
            0 => limits::AUDIO_TYPE.to_string(),
            1 => limits::MIDI_TYPE.to_string(),
            _ => self.text(limits::PORT_TYPE_MAX),
        }
    }

    /// A full port name: "client:port" of random parts, or any text.
    fn port_name(&mut self) -> String {
        if self.rng.bool() {
            let client = self.text(limits::CLIENT_NAME_MAX);
            let port = self.text(limits::PORT_NAME_MAX);
            format!("{client}:{port}")
        } else {
            self.text(limits::PORT_NAME_MAX)
        }
    }

    /// A string for a field limited to `limit` bytes: empty, short, exactly
    /// at the limit, one over it, far over it, or with odd characters.
    fn text(&mut self, limit: usize) -> String {
        match self.rng.u32(0..10) {
            0 => String::new(),
            1..=4 => {
                let n = self.rng.usize(1..=12);
                self.alnum(n)
            }
            5 => self.alnum(limit),
            6 => self.alnum(limit + 1),
            7 => {
                let n = self.rng.usize(limit..=limit * 4);
                self.alnum(n)
            }
            8 => self.odd(),
            _ => (0..self.rng.usize(1..40))
                .map(|_| self.rng.char(..))
                .collect(),
        }
    }

    /// `n` letters and digits.
    fn alnum(&mut self, n: usize) -> String {
        const ALNUM: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut bytes = vec![0u8; n];
        self.rng.fill(&mut bytes);
        for b in &mut bytes {
            *b = ALNUM[usize::from(*b) % ALNUM.len()];
        }
        String::from_utf8(bytes).expect("ASCII letters and digits")
    }

    /// Letters mixed with separators, control characters and multi-byte ones.
    fn odd(&mut self) -> String {
        const ODD: [char; 10] = [':', '/', '\0', '\n', ' ', '.', 'é', '😀', '\u{202e}', '\\'];
        (0..self.rng.usize(1..40))
            .map(|_| {
                if self.rng.bool() {
                    ODD[self.rng.usize(0..ODD.len())]
                } else {
                    self.rng.alphanumeric()
                }
            })
            .collect()
    }
}

/// Whether `req` is one this tool leaves out (see the module's doc):
/// `Close`, a valid buffer size, freewheeling on, a thread id that may be
/// live, an internal client not named by this tool.
pub fn left_out(req: &Request) -> bool {
    match req {
        Request::Close => true,
        Request::SetBufferSize { frames } => {
            (limits::MIN_BUFFER_FRAMES..=limits::MAX_BUFFER_FRAMES).contains(frames)
        }
        Request::SetFreewheel { on } => *on,
        Request::Activate { tid }
        | Request::ReserveExternal { tid, .. }
        | Request::ReserveThread { tid, .. } => (1..=PID_MAX_LIMIT).contains(tid),
        Request::LoadInternal { load_name, .. } => !load_name.starts_with("hostile-"),
        _ => false,
    }
}

/// Whether `payload` decodes as a request left out.
fn reads_as_left_out(payload: &[u8]) -> bool {
    wire::decode::<Envelope>(payload).is_ok_and(|env| left_out(&env.req))
}

/// `v` encoded as a frame of `kind`.
fn frame<T: serde::Serialize>(kind: Kind, v: &T) -> Frame {
    Frame {
        kind,
        bytes: wire::encode(v).expect("every message encodes"),
    }
}

/// A length prefix `claimed`, then `body`.
fn prefixed(claimed: u32, body: &[u8]) -> Vec<u8> {
    let mut bytes = claimed.to_le_bytes().to_vec();
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The announced payload length of a frame.
    fn claimed(f: &Frame) -> usize {
        u32::from_le_bytes(f.bytes[..4].try_into().unwrap()) as usize
    }

    #[test]
    fn the_same_seed_gives_the_same_frames() {
        let (mut a, mut b) = (Gen::new(7), Gen::new(7));
        for _ in 0..1000 {
            assert_eq!(a.body().bytes, b.body().bytes);
        }
    }

    #[test]
    fn well_formed_requests_decode_and_are_never_close() {
        let mut g = Gen::new(1);
        for _ in 0..5000 {
            let f = g.well_formed();
            assert_eq!(claimed(&f), f.bytes.len() - 4);
            assert!(f.bytes.len() - 4 <= limits::MAX_REQUEST_BYTES);
            let env: Envelope = wire::decode(&f.bytes[4..]).unwrap();
            assert_ne!(env.req, Request::Close);
        }
    }

    #[test]
    fn undecodable_payloads_do_not_decode() {
        let mut g = Gen::new(2);
        for _ in 0..5000 {
            let f = g.undecodable();
            assert_eq!(claimed(&f), f.bytes.len() - 4);
            assert!(wire::decode::<Envelope>(&f.bytes[4..]).is_err());
        }
    }

    #[test]
    fn truncated_frames_announce_more_than_they_hold_within_the_limit() {
        let mut g = Gen::new(3);
        for _ in 0..2000 {
            let f = g.truncated();
            assert!(claimed(&f) > f.bytes.len() - 4, "{f:?}");
            assert!(claimed(&f) <= limits::MAX_REQUEST_BYTES);
        }
    }

    #[test]
    fn oversized_frames_announce_more_than_the_limit() {
        let mut g = Gen::new(4);
        for _ in 0..2000 {
            assert!(claimed(&g.oversized()) > limits::MAX_REQUEST_BYTES);
        }
    }

    #[test]
    fn wrong_openings_are_refused_by_the_handshake_check() {
        let mut g = Gen::new(5);
        for _ in 0..5000 {
            let f = g.wrong_opening();
            assert_eq!(f.kind, Kind::OutOfOrder);
            assert!(check_hello(&f.bytes[4..]).is_err(), "{f:?}");
        }
    }

    #[test]
    fn left_out_requests_stay_out() {
        let mut g = Gen::new(6);
        for _ in 0..20_000 {
            let r = g.request();
            assert!(!left_out(&r), "{r:?}");
            assert!(!reads_as_left_out(&g.stray_hello().bytes[4..]));
        }
        assert!(left_out(&Request::SetBufferSize { frames: 256 }));
        assert!(left_out(&Request::SetFreewheel { on: true }));
        assert!(left_out(&Request::Activate { tid: 1234 }));
    }

    #[test]
    fn every_variant_and_string_shape_comes_up() {
        let mut g = Gen::new(8);
        let mut seen = std::collections::HashSet::new();
        let (mut empty, mut over) = (false, false);
        for _ in 0..50_000 {
            let r = g.request();
            if let Request::RegisterPort { name, .. } = &r {
                empty |= name.is_empty();
                over |= name.len() > limits::PORT_NAME_MAX;
            }
            seen.insert(std::mem::discriminant(&r));
        }
        assert_eq!(seen.len(), VARIANTS);
        assert!(empty && over);
    }
}
