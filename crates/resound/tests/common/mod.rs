//! Test harness: a thin layer over `resound_lab::harness` that panics
//! instead of returning errors. A real `resoundd` in a private socket
//! directory, real `resound-tool` client processes, and a control session
//! from the test.
#![allow(dead_code)]

use resound_client::prelude::*;
use resound_client::{Client, ControlSession};
use resound_lab::harness::{self, Bins, ChildOptions, Server, ServerSpec, StderrMode};
use resound_protocol::wire::{self, Status};
use serde_json::Value;
use std::os::unix::net::UnixStream;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

pub const RESOUNDD: &str = env!("CARGO_BIN_EXE_resoundd");
pub const TOOL: &str = env!("CARGO_BIN_EXE_resound-tool");
pub const RESOUND: &str = env!("CARGO_BIN_EXE_resound");

/// The reservation row of the client (or thread) `name` in a status.
pub fn res<'a>(st: &'a Status, name: &str) -> Option<&'a wire::ReservationStatus> {
    st.reservations.iter().find(|r| r.name == name)
}

/// Serialises the tests of one test file that start servers or measure a
/// program's timing: each server may reserve up to the kernel's
/// SCHED_DEADLINE capacity from its own ledger, so two at once make the
/// kernel refuse reservations (EBUSY), and two timing measurements at once
/// disturb each other on a 2-core machine. Hold the guard for the test.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's own directory, `$TMPDIR/resound-{group}-{test}-{pid}`, empty at
/// the start and removed on drop.
pub struct TestDir(pub std::path::PathBuf);

impl TestDir {
    /// Creates it (emptying what an earlier run of the same test left).
    pub fn new(group: &str, test: &str) -> TestDir {
        let dir =
            std::env::temp_dir().join(format!("resound-{group}-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for TestDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

/// A running server in its own socket directory (its `name` and `dir` are
/// the harness server's); stopped on drop.
pub struct Srv(Server);

impl std::ops::Deref for Srv {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.0
    }
}

impl Srv {
    /// `resound -s SERVER run -- PROG ARGS`: a JACK program run against
    /// this server through resound's libjack, whatever the environment
    /// names as the default server.
    pub fn run_program(&self, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new(RESOUND);
        c.env("RESOUND_DIR", &self.dir)
            .env_remove("RESOUND_SERVER")
            .env_remove("JACK_DEFAULT_SERVER")
            .args(["-s", &self.name, "run", "--", prog])
            .args(args);
        c
    }

    /// Starts `resoundd -n <unique> ARGS` and waits until it accepts sessions.
    pub fn start(args: &[&str]) -> Srv {
        Srv::start_with_env(args, &[])
    }

    /// [`Srv::start`] with `--throttle-rescue 0` first: for tests of the
    /// reservations' own mechanics, which read each thread's policy from
    /// the kernel and would find a thread a machine stall got rescued
    /// onto SCHED_FIFO for a while (the rescue has its own tests).
    pub fn start_without_rescue(args: &[&str]) -> Srv {
        let mut all = vec!["--throttle-rescue", "0"];
        all.extend_from_slice(args);
        Srv::start(&all)
    }

    /// [`Srv::start`] with extra environment variables for the server.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Srv {
        let mut spec = ServerSpec::new(Bins::new(RESOUNDD, TOOL), "test", args);
        spec.env.push(("RESOUND_LOG".into(), "info".into()));
        spec.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        spec.child = ChildOptions {
            stderr: StderrMode::Keep {
                keep: usize::MAX,
                echo: Some("resoundd".into()),
            },
            ..ChildOptions::default()
        };
        Srv(Server::start(spec).unwrap_or_else(|e| panic!("server did not start: {e}")))
    }

    /// A control session.
    pub fn ctl(&self) -> ControlSession {
        self.try_ctl().expect("control session")
    }

    /// Status via a fresh control session.
    pub fn status(&self) -> Status {
        self.ctl().status().expect("status")
    }

    /// Waits until status shows the client `name` connected and inactive
    /// (the server deactivated it), failing the test after `timeout`.
    pub fn wait_inactive(&self, name: &str, timeout: Duration) {
        wait_for(&format!("{name} to be deactivated"), timeout, || {
            self.status()
                .clients
                .iter()
                .any(|c| c.name == name && !c.active)
        });
    }

    /// Opens a native client from the test process.
    pub fn client(&self, name: &str) -> Client {
        self.open_client(name).expect("open client")
    }

    /// Server log so far.
    pub fn log(&self) -> String {
        self.0.log().text()
    }

    /// Whether the server process still runs.
    pub fn alive(&mut self) -> bool {
        self.0.exited().is_none()
    }

    /// Starts `resound-tool -n NAME ARGS` against this server and waits for it to be ready.
    pub fn tool(&self, name: &str, args: &[&str]) -> Tool {
        let (child, _) = self
            .0
            .tool(name, args, &mut || Ok(()))
            .unwrap_or_else(|e| panic!("tool {name}: {e}"));
        Tool {
            name: name.into(),
            child,
        }
    }

    /// [`Srv::tool`] once per name, each with the same `args`.
    pub fn tools(&self, names: &[&str], args: &[&str]) -> Vec<Tool> {
        names.iter().map(|name| self.tool(name, args)).collect()
    }

    /// Starts `resound-tool -n NAME ARGS` without waiting for it.
    pub fn spawn_tool(&self, name: &str, args: &[&str]) -> Tool {
        Tool {
            name: name.into(),
            child: self.0.spawn_tool(name, args).expect("spawn resound-tool"),
        }
    }

    /// Runs the `resound` CLI against this server.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        let mut cmd: Command = self.command(RESOUND.as_ref());
        cmd.args(["-s", &self.name])
            .args(args)
            .output()
            .expect("run resound")
    }

    /// Stops the server with SIGTERM and returns its exit status.
    pub fn stop(&mut self) -> ExitStatus {
        self.0.stop().expect("stop resoundd")
    }
}

/// Sends `sig` to the process `pid` (a child of the test).
pub fn signal(pid: u32, sig: i32) {
    harness::signal(pid, sig);
}

/// A running `resound-tool` client process; killed on drop.
pub struct Tool {
    pub name: String,
    child: harness::Child,
}

impl Tool {
    /// Stops it with SIGTERM and returns its final report.
    pub fn stop(mut self) -> Value {
        self.child
            .stop_and_report("final", Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        let _ = self.child.kill9();
    }

    /// Waits for it to exit.
    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().expect("wait for resound-tool")
    }

    /// Every JSON line it printed so far.
    pub fn lines(&self) -> Vec<Value> {
        self.child.lines().all()
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }
}

/// Waits until `f` holds, polling.
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    wait_for_seen(what, timeout, || (f(), String::new()));
}

/// Waits until `f` holds, polling; `f` also says what it saw, which the
/// timeout's message repeats (the last time).
pub fn wait_for_seen(what: &str, timeout: Duration, f: impl FnMut() -> (bool, String)) {
    if let Err(seen) = poll_until(timeout, f) {
        let seen = if seen.is_empty() {
            seen
        } else {
            format!("; last seen: {seen}")
        };
        panic!("timed out waiting for {what}{seen}");
    }
}

/// Polls `f` every 20 ms until it holds (Ok) or `timeout` passed (Err
/// with what `f` saw the last time).
pub fn poll_until(timeout: Duration, mut f: impl FnMut() -> (bool, String)) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let (done, seen) = f();
        if done {
            return Ok(());
        }
        if t0.elapsed() >= timeout {
            return Err(seen);
        }
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
    say_skipped(test, why);
}

/// Prints `SKIP test: why` on stdout and stderr, so that it shows with and
/// without `--nocapture`.
pub fn say_skipped(test: &str, why: &str) {
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

/// A raw client session from this process: Hello, Welcome (its fds
/// dropped), for tests that send the server what libjack never would.
pub fn raw_client(srv: &Srv, name: &str) -> UnixStream {
    let s = UnixStream::connect(srv.dir.join(format!("{}.sock", srv.name))).unwrap();
    let hello = wire::Hello {
        protocol: wire::PROTOCOL_VERSION,
        kind: wire::HelloKind::Client {
            name: name.into(),
            exact_name: true,
        },
    };
    wire::send_frame(&s, &hello).unwrap();
    let (payload, _fds) = wire::recv_frame_with_fds(&s, 1 << 20).unwrap();
    match wire::decode::<wire::Welcome>(&payload).unwrap() {
        wire::Welcome::Client { .. } => s,
        other => panic!("not welcomed: {other:?}"),
    }
}

/// Sends one request on a raw session and returns its reply (skipping
/// notifications).
pub fn call(s: &UnixStream, req: wire::Request) -> wire::Reply {
    call_with_fd(s, req, None)
}

/// [`call`], with `fd` sent along the request (SCM_RIGHTS) if given.
pub fn call_with_fd(
    s: &UnixStream,
    req: wire::Request,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> wire::Reply {
    let env = wire::Envelope { seq: 7, req };
    match fd {
        Some(fd) => wire::send_frame_with_fds(s, &env, &[fd]).unwrap(),
        None => wire::send_frame(s, &env).unwrap(),
    }
    let mut rd = s.try_clone().unwrap();
    loop {
        let p = wire::read_frame(&mut rd, 1 << 20).unwrap();
        if let wire::ServerMsg::Reply { seq: 7, reply } =
            wire::decode::<wire::ServerMsg>(&p).unwrap()
        {
            return reply;
        }
    }
}

/// True when this process may use SCHED_FIFO; otherwise says why the test
/// is skipped ([`say_skipped`]) and returns false.
pub fn fifo_or_skip(test: &str) -> bool {
    if can_fifo() {
        return true;
    }
    say_skipped(
        test,
        "SCHED_FIFO is not permitted for this user (needs CAP_SYS_NICE or an RLIMIT_RTPRIO)",
    );
    false
}

/// True when this process may use SCHED_DEADLINE; otherwise says why the
/// test is skipped ([`say_skipped`]) and returns false.
pub fn deadline_or_skip(test: &str) -> bool {
    if resound_sched::deadline_permitted() {
        return true;
    }
    say_skipped(
        test,
        "SCHED_DEADLINE is not permitted for this user (needs CAP_SYS_NICE)",
    );
    false
}

/// The contents of `/proc/self/task/TID/{file}` for the thread of this
/// process named `comm`.
pub fn thread_file(comm: &str, file: &str) -> Option<String> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if name.trim_end() == comm {
            return std::fs::read_to_string(t.path().join(file)).ok();
        }
    }
    None
}

/// Pins the thread of this process named `comm` to CPU `cpu`.
pub fn pin_thread(comm: &str, cpu: usize) {
    let stat = thread_file(comm, "stat").unwrap_or_else(|| panic!("no thread {comm}"));
    let tid: i32 = stat.split_whitespace().next().unwrap().parse().unwrap();
    let mut only: libc::cpu_set_t = unsafe {
        // SAFETY: cpu_set_t is a plain bit array, valid all zero.
        std::mem::zeroed()
    };
    // SAFETY: `only` is a live cpu_set_t and `cpu` is below CPU_SETSIZE
    // (it comes from this machine's CPU count).
    unsafe { libc::CPU_SET(cpu, &mut only) };
    // SAFETY: `only` is a valid cpu_set_t of the size passed; `tid` names
    // a thread of this process.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&only), &only) };
    assert_eq!(
        rc,
        0,
        "pinning {comm} to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

/// True if this machine has two CPUs or more; otherwise says why the test
/// is skipped ([`say_skipped`]) and returns false.
pub fn two_cpus_or_skip(test: &str) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        return true;
    }
    say_skipped(test, &format!("needs two CPUs, this machine has {cpus}"));
    false
}
