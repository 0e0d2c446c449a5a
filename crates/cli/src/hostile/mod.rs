//! `resound hostile`: a live hostile client. It connects to a running
//! server and, session after session, sends a seeded random mix of
//! well-formed requests with random values at random points of a
//! session's life, undecodable payloads, truncated and oversized frames
//! and protocol out of order (`messages.rs`); now and then a session also
//! registers ports and activates, so that it has a graph node. Every file
//! descriptor the server passes it is mapped writable where the kernel
//! allows it and random bytes are written into every page of it, again
//! and again (`pages.rs`). Replies are drained by each session's reader
//! thread (`session.rs`), never waited for. At the end it checks that the
//! server still answers `status`, and fails only if the server stopped
//! answering: `status`, new sessions, or three sessions in a row.
//!
//! What a server must survive: no crash, no hang, other clients' cycles
//! unharmed, the hostile sessions dropped with a clear log line.
//!
//! Runs on the command's main thread, plus one reader thread per open
//! session and one parked thread whose id the graph-node sessions give
//! the server as their process thread.

mod messages;
mod pages;
mod report;
mod session;

use clap::Args;
use messages::{Ending, Frame, Gen, Opening};
use pages::Pages;
use report::Tally;
use resound_client::prelude::*;
use resound_client::{Client, ControlSession, OpenOptions};
use resound_protocol::paths;
use resound_protocol::wire::{HelloKind, Request};
use resound_shm::{limits, port_flags};
use session::{SendError, Session};
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

/// Options of `resound hostile`.
#[derive(Debug, Clone, Args)]
pub struct HostileArgs {
    /// Messages to send in all.
    #[arg(long, default_value_t = 10_000_000)]
    pub messages: u64,
    /// Seed of the random messages (default: from the clock; printed, so a
    /// run can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Bytes of frames written in one go (one system call for many frames).
const BATCH_BYTES: usize = 8192;
/// Messages between two scribble passes over the shared pages.
const SCRIBBLE_EVERY: u64 = 4096;
/// Time between two progress lines.
const PRINT_EVERY: Duration = Duration::from_secs(2);
/// How long the server may take to close a session it must drop.
const DROP_WAIT: Duration = Duration::from_secs(5);
/// How long the server may take to answer what a session sent.
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// Sessions in a row the server may leave unanswered before the run stops.
const MAX_STUCK: u32 = 3;
/// Sessions waiting for the server to drop them, at most.
const MAX_LINGERING: usize = 8;

/// Runs the hostile client against server `server` (the usual default).
pub fn run(server: Option<&str>, a: HostileArgs) -> Result<(), String> {
    let name = paths::server_name(server);
    // The client library's own error for a missing server or a refusal.
    ControlSession::connect(Some(&name), None).map_err(|e| e.to_string())?;
    let path = paths::socket_path(&name);
    let seed = a.seed.unwrap_or_else(clock_seed);
    println!(
        "== hostile: {} messages to server {name:?} ({}), seed {seed} (repeat with --seed {seed})",
        a.messages,
        path.display()
    );
    let mut attack = Attack::new(seed, path, node_bytes(&name)?, a.messages)?;
    let outcome = attack.play();
    attack.settle();
    report::summary(&attack.tally, &attack.pages, attack.t0.elapsed());
    if let Err(e) = &outcome {
        println!("== the run stopped early: {e}");
    }
    // Both ways the server stopped answering: sessions, or status.
    let answers = server_answers(&name);
    outcome
        .map_err(|e| format!("server {name:?} stopped answering: {e}"))
        .and(answers)
}

/// A seed from the clock.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Whether the server still answers `status` on a new control session.
fn server_answers(name: &str) -> Result<(), String> {
    let answer = ControlSession::connect(Some(name), None).and_then(|c| c.status());
    match answer {
        Ok(st) => {
            println!(
                "== server {name:?} still answers status: {} client(s), cycle {}, {} xrun(s)",
                st.clients.len(),
                st.cycles,
                st.xruns
            );
            Ok(())
        }
        Err(e) => Err(format!("server {name:?} stopped answering: {e}")),
    }
}

/// The run's state.
struct Attack {
    gen: Gen,
    /// Random bytes for the pages (their own stream, so the frames do not
    /// depend on when descriptors arrive).
    page_rng: fastrand::Rng,
    path: PathBuf,
    fd_tx: Sender<OwnedFd>,
    fd_rx: Receiver<OwnedFd>,
    pages: Pages,
    tally: Tally,
    /// Frames queued for the current session.
    batch: Batch,
    /// Message count at which the pages are scribbled next.
    next_scribble: u64,
    /// Sessions sent something the server must drop them for.
    lingering: VecDeque<(Session, Instant)>,
    /// The thread graph-node sessions name as their process thread.
    node_tid: i32,
    /// Bytes of a client's node segment on this server.
    node_bytes: usize,
    total: u64,
    t0: Instant,
    next_print: Instant,
}

impl Attack {
    fn new(seed: u64, path: PathBuf, node_bytes: usize, total: u64) -> Result<Attack, String> {
        let (fd_tx, fd_rx) = channel();
        let t0 = Instant::now();
        Ok(Attack {
            gen: Gen::new(seed),
            page_rng: fastrand::Rng::with_seed(seed ^ 0x5eed_9a9e),
            path,
            fd_tx,
            fd_rx,
            pages: Pages::default(),
            tally: Tally::default(),
            batch: Batch::default(),
            next_scribble: SCRIBBLE_EVERY,
            lingering: VecDeque::new(),
            node_tid: parked_thread()?,
            node_bytes,
            total,
            t0,
            next_print: t0 + PRINT_EVERY,
        })
    }

    /// Sessions until every message is sent; an error if the server can no
    /// longer be reached or stopped reading.
    fn play(&mut self) -> Result<(), String> {
        let mut stuck = 0;
        while self.tally.messages() < self.total {
            let s = Session::open(&self.path, &self.fd_tx)
                .map_err(|e| format!("cannot open a session: {e}"))?;
            self.tally.opened += 1;
            let waits = self.tally.slow + self.tally.stalled;
            self.session(s);
            self.reap(false);
            stuck = if self.tally.slow + self.tally.stalled > waits {
                stuck + 1
            } else {
                0
            };
            if stuck >= MAX_STUCK {
                return Err(format!(
                    "the server neither read nor answered {MAX_STUCK} sessions in a row"
                ));
            }
        }
        Ok(())
    }

    /// One session: its opening, body and ending.
    fn session(&mut self, s: Session) {
        let (kind, node) = match self.gen.opening() {
            Opening::Wrong(frame) => {
                if self.send(&s, frame) && self.flush(&s) {
                    self.linger(s);
                } else {
                    self.finish(s, false);
                }
                return;
            }
            Opening::Hello { frame, kind, node } => {
                if !self.send(&s, frame) {
                    return self.finish(s, false);
                }
                (kind, node)
            }
        };
        if node && !self.become_node(&s, &kind) {
            return self.finish(s, false);
        }
        if !self.body(&s, node) {
            return self.finish(s, false);
        }
        self.end(s);
    }

    /// Registers an input and an output, activates with the parked
    /// thread and connects the two; false if the session ended.
    fn become_node(&mut self, s: &Session, kind: &HelloKind) -> bool {
        let HelloKind::Client { name, .. } = kind else {
            return true;
        };
        self.tally.nodes += 1;
        // Its own node segment first, as the client library does: the one
        // shared memory a client may write, and which it must have to
        // activate.
        let Ok(fd) = self.pages.own_node(self.node_bytes) else {
            return true;
        };
        if !self.flush(s) {
            return false;
        }
        let attach = self.gen.envelope(Request::AttachNode);
        if s.send_with_fd(&attach.bytes, &fd).is_err() {
            return false;
        }
        let port = |name: &str, flags| Request::RegisterPort {
            name: name.into(),
            port_type: limits::AUDIO_TYPE.into(),
            flags,
        };
        let steps = [
            port("in", port_flags::IS_INPUT),
            port("out", port_flags::IS_OUTPUT),
            Request::Activate { tid: self.node_tid },
            Request::Connect {
                src: format!("{name}:out"),
                dst: format!("{name}:in"),
            },
        ];
        steps.into_iter().all(|req| {
            let f = self.gen.envelope(req);
            self.send(s, f)
        })
    }

    /// The session's body; a graph node deactivates halfway (and goes on
    /// sending). False if the session ended.
    fn body(&mut self, s: &Session, node: bool) -> bool {
        let n = self.gen.body_len();
        for i in 0..n {
            if self.tally.messages() + self.batch.frames >= self.total || s.closed() {
                break;
            }
            let f = if node && i == n / 2 {
                self.gen.envelope(Request::Deactivate)
            } else {
                self.gen.body()
            };
            if !self.send(s, f) {
                return false;
            }
        }
        !s.closed()
    }

    /// The session's last frame, once the server has answered the others
    /// (so that it reads them all before the session ends).
    fn end(&mut self, s: Session) {
        if !self.flush(&s) {
            return self.finish(s, false);
        }
        if !s.wait_answered(ANSWER_WAIT) {
            self.tally.slow += 1;
        }
        match self.gen.ending() {
            Ending::Oversized => {
                let f = self.gen.oversized();
                if self.send(&s, f) && self.flush(&s) {
                    return self.linger(s);
                }
                self.finish(s, false)
            }
            Ending::Truncated => {
                let f = self.gen.truncated();
                if self.send(&s, f) {
                    self.flush(&s);
                }
                self.finish(s, false)
            }
            Ending::Close => {
                let f = self.gen.close();
                let closing = self.send(&s, f) && self.flush(&s);
                self.finish(s, closing)
            }
            Ending::Hangup => self.finish(s, false),
        }
    }

    /// Queues one frame, writing the queue out once it is
    /// [`BATCH_BYTES`] long; false if the session is over.
    fn send(&mut self, s: &Session, f: Frame) -> bool {
        self.batch.push(f);
        self.batch.bytes.len() < BATCH_BYTES || self.flush(s)
    }

    /// Writes the queued frames in one go and counts them; false if the
    /// session is over.
    fn flush(&mut self, s: &Session) -> bool {
        if self.batch.frames == 0 {
            return true;
        }
        let batch = std::mem::take(&mut self.batch);
        match s.send(&batch.bytes, batch.frames) {
            Ok(()) => {
                for (n, k) in self.tally.sent.iter_mut().zip(batch.kinds) {
                    *n += k;
                }
                self.tick();
                true
            }
            Err(SendError::Stalled) => {
                self.tally.stalled += 1;
                false
            }
            Err(SendError::Closed) => false,
            Err(SendError::Other(e)) => {
                self.tally.write_errors += 1;
                self.tally.first_write_error.get_or_insert(e.to_string());
                false
            }
        }
    }

    /// After a write: a scribble pass every [`SCRIBBLE_EVERY`] messages, a
    /// progress line every [`PRINT_EVERY`].
    fn tick(&mut self) {
        let n = self.tally.messages();
        if n >= self.next_scribble {
            self.next_scribble = n + SCRIBBLE_EVERY;
            self.take_fds();
            self.pages.scribble(&mut self.page_rng);
        }
        if Instant::now() >= self.next_print {
            self.next_print += PRINT_EVERY;
            report::progress(&self.tally, &self.pages, self.t0.elapsed(), self.total);
        }
    }

    /// Takes every descriptor the readers have received.
    fn take_fds(&mut self) {
        while let Ok(fd) = self.fd_rx.try_recv() {
            self.pages.take(fd);
        }
    }

    /// Keeps `s` until the server drops it (or [`DROP_WAIT`] passes).
    fn linger(&mut self, s: Session) {
        self.lingering.push_back((s, Instant::now()));
    }

    /// Ends the lingering sessions the server has dropped or that waited
    /// too long; with `all`, waits for every one.
    fn reap(&mut self, all: bool) {
        while let Some((s, since)) = self.lingering.front() {
            let (closed, late) = (s.closed(), since.elapsed() >= DROP_WAIT);
            if !closed && !late {
                if all || self.lingering.len() > MAX_LINGERING {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                break;
            }
            let Some((s, _)) = self.lingering.pop_front() else {
                break;
            };
            self.tally.kept_open += u64::from(!closed);
            self.finish(s, false);
        }
    }

    /// Closes `s`, counting it dropped if the server closed it first
    /// (`expected`: we asked it to, with `Close`).
    fn finish(&mut self, s: Session, expected: bool) {
        self.batch = Batch::default();
        if s.closed() && !expected {
            // A write may see the end before the reader reads the refusal.
            s.wait_read_end(Duration::from_millis(200));
            self.tally.dropped += 1;
            self.tally.refused += u64::from(s.refused());
        }
        self.tally.received += s.frames();
    }

    /// The end of the run: every lingering session settled, the last
    /// descriptors taken.
    fn settle(&mut self) {
        self.reap(true);
        self.take_fds();
    }
}

/// Frames queued to be written in one go.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    frames: u64,
    /// Frames per kind (in `Kind::ALL` order).
    kinds: [u64; 5],
}

impl Batch {
    fn push(&mut self, f: Frame) {
        self.bytes.extend_from_slice(&f.bytes);
        self.frames += 1;
        self.kinds[f.kind as usize] += 1;
    }
}

/// The size of a client's node segment on server `name` (the one thing a
/// client must know to make its own): what the client library made for a
/// probe client, opened and closed.
fn node_bytes(name: &str) -> Result<usize, String> {
    let opts = OpenOptions {
        server: Some(name.into()),
        ..Default::default()
    };
    let probe = Client::open("hostile-probe", opts).map_err(|e| e.to_string())?;
    Ok(probe.view().layout().node_bytes)
}

/// Starts a thread that only sleeps, and returns its kernel thread id.
fn parked_thread() -> Result<i32, String> {
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("hostile-node".into())
        .spawn(move || {
            let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get());
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    rx.recv().map_err(|e| format!("no thread id: {e}"))
}
