//! The load clients of one run: the one C JACK client (`loadclient`,
//! compiled against the distribution's JACK headers, the papers' `dnl`:
//! busy for a share of the period, copying its input to its output) started
//! when the timeline says, connected where the plan says, stopped (they
//! write their per-cycle records) or killed. The same binary runs on jackd
//! (the distribution's libjack) and on resoundd (resound's libjack.so.0).
//! Runs on the command's main thread.

use super::plan::{ClientPlan, Plan};
use super::server::AudioServer;
use crate::harness::Child;
use crate::vsjackd::records::{read_client_csv, ClientRecords};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A started load client.
struct Running {
    name: String,
    child: Option<Child>,
    file: PathBuf,
    /// Killed with SIGKILL: its records are lost with it.
    killed: bool,
}

/// The load clients of a run, in join order.
pub struct LoadClients {
    exe: PathBuf,
    dir: PathBuf,
    record_s: f64,
    running: Vec<Running>,
}

/// What the clients recorded, in join order.
pub struct ClientData {
    /// Name and records (None: killed, or its file was unreadable; the
    /// error says which).
    pub clients: Vec<(String, Result<ClientRecords, String>)>,
}

impl LoadClients {
    /// No clients yet; `exe` is the compiled loadclient, `dir` where their
    /// records go, `record_s` the seconds each must be able to record.
    pub fn new(exe: &Path, dir: &Path, record_s: f64) -> LoadClients {
        LoadClients {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            record_s,
            running: Vec::new(),
        }
    }

    /// Starts `c`, waits until it is active and connected, and connects the
    /// extra inputs of a fan-in client.
    pub fn join(&mut self, c: &ClientPlan, srv: &AudioServer, plan: &Plan) -> Result<(), String> {
        let file = self.dir.join(format!("{}.csv", c.name));
        let pos = match (&c.from, c.to_playback) {
            (None, _) => "first",
            (Some(_), false) => "middle",
            (Some(_), true) => "last",
        };
        let mut args: Vec<String> = vec![
            "-n".into(),
            c.name.clone(),
            "-p".into(),
            pos.into(),
            "-b".into(),
            c.busy_pct.to_string(),
            "-s".into(),
            format!("{:.0}", self.record_s),
            "-o".into(),
            file.display().to_string(),
        ];
        if let Some(f) = &c.from {
            args.extend(["-f".into(), f.clone()]);
        }
        if c.to_playback && c.from.is_none() {
            args.push("-O".into());
        }
        let mut child = srv.spawn_client(&self.exe, &args, &c.name, plan)?;
        child
            .wait_event("ready", Duration::from_secs(15), &mut || Ok(()))
            .map_err(|e| format!("load client {}: {e}", c.name))?;
        for port in &c.extra_inputs {
            srv.jack_program("jack_connect", &[port, &format!("{}:in", c.name)])?;
        }
        self.running.push(Running {
            name: c.name.clone(),
            child: Some(child),
            file,
            killed: false,
        });
        Ok(())
    }

    /// Stops `name` (SIGTERM: it closes, writes its records and exits).
    pub fn leave(&mut self, name: &str) -> Result<(), String> {
        let r = self.find(name)?;
        if let Some(mut c) = r.child.take() {
            c.stop_and_report("done", Duration::from_secs(10))
                .map_err(|e| format!("load client {name} did not stop cleanly: {e}"))?;
        }
        Ok(())
    }

    /// Kills `name` with SIGKILL (its records are lost).
    pub fn kill(&mut self, name: &str) -> Result<(), String> {
        let r = self.find(name)?;
        if let Some(mut c) = r.child.take() {
            c.kill9()?;
            r.killed = true;
        }
        Ok(())
    }

    fn find(&mut self, name: &str) -> Result<&mut Running, String> {
        self.running
            .iter_mut()
            .find(|r| r.name == name)
            .ok_or_else(|| format!("no load client {name} has joined yet"))
    }

    /// Whether a client exited on its own; an error naming it.
    pub fn check_alive(&mut self) -> Result<(), String> {
        for r in &mut self.running {
            if let Some(c) = r.child.as_mut() {
                if let Some(st) = c.exited_with_last_words() {
                    return Err(format!(
                        "load client {} exited ({st}):\n{}",
                        r.name,
                        c.log().tail(10)
                    ));
                }
            }
        }
        Ok(())
    }

    /// The names of the clients that joined, in join order.
    pub fn names(&self) -> Vec<String> {
        self.running.iter().map(|r| r.name.clone()).collect()
    }

    /// Stops every client still running (the last joined first, so none
    /// waits long on a stopped upstream) and reads all the records.
    pub fn finish(mut self) -> ClientData {
        let mut stop_errors = Vec::new();
        for r in self.running.iter_mut().rev() {
            if let Some(mut c) = r.child.take() {
                if let Err(e) = c.stop_and_report("done", Duration::from_secs(10)) {
                    stop_errors.push((r.name.clone(), e));
                }
            }
        }
        let clients = self
            .running
            .iter()
            .map(|r| {
                let data = if r.killed {
                    Err("killed by the timeline".to_string())
                } else if let Some((_, e)) = stop_errors.iter().find(|(n, _)| *n == r.name) {
                    Err(format!("did not stop cleanly: {e}"))
                } else {
                    read_client_csv(&r.file)
                };
                (r.name.clone(), data)
            })
            .collect();
        ClientData { clients }
    }
}
