//! How the tests run JACK programs: C test programs compiled against the
//! distribution's JACK headers, the distribution's own programs, each through
//! `resound run` against a test server, in the foreground or the background.

use crate::common::*;
use resound_client::prelude::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) const PERIOD: &str = "256";

pub(crate) fn skip(test: &str, why: &str) {
    skip_missing_tool(test, why);
}

/// The compiled C test program `name` (None: no compiler or JACK headers; SKIP printed).
pub(crate) fn c_program(test: &str, name: &str) -> Option<PathBuf> {
    compile_c(test, name, name, &[])
}

/// The directory holding the C internal client object `name.so`, compiled
/// from `name.c` (None: no compiler or JACK headers; SKIP printed).
pub(crate) fn c_internal_object(test: &str, name: &str) -> Option<PathBuf> {
    let so = compile_c(
        test,
        name,
        &format!("objects/{name}.so"),
        &["-shared", "-fPIC"],
    )?;
    so.parent().map(Path::to_path_buf)
}

/// Compiles `../libjack/tests/c/name.c` with `extra` flags into `out`
/// (relative to the test's scratch directory) unless it is fresh.
pub(crate) fn compile_c(test: &str, name: &str, out: &str, extra: &[&str]) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !Path::new("/usr/include/jack/jack.h").exists() {
        skip(
            test,
            "JACK headers missing (apt-get install libjack-jackd2-dev)",
        );
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../libjack/tests/c")
        .join(format!("{name}.c"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("libjack-c")
        .join(out);
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let fresh = |e: &Path| {
        let (Ok(a), Ok(b)) = (std::fs::metadata(e), std::fs::metadata(&src)) else {
            return false;
        };
        a.modified().unwrap() >= b.modified().unwrap()
    };
    if !fresh(&exe) {
        let out = match Command::new("cc")
            .args([
                "-std=gnu11",
                "-O1",
                "-g",
                "-Wall",
                "-Werror",
                "-Wno-deprecated-declarations",
            ])
            .args(extra)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .args(["-ljack", "-lpthread", "-ldl"])
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                skip(test, &format!("no C compiler (cc): {e}"));
                return None;
            }
        };
        assert!(
            out.status.success(),
            "compiling {name}.c failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Some(exe)
}

/// A distribution JACK program (None: not installed; SKIP printed).
pub(crate) fn dist(test: &str, name: &str) -> Option<String> {
    let p = format!("/usr/bin/{name}");
    if Path::new(&p).exists() {
        Some(p)
    } else {
        skip(test, &format!("{p} missing (apt-get install jackd2)"));
        None
    }
}

/// Runs a program to completion (with a timeout) and returns (status, stdout, stderr).
pub(crate) fn run_to_end(
    srv: &Srv,
    prog: &str,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let mut c = srv.run_program(prog, args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let mut si = child.stdin.take().unwrap();
    si.write_all(stdin.as_bytes()).unwrap();
    drop(si);
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                st.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into(),
                String::from_utf8_lossy(&out.stderr).into(),
            );
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{prog} {args:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A program running in the background, its output collected line by line.
pub(crate) struct Bg {
    name: String,
    pub(crate) child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stdin: Option<std::process::ChildStdin>,
}

impl Bg {
    pub(crate) fn start(srv: &Srv, prog: &str, args: &[&str]) -> Bg {
        let mut c = srv.run_program(prog, args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for out in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let l = lines.clone();
            let tag = prog.rsplit('/').next().unwrap_or(prog).to_string();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    eprintln!("[{tag}] {line}");
                    l.lock().unwrap().push(line);
                }
            });
        }
        Bg {
            name: prog.into(),
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    pub(crate) fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub(crate) fn has(&self, f: impl Fn(&str) -> bool) -> bool {
        self.lines.lock().unwrap().iter().any(|l| f(l))
    }

    pub(crate) fn wait_for(&mut self, what: &str, f: impl Fn(&str) -> bool) {
        let t0 = Instant::now();
        while !self.has(&f) {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!(
                    "{} exited ({st}) before {what}: {:?}",
                    self.name,
                    self.output()
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{}: timed out waiting for {what}: {:?}",
                self.name,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn send(&mut self, line: &str) {
        let s = self.stdin.as_mut().expect("stdin");
        writeln!(s, "{line}").unwrap();
        s.flush().unwrap();
    }

    pub(crate) fn signal(&self, sig: i32) {
        signal(self.child.id(), sig);
    }

    /// SIGTERM, wait, and return everything it printed.
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.signal(libc::SIGTERM);
        self.wait()
    }

    pub(crate) fn wait(&mut self) -> Vec<String> {
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                panic!("{} did not exit: {:?}", self.name, self.output());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50));
        self.output()
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn server() -> Srv {
    Srv::start(&["-d", "dummy", "-r", "48000", "-p", PERIOD])
}

pub(crate) fn ports(srv: &Srv) -> Vec<resound_protocol::wire::PortInfo> {
    srv.ctl().list_ports().unwrap()
}

pub(crate) fn connected(srv: &Srv, a: &str, b: &str) -> bool {
    ports(srv)
        .iter()
        .any(|p| p.name == a && p.connections.iter().any(|c| c == b))
}

/// `key=value` of a summary line.
pub(crate) fn field(line: &str, key: &str) -> i64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}
