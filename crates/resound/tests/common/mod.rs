//! Test harness: a real `resoundd` in a private socket directory, real
//! `resound-tool` client processes, and a control session from the test.
#![allow(dead_code)]

use resound_client::prelude::*;
use resound_client::{Client, ControlSession, OpenOptions};
use resound_protocol::wire::Status;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub const RESOUNDD: &str = env!("CARGO_BIN_EXE_resoundd");
pub const TOOL: &str = env!("CARGO_BIN_EXE_resound-tool");
pub const RESOUND: &str = env!("CARGO_BIN_EXE_resound");

/// A running server in its own socket directory.
pub struct Srv {
    pub child: Child,
    pub dir: PathBuf,
    pub name: String,
    stderr: Arc<Mutex<String>>,
}

impl Srv {
    /// Starts `resoundd -n <unique> ARGS` and waits until it accepts sessions.
    pub fn start(args: &[&str]) -> Srv {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("resound-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let name = format!("t{n}");
        let mut child = Command::new(RESOUNDD)
            .env("RESOUND_DIR", &dir)
            .env("RESOUND_LOG", "info")
            .args(["-n", &name])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn resoundd");
        let err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let e = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("[resoundd] {line}");
                let mut s = e.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let srv = Srv {
            child,
            dir,
            name,
            stderr,
        };
        let t0 = Instant::now();
        while srv.try_ctl().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "server did not start: {}",
                srv.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        srv
    }

    fn try_ctl(&self) -> Option<ControlSession> {
        ControlSession::connect(Some(&self.name), Some(&self.dir)).ok()
    }

    /// A control session.
    pub fn ctl(&self) -> ControlSession {
        self.try_ctl().expect("control session")
    }

    /// Status via a fresh control session.
    pub fn status(&self) -> Status {
        self.ctl().status().expect("status")
    }

    /// Opens a native client from the test process.
    pub fn client(&self, name: &str) -> Client {
        Client::open(
            name,
            OpenOptions {
                server: Some(self.name.clone()),
                dir: Some(self.dir.clone()),
                exact_name: true,
            },
        )
        .expect("open client")
    }

    /// Server log so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the server process still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Starts `resound-tool -n NAME ARGS` against this server and waits for it to be ready.
    pub fn tool(&self, name: &str, args: &[&str]) -> Tool {
        let mut t = self.spawn_tool(name, args);
        let t0 = Instant::now();
        while !t
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|v| v["event"] == "ready")
        {
            if let Some(st) = t.child.try_wait().unwrap() {
                panic!("tool {name} exited before it was ready: {st}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "tool {name} not ready"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        t
    }

    /// Starts `resound-tool -n NAME ARGS` without waiting for it.
    pub fn spawn_tool(&self, name: &str, args: &[&str]) -> Tool {
        let mut child = Command::new(TOOL)
            .env("RESOUND_DIR", &self.dir)
            .args(["-s", &self.name, "-n", name])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn resound-tool");
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::<Value>::new()));
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    l.lock().unwrap().push(v);
                }
            }
        });
        Tool {
            name: name.into(),
            child,
            lines,
        }
    }

    /// Runs the `resound` CLI against this server.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(RESOUND)
            .env("RESOUND_DIR", &self.dir)
            .args(["-s", &self.name])
            .args(args)
            .output()
            .expect("run resound")
    }

    /// Stops the server with SIGTERM and returns its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        signal(self.child.id(), libc::SIGTERM);
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Srv {
    fn drop(&mut self) {
        if self.alive() {
            self.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a pid we spawned.
    unsafe { libc::kill(pid as i32, sig) };
}

/// A running `resound-tool` client process.
pub struct Tool {
    pub name: String,
    pub child: Child,
    pub lines: Arc<Mutex<Vec<Value>>>,
}

impl Tool {
    /// Stops it with SIGTERM and returns its final report.
    pub fn stop(mut self) -> Value {
        signal(self.child.id(), libc::SIGTERM);
        let st = self.child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .rev()
            .find(|v| v["event"] == "final")
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "{} exited ({st}) without a final report: {lines:?}",
                    self.name
                )
            })
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        signal(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until `f` holds, polling.
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// A test cannot run because a tool it needs is not installed: prints
/// `SKIP test: why`. Under the README's test command (`scripts/test.sh`
/// exports `RESOUND_REQUIRE_TEST_TOOLS=1` after installing every tool) a
/// missing tool is a failure instead, so CI cannot pass without running it.
pub fn skip_missing_tool(test: &str, why: &str) {
    if std::env::var_os("RESOUND_REQUIRE_TEST_TOOLS").is_some_and(|v| v == "1") {
        panic!("{test}: {why}, but scripts/test.sh should have installed it");
    }
    println!("SKIP {test}: {why}");
    eprintln!("SKIP {test}: {why}");
}

/// True when this process may use SCHED_FIFO (root or CAP_SYS_NICE with an rtprio limit).
pub fn can_fifo() -> bool {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: we set and immediately restore the calling thread's policy.
    unsafe {
        let ok = libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0;
        if ok {
            let p0 = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &p0);
        }
        ok
    }
}
