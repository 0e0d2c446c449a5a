//! Whether a thread is runnable and how much CPU time it has used, read
//! from `/proc/TID/stat` and `/proc/TID/schedstat` without allocating.
//!
//! The driver thread asks this about a client thread that stopped
//! finishing its cycles: a thread the kernel counts as runnable (state
//! `R`) whose CPU time does not move is held by its reservation's
//! throttle, not working, stopped or asleep (see
//! `resound_engine::reserve`'s rescue).
//!
//! Threads: any; real-time safe (two `open`/`read`/`close` of procfs
//! files into stack buffers, no allocation, no locks of our own).

/// A thread's run state and CPU time, as procfs shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadRun {
    /// State `R` in `/proc/TID/stat`: running, or waiting for a CPU
    /// (a SCHED_DEADLINE thread throttled by its budget counts here too).
    pub runnable: bool,
    /// CPU time used so far (ns), the first field of `/proc/TID/schedstat`.
    pub cpu_ns: u64,
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
