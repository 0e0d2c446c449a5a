//! A child process under a drop guard ([`Child`]): spawned with its stdout
//! JSON lines and its stderr collected, stopped (SIGTERM, then SIGKILL) and
//! reaped on drop. Runs on the caller's thread.

use super::output::{JsonLines, LineWait, StderrLog};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long [`Child::exited_with_last_words`] waits for the stderr reader
/// to reach the end of an exited child's stderr.
const LAST_WORDS_WAIT: Duration = Duration::from_secs(2);

/// What happens to a child's stderr.
#[derive(Debug, Clone)]
pub enum StderrMode {
    /// Goes to this process's stderr.
    Inherit,
    /// Kept in the child's [`StderrLog`] (its last `keep` lines), and echoed
    /// to this process's stderr as `[tag] line` when `echo` is given.
    Keep {
        /// Lines kept.
        keep: usize,
        /// Tag of the echoed lines; None: not echoed.
        echo: Option<String>,
    },
}

/// How to spawn a child.
#[derive(Debug, Clone)]
pub struct ChildOptions {
    /// Its stderr.
    pub stderr: StderrMode,
    /// It gets SIGTERM when the thread that spawned it dies, so a killed
    /// runner leaves nothing running. Only for runners that spawn from one
    /// long-lived thread (a test thread ends with its test).
    pub die_with_parent: bool,
    /// It runs in a process group of its own, so a Ctrl-C at the terminal
    /// reaches only this process, which then stops everything in order.
    pub own_process_group: bool,
    /// It runs on this CPU only.
    pub cpu: Option<usize>,
}

impl Default for ChildOptions {
    /// Stderr inherited, nothing else.
    fn default() -> ChildOptions {
        ChildOptions {
            stderr: StderrMode::Inherit,
            die_with_parent: false,
            own_process_group: false,
            cpu: None,
        }
    }
}

/// Sends `sig` to the process `pid` (one of our children).
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // callers pass the pid of a child they have not reaped yet, so it
    // cannot name a reused pid.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// A child process; stopped (SIGTERM, then SIGKILL after 3 s) and reaped on
/// drop.
pub struct Child {
    child: std::process::Child,
    what: String,
    lines: JsonLines,
    log: StderrLog,
    status: Option<ExitStatus>,
}

impl Child {
    /// Spawns `cmd` (stdin from /dev/null, stdout collected as JSON lines),
    /// naming it `what` in error messages.
    pub fn spawn(mut cmd: Command, what: &str, opts: &ChildOptions) -> Result<Child, String> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped());
        match opts.stderr {
            StderrMode::Inherit => cmd.stderr(Stdio::inherit()),
            StderrMode::Keep { .. } => cmd.stderr(Stdio::piped()),
        };
        if opts.die_with_parent {
            die_with_parent(&mut cmd, libc::SIGTERM);
        }
        if opts.own_process_group {
            cmd.process_group(0);
        }
        if let Some(c) = opts.cpu {
            pin_to_cpu(&mut cmd, c)?;
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        let lines = JsonLines::default();
        if let Some(out) = child.stdout.take() {
            lines.follow(out);
        }
        let log = match &opts.stderr {
            StderrMode::Keep { keep, echo } => {
                let log = StderrLog::new(*keep);
                if let Some(err) = child.stderr.take() {
                    log.follow(err, echo.clone());
                }
                log
            }
            StderrMode::Inherit => StderrLog::new(1),
        };
        Ok(Child {
            child,
            what: what.to_string(),
            lines,
            log,
            status: None,
        })
    }

    /// What it is called in messages.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its stdout JSON lines.
    pub fn lines(&self) -> &JsonLines {
        &self.lines
    }

    /// Its kept stderr (empty when inherited).
    pub fn log(&self) -> &StderrLog {
        &self.log
    }

    /// Its exit status if it has exited (reaping it).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Its exit status if it has exited, once its stderr reader has taken
    /// in the last lines (up to `LAST_WORDS_WAIT`): an error quoting
    /// the log then holds its last words (a bad option's message).
    pub fn exited_with_last_words(&mut self) -> Option<ExitStatus> {
        let st = self.exited()?;
        self.log.wait_closed(LAST_WORDS_WAIT);
        Some(st)
    }

    /// Sends it `sig` unless it was reaped already.
    pub fn signal(&mut self, sig: i32) {
        if self.exited().is_none() {
            signal(self.pid(), sig);
        }
    }

    /// Waits for it to exit.
    pub fn wait(&mut self) -> Result<ExitStatus, String> {
        if let Some(st) = self.status {
            return Ok(st);
        }
        let st = self
            .child
            .wait()
            .map_err(|e| format!("waiting for {}: {e}", self.what))?;
        self.status = Some(st);
        Ok(st)
    }

    /// SIGTERM, then SIGKILL after `grace`; reaps it and returns its status.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, String> {
        self.signal(libc::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Some(st) = self.exited() {
                return Ok(st);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill9()
    }

    /// SIGKILL; reaps it and returns its status.
    pub fn kill9(&mut self) -> Result<ExitStatus, String> {
        self.signal(libc::SIGKILL);
        self.wait()
    }

    /// Waits up to `timeout` for a stdout line with `"event": event`.
    /// `keep_going` is asked every 50 ms whether to go on waiting (an
    /// interrupted runner returns its error).
    pub fn wait_event(
        &mut self,
        event: &str,
        timeout: Duration,
        keep_going: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<serde_json::Value, String> {
        let t0 = Instant::now();
        loop {
            let slice = timeout
                .saturating_sub(t0.elapsed())
                .min(Duration::from_millis(50));
            match self.lines.wait_event(event, slice) {
                Ok(v) => return Ok(v),
                Err(LineWait::Closed) => {
                    let st = self.wait().map(|s| s.to_string()).unwrap_or_default();
                    self.log.wait_closed(Duration::from_secs(2));
                    return Err(format!(
                        "{} exited ({st}) before printing {event:?}:\n{}",
                        self.what,
                        self.log.tail(10)
                    ));
                }
                Err(LineWait::TimedOut) => {}
            }
            keep_going()?;
            if t0.elapsed() >= timeout {
                return Err(format!(
                    "{} did not print {event:?} within {timeout:?}:\n{}",
                    self.what,
                    self.log.tail(10)
                ));
            }
        }
    }

    /// Stops it (SIGTERM, then SIGKILL after `grace`) and returns its last
    /// line with `"event": event` (its final report).
    pub fn stop_and_report(
        &mut self,
        event: &str,
        grace: Duration,
    ) -> Result<serde_json::Value, String> {
        let st = self.stop(grace)?;
        self.lines.wait_closed(Duration::from_secs(3));
        self.lines.last_event(event).ok_or_else(|| {
            format!(
                "{} exited ({st}) without a {event:?} line: {:?}",
                self.what,
                self.lines.all()
            )
        })
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.stop(Duration::from_secs(3));
    }
}

/// Makes a spawned child receive `sig` when the thread that spawned it dies.
fn die_with_parent(cmd: &mut Command, sig: libc::c_int) {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // prctl(2), which is async-signal-safe; it touches no memory but `sig`.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes a spawned child run on `cpu` only.
fn pin_to_cpu(cmd: &mut Command, cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is out of range"));
    }
    // SAFETY: cpu_set_t is plain data for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and cpu < CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the closure runs in the forked child before exec and only calls
    // sched_setaffinity(2), a plain async-signal-safe syscall, on its own copy of `set`.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    #[test]
    fn collects_json_lines_and_the_final_report() {
        // The trap is set before "ready" is printed: the test may stop the
        // child as soon as it reads that line.
        let script = r#"trap 'echo "{\"event\":\"final\",\"n\":3}"; exit 0' TERM; echo '{"event":"ready","name":"x"}'; echo 'not json'; while :; do sleep 0.05; done"#;
        let mut c = Child::spawn(sh(script), "sh", &ChildOptions::default()).unwrap();
        let ready = c
            .wait_event("ready", Duration::from_secs(10), &mut || Ok(()))
            .unwrap();
        assert_eq!(ready["name"], "x");
        let fin = c.stop_and_report("final", Duration::from_secs(10)).unwrap();
        assert_eq!(fin["n"], 3);
        assert_eq!(
            c.lines().all().len(),
            2,
            "the line that is not JSON is dropped"
        );
    }

    #[test]
    fn an_exit_before_the_line_is_an_error_with_the_stderr_tail() {
        let opts = ChildOptions {
            stderr: StderrMode::Keep {
                keep: 10,
                echo: None,
            },
            ..ChildOptions::default()
        };
        let mut c = Child::spawn(sh("echo broken >&2; exit 3"), "sh", &opts).unwrap();
        let e = c
            .wait_event("ready", Duration::from_secs(10), &mut || Ok(()))
            .unwrap_err();
        assert!(e.contains("exited") && e.contains("broken"), "{e}");
        assert_eq!(c.exited().and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn keep_going_stops_the_wait() {
        let mut c = Child::spawn(sh("sleep 30"), "sh", &ChildOptions::default()).unwrap();
        let e = c
            .wait_event("ready", Duration::from_secs(10), &mut || {
                Err("interrupted".into())
            })
            .unwrap_err();
        assert_eq!(e, "interrupted");
        // The drop guard stops it.
    }
}
