//! One raw session of `resound hostile` with the server: the socket, the
//! frames written on it, and a reader thread that drains whatever the
//! server sends (replies, notifications, welcomes), hands over every file
//! descriptor that comes with a frame, and notices when the server closes
//! the session.
//!
//! Threads: the command's main thread writes; one "hostile-reader" thread
//! per session reads until the socket closes.

use resound_protocol::wire::{self, Welcome};
use resound_shm::limits;
use std::cell::Cell;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a write may block before the server counts as not reading.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first byte of a `ServerMsg::Reply` payload (postcard writes an
/// enum's variant index first; `Reply` is variant 0).
const REPLY_TAG: u8 = 0;

/// Why a frame could not be written.
#[derive(Debug)]
pub enum SendError {
    /// The server closed the session (EPIPE, ECONNRESET).
    Closed,
    /// The server read nothing for [`WRITE_TIMEOUT`].
    Stalled,
    /// Anything else.
    Other(io::Error),
}

/// What the reader thread saw.
#[derive(Default)]
struct Seen {
    /// Frames received.
    frames: AtomicU64,
    /// Of which replies to requests (`ServerMsg::Reply`, after the welcome).
    replies: AtomicU64,
    /// The socket reached its end (or failed).
    closed: AtomicBool,
    /// The first frame was `Welcome::Refused`.
    refused: AtomicBool,
}

/// An open session; closed (and its reader joined) on drop.
pub struct Session {
    stream: UnixStream,
    seen: Arc<Seen>,
    /// A write found the server's end closed.
    write_closed: Cell<bool>,
    /// Frames written whole.
    sent: Cell<u64>,
    reader: Option<JoinHandle<()>>,
}

impl Session {
    /// Connects to the socket at `path`; the descriptors the server sends
    /// go to `fds`.
    pub fn open(path: &Path, fds: &Sender<OwnedFd>) -> io::Result<Session> {
        let stream = UnixStream::connect(path)?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let seen = Arc::new(Seen::default());
        let (rd, seen2, fds) = (stream.try_clone()?, seen.clone(), fds.clone());
        let reader = std::thread::Builder::new()
            .name("hostile-reader".into())
            .spawn(move || drain(&rd, &seen2, &fds))?;
        Ok(Session {
            stream,
            seen,
            write_closed: Cell::new(false),
            sent: Cell::new(0),
            reader: Some(reader),
        })
    }

    /// Writes one whole frame, `bytes`, with `fd` attached (SCM_RIGHTS, on
    /// its first byte), as a client sends `AttachNode`.
    pub fn send_with_fd(&self, bytes: &[u8], fd: &OwnedFd) -> Result<(), SendError> {
        use std::os::fd::AsFd;
        match wire::send_bytes_with_fds(&self.stream, bytes, &[fd.as_fd()]) {
            Ok(()) => {
                self.sent.set(self.sent.get() + 1);
                Ok(())
            }
            Err(e) => Err(self.send_error(e)),
        }
    }

    /// Writes `bytes`, `frames` whole frames (without SIGPIPE).
    pub fn send(&self, bytes: &[u8], frames: u64) -> Result<(), SendError> {
        use rustix::net::{send, SendFlags};
        let mut sent = 0;
        while sent < bytes.len() {
            match send(&self.stream, &bytes[sent..], SendFlags::NOSIGNAL) {
                Ok(n) => sent += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(self.send_error(e.into())),
            }
        }
        self.sent.set(self.sent.get() + frames);
        Ok(())
    }

    /// What a failed write means: the server closed the session (EPIPE,
    /// ECONNRESET), read nothing for [`WRITE_TIMEOUT`] (EAGAIN), or else.
    fn send_error(&self, e: io::Error) -> SendError {
        use rustix::io::Errno;
        match Errno::from_io_error(&e) {
            Some(Errno::PIPE | Errno::CONNRESET) => {
                self.write_closed.set(true);
                SendError::Closed
            }
            Some(Errno::AGAIN) => SendError::Stalled,
            _ => SendError::Other(e),
        }
    }

    /// Waits up to `timeout` until the server has answered every frame
    /// after the first (one reply each, the first one's being the
    /// welcome) or closed the session; false on the timeout.
    pub fn wait_answered(&self, timeout: Duration) -> bool {
        let want = self.sent.get().saturating_sub(1);
        let t0 = Instant::now();
        while self.seen.replies.load(Ordering::Acquire) < want && !self.closed() {
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }

    /// Whether the server has closed the session (as far as read or
    /// written so far).
    pub fn closed(&self) -> bool {
        self.write_closed.get() || self.read_closed()
    }

    /// Whether the reader has reached the socket's end.
    fn read_closed(&self) -> bool {
        self.seen.closed.load(Ordering::Acquire)
    }

    /// Whether the server refused the session at the handshake (once the
    /// reader has read to the end: see [`Session::wait_read_end`]).
    pub fn refused(&self) -> bool {
        self.seen.refused.load(Ordering::Acquire)
    }

    /// Waits up to `timeout` for the reader to reach the socket's end.
    pub fn wait_read_end(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while !self.read_closed() {
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Frames received so far.
    pub fn frames(&self) -> u64 {
        self.seen.frames.load(Ordering::Relaxed)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// The reader thread: counts frames and passes their descriptors on
/// until the socket ends.
fn drain(rd: &UnixStream, seen: &Seen, fds: &Sender<OwnedFd>) {
    while let Ok((payload, got)) = wire::recv_frame_with_fds(rd, limits::MAX_REPLY_BYTES) {
        if seen.frames.fetch_add(1, Ordering::Relaxed) == 0 {
            let refused = matches!(wire::decode(&payload), Ok(Welcome::Refused(_)));
            seen.refused.store(refused, Ordering::Release);
        } else if payload.first() == Some(&REPLY_TAG) {
            seen.replies.fetch_add(1, Ordering::Release);
        }
        for fd in got {
            // The main thread gone means the run is over: drop it.
            let _ = fds.send(fd);
        }
    }
    seen.closed.store(true, Ordering::Release);
}
