//! Shutdown: every client told, their threads woken, the driver stopped,
//! the socket removed and the sessions closed.
//!
//! Threads: the thread that calls [`Server::stop`] (the binary's main thread
//! on a signal).

use super::Server;
use resound_protocol::wire::Notification;
use resound_shm::sync::{futex, Ordering};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use tracing::info;

impl Server {
    /// Stops the server: notifies every client, wakes their threads, stops the driver.
    pub fn stop(&self, reason: &str) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        info!("stopping: {reason}");
        let h = self.view.header();
        {
            let mut st = self.lock();
            Self::notify(
                &mut st,
                Notification::Shutdown {
                    reason: reason.to_string(),
                },
            );
        }
        h.running.store(0, Ordering::Release);
        self.engine.stop.store(true, Ordering::Release);
        // Every client process thread also sleeps on the epoch word.
        futex::bump_and_wake(&h.epoch);
        let t0 = Instant::now();
        while self.engine.running.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Give the writer threads a moment to flush the shutdown notification.
        std::thread::sleep(Duration::from_millis(100));
        // Wake the listener so it sees `stopping`, then remove the socket.
        let _ = UnixStream::connect(&self.socket);
        let _ = std::fs::remove_file(&self.socket);
        let st = self.lock();
        for s in st.sessions.values() {
            let _ = s.stream.shutdown(std::net::Shutdown::Both);
        }
    }
}
