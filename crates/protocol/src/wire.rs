//! Messages on a client's Unix socket, and their framing.
//!
//! Every client has its own connection to the server's socket: the server
//! accepts one stream per client, and that stream is the client's private
//! channel in both directions (requests and replies, plus notifications from
//! the server). A frame is a little-endian `u32` payload length followed by a
//! [postcard](https://docs.rs/postcard) payload.
//!
//! Handshake: the client's first frame is a [`Hello`]. The server answers with
//! a [`Welcome`] frame; for a client (not a control session) two memfds
//! (the control segment and the driver's node segment) travel with that
//! frame as SCM_RIGHTS ancillary data. After that the client sends
//! [`Envelope`]s (a client first [`Request::AttachNode`] with its own node
//! segment) and the server sends [`ServerMsg`]s ([`ServerMsg::Node`] with
//! the other clients' node segments).

pub use crate::status::{
    ClientStatus, GraphReservation, LateClient, ReservationStatus, Status, XrunRecord,
};
use serde::{Deserialize, Serialize};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;

/// Protocol version; a server refuses clients of another version with a clear error.
pub const PROTOCOL_VERSION: u32 = 2;

/// First frame from a client.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the client.
    pub protocol: u32,
    /// What kind of session this is.
    pub kind: HelloKind,
}

/// Session kind.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum HelloKind {
    /// A JACK-style client with ports and a process thread.
    Client {
        /// Requested name.
        name: String,
        /// Fail instead of renaming when the name is taken (JackUseExactName).
        exact_name: bool,
    },
    /// A control session (status, lsp, connect...): no ports, no graph node.
    Control,
    /// A control session that also reads the profile ring: the server answers
    /// [`Welcome::Profile`] with the control and profile memfds.
    Profile,
}

/// The server's answer to [`Hello`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Welcome {
    /// Accepted as a client; the memfds of the control segment and of the
    /// driver's node segment come with this frame.
    Client {
        /// Slot of the client (index of its activation record and client entry).
        slot: u32,
        /// Actual name (may differ from the requested one unless exact_name).
        name: String,
        /// Unique id of the client.
        uuid: u64,
        /// Server name.
        server: String,
    },
    /// Accepted as a control session.
    Control {
        /// Server name.
        server: String,
    },
    /// Refused.
    Refused(WireError),
    /// Accepted as a profile reader (a control session that can also make
    /// requests); the control memfd and the profile memfd
    /// (the profile ring of `resound_shm::profile`) come with this frame, in that order.
    Profile {
        /// Server name.
        server: String,
    },
}

/// A request with its sequence number (echoed in the reply).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Envelope {
    /// Chosen by the client, echoed by the server.
    pub seq: u32,
    /// The request.
    pub req: Request,
}

/// Requests a session can make.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Request {
    /// Registers a port of this client. Reply: [`Reply::Port`].
    RegisterPort {
        /// Short name (after "client:").
        name: String,
        /// Port type name ("32 bit float mono audio", "8 bit raw midi").
        port_type: String,
        /// JACK port flags.
        flags: u32,
    },
    /// Unregisters a port of this client (by port slot).
    UnregisterPort {
        /// Port slot.
        port: u32,
    },
    /// Renames a port of this client.
    RenamePort {
        /// Port slot.
        port: u32,
        /// New short name.
        name: String,
    },
    /// Joins the activation graph. `tid` is the thread that will run the process callback.
    Activate {
        /// Kernel thread id of the client's process thread.
        tid: i32,
    },
    /// Leaves the activation graph (ports and connections stay).
    Deactivate,
    /// Connects two ports by full name (source output, destination input).
    Connect {
        /// Output port.
        src: String,
        /// Input port.
        dst: String,
    },
    /// Disconnects two ports.
    Disconnect {
        /// Output port.
        src: String,
        /// Input port.
        dst: String,
    },
    /// Removes every connection of a port.
    DisconnectAll {
        /// Full port name.
        port: String,
    },
    /// Changes the period (frames per cycle, up to the server's max_frames).
    SetBufferSize {
        /// New period in frames.
        frames: u32,
    },
    /// Status of the server and its clients. Reply: [`Reply::Status`].
    Status,
    /// Every port with its connections. Reply: [`Reply::Ports`].
    ListPorts,
    /// Closes the session cleanly (the server then closes the socket).
    Close,
    /// Loads one of the server's built-in in-process clients (JACK's internal
    /// clients; `jack_internal_client_load`). Reply: [`Reply::Internal`].
    LoadInternal {
        /// Name for the new client ("" = the built-in's own name).
        client_name: String,
        /// Which built-in ("profiler").
        load_name: String,
        /// Its argument string (e.g. "-c -p -e").
        init: String,
    },
    /// Unloads an internal client by uuid.
    UnloadInternal {
        /// Its uuid.
        uuid: u64,
    },
    // ---- added for libjack (appended: earlier variants keep their encoding) ----
    /// Adds an alias to any port (JACK allows two per port).
    SetPortAlias {
        /// Port slot.
        port: u32,
        /// The alias (a full-name-like string).
        alias: String,
    },
    /// Removes an alias of a port.
    UnsetPortAlias {
        /// Port slot.
        port: u32,
        /// The alias.
        alias: String,
    },
    /// Sets the latency range of one of this client's ports for one direction.
    SetLatencyRange {
        /// Port slot.
        port: u32,
        /// 0: capture latency, 1: playback latency (JackLatencyCallbackMode).
        mode: u32,
        /// Minimum (frames).
        min: u32,
        /// Maximum (frames).
        max: u32,
    },
    /// Whether this client computes its ports' latencies itself (it has a
    /// latency callback); otherwise the server applies JACK's default rule.
    SetLatencyCallback {
        /// On or off.
        on: bool,
    },
    /// Recomputes every port's latency and sends [`Notification::Latency`].
    RecomputeLatencies,
    /// jack_port_request_monitor: counted monitor requests on a port.
    RequestMonitor {
        /// Port slot.
        port: u32,
        /// Request (true) or withdraw (false).
        on: bool,
    },
    /// jack_port_ensure_monitor: monitor on (if not already) or off.
    EnsureMonitor {
        /// Port slot.
        port: u32,
        /// On or off.
        on: bool,
    },
    /// Starts or stops freewheeling.
    SetFreewheel {
        /// On or off.
        on: bool,
    },
    /// Whether this client is a slow-sync client (has a sync callback).
    SetSyncClient {
        /// On or off.
        on: bool,
    },
    /// Slow-sync timeout.
    SetSyncTimeout {
        /// Microseconds.
        usecs: u64,
    },
    /// Makes this client the timebase master.
    SetTimebase {
        /// Fail if another client is master.
        conditional: bool,
    },
    /// This client stops being the timebase master.
    ReleaseTimebase,
    /// Resets the driver's maximum wake-up delay statistic.
    ResetMaxDelayed,
    /// Sets a metadata property. Reply: Ok; notifies [`Notification::PropertyChange`].
    SetProperty {
        /// UUID of the described client or port.
        subject: u64,
        /// Key (a URI).
        key: String,
        /// Value.
        value: String,
        /// MIME type of the value ("" for a plain string).
        type_name: String,
    },
    /// Reads one property. Reply: [`Reply::Property`].
    GetProperty {
        /// Subject UUID.
        subject: u64,
        /// Key.
        key: String,
    },
    /// Every property of a subject. Reply: [`Reply::Properties`].
    GetProperties {
        /// Subject UUID.
        subject: u64,
    },
    /// Every property of every subject. Reply: [`Reply::AllProperties`].
    GetAllProperties,
    /// Removes one property.
    RemoveProperty {
        /// Subject UUID.
        subject: u64,
        /// Key.
        key: String,
    },
    /// Removes every property of a subject. Reply: [`Reply::Count`].
    RemoveProperties {
        /// Subject UUID.
        subject: u64,
    },
    /// Removes every property of every subject.
    RemoveAllProperties,
    /// Admits `bandwidth` CPUs (0: releases) for a thread outside the graph
    /// (a legacy program's thread under a SCHED_DEADLINE reservation set by
    /// `resound legacy`) in the server's admission ledger, replacing what it
    /// held. Held until released or the session ends. Reply: [`Reply::Ok`],
    /// or [`ErrorCode::Full`] saying what was asked, what is free and what
    /// the server holds.
    ReserveExternal {
        /// Kernel thread id.
        tid: i32,
        /// CPUs (budget / period); 0 releases.
        bandwidth: f64,
    },
    /// Clients only: a real-time thread the client created
    /// (`jack_client_create_thread`) or raised
    /// (`jack_acquire_real_time_scheduling`) starts (`on`) or stops being
    /// real-time. Under `--sched deadline` the server gives it a
    /// SCHED_DEADLINE reservation whose budget follows its measured CPU time,
    /// admitted in the same ledger as the graph (SCHED_FIFO when refused),
    /// until `on: false`, the thread's end or the client's. The thread must
    /// belong to the client's own process, else [`ErrorCode::NotAllowed`].
    /// Other modes: [`Reply::Ok`], nothing done (the client set its policy).
    ReserveThread {
        /// Kernel thread id.
        tid: i32,
        /// Starts (true) or stops (false) being real-time.
        on: bool,
    },
    /// This client's node segment: its activation record, mailbox and port
    /// buffers, a memfd it created, mapped read-write and then sealed
    /// against writable mappings, shrinking and growing; the descriptor
    /// travels with this frame (SCM_RIGHTS). The server checks the seals
    /// and the size, maps it read-only and passes it on to the other
    /// clients. Sent once, right after the welcome; a client cannot
    /// activate before. Reply: [`Reply::Ok`], or an error saying what is
    /// wrong with the descriptor.
    AttachNode,
}

/// Replies.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Reply {
    /// Success without a value.
    Ok,
    /// A registered port: its slot and full name.
    Port {
        /// Port slot (the JACK port id).
        port: u32,
        /// Full name.
        name: String,
    },
    /// Status report.
    Status(Box<Status>),
    /// Port list.
    Ports(Vec<PortInfo>),
    /// Failure.
    Err(WireError),
    /// An internal client was loaded.
    Internal {
        /// Its uuid.
        uuid: u64,
        /// Its actual name.
        name: String,
    },
    // ---- added for libjack (appended) ----
    /// One property, if set.
    Property(Option<Property>),
    /// The properties of one subject.
    Properties(Vec<Property>),
    /// Every subject with its properties.
    AllProperties(Vec<(u64, Vec<Property>)>),
    /// A count (of removed properties).
    Count(u32),
}

/// A metadata property (JACK's `jack_property_t`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Property {
    /// Key (a URI).
    pub key: String,
    /// Value.
    pub value: String,
    /// MIME type ("" for a plain string).
    pub type_name: String,
}

/// `jack_property_change_t` values of [`Notification::PropertyChange`].
pub mod property_change {
    /// PropertyCreated.
    pub const CREATED: u32 = 0;
    /// PropertyChanged.
    pub const CHANGED: u32 = 1;
    /// PropertyDeleted.
    pub const DELETED: u32 = 2;
}

/// Messages from the server after the handshake.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ServerMsg {
    /// Reply to the request with this sequence number.
    Reply {
        /// Sequence number of the request.
        seq: u32,
        /// The reply.
        reply: Reply,
    },
    /// An asynchronous notification.
    Notify(Notification),
    /// The node segment of the client `uuid` in `slot` (read-only; the
    /// memfd travels with this frame, SCM_RIGHTS): map it, it replaces
    /// whatever that slot had. Sent to every client when another attaches
    /// its segment, and to a client that attaches, one for each client
    /// already there, before the reply.
    Node {
        /// Slot of that client.
        slot: u32,
        /// Its uuid.
        uuid: u64,
    },
}

/// Notifications, delivered on the client's non-real-time notification thread.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Notification {
    /// A client appeared or went away.
    ClientRegistration {
        /// Its name.
        name: String,
        /// true: registered; false: gone.
        registered: bool,
    },
    /// A port appeared or went away.
    PortRegistration {
        /// Port slot.
        port: u32,
        /// Full name.
        name: String,
        /// true: registered; false: gone.
        registered: bool,
    },
    /// A port was renamed.
    PortRename {
        /// Port slot.
        port: u32,
        /// Previous full name.
        old: String,
        /// New full name.
        new: String,
    },
    /// Two ports were connected or disconnected.
    PortConnect {
        /// Output port slot.
        src: u32,
        /// Input port slot.
        dst: u32,
        /// true: connected; false: disconnected.
        connected: bool,
    },
    /// The activation order changed.
    GraphOrder,
    /// Clients missed their deadline in a cycle.
    Xrun {
        /// Cycle number.
        cycle: u64,
        /// Names of the clients that had not finished (empty: driver-level xrun).
        late: Vec<String>,
    },
    /// The period changed.
    BufferSize(u32),
    /// The sample rate changed.
    SampleRate(u32),
    /// The server is going away.
    Shutdown {
        /// Why.
        reason: String,
    },
    // ---- added for libjack (appended) ----
    /// Freewheeling started (true) or stopped.
    Freewheel(bool),
    /// Latencies were recomputed: a client with a latency callback sets its
    /// ports' latencies for this mode (0 capture, 1 playback).
    Latency {
        /// JackLatencyCallbackMode.
        mode: u32,
    },
    /// A metadata property changed.
    PropertyChange {
        /// Subject UUID (0 with an empty key: every property was removed).
        subject: u64,
        /// Key ("" when every property of the subject went).
        key: String,
        /// [`property_change`] value.
        change: u32,
    },
    /// This client was evicted from the cycle (JACK's zombie state): it
    /// stayed late past the server's client timeout, so the server
    /// deactivated it. Its process and socket are left alone; it may
    /// activate again.
    Evicted {
        /// Why, for the application's info-shutdown callback.
        reason: String,
    },
}

/// Error codes, so callers (libjack) can map them to JACK status bits.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum ErrorCode {
    /// Malformed or unexpected message.
    Protocol,
    /// Client or server protocol versions differ.
    Version,
    /// A name is empty, too long or has forbidden characters.
    InvalidName,
    /// A name is already taken.
    NameTaken,
    /// A port does not exist (or is not this client's).
    NoSuchPort,
    /// Ports are not output→input or have different types.
    Incompatible,
    /// Already connected (connect) or not connected (disconnect).
    Exists,
    /// Not connected.
    NotConnected,
    /// A capacity (clients, ports, connections) is exhausted.
    Full,
    /// Operation not allowed in this session kind or state.
    NotAllowed,
    /// Unknown port type.
    UnknownType,
    /// The server failed internally (the message says how).
    Internal,
    /// The thing asked for (a property, a timebase master...) does not exist.
    NotFound,
}

/// An error with a human-readable message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    /// Machine-readable code.
    pub code: ErrorCode,
    /// What went wrong, for a person.
    pub message: String,
}

impl WireError {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            message: message.into(),
        }
    }
}

/// One port in a [`Reply::Ports`] list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PortInfo {
    /// Port slot.
    pub id: u32,
    /// Full name.
    pub name: String,
    /// Type name.
    pub port_type: String,
    /// JACK flags.
    pub flags: u32,
    /// Aliases.
    pub aliases: Vec<String>,
    /// Full names of connected ports.
    pub connections: Vec<String>,
    /// Latency range (min, max) in frames for the port's direction.
    pub latency: (u32, u32),
}

/// Encodes a value into a frame (length prefix + payload).
pub fn encode<T: Serialize>(v: &T) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; 4];
    let body = postcard::to_stdvec(v).map_err(|e| io::Error::other(format!("encode: {e}")))?;
    out[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes a payload.
pub fn decode<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, WireError> {
    postcard::from_bytes(payload)
        .map_err(|e| WireError::new(ErrorCode::Protocol, format!("malformed message: {e}")))
}

/// Writes one frame.
pub fn write_frame<T: Serialize>(s: &mut impl Write, v: &T) -> io::Result<()> {
    s.write_all(&encode(v)?)
}

/// Writes one frame to a socket without raising SIGPIPE if the peer is gone
/// (a library inside someone else's program must not kill it).
pub fn send_frame<T: Serialize>(s: &UnixStream, v: &T) -> io::Result<()> {
    use rustix::net::{send, SendFlags};
    let bytes = encode(v)?;
    let mut sent = 0;
    while sent < bytes.len() {
        match send(s, &bytes[sent..], SendFlags::NOSIGNAL) {
            Ok(n) => sent += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Errors of [`read_frame`].
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the stream at a frame boundary.
    #[error("peer closed the connection")]
    Closed,
    /// The announced length exceeds the limit: the stream cannot be resynchronised.
    #[error("frame of {0} bytes exceeds the limit of {1}")]
    TooLong(usize, usize),
    /// I/O error (including EOF inside a frame).
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Reads one frame's payload, refusing frames longer than `max`.
pub fn read_frame(s: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match s.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > max {
        return Err(FrameError::TooLong(n, max));
    }
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf)?;
    Ok(buf)
}

/// Sends one frame with file descriptors attached (SCM_RIGHTS).
pub fn send_frame_with_fds<T: Serialize>(
    s: &UnixStream,
    v: &T,
    fds: &[rustix::fd::BorrowedFd<'_>],
) -> io::Result<()> {
    send_bytes_with_fds(s, &encode(v)?, fds)
}

/// Sends `bytes` (one or more whole frames, already encoded) with file
/// descriptors attached to the first byte (SCM_RIGHTS), the rest plainly.
pub fn send_bytes_with_fds(
    s: &UnixStream,
    bytes: &[u8],
    fds: &[rustix::fd::BorrowedFd<'_>],
) -> io::Result<()> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many fds for one message"));
    }
    let mut sent = sendmsg(s, &[IoSlice::new(bytes)], &mut anc, SendFlags::NOSIGNAL)?;
    // The fds went with the first byte; send any remainder plainly.
    while sent < bytes.len() {
        sent += rustix::net::send(s, &bytes[sent..], SendFlags::NOSIGNAL)?;
    }
    Ok(())
}

/// Receives one frame and the file descriptors that came with it.
pub fn recv_frame_with_fds(
    s: &UnixStream,
    max: usize,
) -> Result<(Vec<u8>, Vec<rustix::fd::OwnedFd>), FrameError> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut head = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut anc = RecvAncillaryBuffer::new(&mut space);
    let mut fds = Vec::new();
    // Read the 4-byte length with recvmsg so the ancillary data is taken with it.
    let r = recvmsg(
        s,
        &mut [IoSliceMut::new(&mut head)],
        &mut anc,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    for m in anc.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = m {
            fds.extend(it);
        }
    }
    if r.bytes == 0 {
        return Err(FrameError::Closed);
    }
    let mut got = r.bytes;
    let mut rd = s;
    while got < 4 {
        let n = rd.read(&mut head[got..])?;
        if n == 0 {
            return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        got += n;
    }
    let n = u32::from_le_bytes(head) as usize;
    if n > max {
        return Err(FrameError::TooLong(n, max));
    }
    let mut buf = vec![0u8; n];
    rd.read_exact(&mut buf)?;
    Ok((buf, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_limits() {
        let env = Envelope {
            seq: 9,
            req: Request::Connect {
                src: "a:out".into(),
                dst: "b:in".into(),
            },
        };
        let bytes = encode(&env).unwrap();
        let mut cur = std::io::Cursor::new(bytes.clone());
        let payload = read_frame(&mut cur, 1024).unwrap();
        assert_eq!(decode::<Envelope>(&payload).unwrap(), env);
        let mut cur = std::io::Cursor::new(bytes);
        assert!(matches!(
            read_frame(&mut cur, 4),
            Err(FrameError::TooLong(_, 4))
        ));
        assert!(matches!(
            read_frame(&mut std::io::Cursor::new(vec![]), 4),
            Err(FrameError::Closed)
        ));
        assert!(decode::<Envelope>(&[0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn fds_travel_with_a_frame() {
        let (a, b) = UnixStream::pair().unwrap();
        let memfd = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&memfd, 12345).unwrap();
        use rustix::fd::AsFd;
        let w = Welcome::Control {
            server: "x".repeat(10000),
        };
        send_frame_with_fds(&a, &w, &[memfd.as_fd()]).unwrap();
        let (payload, fds) = recv_frame_with_fds(&b, 1 << 20).unwrap();
        assert_eq!(decode::<Welcome>(&payload).unwrap(), w);
        assert_eq!(fds.len(), 1);
        assert_eq!(rustix::fs::fstat(&fds[0]).unwrap().st_size, 12345);
    }
}
