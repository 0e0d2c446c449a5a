//! Whether a thread is runnable and how much CPU time it has used, read
//! from `/proc/TID/stat` and `/proc/TID/schedstat`, and where its
//! SCHED_DEADLINE entity stands, from `/proc/TID/sched`, without
//! allocating.
//!
//! The driver thread asks this about a client thread that stopped
//! finishing its cycles: a thread the kernel counts as runnable (state
//! `R`) whose CPU time does not move is held by its reservation's
//! throttle, not working, stopped or asleep; its entity's absolute
//! deadline then tells how long the kernel will hold it (see
//! `resound_engine::reserve`'s rescue).
//!
//! Threads: any; real-time safe (`open`/`read`/`close` of procfs files
//! into stack buffers, no allocation, no locks of our own).

/// A thread's run state and CPU time, as procfs shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadRun {
    /// State `R` in `/proc/TID/stat`: running, or waiting for a CPU
    /// (a SCHED_DEADLINE thread throttled by its budget counts here too).
    pub runnable: bool,
    /// CPU time used so far (ns), the first field of `/proc/TID/schedstat`.
    pub cpu_ns: u64,
}

/// A SCHED_DEADLINE thread's entity, as `/proc/TID/sched` shows it (the
/// kernel prints it with `CONFIG_SCHED_DEBUG`, which Debian's kernels have).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineEntity {
    /// Runtime left in the current period (ns; negative: the overrun the
    /// thread owes, while it is throttled).
    pub runtime_ns: i64,
    /// Absolute deadline (ns) on the kernel's run-queue clock, which is not
    /// CLOCK_MONOTONIC: only differences between two threads' deadlines
    /// mean something here.
    pub deadline_ns: u64,
}

/// Reads thread `tid`'s [`DeadlineEntity`]; None if the thread is gone, the
/// kernel does not print it, or the text does not parse. Real-time safe
/// (the file is about 2 KB; the kernel formats all of it, about as long
/// as the two reads of [`read_thread_run`]).
pub fn read_deadline_entity(tid: i32) -> Option<DeadlineEntity> {
    let mut buf = [0u8; 4096];
    let sched = read_proc(tid, b"sched", &mut buf)?;
    deadline_entity_of_sched(sched)
}

/// The `dl.runtime` and `dl.deadline` lines of a `/proc/TID/sched` text.
/// Real-time safe.
pub fn deadline_entity_of_sched(text: &[u8]) -> Option<DeadlineEntity> {
    let runtime = field_of_sched(text, b"dl.runtime")?;
    let deadline = field_of_sched(text, b"dl.deadline")?;
    let runtime_ns = match runtime.strip_prefix(b"-") {
        Some(digits) => i64::try_from(first_number(digits)?).ok()?.checked_neg()?,
        None => i64::try_from(first_number(runtime)?).ok()?,
    };
    Some(DeadlineEntity {
        runtime_ns,
        deadline_ns: first_number(deadline)?,
    })
}

/// The value of the line `NAME   :   VALUE` of a `/proc/TID/sched` text,
/// from its first non-blank byte. Real-time safe.
fn field_of_sched<'t>(text: &'t [u8], name: &[u8]) -> Option<&'t [u8]> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let rest = rest.trim_ascii_start().strip_prefix(b":")?;
        Some(rest.trim_ascii_start())
    })
}

/// Reads thread `tid`'s [`ThreadRun`] from procfs; None if the thread is
/// gone or procfs cannot be read. Real-time safe.
pub fn read_thread_run(tid: i32) -> Option<ThreadRun> {
    let mut buf = [0u8; 512];
    let stat = read_proc(tid, b"stat", &mut buf)?;
    let runnable = state_of_stat(stat)? == b'R';
    let schedstat = read_proc(tid, b"schedstat", &mut buf)?;
    let cpu_ns = first_number(schedstat)?;
    Some(ThreadRun { runnable, cpu_ns })
}

/// The state letter of a `/proc/TID/stat` line: the first field after the
/// command name, which is in parentheses and may itself hold spaces and
/// parentheses (hence the last `)`). Real-time safe.
pub fn state_of_stat(line: &[u8]) -> Option<u8> {
    let close = line.iter().rposition(|&b| b == b')')?;
    line.get(close + 2).copied()
}

/// The leading decimal number of `text`. Real-time safe.
fn first_number(text: &[u8]) -> Option<u64> {
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    text[..digits].iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Reads `/proc/TID/NAME` into `buf` and returns the bytes read. Real-time
/// safe.
fn read_proc<'a>(tid: i32, name: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let mut path = [0u8; 64];
    let len = proc_path(tid, name, &mut path)?;
    // SAFETY: `path[..len]` is a NUL-terminated byte string built by
    // `proc_path` in a buffer that outlives the call; `open` only reads it.
    let fd = unsafe {
        libc::open(
            path[..len].as_ptr().cast(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is the descriptor just opened and owned here; `read`
    // writes at most `buf.len()` bytes into `buf`, which is valid for
    // writes of that length for the whole call.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: `fd` was opened above, is closed exactly once, here, and not
    // used after.
    unsafe { libc::close(fd) };
    let n = usize::try_from(n).ok()?;
    Some(&buf[..n])
}

/// Writes `/proc/TID/NAME` and a NUL into `out`; returns the length with the
/// NUL. None for a negative tid or a path too long. Real-time safe.
fn proc_path(tid: i32, name: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut digits = [0u8; 10];
    let mut n = u32::try_from(tid).ok()?;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let parts: [&[u8]; 4] = [b"/proc/", &digits[at..], b"/", name];
    let mut len = 0;
    for part in parts {
        out.get_mut(len..len + part.len())?.copy_from_slice(part);
        len += part.len();
    }
    *out.get_mut(len)? = 0;
    Some(len + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis_of_the_command_name() {
        assert_eq!(state_of_stat(b"42 (a) b) R 1 2 3"), Some(b'R'));
        assert_eq!(state_of_stat(b"7 (sleepy) S 1"), Some(b'S'));
        assert_eq!(state_of_stat(b"no parenthesis"), None);
    }

    #[test]
    fn the_deadline_entity_is_read_from_its_two_lines() {
        let text = b"c3 (4712, #threads: 4)\n----\nse.exec_start   :   14053499.481058\n\
dl.runtime                                   :               158534\n\
dl.deadline                                  :       14075346333128\n\
clock-delta                                  :                   80\n";
        assert_eq!(
            deadline_entity_of_sched(text),
            Some(DeadlineEntity {
                runtime_ns: 158_534,
                deadline_ns: 14_075_346_333_128
            })
        );
        let owed = b"dl.runtime : -5800000\ndl.deadline : 99\n";
        assert_eq!(
            deadline_entity_of_sched(owed).map(|e| e.runtime_ns),
            Some(-5_800_000)
        );
        assert_eq!(deadline_entity_of_sched(b"dl.runtime : 1\n"), None);
        assert_eq!(
            deadline_entity_of_sched(b"dl.runtime : x\ndl.deadline : 1\n"),
            None
        );
        assert_eq!(
            deadline_entity_of_sched(b"dl.runtimes : 1\ndl.deadline : 1\n"),
            None,
            "a longer name is another field"
        );
    }

    #[test]
    fn a_reserved_threads_entity_reads_with_its_deadline_ahead_of_another() {
        use crate::policy::{apply, deadline_permitted, gettid, Policy};
        if !deadline_permitted() {
            println!("skipped: SCHED_DEADLINE is not permitted here");
            return;
        }
        // 1 ms every 100 ms, deadline 100 ms: two such threads reserved
        // 20 ms apart have deadlines about 20 ms apart.
        let reserve = Policy::Deadline {
            runtime_ns: 1_000_000,
            deadline_ns: 100_000_000,
            period_ns: 100_000_000,
            reclaim: false,
        };
        let read_reserved = move || {
            apply(0, &reserve).expect("SCHED_DEADLINE permitted");
            let tid = gettid();
            let text = std::fs::read_to_string(format!("/proc/{tid}/sched")).unwrap();
            let e = read_deadline_entity(tid);
            apply(0, &Policy::Other).unwrap();
            (text.contains("dl.deadline"), e)
        };
        let (printed, first) = std::thread::spawn(read_reserved).join().unwrap();
        if !printed {
            println!("skipped: this kernel prints no dl.deadline in /proc/TID/sched");
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (_, second) = std::thread::spawn(read_reserved).join().unwrap();
        let (first, second) = (first.expect("printed"), second.expect("printed"));
        assert!(
            (0..=1_000_000).contains(&first.runtime_ns),
            "a fresh reservation owes nothing and holds at most its budget: {first:?}"
        );
        let apart = second.deadline_ns.saturating_sub(first.deadline_ns);
        assert!(
            (19_000_000..200_000_000).contains(&apart),
            "reserved 20 ms apart, deadlines {apart} ns apart"
        );
        // SAFETY: gettid has no preconditions.
        let own = unsafe { libc::gettid() };
        assert_eq!(
            read_deadline_entity(own),
            None,
            "a SCHED_OTHER thread has none"
        );
        assert_eq!(read_deadline_entity(-1), None);
    }

    #[test]
    fn paths_are_built_without_allocating_and_bounded() {
        let mut out = [0u8; 64];
        let len = proc_path(1234, b"schedstat", &mut out).unwrap();
        assert_eq!(&out[..len], b"/proc/1234/schedstat\0");
        assert_eq!(proc_path(-1, b"stat", &mut out), None);
        assert_eq!(proc_path(1, b"stat", &mut [0u8; 8]), None);
    }

    #[test]
    fn a_running_thread_reads_as_runnable_with_its_cpu_time_moving() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let before = read_thread_run(tid).expect("own thread readable");
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let after = read_thread_run(tid).unwrap();
        assert!(
            before.runnable && after.runnable,
            "a thread reading its own state runs"
        );
        assert!(
            after.cpu_ns >= before.cpu_ns + 10_000_000,
            "20 ms of spinning: {before:?} then {after:?}"
        );
    }

    #[test]
    fn a_sleeping_thread_is_not_runnable_and_a_gone_one_reads_none() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let run = read_thread_run(tid).expect("sleeping thread readable");
        assert!(!run.runnable, "blocked in recv: {run:?}");
        stop_tx.send(()).unwrap();
        sleeper.join().unwrap();
        assert_eq!(read_thread_run(tid), None, "the thread is gone");
    }
}
