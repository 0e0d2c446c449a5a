//! The audio server of one run: a `resoundd` or Debian's `jackd`, under a
//! unique name (resoundd also in a private runtime directory), started with
//! the plan's settings on the dummy driver, and what the runner asks of it
//! whatever it is: a command for a JACK program with the right libjack, a
//! buffer-size change (`jack_bufsize`, the JACK program a user would run),
//! a connection (`jack_connect`), its process id, whether it still runs.
//! Runs on the command's main thread.

use super::plan::Plan;
use crate::harness::{
    dummy_driver_args, Bins, Child, ChildOptions, Jackd, Server, ServerSpec, StderrMode,
};
use crate::vsjackd::chain::libjack_dir;
use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_shm::profile::ProfileSegment;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Tag of the runs' server names and private directories.
pub const TAG: &str = "exp";

/// A started server of either kind.
pub enum AudioServer {
    /// resoundd, its control session and its profile ring.
    Resound {
        /// The server (stopped on drop; boxed: the variants differ in size).
        server: Box<Server>,
        /// A control session (status).
        ctl: ControlSession,
        /// The profile ring, mapped read-only.
        profile: ProfileSegment,
        /// Where resound's libjack.so.0 is.
        libjack: PathBuf,
    },
    /// Debian's jackd.
    Jackd(Jackd),
}

/// How every process of a run is spawned: stderr kept for error
/// messages, killed with this process, in its own process group (a
/// terminal's Ctrl-C reaches only the runner, which stops them in order),
/// on CPU 0 when the plan allows one CPU only.
pub fn child_options(plan: &Plan) -> ChildOptions {
    ChildOptions {
        stderr: StderrMode::Keep {
            keep: 60,
            echo: None,
        },
        die_with_parent: true,
        own_process_group: true,
        cpu: (plan.cpus == Some(1)).then_some(0),
    }
}

impl AudioServer {
    /// Starts the server of `plan` and waits until clients can connect.
    pub fn start(plan: &Plan, bins: &Bins) -> Result<AudioServer, String> {
        let driver = dummy_driver_args(plan.rate, plan.frames);
        match plan.server {
            crate::experiment::scenario::ServerKind::Jackd => {
                if !Jackd::available() {
                    return Err("Debian's jackd is not installed (apt-get install jackd2, or scripts/setup.sh)".into());
                }
                let mut args = plan.jackd_server_args();
                args.extend(driver);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Ok(AudioServer::Jackd(Jackd::start_with(
                    TAG,
                    &args,
                    &child_options(plan),
                )?))
            }
            crate::experiment::scenario::ServerKind::Resound => {
                let mut spec = ServerSpec::new(bins.clone(), TAG, &[]);
                spec.args = plan.resound_server_args();
                spec.args.extend(driver);
                spec.child = child_options(plan);
                spec.tools = child_options(plan);
                let mut server = Server::spawn(spec)?;
                server.wait_ready(&mut || Ok(()))?;
                let (ctl, profile) =
                    ControlSession::connect_profile(Some(&server.name), Some(&server.dir))
                        .map_err(|e| format!("the server's profile ring: {e}"))?;
                Ok(AudioServer::Resound {
                    server: Box::new(server),
                    ctl,
                    profile,
                    libjack: libjack_dir(bins)?,
                })
            }
        }
    }

    /// The server's command line as the report shows it.
    pub fn describe(plan: &Plan) -> String {
        let driver = dummy_driver_args(plan.rate, plan.frames).join(" ");
        match plan.server {
            crate::experiment::scenario::ServerKind::Jackd => {
                format!(
                    "jackd -n NAME {} {driver}",
                    plan.jackd_server_args().join(" ")
                )
            }
            crate::experiment::scenario::ServerKind::Resound => format!(
                "resoundd -n NAME {} {driver}",
                plan.resound_server_args().join(" ")
            ),
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        match self {
            AudioServer::Resound { server, .. } => server.pid(),
            AudioServer::Jackd(j) => j.pid(),
        }
    }

    /// A command for JACK program `prog` on this server, with the right
    /// libjack (the distribution's for jackd, resound's for resoundd).
    pub fn command(&self, prog: impl AsRef<Path>) -> Command {
        match self {
            AudioServer::Jackd(j) => j.command(prog.as_ref()),
            AudioServer::Resound {
                server, libjack, ..
            } => {
                let mut c = server.command(prog.as_ref());
                c.env("JACK_DEFAULT_SERVER", &server.name)
                    .env("JACK_NO_START_SERVER", "1")
                    .env("LD_LIBRARY_PATH", libjack)
                    .env_remove("LD_PRELOAD");
                c
            }
        }
    }

    /// Runs a short JACK program (`jack_bufsize 256`, `jack_connect a b`) to
    /// completion; an error with its output when it fails.
    pub fn jack_program(&self, prog: &str, args: &[&str]) -> Result<(), String> {
        let out = self
            .command(Path::new("/usr/bin").join(prog))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                format!("cannot run {prog}: {e} (it comes with Debian's jackd2 package)")
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{prog} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }

    /// An error when the server has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self {
            AudioServer::Resound { server, .. } => server.exit_error().map_or(Ok(()), Err),
            AudioServer::Jackd(_) => Ok(()),
        }
    }

    /// The server's xrun count so far (resoundd; None for jackd, whose
    /// clients count them).
    pub fn xruns(&self) -> Option<u64> {
        match self {
            AudioServer::Resound { ctl, .. } => ctl.status().ok().map(|s| s.xruns),
            AudioServer::Jackd(_) => None,
        }
    }

    /// Spawns a child that is a JACK client of this server.
    pub fn spawn_client(
        &self,
        prog: &Path,
        args: &[String],
        what: &str,
        plan: &Plan,
    ) -> Result<Child, String> {
        let mut cmd = self.command(prog);
        cmd.args(args);
        Child::spawn(cmd, what, &child_options(plan))
    }
}
