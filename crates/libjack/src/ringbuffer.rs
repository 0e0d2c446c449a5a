//! ringbuffer.h: JACK's lock-free single-producer single-consumer byte ring,
//! on the structure layout the header exposes (programs may read its
//! fields). One thread writes, one reads; the read and write indices are
//! accessed atomically (release after copying data, acquire before), which
//! is what makes the ring safe across threads without locks.

use crate::ffi::{jack_ringbuffer_data_t, jack_ringbuffer_t};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The write index as an atomic.
///
/// # Safety
/// `rb` points to a live ring.
unsafe fn wp<'a>(rb: *mut jack_ringbuffer_t) -> &'a AtomicUsize {
    // SAFETY: AtomicUsize has the layout of usize; the field is aligned.
    unsafe { AtomicUsize::from_ptr(std::ptr::addr_of_mut!((*rb).write_ptr)) }
}

/// The read index as an atomic.
///
/// # Safety
/// `rb` points to a live ring.
unsafe fn rp<'a>(rb: *mut jack_ringbuffer_t) -> &'a AtomicUsize {
    // SAFETY: as in `wp`.
    unsafe { AtomicUsize::from_ptr(std::ptr::addr_of_mut!((*rb).read_ptr)) }
}

/// The two pieces (before and after the wrap) of a run of `n` bytes starting
/// at index `pos` of a ring of `size` bytes.
fn pieces(pos: usize, n: usize, size: usize, mask: usize) -> (usize, usize) {
    if pos + n > size {
        (size - pos, (pos + n) & mask)
    } else {
        (n, 0)
    }
}

/// Writes the two (pointer, length) pieces of a run of `n` bytes at `pos`.
///
/// # Safety
/// `rb` is a live ring, `pos` < its size; `vec` has two writable entries.
unsafe fn write_vector(
    rb: *mut jack_ringbuffer_t,
    pos: usize,
    n: usize,
    vec: *mut jack_ringbuffer_data_t,
) {
    // SAFETY: per the function contract; buf + pos stays inside the buffer.
    unsafe {
        let (size, mask, buf) = ((*rb).size, (*rb).size_mask, (*rb).buf);
        let (n1, n2) = pieces(pos, n, size, mask);
        vec.write(jack_ringbuffer_data_t {
            buf: buf.add(pos),
            len: n1,
        });
        vec.add(1).write(jack_ringbuffer_data_t { buf, len: n2 });
    }
}

/// Creates a ring of at least `sz` bytes (a power of two; it holds one less).
#[no_mangle]
pub extern "C" fn jack_ringbuffer_create(sz: usize) -> *mut jack_ringbuffer_t {
    crate::ffi::guard(std::ptr::null_mut(), || {
        let mut power = 1u32;
        while power < usize::BITS - 1 && (1usize << power) < sz {
            power += 1;
        }
        let size = 1usize << power;
        // SAFETY: two mallocs, checked; the struct is fully initialised before use.
        unsafe {
            let rb =
                libc::malloc(std::mem::size_of::<jack_ringbuffer_t>()) as *mut jack_ringbuffer_t;
            if rb.is_null() {
                return rb;
            }
            let buf = libc::malloc(size) as *mut c_char;
            if buf.is_null() {
                libc::free(rb as *mut libc::c_void);
                return std::ptr::null_mut();
            }
            rb.write(jack_ringbuffer_t {
                buf,
                write_ptr: 0,
                read_ptr: 0,
                size,
                size_mask: size - 1,
                mlocked: 0,
            });
            rb
        }
    })
}

/// # Safety
/// `rb` is NULL or a ring from jack_ringbuffer_create, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_free(rb: *mut jack_ringbuffer_t) {
    crate::ffi::guard((), || {
        if rb.is_null() {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            if (*rb).mlocked != 0 {
                libc::munlock((*rb).buf as *const libc::c_void, (*rb).size);
            }
            libc::free((*rb).buf as *mut libc::c_void);
            libc::free(rb as *mut libc::c_void);
        }
    })
}

/// # Safety
/// `rb` is NULL or a live ring.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_mlock(rb: *mut jack_ringbuffer_t) -> c_int {
    crate::ffi::guard(-1, || {
        if rb.is_null() {
            return -1;
        }
        // SAFETY: per the function contract.
        unsafe {
            if libc::mlock((*rb).buf as *const libc::c_void, (*rb).size) != 0 {
                return -1;
            }
            (*rb).mlocked = 1;
        }
        0
    })
}

/// # Safety
/// `rb` is NULL or a live ring no other thread uses meanwhile.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_reset(rb: *mut jack_ringbuffer_t) {
    crate::ffi::guard((), || {
        if rb.is_null() {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            rp(rb).store(0, Ordering::Release);
            wp(rb).store(0, Ordering::Release);
            std::ptr::write_bytes((*rb).buf, 0, (*rb).size);
        }
    })
}

/// Resets the ring to `sz` bytes, which must be a power of two not larger
/// than its allocation (as in JACK).
///
/// # Safety
/// `rb` is NULL or a live ring no other thread uses meanwhile.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_reset_size(rb: *mut jack_ringbuffer_t, sz: usize) {
    crate::ffi::guard((), || {
        if rb.is_null() || sz == 0 {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            (*rb).size = sz;
            (*rb).size_mask = sz - 1;
            rp(rb).store(0, Ordering::Release);
            wp(rb).store(0, Ordering::Release);
        }
    })
}

/// # Safety
/// `rb` is NULL or a live ring.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_read_space(rb: *const jack_ringbuffer_t) -> usize {
    crate::ffi::guard(0, || {
        if rb.is_null() {
            return 0;
        }
        let rb = rb as *mut jack_ringbuffer_t;
        // SAFETY: per the function contract.
        unsafe {
            let w = wp(rb).load(Ordering::Acquire);
            let r = rp(rb).load(Ordering::Relaxed);
            if w > r {
                w - r
            } else {
                (w.wrapping_sub(r).wrapping_add((*rb).size)) & (*rb).size_mask
            }
        }
    })
}

/// # Safety
/// `rb` is NULL or a live ring.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_write_space(rb: *const jack_ringbuffer_t) -> usize {
    crate::ffi::guard(0, || {
        if rb.is_null() {
            return 0;
        }
        let rb = rb as *mut jack_ringbuffer_t;
        // SAFETY: per the function contract.
        unsafe {
            let w = wp(rb).load(Ordering::Relaxed);
            let r = rp(rb).load(Ordering::Acquire);
            if w > r {
                ((r.wrapping_sub(w).wrapping_add((*rb).size)) & (*rb).size_mask) - 1
            } else if w < r {
                r - w - 1
            } else {
                (*rb).size - 1
            }
        }
    })
}

/// Copies up to `cnt` readable bytes out; `advance` moves the read index.
unsafe fn read_impl(
    rb: *mut jack_ringbuffer_t,
    dest: *mut c_char,
    cnt: usize,
    advance: bool,
) -> usize {
    // SAFETY: the callers' contract: a live ring and `cnt` writable bytes at dest.
    unsafe {
        let avail = jack_ringbuffer_read_space(rb);
        let n = cnt.min(avail);
        if n == 0 {
            return 0;
        }
        let (size, mask, buf) = ((*rb).size, (*rb).size_mask, (*rb).buf);
        let r = rp(rb).load(Ordering::Relaxed);
        let (n1, n2) = pieces(r, n, size, mask);
        std::ptr::copy_nonoverlapping(buf.add(r), dest, n1);
        if n2 > 0 {
            std::ptr::copy_nonoverlapping(buf, dest.add(n1), n2);
        }
        if advance {
            rp(rb).store((r + n) & mask, Ordering::Release);
        }
        n
    }
}

/// # Safety
/// `rb` NULL or a live ring (reader side); `dest` has `cnt` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_read(
    rb: *mut jack_ringbuffer_t,
    dest: *mut c_char,
    cnt: usize,
) -> usize {
    crate::ffi::guard(0, || {
        if rb.is_null() || dest.is_null() {
            return 0;
        }
        // SAFETY: per the function contract.
        unsafe { read_impl(rb, dest, cnt, true) }
    })
}

/// # Safety
/// As jack_ringbuffer_read.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_peek(
    rb: *mut jack_ringbuffer_t,
    dest: *mut c_char,
    cnt: usize,
) -> usize {
    crate::ffi::guard(0, || {
        if rb.is_null() || dest.is_null() {
            return 0;
        }
        // SAFETY: per the function contract.
        unsafe { read_impl(rb, dest, cnt, false) }
    })
}

/// # Safety
/// `rb` NULL or a live ring (writer side); `src` has `cnt` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_write(
    rb: *mut jack_ringbuffer_t,
    src: *const c_char,
    cnt: usize,
) -> usize {
    crate::ffi::guard(0, || {
        if rb.is_null() || src.is_null() {
            return 0;
        }
        // SAFETY: per the function contract.
        unsafe {
            let n = cnt.min(jack_ringbuffer_write_space(rb));
            if n == 0 {
                return 0;
            }
            let (size, mask, buf) = ((*rb).size, (*rb).size_mask, (*rb).buf);
            let w = wp(rb).load(Ordering::Relaxed);
            let (n1, n2) = pieces(w, n, size, mask);
            std::ptr::copy_nonoverlapping(src, buf.add(w), n1);
            if n2 > 0 {
                std::ptr::copy_nonoverlapping(src.add(n1), buf, n2);
            }
            wp(rb).store((w + n) & mask, Ordering::Release);
            n
        }
    })
}

/// # Safety
/// `rb` NULL or a live ring (reader side); `cnt` ≤ the read space.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_read_advance(rb: *mut jack_ringbuffer_t, cnt: usize) {
    crate::ffi::guard((), || {
        if rb.is_null() {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            let r = rp(rb).load(Ordering::Relaxed);
            rp(rb).store(r.wrapping_add(cnt) & (*rb).size_mask, Ordering::Release);
        }
    })
}

/// # Safety
/// `rb` NULL or a live ring (writer side); `cnt` ≤ the write space.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_write_advance(rb: *mut jack_ringbuffer_t, cnt: usize) {
    crate::ffi::guard((), || {
        if rb.is_null() {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            let w = wp(rb).load(Ordering::Relaxed);
            wp(rb).store(w.wrapping_add(cnt) & (*rb).size_mask, Ordering::Release);
        }
    })
}

/// Two (pointer, length) pieces covering the readable data.
///
/// # Safety
/// `rb` NULL or a live ring; `vec` NULL or two writable entries.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_get_read_vector(
    rb: *const jack_ringbuffer_t,
    vec: *mut jack_ringbuffer_data_t,
) {
    crate::ffi::guard((), || {
        if rb.is_null() || vec.is_null() {
            return;
        }
        let rb = rb as *mut jack_ringbuffer_t;
        // SAFETY: per the function contract.
        unsafe {
            let avail = jack_ringbuffer_read_space(rb);
            write_vector(rb, rp(rb).load(Ordering::Relaxed), avail, vec);
        }
    })
}

/// Two (pointer, length) pieces covering the writable space.
///
/// # Safety
/// `rb` NULL or a live ring; `vec` NULL or two writable entries.
#[no_mangle]
pub unsafe extern "C" fn jack_ringbuffer_get_write_vector(
    rb: *const jack_ringbuffer_t,
    vec: *mut jack_ringbuffer_data_t,
) {
    crate::ffi::guard((), || {
        if rb.is_null() || vec.is_null() {
            return;
        }
        let rb = rb as *mut jack_ringbuffer_t;
        // SAFETY: per the function contract.
        unsafe {
            let free = jack_ringbuffer_write_space(rb);
            write_vector(rb, wp(rb).load(Ordering::Relaxed), free, vec);
        }
    })
}
