//! What a child process prints: its stdout JSON lines ([`JsonLines`]) and
//! its stderr ([`StderrLog`]), each collected by a reader thread of its own.

use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Locks `m`, going on with the data if a reader thread panicked.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct Lines {
    /// Every stdout line that parsed as JSON, in order.
    values: Vec<Value>,
    /// The pipe reached end of file (the process exited or closed stdout).
    closed: bool,
}

/// The JSON lines a child printed on stdout (lines that are not JSON are
/// dropped), shared with the thread that reads them.
#[derive(Clone, Default)]
pub struct JsonLines(Arc<(Mutex<Lines>, Condvar)>);

/// Why [`JsonLines::wait_event`] returned without the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineWait {
    /// The pipe closed first: the line will never come.
    Closed,
    /// The timeout passed first.
    TimedOut,
}

impl JsonLines {
    /// Starts the reader thread of `r`.
    pub(crate) fn follow(&self, r: impl Read + Send + 'static) {
        let me = self.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    lock(&me.0 .0).values.push(v);
                    me.0 .1.notify_all();
                }
            }
            lock(&me.0 .0).closed = true;
            me.0 .1.notify_all();
        });
    }

    /// A copy of every line so far.
    pub fn all(&self) -> Vec<Value> {
        lock(&self.0 .0).values.clone()
    }

    /// The latest line, if any.
    pub fn last(&self) -> Option<Value> {
        lock(&self.0 .0).values.last().cloned()
    }

    /// The latest line with `"event": event`.
    pub fn last_event(&self, event: &str) -> Option<Value> {
        lock(&self.0 .0)
            .values
            .iter()
            .rev()
            .find(|v| v["event"] == event)
            .cloned()
    }

    /// Whether the pipe reached end of file.
    pub fn closed(&self) -> bool {
        lock(&self.0 .0).closed
    }

    /// Waits up to `timeout` for a line with `"event": event` (the first
    /// one), returning it.
    pub fn wait_event(&self, event: &str, timeout: Duration) -> Result<Value, LineWait> {
        let t0 = Instant::now();
        let mut g = lock(&self.0 .0);
        loop {
            if let Some(v) = g.values.iter().find(|v| v["event"] == event) {
                return Ok(v.clone());
            }
            if g.closed {
                return Err(LineWait::Closed);
            }
            let left = timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Err(LineWait::TimedOut);
            }
            g = self
                .0
                 .1
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits up to `timeout` for the pipe to close (every line is in).
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        let mut g = lock(&self.0 .0);
        while !g.closed {
            let left = timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return false;
            }
            g = self
                .0
                 .1
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// The last `keep` lines a child printed on stderr, optionally echoed to
/// this process's stderr with a prefix as they arrive.
#[derive(Clone)]
pub struct StderrLog {
    lines: Arc<Mutex<VecDeque<String>>>,
    keep: usize,
    /// False while a reader thread is still reading the child's stderr.
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl StderrLog {
    /// An empty log keeping at most `keep` lines.
    pub(crate) fn new(keep: usize) -> StderrLog {
        StderrLog {
            lines: Arc::default(),
            keep: keep.max(1),
            done: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        }
    }

    /// Starts the reader thread of `r`; echoes each line as `[echo] line` when given.
    pub(crate) fn follow(&self, r: impl Read + Send + 'static, echo: Option<String>) {
        let me = self.clone();
        self.done.store(false, std::sync::atomic::Ordering::Release);
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(Result::ok) {
                if let Some(tag) = &echo {
                    eprintln!("[{tag}] {line}");
                }
                let mut g = lock(&me.lines);
                if g.len() >= me.keep {
                    g.pop_front();
                }
                g.push_back(line);
            }
            me.done.store(true, std::sync::atomic::Ordering::Release);
        });
    }

    /// Waits up to `timeout` for the reader thread to reach the end of the
    /// child's stderr (so an error message built after the child exited
    /// holds its last words). True if it did.
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        let t0 = std::time::Instant::now();
        while !self.done.load(std::sync::atomic::Ordering::Acquire) {
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Every kept line, newline-terminated.
    pub fn text(&self) -> String {
        lock(&self.lines).iter().map(|l| format!("{l}\n")).collect()
    }

    /// The last `n` lines, indented, for an error message.
    pub fn tail(&self, n: usize) -> String {
        let g = lock(&self.lines);
        let from = g.len().saturating_sub(n);
        g.iter().skip(from).map(|l| format!("    {l}\n")).collect()
    }
}
