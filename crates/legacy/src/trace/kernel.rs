//! The kernel tracer, the paper's future work: syscall tracepoints through
//! `perf_event_open`, one event per tracepoint, thread and CPU with `inherit`
//! (threads and children created while tracing are covered at once), and one
//! mmap ring per CPU read every few milliseconds. The process never stops.
//! Fork, exec and lost records come from the same rings. Runs on the caller's
//! thread.
//!
//! The tracepoints are the per-call ones (`syscalls:sys_enter_read`,
//! `sys_exit_read`, ...) of the calls of interest only: a call outside the
//! set then costs the traced thread a bit test in the kernel, where the
//! generic `raw_syscalls` pair would build a record and run a filter on every
//! call (about 300 ns against 40 ns per call here). A kernel without the
//! per-call events gets the `raw_syscalls` pair with an `id == n || ...`
//! filter.

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

/// What a record of one tracepoint says.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// `raw_syscalls:sys_enter`/`sys_exit`: the call number is in the record.
    Raw { enter: bool },
    /// `syscalls:sys_enter_NAME`/`sys_exit_NAME`: the tracepoint's own call.
    Call { enter: bool, nr: i64 },
}

/// One tracepoint to open: its tracefs id and what its records mean.
#[derive(Debug, Clone, Copy)]
struct Tracepoint {
    id: u64,
    source: Source,
}

/// The tracepoints to open and, for the generic pair, the filter they need.
struct Ids {
    points: Vec<Tracepoint>,
    filter: Option<std::ffi::CString>,
}

impl Ids {
    /// The meaning of a record whose `common_type` is `ty`.
    fn source(&self, ty: u64) -> Option<Source> {
        self.points.iter().find(|p| p.id == ty).map(|p| p.source)
    }
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
    let ids = tracepoints(opts)?;
    let mut s = open_all(opts.pid, &ids)?;
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
    let end = run(opts, &ids, &mut s, &mut c);
    for fd in &s.fds {
        let _ = perf::enable(fd, false);
    }
    drain(opts.pid, &ids, &mut s, &mut c);
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
        cpu_latency_us: None,
        cpu_latency_error: None,
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

/// The tracefs roots, in the order they are tried.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The id of tracepoint `group/name` under a mounted tracefs.
fn tracepoint_id(group: &str, name: &str) -> Option<u64> {
    TRACEFS.iter().find_map(|root| {
        std::fs::read_to_string(format!("{root}/events/{group}/{name}/id"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// Mount tracefs at /sys/kernel/tracing when no root shows the tracepoints
/// (and we may mount it).
fn mount_tracefs() {
    if tracepoint_id("raw_syscalls", "sys_enter").is_some() {
        return;
    }
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
}

/// The per-call tracepoints of every call in the set, or the generic pair
/// with a filter when some call has none (a number outside the name table,
/// a kernel without per-call events).
fn tracepoints(opts: &Options) -> Result<Ids, TraceError> {
    mount_tracefs();
    let numbers = opts.syscalls.numbers();
    let per_call: Option<Vec<Tracepoint>> = numbers
        .iter()
        .flat_map(|&nr| [(nr, true), (nr, false)])
        .map(|(nr, enter)| {
            let name = crate::events::syscall_name(nr)?;
            let dir = if enter { "enter" } else { "exit" };
            let id = tracepoint_id("syscalls", &format!("sys_{dir}_{name}"))?;
            Some(Tracepoint {
                id,
                source: Source::Call { enter, nr },
            })
        })
        .collect();
    if let Some(points) = per_call {
        return Ok(Ids {
            points,
            filter: None,
        });
    }
    let raw = |name: &str, enter: bool| {
        tracepoint_id("raw_syscalls", name).map(|id| Tracepoint {
            id,
            source: Source::Raw { enter },
        })
    };
    let (enter, exit) = raw("sys_enter", true)
        .zip(raw("sys_exit", false))
        .ok_or_else(|| {
            TraceError::Unavailable(
                "the syscall tracepoint ids cannot be read: tracefs is not mounted at \
                 /sys/kernel/tracing (and could not be mounted) or is readable by root only; \
                 run as root or use --tracer ptrace"
                    .into(),
            )
        })?;
    Ok(Ids {
        points: vec![enter, exit],
        filter: Some(filter_expr(&numbers)),
    })
}

/// The generic pair's filter: `id == a || id == b ...`.
fn filter_expr(numbers: &[i64]) -> std::ffi::CString {
    let terms: Vec<String> = numbers.iter().map(|n| format!("id == {n}")).collect();
    std::ffi::CString::new(terms.join(" || ")).expect("no NUL in a filter")
}

/// Let this process hold `needed` more descriptors than it has, raising the
/// soft limit towards the hard one (each tracepoint, thread and CPU is one
/// perf event).
fn allow_descriptors(needed: usize) -> Result<(), TraceError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit the call fills.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count());
    let want = (open + needed + 64) as libc::rlim_t;
    if want <= lim.rlim_cur {
        return Ok(());
    }
    if want > lim.rlim_max {
        return Err(TraceError::Unavailable(format!(
            "the kernel tracer needs {needed} perf events (one per traced call, thread and CPU) \
             but the descriptor limit is {}; raise it (ulimit -n) or trace fewer calls (--events)",
            lim.rlim_max
        )));
    }
    lim.rlim_cur = want;
    // SAFETY: `lim` is a valid rlimit within the hard limit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    Ok(())
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

/// Open every tracepoint for every thread on every CPU, one ring per CPU.
/// Only the first tracepoint of a thread carries fork and exec records, so
/// each is seen once.
fn open_all(pid: i32, ids: &Ids) -> Result<Session, TraceError> {
    // SAFETY: sysconf has no preconditions.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i32;
    let threads = threads_of(pid);
    if threads.is_empty() {
        return Err(TraceError::NoProcess(pid));
    }
    allow_descriptors(ncpu as usize * threads.len() * ids.points.len())?;
    let mut s = Session {
        rings: Vec::new(),
        fds: Vec::new(),
    };
    for cpu in 0..ncpu {
        let mut ring: Option<Ring> = None;
        for &tid in &threads {
            for (i, point) in ids.points.iter().enumerate() {
                let attr = perf::tracepoint_attr(point.id, i == 0);
                let fd = match perf::open(&attr, tid, cpu) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid != pid => continue,
                    Err(e) => return Err(open_error(pid, tid, e)),
                };
                if let Some(filter) = &ids.filter {
                    perf::set_filter(&fd, filter)
                        .map_err(|e| os("PERF_EVENT_IOC_SET_FILTER", e))?;
                }
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
fn run(opts: &Options, ids: &Ids, s: &mut Session, c: &mut Collected) -> End {
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

fn drain(pid: i32, ids: &Ids, s: &mut Session, c: &mut Collected) {
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
fn on_record(pid: i32, ids: &Ids, rec: &[u8], c: &mut Collected) {
    let misc = u16::from_le_bytes([rec[4], rec[5]]);
    match u32_at(rec, 0) {
        RECORD_SAMPLE => {
            // pid, tid, time, raw size, raw { common_type u16, .., the
            // generic pair's id i64 @ 8 }
            let (tid, t_ns) = (u32_at(rec, 12) as i32, u64_at(rec, 16));
            let ty = u64::from(u16::from_le_bytes([rec[28], rec[29]]));
            let (enter, nr) = match ids.source(ty) {
                Some(Source::Call { enter, nr }) => (enter, nr),
                Some(Source::Raw { enter }) => (enter, u64_at(rec, 36) as i64),
                None => return,
            };
            let kind = if enter {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The tracepoints chosen for `events`, or `None` (with the reason
    /// printed) where tracefs cannot be read.
    fn chosen(events: &str) -> Option<Ids> {
        let mut opts = Options::new(std::process::id() as i32, Duration::from_secs(1));
        opts.syscalls = crate::events::parse_set(events).expect("a valid set");
        match tracepoints(&opts) {
            Ok(ids) => Some(ids),
            Err(e) => {
                println!("SKIP: the tracepoints cannot be read here: {e}");
                None
            }
        }
    }

    #[test]
    fn named_calls_get_their_own_tracepoints_without_a_filter() {
        let Some(ids) = chosen("read,futex") else {
            return;
        };
        assert_eq!(ids.points.len(), 4, "enter and exit of each call");
        assert!(ids.filter.is_none());
        let futex = crate::events::syscall_nr("futex").expect("futex is named");
        let exits = ids
            .points
            .iter()
            .filter(|p| matches!(p.source, Source::Call { enter: false, nr } if nr == futex))
            .count();
        assert_eq!(exits, 1);
        let any = ids.points[1];
        assert!(matches!(ids.source(any.id), Some(Source::Call { .. })));
        assert!(ids.source(u64::MAX).is_none());
    }

    #[test]
    fn a_call_known_only_by_number_falls_back_to_the_filtered_generic_pair() {
        let Some(ids) = chosen(&format!("read,{}", libc::SYS_getpid)) else {
            return;
        };
        assert_eq!(ids.points.len(), 2);
        let filter = ids.filter.expect("the generic pair is filtered");
        let want = format!("id == {} || id == {}", libc::SYS_read, libc::SYS_getpid);
        assert_eq!(filter.to_str().unwrap(), want);
    }
}
