//! Debian's `jackd` (jackd2) as a reference server, under a unique name,
//! for tests and benches that compare resound with it in the same run.
//!
//! jackd2 keeps its sockets and shared memory under `/dev/shm` (fixed at
//! build time), so the isolation is the name alone: `{tag}{pid}x{n}`,
//! never the user's default server. Programs reach it through
//! `JACK_DEFAULT_SERVER` (see [`Jackd::command`]) with the distribution's
//! libjack, never resound's. Stopped (SIGTERM, then SIGKILL) on drop.
//!
//! Runs on the caller's thread; nothing here is on the real-time path.

use super::child::{Child, ChildOptions, StderrMode};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Where Debian installs jackd2's server.
pub const JACKD: &str = "/usr/bin/jackd";

/// A running jackd.
pub struct Jackd {
    /// Its name (`-n`).
    pub name: String,
    process: Child,
}

impl Jackd {
    /// Whether jackd2 is installed.
    pub fn available() -> bool {
        Path::new(JACKD).exists()
    }

    /// Starts `jackd -n NAME SERVER_ARGS -d DRIVER_ARGS...` (`args` are
    /// everything after the name, e.g. `["-d", "dummy", "-r", "48000"]`)
    /// and waits until a client can connect.
    pub fn start(tag: &str, args: &[&str]) -> Result<Jackd, String> {
        let opts = ChildOptions {
            stderr: StderrMode::Keep {
                keep: 200,
                echo: None,
            },
            ..ChildOptions::default()
        };
        Jackd::start_with(tag, args, &opts)
    }

    /// As [`Jackd::start`], spawned with `opts` (e.g. pinned to a CPU, in a
    /// process group of its own).
    pub fn start_with(tag: &str, args: &[&str], opts: &ChildOptions) -> Result<Jackd, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{tag}{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut cmd = Command::new(JACKD);
        cmd.arg("-n").arg(&name).args(args);
        let process = Child::spawn(cmd, "jackd", opts)?;
        let mut j = Jackd { name, process };
        j.wait_ready(Duration::from_secs(10))?;
        Ok(j)
    }

    /// A command running JACK program `prog` against this server with the
    /// distribution's libjack: the loader path is cleared (cargo's test
    /// runner puts its target directory, with resound's libjack.so.0, there).
    pub fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(prog);
        c.env("JACK_DEFAULT_SERVER", &self.name)
            .env("JACK_NO_START_SERVER", "1")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("LD_PRELOAD");
        c
    }

    /// Polls with `jack_lsp` until the server answers.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.process.exited_with_last_words() {
                return Err(format!(
                    "jackd exited ({st}) before it was ready:\n{}",
                    self.process.log().text()
                ));
            }
            let ok = self
                .command("jack_lsp")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(format!(
                    "jackd was not ready after {timeout:?}:\n{}",
                    self.process.log().text()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Its log so far (stderr and stdout are not separated by jackd).
    pub fn log(&self) -> String {
        self.process.log().text()
    }
}

impl Drop for Jackd {
    fn drop(&mut self) {
        let _ = self.process.stop(Duration::from_secs(5));
    }
}
