//! The perf-events plumbing of the kernel tracer: the `perf_event_attr`
//! struct, opening a tracepoint event for one thread on one CPU, attaching a
//! tracepoint filter, and reading the mmap ring buffer. Used on the tracer's
//! own thread only.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// `PERF_TYPE_TRACEPOINT`: `config` is a tracepoint id from tracefs.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW`.
const SAMPLE_TYPE: u64 = (1 << 1) | (1 << 2) | (1 << 10);
/// `PERF_FLAG_FD_CLOEXEC`: the new fd is close-on-exec.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `PERF_EVENT_IOC_ENABLE`.
const IOC_ENABLE: libc::c_ulong = 0x2400;
/// `PERF_EVENT_IOC_DISABLE`.
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// `PERF_EVENT_IOC_SET_OUTPUT` (`_IO('$', 5)`).
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// `PERF_EVENT_IOC_SET_FILTER` (`_IOW('$', 6, char *)`).
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// Bits of [`PerfEventAttr::flags`] (the kernel's bitfield, in order).
pub mod flag {
    /// Start disabled; enabled with an ioctl once everything is open.
    pub const DISABLED: u64 = 1 << 0;
    /// Children (threads and processes) the task creates get the event too.
    pub const INHERIT: u64 = 1 << 1;
    /// Emit `PERF_RECORD_COMM` when the task's name changes.
    pub const COMM: u64 = 1 << 9;
    /// Emit `PERF_RECORD_FORK` / `PERF_RECORD_EXIT` records.
    pub const TASK: u64 = 1 << 13;
    /// Wake readers by bytes (`wakeup_watermark`) rather than by events.
    pub const WATERMARK: u64 = 1 << 14;
    /// Mark COMM records caused by exec with `PERF_RECORD_MISC_COMM_EXEC`.
    pub const COMM_EXEC: u64 = 1 << 24;
    /// Timestamps from `clockid` rather than the perf clock.
    pub const USE_CLOCKID: u64 = 1 << 25;
}

/// `struct perf_event_attr` (`PERF_ATTR_SIZE_VER8`, 136 bytes), as the
/// kernel's `include/uapi/linux/perf_event.h` lays it out.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct PerfEventAttr {
    /// Major type of event (`PERF_TYPE_TRACEPOINT` here).
    pub type_: u32,
    /// Size of this struct, for the kernel's versioning.
    pub size: u32,
    /// Type-specific configuration: the tracepoint id.
    pub config: u64,
    /// Record a sample every this many events (1: every event).
    pub sample_period: u64,
    /// What each sample carries (`PERF_SAMPLE_*` bits).
    pub sample_type: u64,
    /// What `read()` on the fd returns (unused: 0).
    pub read_format: u64,
    /// The bitfield of options (see [`flag`]).
    pub flags: u64,
    /// Wake the reader after this many events (or bytes with `WATERMARK`).
    pub wakeup_events: u32,
    /// Breakpoint type (unused).
    pub bp_type: u32,
    /// Extension of `config` (unused).
    pub config1: u64,
    /// Further extension of `config` (unused).
    pub config2: u64,
    /// Branch sampling mask (unused).
    pub branch_sample_type: u64,
    /// User registers to dump with a sample (unused).
    pub sample_regs_user: u64,
    /// Bytes of user stack to dump with a sample (unused).
    pub sample_stack_user: u32,
    /// The clock of the timestamps when `USE_CLOCKID` is set.
    pub clockid: i32,
    /// Interrupted registers to dump (unused).
    pub sample_regs_intr: u64,
    /// AUX area watermark (unused).
    pub aux_watermark: u32,
    /// Largest call-chain depth (unused).
    pub sample_max_stack: u16,
    /// Reserved, zero.
    pub reserved_2: u16,
    /// AUX data per sample (unused).
    pub aux_sample_size: u32,
    /// Reserved, zero.
    pub reserved_3: u32,
    /// Data for a synchronous signal (unused).
    pub sig_data: u64,
    /// Extension of `config` (unused).
    pub config3: u64,
}

/// An attr for tracepoint `id`: every hit sampled with thread ids,
/// CLOCK_MONOTONIC time and the raw record; inherited by new threads.
pub fn tracepoint_attr(id: u64, task_records: bool) -> PerfEventAttr {
    let mut flags = flag::DISABLED | flag::INHERIT | flag::USE_CLOCKID | flag::WATERMARK;
    if task_records {
        flags |= flag::TASK | flag::COMM | flag::COMM_EXEC;
    }
    PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        sample_type: SAMPLE_TYPE,
        flags,
        wakeup_events: 4096,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    }
}

/// Open `attr` for thread `tid` on `cpu`.
pub fn open(attr: &PerfEventAttr, tid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` points to a live, fully initialised attr whose `size`
    // field says how much the kernel may read; the other arguments are plain
    // integers (no group fd, no flags but CLOEXEC).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            tid,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor; we own it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong, arg: usize) -> std::io::Result<()> {
    // SAFETY: `fd` is a perf event; every request used here takes an
    // integer or a pointer to a NUL-terminated string that outlives the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req, arg) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Keep only the records the tracepoint filter `expr` accepts.
pub fn set_filter(fd: &OwnedFd, expr: &std::ffi::CStr) -> std::io::Result<()> {
    ioctl(fd, IOC_SET_FILTER, expr.as_ptr() as usize)
}

/// Send `fd`'s records into `ring`'s buffer (same CPU).
pub fn set_output(fd: &OwnedFd, ring: &OwnedFd) -> std::io::Result<()> {
    ioctl(fd, IOC_SET_OUTPUT, ring.as_raw_fd() as usize)
}

/// Start or stop counting.
pub fn enable(fd: &OwnedFd, on: bool) -> std::io::Result<()> {
    ioctl(fd, if on { IOC_ENABLE } else { IOC_DISABLE }, 0)
}

/// Offsets in `struct perf_event_mmap_page` of `data_head`, `data_tail`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// One CPU's mmap ring buffer: a metadata page and 2^n data pages.
pub struct Ring {
    base: *mut u8,
    len: usize,
    data_size: usize,
    fd: OwnedFd,
}

impl Ring {
    /// Map a ring of `pages` (a power of two) data pages for `fd`.
    pub fn map(fd: OwnedFd, pages: usize) -> std::io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (pages + 1);
        // SAFETY: a fresh shared mapping of the perf fd, of the size perf
        // requires (1 + 2^n pages); checked for MAP_FAILED below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            base: base as *mut u8,
            len,
            data_size: page * pages,
            fd,
        })
    }

    /// The event fd the ring belongs to.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Hand every record now in the ring to `f` (its bytes, header first,
    /// copied out of the ring so wrapped records are whole), then free them.
    pub fn drain(&mut self, scratch: &mut Vec<u8>, mut f: impl FnMut(&[u8])) {
        // SAFETY: the metadata page is mapped for the ring's lifetime; the
        // kernel writes data_head, we write data_tail (u64, aligned).
        let head_ptr = unsafe { self.base.add(DATA_HEAD) } as *const u64;
        // SAFETY: DATA_TAIL is inside the same metadata page, mapped for
        // the ring's lifetime; only this reader writes data_tail.
        let tail_ptr = unsafe { self.base.add(DATA_TAIL) } as *mut u64;
        // SAFETY: aligned reads of mapped memory the kernel updates.
        let head = unsafe { std::ptr::read_volatile(head_ptr) };
        fence(Ordering::Acquire);
        // SAFETY: only this thread writes data_tail.
        let mut tail = unsafe { std::ptr::read_volatile(tail_ptr) };
        while tail + 8 <= head {
            let size = self.peek(tail, scratch, 8)[6..8]
                .iter()
                .rev()
                .fold(0usize, |a, &b| (a << 8) | b as usize);
            if size < 8 || tail + size as u64 > head {
                break;
            }
            f(self.peek(tail, scratch, size));
            tail += size as u64;
        }
        fence(Ordering::Release);
        // SAFETY: tells the kernel the space up to `tail` is free.
        unsafe { std::ptr::write_volatile(tail_ptr, tail) };
    }

    /// Copy `n` bytes at ring position `pos` (wrapping) into `scratch`.
    fn peek<'s>(&self, pos: u64, scratch: &'s mut Vec<u8>, n: usize) -> &'s [u8] {
        scratch.clear();
        let start = pos as usize % self.data_size;
        let first = n.min(self.data_size - start);
        // SAFETY: the data area starts one page (len - data_size) after the
        // base and is data_size bytes; both slices lie inside it.
        unsafe {
            let data = self.base.add(self.len - self.data_size);
            scratch.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            scratch.extend_from_slice(std::slice::from_raw_parts(data, n - first));
        }
        scratch
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this ring made, once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn attr_has_the_kernel_size() {
        assert_eq!(std::mem::size_of::<super::PerfEventAttr>(), 136);
    }
}
