//! The socket connection to the server: connecting, the hello/welcome
//! handshake, request/reply with sequence numbers, and the socket reader
//! thread that routes replies to the requester and notifications to the
//! dispatcher.
//!
//! Threads: [`Connection::call`] runs on any non-real-time thread (it blocks
//! on the socket); the reader runs on its own thread ("resound-reader" or
//! "resound-ctl-reader").

use crate::error::{frame_err, Error, Result};
use resound_protocol::wire::{
    self, Envelope, Hello, HelloKind, Notification, Reply, Request, ServerMsg, Welcome,
};
use resound_shm::limits;
use resound_shm::sync::{futex, Ordering};
use resound_shm::View;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a request waits for its reply (jackd fails requests after about
/// five seconds too).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Sequence number the server uses for an error not tied to a request.
const UNSOLICITED_SEQ: u32 = u32::MAX;

/// Options of [`crate::Client::open`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Server name (default: $RESOUND_SERVER, $JACK_DEFAULT_SERVER, "default").
    pub server: Option<String>,
    /// Fail if the name is taken instead of getting "name-01" (JackUseExactName).
    pub exact_name: bool,
    /// Socket directory (default: [`resound_protocol::paths::socket_dir`]).
    pub dir: Option<std::path::PathBuf>,
}

/// Where notifications go: the dispatcher's queue (None: the connection
/// ended) and the futex word that wakes it.
pub(crate) struct NotifySink {
    /// Queue of the dispatcher.
    pub notes: Sender<Option<Notification>>,
    /// Bumped after every queued item.
    pub wake: Arc<AtomicU32>,
}

/// The server's answer to the hello: its welcome and the fds sent with it.
pub(crate) struct Handshake {
    /// The connected socket.
    pub stream: UnixStream,
    /// The server's welcome.
    pub welcome: Welcome,
    /// File descriptors that came with the welcome.
    pub fds: Vec<OwnedFd>,
}

/// Connects to server `server` (socket directory `dir`) and says hello as `kind`.
pub(crate) fn handshake(
    server: Option<&str>,
    dir: Option<&std::path::Path>,
    kind: HelloKind,
) -> Result<Handshake> {
    let stream = connect_socket(server, dir)?;
    let hello = Hello {
        protocol: wire::PROTOCOL_VERSION,
        kind,
    };
    wire::send_frame(&stream, &hello)?;
    let (payload, fds) =
        wire::recv_frame_with_fds(&stream, limits::MAX_REPLY_BYTES).map_err(frame_err)?;
    let welcome = wire::decode::<Welcome>(&payload)?;
    Ok(Handshake {
        stream,
        welcome,
        fds,
    })
}

fn connect_socket(server: Option<&str>, dir: Option<&std::path::Path>) -> Result<UnixStream> {
    let name = resound_protocol::paths::server_name(server);
    let path = match dir {
        Some(d) => d.join(format!("{name}.sock")),
        None => resound_protocol::paths::socket_path(&name),
    };
    match UnixStream::connect(&path) {
        Ok(s) => Ok(s),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            Err(Error::NoServer {
                name,
                path: path.display().to_string(),
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// An established connection: the socket, the replies the reader routes
/// back, and whether the server went away. Shut down when dropped.
pub(crate) struct Connection {
    stream: UnixStream,
    /// Last sequence number used, and the replies (seq, reply) from the reader.
    replies: Mutex<(u32, Receiver<(u32, Reply)>)>,
    /// The server went away (set by the owner's notification thread).
    gone: AtomicBool,
}

impl Connection {
    /// Starts the reader thread (named `thread`) on a clone of `stream`;
    /// with a `view` (a client's), it maps there the node segments the
    /// server passes on.
    pub fn start(
        stream: UnixStream,
        sink: NotifySink,
        view: Option<Arc<View>>,
        thread: &str,
    ) -> Result<Connection> {
        let rd = stream.try_clone()?;
        let (rtx, rrx) = channel();
        std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || reader(rd, rtx, sink, view))?;
        Ok(Connection {
            stream,
            replies: Mutex::new((0, rrx)),
            gone: AtomicBool::new(false),
        })
    }

    /// Whether the server went away.
    pub fn gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Records that the server went away: later requests fail at once.
    pub fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Sends `req` and waits for its reply (a server error becomes `Err`).
    pub fn call(&self, req: Request) -> Result<Reply> {
        self.call_with_fd(req, None)
    }

    /// Gives the server this client's node segment ([`Request::AttachNode`],
    /// its descriptor with the frame); when it returns, the reader has also
    /// mapped every other client's.
    pub fn attach_node(&self, fd: OwnedFd) -> Result<()> {
        self.call_with_fd(Request::AttachNode, Some(fd)).map(|_| ())
    }

    /// [`Connection::call`], with `fd` sent along (SCM_RIGHTS).
    fn call_with_fd(&self, req: Request, fd: Option<OwnedFd>) -> Result<Reply> {
        let mut g = self.replies.lock().unwrap_or_else(|e| e.into_inner());
        if self.gone() {
            return Err(gone_error());
        }
        g.0 = g.0.wrapping_add(1) % (u32::MAX - 1);
        let seq = g.0;
        let env = Envelope { seq, req };
        match &fd {
            Some(fd) => wire::send_frame_with_fds(&self.stream, &env, &[fd.as_fd()])?,
            None => wire::send_frame(&self.stream, &env)?,
        }
        loop {
            match g.1.recv_timeout(REQUEST_TIMEOUT) {
                Ok((s, r)) if s == seq => {
                    return match r {
                        Reply::Err(e) => Err(Error::Server(e)),
                        r => Ok(r),
                    }
                }
                Ok((UNSOLICITED_SEQ, Reply::Err(e))) => return Err(Error::Server(e)),
                Ok(_) => continue, // a stale reply to a request that timed out
                Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout(REQUEST_TIMEOUT)),
                Err(RecvTimeoutError::Disconnected) => return Err(gone_error()),
            }
        }
    }

    /// Shuts the socket down (the reader then ends).
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn gone_error() -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "the server has gone away",
    ))
}

/// Reads the socket: replies go to the requester, notifications to the
/// dispatcher (woken through the sink's futex word), node segments into
/// `view` (mapped read-only, seals checked; one that fails to map leaves
/// that client's outputs silent here, and says so).
fn reader(
    stream: UnixStream,
    replies: Sender<(u32, Reply)>,
    sink: NotifySink,
    view: Option<Arc<View>>,
) {
    while let Ok((payload, mut fds)) = wire::recv_frame_with_fds(&stream, limits::MAX_REPLY_BYTES) {
        match wire::decode::<ServerMsg>(&payload) {
            Ok(ServerMsg::Reply { seq, reply }) => {
                let _ = replies.send((seq, reply));
            }
            Ok(ServerMsg::Notify(n)) => {
                let _ = sink.notes.send(Some(n));
                futex::bump_and_wake(&sink.wake);
            }
            Ok(ServerMsg::Node { slot, uuid }) => {
                if let (Some(v), Some(fd)) = (&view, fds.pop()) {
                    map_node(v, slot, uuid, fd);
                }
            }
            Err(_) => break,
        }
        if let Some(v) = &view {
            v.purge_retired();
        }
    }
    // None: the connection is gone.
    let _ = sink.notes.send(None);
    futex::bump_and_wake(&sink.wake);
}

/// Maps another client's node segment into `view` for `slot`.
fn map_node(view: &View, slot: u32, uuid: u64, fd: OwnedFd) {
    let mapped = view
        .map_node(fd)
        .map(|seg| view.install_node(slot, uuid, seg));
    if !matches!(mapped, Ok(true)) {
        eprintln!("resound: the shared memory of the client in slot {slot} could not be mapped; its outputs read as silence here");
    }
}
