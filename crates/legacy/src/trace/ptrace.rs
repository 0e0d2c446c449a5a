//! The ptrace tracer, as the paper's `qostrace`: seize every thread of the
//! process (and, through PTRACE_O_TRACECLONE/FORK, the threads and children
//! it creates), stop it at each system-call entry and exit, keep only the
//! calls of interest in a preallocated array (no formatting while tracing),
//! and detach cleanly at the end so the process runs on untouched. Runs on
//! the calling thread (every ptrace request must come from the attaching
//! thread) with a watchdog thread (`stop::Watchdog`) that ends the wait on time.

use super::stop::Watchdog;
use super::{now_ns, permission_error, threads_of, End, Options, Trace, TraceError, Tracer};
use crate::events::{Event, EventBuf, Kind, SyscallSet};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const OPTIONS: libc::c_int = libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC;

/// The tracer's state while the loop runs (everything preallocated).
struct State<'a> {
    buf: EventBuf,
    live: Vec<i32>,
    in_call: HashMap<i32, i64>,
    threads: Vec<i32>,
    children: Vec<i32>,
    execs: u32,
    set: &'a SyscallSet,
}

impl State<'_> {
    fn add(&mut self, tid: i32) {
        if !self.live.contains(&tid) {
            self.live.push(tid);
        }
        if !self.threads.contains(&tid) {
            self.threads.push(tid);
        }
    }
}

fn ptrace(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> libc::c_long {
    // SAFETY: every request used here takes integer arguments or, for
    // GETEVENTMSG/GET_SYSCALL_INFO, a pointer to a live buffer of the size
    // given (the callers below pass exactly that).
    unsafe { libc::ptrace(req, tid, addr, data) }
}

fn resume(tid: i32, sig: i32) {
    ptrace(libc::PTRACE_SYSCALL, tid, 0, sig as usize);
}

/// Trace `opts.pid` with ptrace for `opts.duration`.
pub fn trace(opts: &Options) -> Result<Trace, TraceError> {
    let t0 = now_ns();
    let mut st = State {
        buf: EventBuf::with_capacity(opts.capacity),
        live: Vec::with_capacity(256),
        in_call: HashMap::with_capacity(256),
        threads: Vec::with_capacity(256),
        children: Vec::new(),
        execs: 0,
        set: &opts.syscalls,
    };
    attach_all(opts.pid, &mut st)?;
    let wd = Watchdog::start(Instant::now() + opts.duration, opts.stop.clone());
    let mut end = run(&mut st, &wd);
    if end != End::Exited {
        detach_all(&mut st);
        if opts.stop.load(Ordering::Relaxed) {
            end = End::Stopped;
        }
    }
    drop(wd);
    let lost = st.buf.dropped();
    Ok(Trace {
        events: st.buf.into_sorted(),
        threads: st.threads,
        children: st.children,
        execs: st.execs,
        lost,
        end,
        elapsed_ns: now_ns() - t0,
        tracer: Tracer::Ptrace,
        cpu_latency_us: None,
        cpu_latency_error: None,
    })
}

/// Seize every thread (re-reading the list until no new thread appears) and
/// interrupt each so it reports a first stop.
fn attach_all(pid: i32, st: &mut State) -> Result<(), TraceError> {
    loop {
        let new: Vec<i32> = threads_of(pid)
            .into_iter()
            .filter(|t| !st.live.contains(t))
            .collect();
        if new.is_empty() {
            return if st.live.is_empty() {
                Err(TraceError::NoProcess(pid))
            } else {
                Ok(())
            };
        }
        for tid in new {
            if ptrace(libc::PTRACE_SEIZE, tid, 0, OPTIONS as usize) < 0 {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EPERM) => {
                        detach_all(st);
                        return Err(permission_error(pid));
                    }
                    Some(libc::ESRCH) if tid != pid => continue,
                    Some(libc::ESRCH) => return Err(TraceError::NoProcess(pid)),
                    _ => {
                        detach_all(st);
                        return Err(TraceError::Os {
                            what: format!("PTRACE_SEIZE {tid}"),
                            source: err,
                        });
                    }
                }
            }
            ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
            st.add(tid);
        }
    }
}

/// The tracing loop: until the watchdog fires or every thread is gone.
fn run(st: &mut State, wd: &Watchdog) -> End {
    loop {
        if wd.fired() {
            return End::Timeout;
        }
        if st.live.is_empty() {
            return End::Exited;
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out pointer.
        let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        let t = now_ns();
        if tid < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return End::Exited;
        }
        on_status(st, tid, status, t);
    }
}

/// Handle one wait status of `tid` at time `t`.
fn on_status(st: &mut State, tid: i32, status: i32, t: u64) {
    if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
        st.live.retain(|&x| x != tid);
        st.in_call.remove(&tid);
        return;
    }
    if !libc::WIFSTOPPED(status) {
        return;
    }
    let sig = libc::WSTOPSIG(status);
    let event = status >> 16;
    st.add(tid);
    if sig == libc::SIGTRAP | 0x80 {
        on_syscall(st, tid, t);
        resume(tid, 0);
    } else if event != 0 {
        on_event(st, tid, event);
        resume(tid, 0);
    } else {
        // A signal for the process: deliver it.
        resume(tid, sig);
    }
}

fn on_syscall(st: &mut State, tid: i32, t: u64) {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    if ptrace(
        libc::PTRACE_GET_SYSCALL_INFO,
        tid,
        size,
        &mut info as *mut _ as usize,
    ) <= 0
    {
        return;
    }
    match info.op {
        libc::PTRACE_SYSCALL_INFO_ENTRY => {
            // SAFETY: op == ENTRY says the `entry` member is the one filled.
            let nr = unsafe { info.u.entry.nr } as i64;
            st.in_call.insert(tid, nr);
            if st.set.contains(nr) {
                st.buf.push(Event {
                    tid,
                    t_ns: t,
                    kind: Kind::SysEnter(nr),
                });
            }
        }
        libc::PTRACE_SYSCALL_INFO_EXIT => {
            if let Some(nr) = st.in_call.remove(&tid).filter(|&nr| st.set.contains(nr)) {
                st.buf.push(Event {
                    tid,
                    t_ns: t,
                    kind: Kind::SysExit(nr),
                });
            }
        }
        _ => {}
    }
}

fn on_event(st: &mut State, tid: i32, event: i32) {
    let mut msg: libc::c_ulong = 0;
    match event {
        libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
            ptrace(
                libc::PTRACE_GETEVENTMSG,
                tid,
                0,
                &mut msg as *mut _ as usize,
            );
            let new = msg as i32;
            st.add(new);
            if event != libc::PTRACE_EVENT_CLONE && !st.children.contains(&new) {
                st.children.push(new);
            }
        }
        libc::PTRACE_EVENT_EXEC => {
            ptrace(
                libc::PTRACE_GETEVENTMSG,
                tid,
                0,
                &mut msg as *mut _ as usize,
            );
            let former = msg as i32;
            if former != tid {
                st.live.retain(|&x| x != former);
            }
            st.in_call.remove(&tid);
            st.execs += 1;
        }
        _ => {}
    }
}

/// Stop every live thread and detach it (delivering a signal it was about
/// to receive), so the process runs on as before.
fn detach_all(st: &mut State) {
    for &tid in &st.live {
        ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
    }
    let give_up = Instant::now() + Duration::from_secs(2);
    while !st.live.is_empty() && Instant::now() < give_up {
        let mut status = 0;
        // SAFETY: `status` is a valid out pointer.
        let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if tid < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => break,
            }
        }
        if !st.live.contains(&tid) {
            continue;
        }
        if libc::WIFSTOPPED(status) {
            let (sig, event) = (libc::WSTOPSIG(status), status >> 16);
            let deliver = if sig != libc::SIGTRAP | 0x80 && event == 0 {
                sig
            } else {
                0
            };
            ptrace(libc::PTRACE_DETACH, tid, 0, deliver as usize);
        }
        st.live.retain(|&x| x != tid);
    }
    // Threads that did not report in time: detach is refused unless stopped,
    // but try anyway.
    for &tid in &st.live {
        ptrace(libc::PTRACE_DETACH, tid, 0, 0);
    }
    st.live.clear();
}
