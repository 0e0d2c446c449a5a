//! The kernel tracer, the paper's future work: the `raw_syscalls:sys_enter`
//! and `sys_exit` tracepoints through `perf_event_open`, one event pair per
//! thread and CPU with `inherit` (threads and children created while tracing
//! are covered at once), a tracepoint filter keeping only the system calls of
//! interest, and one mmap ring per CPU read every few milliseconds. The
//! process never stops. Fork, exec and lost records come from the same
//! rings. Runs on the caller's thread.

mod perf;

use super::{now_ns, permission_error, threads_of, End, Options, Trace, TraceError, Tracer};
use crate::events::{Event, EventBuf, Kind};
use perf::Ring;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Data pages per CPU ring (256 KiB with 4 KiB pages).
const RING_PAGES: usize = 64;
const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_FORK: u32 = 7;
const RECORD_SAMPLE: u32 = 9;
const MISC_COMM_EXEC: u16 = 1 << 13;

/// The two tracepoints' ids.
#[derive(Debug, Clone, Copy)]
struct Ids {
    enter: u64,
    exit: u64,
}

/// Everything open while tracing.
struct Session {
    rings: Vec<Ring>,
    fds: Vec<OwnedFd>,
}

/// What the records said.
struct Collected {
    buf: EventBuf,
    threads: Vec<i32>,
    children: Vec<i32>,
    execs: u32,
    lost: u64,
}

/// Trace `opts.pid` with perf tracepoints for `opts.duration`.
pub fn trace(opts: &Options) -> Result<Trace, TraceError> {
    let t0 = now_ns();
    refuse_other_users(opts.pid)?;
    let ids = tracepoint_ids()?;
    let filter = filter_expr(opts);
    let mut s = open_all(opts.pid, ids, &filter)?;
    let mut c = Collected {
        buf: EventBuf::with_capacity(opts.capacity),
        threads: threads_of(opts.pid),
        children: Vec::new(),
        execs: 0,
        lost: 0,
    };
    for fd in &s.fds {
        perf::enable(fd, true).map_err(|e| os("PERF_EVENT_IOC_ENABLE", e))?;
    }
    let end = run(opts, ids, &mut s, &mut c);
    for fd in &s.fds {
        let _ = perf::enable(fd, false);
    }
    drain(opts.pid, ids, &mut s, &mut c);
    c.threads.sort_unstable();
    let lost = c.lost + c.buf.dropped();
    Ok(Trace {
        events: c.buf.into_sorted(),
        threads: c.threads,
        children: c.children,
        execs: c.execs,
        lost,
        end,
        elapsed_ns: now_ns() - t0,
        tracer: Tracer::Kernel,
    })
}

fn os(what: &str, source: std::io::Error) -> TraceError {
    TraceError::Os {
        what: what.into(),
        source,
    }
}

/// Without root, a process of another user is refused before anything is
/// opened (the kernel would refuse its perf events too: it asks for the
/// same access as ptrace).
fn refuse_other_users(pid: i32) -> Result<(), TraceError> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid());
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me != 0 && owner.is_ok_and(|u| u != me) {
        return Err(permission_error(pid));
    }
    Ok(())
}

/// Read the tracepoint ids from tracefs, mounting it at /sys/kernel/tracing
/// when it is not mounted (and we may).
fn tracepoint_ids() -> Result<Ids, TraceError> {
    let roots = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    let read = |root: &str, ev: &str| -> Option<u64> {
        std::fs::read_to_string(format!("{root}/events/raw_syscalls/{ev}/id"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let find = || {
        roots
            .iter()
            .find_map(|r| Some((read(r, "sys_enter")?, read(r, "sys_exit")?)))
    };
    let found = find().or_else(|| {
        let (src, dst) = (c"nodev", c"/sys/kernel/tracing");
        // SAFETY: NUL-terminated strings that outlive the call; no data.
        unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                c"tracefs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        find()
    });
    let (enter, exit) = found.ok_or_else(|| {
        TraceError::Unavailable(
            "the raw_syscalls tracepoint ids cannot be read: tracefs is not mounted at \
             /sys/kernel/tracing (and could not be mounted) or is readable by root only; \
             run as root or use --tracer ptrace"
                .into(),
        )
    })?;
    Ok(Ids { enter, exit })
}

/// The tracepoint filter: `id == a || id == b ...`.
fn filter_expr(opts: &Options) -> std::ffi::CString {
    let terms: Vec<String> = opts
        .syscalls
        .numbers()
        .iter()
        .map(|n| format!("id == {n}"))
        .collect();
    std::ffi::CString::new(terms.join(" || ")).expect("no NUL in a filter")
}

/// Map an open error to what the user should hear.
fn open_error(pid: i32, tid: i32, e: std::io::Error) -> TraceError {
    use std::os::unix::fs::MetadataExt;
    match e.raw_os_error() {
        Some(libc::ESRCH) => TraceError::NoProcess(pid),
        Some(libc::EACCES | libc::EPERM) => {
            let owner = std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid());
            // SAFETY: geteuid has no preconditions.
            if owner.is_ok_and(|u| u != unsafe { libc::geteuid() }) {
                permission_error(pid)
            } else {
                TraceError::Unavailable(format!(
                    "perf tracepoint events refused ({e}): they need root or CAP_PERFMON \
                     (kernel.perf_event_paranoid is {}); use --tracer ptrace",
                    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                        .unwrap_or_default()
                        .trim()
                ))
            }
        }
        _ => os(&format!("perf_event_open for thread {tid}"), e),
    }
}

/// Open the enter/exit pair for every thread on every CPU, one ring per CPU.
fn open_all(pid: i32, ids: Ids, filter: &std::ffi::CStr) -> Result<Session, TraceError> {
    // SAFETY: sysconf has no preconditions.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i32;
    let threads = threads_of(pid);
    if threads.is_empty() {
        return Err(TraceError::NoProcess(pid));
    }
    let mut s = Session {
        rings: Vec::new(),
        fds: Vec::new(),
    };
    for cpu in 0..ncpu {
        let mut ring: Option<Ring> = None;
        for &tid in &threads {
            for (id, task) in [(ids.enter, true), (ids.exit, false)] {
                let fd = match perf::open(&perf::tracepoint_attr(id, task), tid, cpu) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid != pid => continue,
                    Err(e) => return Err(open_error(pid, tid, e)),
                };
                perf::set_filter(&fd, filter).map_err(|e| os("PERF_EVENT_IOC_SET_FILTER", e))?;
                match &ring {
                    Some(r) => {
                        perf::set_output(&fd, r.fd())
                            .map_err(|e| os("PERF_EVENT_IOC_SET_OUTPUT", e))?;
                        s.fds.push(fd);
                    }
                    None => {
                        ring = Some(
                            Ring::map(fd, RING_PAGES).map_err(|e| os("mmap of a perf ring", e))?,
                        )
                    }
                }
            }
        }
        s.rings.extend(ring);
    }
    s.fds.extend(
        s.rings
            .iter()
            .map(|r| r.fd().try_clone())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| os("dup", e))?,
    );
    Ok(s)
}

/// Read the rings until the deadline, a stop request, or the process's end.
fn run(opts: &Options, ids: Ids, s: &mut Session, c: &mut Collected) -> End {
    let deadline = Instant::now() + opts.duration;
    loop {
        drain(opts.pid, ids, s, c);
        if opts.stop.load(Ordering::Relaxed) {
            return End::Stopped;
        }
        if Instant::now() >= deadline {
            return End::Timeout;
        }
        if !alive(opts.pid) {
            return End::Exited;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Is `pid` still running (not gone, not a zombie)?
fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}

fn drain(pid: i32, ids: Ids, s: &mut Session, c: &mut Collected) {
    let mut scratch = Vec::with_capacity(4096);
    for ring in &mut s.rings {
        ring.drain(&mut scratch, |rec| on_record(pid, ids, rec, c));
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// One record (header first): a sample, a fork, an exec or a loss.
fn on_record(pid: i32, ids: Ids, rec: &[u8], c: &mut Collected) {
    let misc = u16::from_le_bytes([rec[4], rec[5]]);
    match u32_at(rec, 0) {
        RECORD_SAMPLE => {
            // pid, tid, time, raw size, raw { common_type u16, .., id i64 @ 8 }
            let (tid, t_ns) = (u32_at(rec, 12) as i32, u64_at(rec, 16));
            let (ty, nr) = (
                u64::from(u16::from_le_bytes([rec[28], rec[29]])),
                u64_at(rec, 36) as i64,
            );
            let kind = if ty == ids.enter {
                Kind::SysEnter(nr)
            } else {
                Kind::SysExit(nr)
            };
            c.buf.push(Event { tid, t_ns, kind });
        }
        RECORD_FORK => {
            let (p, ppid, tid) = (
                u32_at(rec, 8) as i32,
                u32_at(rec, 12) as i32,
                u32_at(rec, 16) as i32,
            );
            if !c.threads.contains(&tid) {
                c.threads.push(tid);
            }
            if p != ppid && p != pid && !c.children.contains(&p) {
                c.children.push(p);
            }
        }
        RECORD_COMM if misc & MISC_COMM_EXEC != 0 => c.execs += 1,
        RECORD_LOST => c.lost += u64_at(rec, 16),
        _ => {}
    }
}
