//! A `resoundd` under a drop guard ([`Server`]): a unique name in a private
//! runtime directory (`RESOUND_DIR`), or a given name in the user's runtime
//! directory (the demo), ready once it accepts control sessions; the client
//! tools it serves are started from here too. Runs on the caller's thread.

use super::bins::Bins;
use super::child::{Child, ChildOptions};
use resound_client::{Client, ControlSession, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Servers started by this process so far (makes names unique).
static STARTED: AtomicU32 = AtomicU32::new(0);

/// How long a server may take to accept control sessions.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// What server to start.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The binaries (the server's, and the tool's for [`Server::spawn_tool`]).
    pub bins: Bins,
    /// Names the run: the private directory is
    /// `$TMPDIR/resound-{tag}-{pid}-{n}` and the server `{tag}{pid}x{n}`.
    pub tag: String,
    /// A fixed server name in the user's runtime directory instead of a
    /// unique one in a private directory (the demo, which a user may watch
    /// with `resound -s NAME status`).
    pub public_name: Option<String>,
    /// Server options after `-n NAME`.
    pub args: Vec<String>,
    /// Extra environment of the server (e.g. `RESOUND_LOG=info`).
    pub env: Vec<(String, String)>,
    /// How the server process is spawned.
    pub child: ChildOptions,
    /// How the tool processes are spawned.
    pub tools: ChildOptions,
}

impl ServerSpec {
    /// A server with the options `args`, in a private directory named after `tag`.
    pub fn new(bins: Bins, tag: &str, args: &[&str]) -> ServerSpec {
        ServerSpec {
            bins,
            tag: tag.to_string(),
            public_name: None,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            child: ChildOptions::default(),
            tools: ChildOptions::default(),
        }
    }
}

/// A running `resoundd`; stopped (SIGTERM, then SIGKILL after 10 s) on drop,
/// and its private directory removed.
pub struct Server {
    /// Its name (`-n`).
    pub name: String,
    /// Its runtime directory (socket and shared-memory names).
    pub dir: PathBuf,
    /// Whether `dir` is private to it (removed on drop).
    private_dir: bool,
    process: Child,
    tool: PathBuf,
    tools: ChildOptions,
}

impl Server {
    /// Starts the server and waits until it accepts control sessions.
    pub fn start(spec: ServerSpec) -> Result<Server, String> {
        let mut srv = Server::spawn(spec)?;
        srv.wait_ready(&mut || Ok(()))?;
        Ok(srv)
    }

    /// Starts the server without waiting for it (see [`Server::wait_ready`]).
    pub fn spawn(spec: ServerSpec) -> Result<Server, String> {
        let (name, dir, private_dir) = match &spec.public_name {
            Some(name) => (name.clone(), resound_protocol::paths::socket_dir(), false),
            None => {
                let n = STARTED.fetch_add(1, Ordering::Relaxed);
                let pid = std::process::id();
                let dir = private_dir(&spec.tag, &format!("{pid}-{n}"))?;
                (format!("{}{pid}x{n}", spec.tag), dir, true)
            }
        };
        let mut cmd = Command::new(&spec.bins.resoundd);
        if private_dir {
            cmd.env("RESOUND_DIR", &dir);
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
            .args(["-n", &name])
            .args(&spec.args);
        let spawned = Child::spawn(cmd, "resoundd", &spec.child);
        let process = match spawned {
            Ok(p) => p,
            Err(e) => {
                if private_dir {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                return Err(e);
            }
        };
        Ok(Server {
            name,
            dir,
            private_dir,
            process,
            tool: spec.bins.tool,
            tools: spec.tools,
        })
    }

    /// Waits until the server accepts a control session and returns it;
    /// `keep_going` is asked every 20 ms whether to go on waiting.
    pub fn wait_ready(
        &mut self,
        keep_going: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<ControlSession, String> {
        let t0 = Instant::now();
        loop {
            if let Some(c) = self.try_ctl() {
                return Ok(c);
            }
            if let Some(e) = self.exit_error() {
                return Err(e);
            }
            if t0.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "resoundd did not accept connections within {READY_TIMEOUT:?}:\n{}",
                    self.log().tail(10)
                ));
            }
            keep_going()?;
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A control session, if the server accepts one now.
    pub fn try_ctl(&self) -> Option<ControlSession> {
        ControlSession::connect(Some(&self.name), Some(&self.dir)).ok()
    }

    /// Opens a native client of this server in this process.
    pub fn open_client(&self, name: &str) -> Result<Client, String> {
        Client::open(
            name,
            OpenOptions {
                server: Some(self.name.clone()),
                dir: Some(self.dir.clone()),
                exact_name: true,
            },
        )
        .map_err(|e| format!("open client {name}: {e}"))
    }

    /// The server process.
    pub fn process(&mut self) -> &mut Child {
        &mut self.process
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Its kept stderr.
    pub fn log(&self) -> &super::StderrLog {
        self.process.log()
    }

    /// If it has exited: its status and the last lines of its log, as an
    /// error message.
    pub fn exit_error(&mut self) -> Option<String> {
        let st = self.process.exited_with_last_words()?;
        Some(format!("resoundd exited ({st}):\n{}", self.log().tail(10)))
    }

    /// Its exit status if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.process.exited()
    }

    /// A command for a program that talks to this server: `bin` with
    /// `RESOUND_DIR` set to the server's directory when it is private.
    pub fn command(&self, bin: &Path) -> Command {
        let mut cmd = Command::new(bin);
        if self.private_dir {
            cmd.env("RESOUND_DIR", &self.dir);
        }
        cmd
    }

    /// Starts `resound-tool -s SERVER -n NAME ARGS` without waiting for it.
    pub fn spawn_tool(&self, name: &str, args: &[&str]) -> Result<Child, String> {
        let mut cmd = self.command(&self.tool);
        cmd.args(["-s", &self.name, "-n", name]).args(args);
        Child::spawn(cmd, name, &self.tools)
    }

    /// Starts `resound-tool -s SERVER ARGS` (a tool that is not a client,
    /// such as `rtapp`, when `args` has no `-n`) without waiting for it.
    pub fn spawn_tool_raw(&self, what: &str, args: &[&str]) -> Result<Child, String> {
        let mut cmd = self.command(&self.tool);
        cmd.args(args);
        Child::spawn(cmd, what, &self.tools)
    }

    /// Starts the tool client `name` and waits (10 s at most) until it prints
    /// its `ready` line, which it returns with the client.
    pub fn tool(
        &self,
        name: &str,
        args: &[&str],
        keep_going: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(Child, serde_json::Value), String> {
        let mut t = self.spawn_tool(name, args)?;
        let ready = t.wait_event("ready", Duration::from_secs(10), keep_going)?;
        Ok((t, ready))
    }

    /// Stops the server with SIGTERM (SIGKILL after 10 s) and returns its exit status.
    pub fn stop(&mut self) -> Result<ExitStatus, String> {
        self.process.stop(Duration::from_secs(10))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop();
        if self.private_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Creates `$TMPDIR/resound-{tag}-{id}`, empty and private (mode 0700).
fn private_dir(tag: &str, id: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let p = std::env::temp_dir().join(format!("resound-{tag}-{id}"));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}

/// The driver part of a `resoundd` command line for the dummy driver:
/// `-d dummy -r RATE -p FRAMES`.
pub fn dummy_driver_args(rate: u32, frames: u32) -> Vec<String> {
    [
        "-d",
        "dummy",
        "-r",
        &rate.to_string(),
        "-p",
        &frames.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// Removes the private directories `$TMPDIR/resound-{tag}-{pid}-*` of earlier
/// runs whose process is gone (killed outright, so their guards never ran).
pub fn remove_stale_dirs(tag: &str) {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let prefix = format!("resound-{tag}-");
    for e in dir.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
