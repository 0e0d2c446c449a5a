//! The churn of `resound soak`: client processes that join and leave,
//! connections made and broken at random, clients killed with SIGKILL or
//! stopped with SIGSTOP (and continued later) at random points. The churn
//! never touches the sample-exact chain's inputs: it may listen to the
//! chain, never feed it.
//!
//! Runs on the soak's main thread.

use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_lab::harness::{Child, Server};
use std::time::{Duration, Instant};

/// What the churn did, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Clients started.
    pub joined: u64,
    /// Clients stopped with SIGTERM.
    pub left: u64,
    /// Clients killed with SIGKILL.
    pub killed: u64,
    /// Clients stopped with SIGSTOP (and continued later).
    pub stopped: u64,
    /// Connections made.
    pub connected: u64,
    /// Connections broken.
    pub disconnected: u64,
}

/// One churn client process.
struct Churner {
    name: String,
    child: Child,
    /// Stopped with SIGSTOP until then.
    stopped_until: Option<Instant>,
}

/// The churn's state.
pub struct Churn {
    rng: fastrand::Rng,
    clients: Vec<Churner>,
    /// Connections the churn made that may still exist.
    links: Vec<(String, String)>,
    next_id: u64,
    max_clients: usize,
    /// Ports of the chain the churn may listen to.
    taps: Vec<String>,
    /// Capture and playback ports of the driver.
    capture: Vec<String>,
    playback: Vec<String>,
    /// What it did.
    pub counts: Counts,
}

impl Churn {
    /// Churn with `seed`, at most `max_clients` clients at once, listening
    /// to the chain's `taps`.
    pub fn new(seed: u64, max_clients: usize, taps: &[&str], ctl: &ControlSession) -> Churn {
        let ports = ctl.list_ports().unwrap_or_default();
        let system = |prefix: &str| {
            ports
                .iter()
                .filter(|p| p.name.starts_with(prefix))
                .map(|p| p.name.clone())
                .collect()
        };
        Churn {
            rng: fastrand::Rng::with_seed(seed),
            clients: Vec::new(),
            links: Vec::new(),
            next_id: 0,
            max_clients,
            taps: taps.iter().map(|s| s.to_string()).collect(),
            capture: system("system:capture_"),
            playback: system("system:playback_"),
            counts: Counts::default(),
        }
    }

    /// Clients running now.
    pub fn running(&self) -> usize {
        self.clients.len()
    }

    /// One random action (or none), after continuing the clients whose
    /// stop is over.
    pub fn step(&mut self, server: &Server, ctl: &ControlSession) -> Result<(), String> {
        self.continue_stopped();
        match self.rng.u32(0..100) {
            0..=24 if self.clients.len() < self.max_clients => self.join(server, ctl)?,
            25..=49 => self.connect(ctl),
            50..=59 => self.disconnect(ctl),
            60..=66 => self.kill(),
            67..=73 => self.stop(),
            74..=80 => self.leave(),
            _ => {}
        }
        Ok(())
    }

    /// Continues every stopped client, then stops every client (SIGTERM,
    /// SIGKILL after a grace time).
    pub fn finish(&mut self) {
        for c in &mut self.clients {
            c.child.signal(libc::SIGCONT);
        }
        for mut c in self.clients.drain(..) {
            let _ = c.child.stop(Duration::from_secs(3));
        }
        self.links.clear();
    }

    fn continue_stopped(&mut self) {
        let now = Instant::now();
        for c in &mut self.clients {
            if c.stopped_until.is_some_and(|t| t <= now) {
                c.child.signal(libc::SIGCONT);
                c.stopped_until = None;
            }
        }
    }

    /// A new client process (pass or a light load), listening to the chain.
    fn join(&mut self, server: &Server, ctl: &ControlSession) -> Result<(), String> {
        let name = format!("churn{}", self.next_id);
        self.next_id += 1;
        let args: &[&str] = if self.rng.bool() {
            &["pass"]
        } else {
            &["load", "--busy", "2"]
        };
        let (child, _) = server.tool(&name, args, &mut || Ok(()))?;
        self.counts.joined += 1;
        let tap = self.taps[self.rng.usize(0..self.taps.len())].clone();
        self.link(ctl, tap, format!("{name}:in"));
        self.clients.push(Churner {
            name,
            child,
            stopped_until: None,
        });
        Ok(())
    }

    /// A random connection among the churn clients and the driver's ports.
    fn connect(&mut self, ctl: &ControlSession) {
        if self.clients.is_empty() {
            return;
        }
        let a = self.clients[self.rng.usize(0..self.clients.len())]
            .name
            .clone();
        let (src, dst) = match self.rng.u32(0..3) {
            0 if !self.playback.is_empty() => (
                format!("{a}:out"),
                self.playback[self.rng.usize(0..self.playback.len())].clone(),
            ),
            1 if !self.capture.is_empty() => (
                self.capture[self.rng.usize(0..self.capture.len())].clone(),
                format!("{a}:in"),
            ),
            _ => {
                let b = &self.clients[self.rng.usize(0..self.clients.len())].name;
                (format!("{a}:out"), format!("{b}:in"))
            }
        };
        self.link(ctl, src, dst);
    }

    /// Connects, counting it if the server took it (a client may be gone).
    fn link(&mut self, ctl: &ControlSession, src: String, dst: String) {
        if ctl.connect_ports(&src, &dst).is_ok() {
            self.counts.connected += 1;
            self.links.push((src, dst));
        }
    }

    fn disconnect(&mut self, ctl: &ControlSession) {
        if self.links.is_empty() {
            return;
        }
        let (s, d) = self.links.swap_remove(self.rng.usize(0..self.links.len()));
        if ctl.disconnect_ports(&s, &d).is_ok() {
            self.counts.disconnected += 1;
        }
    }

    /// Takes a random client out of the list (None if there is none).
    fn pick(&mut self) -> Option<Churner> {
        if self.clients.is_empty() {
            return None;
        }
        Some(
            self.clients
                .swap_remove(self.rng.usize(0..self.clients.len())),
        )
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.pick() {
            let _ = c.child.kill9();
            self.counts.killed += 1;
        }
    }

    fn leave(&mut self) {
        let Some(mut c) = self.pick() else { return };
        c.child.signal(libc::SIGCONT);
        let _ = c.child.stop(Duration::from_secs(3));
        self.counts.left += 1;
    }

    /// SIGSTOP for 0.1 to 1.5 s: long enough, often, to be evicted.
    fn stop(&mut self) {
        let Some(mut c) = self.pick() else { return };
        if c.stopped_until.is_none() {
            c.child.signal(libc::SIGSTOP);
            let ms = self.rng.u64(100..1500);
            c.stopped_until = Some(Instant::now() + Duration::from_millis(ms));
            self.counts.stopped += 1;
        }
        self.clients.push(c);
    }
}
