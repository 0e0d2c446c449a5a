//! Port queries: jack_get_ports (POSIX extended regular expressions on
//! names and types, as jackd), jack_port_by_name, jack_port_by_id.
//! Application threads.

use crate::client::client;
use crate::ffi::{self, *};
use crate::port::intern;
use resound_client::PortSnap;
use std::ffi::{c_char, c_ulong, c_void, CStr};

/// A compiled POSIX extended regular expression (jackd matches port names
/// and types with regcomp/regexec, so the same patterns mean the same here).
struct Regex(libc::regex_t);

impl Regex {
    fn new(pattern: &CStr) -> Option<Regex> {
        // SAFETY: regex_t is plain data; regcomp initialises it and we only use
        // it (and regfree it) after success.
        unsafe {
            let mut r: libc::regex_t = std::mem::zeroed();
            if libc::regcomp(
                &mut r,
                pattern.as_ptr(),
                libc::REG_EXTENDED | libc::REG_NOSUB,
            ) != 0
            {
                return None;
            }
            Some(Regex(r))
        }
    }

    fn is_match(&self, s: &str) -> bool {
        let Ok(c) = std::ffi::CString::new(s) else {
            return false;
        };
        // SAFETY: a compiled regex and a valid C string; no match array.
        unsafe { libc::regexec(&self.0, c.as_ptr(), 0, std::ptr::null_mut(), 0) == 0 }
    }
}

impl Drop for Regex {
    fn drop(&mut self) {
        // SAFETY: compiled by regcomp in `new`.
        unsafe { libc::regfree(&mut self.0) }
    }
}

/// # Safety
/// `client` NULL or open; the patterns NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_get_ports(
    client_: *mut c_void,
    port_pattern: *const c_char,
    type_pattern: *const c_char,
    flags: c_ulong,
) -> *mut *const c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_get_ports") }) else {
            return std::ptr::null_mut();
        };
        let compile = |p: *const c_char| -> Result<Option<Regex>, ()> {
            if p.is_null() {
                return Ok(None);
            }
            // SAFETY: per the function contract.
            let c = unsafe { CStr::from_ptr(p) };
            if c.is_empty() {
                return Ok(None);
            }
            Regex::new(c).map(Some).ok_or(())
        };
        let (Ok(pr), Ok(tr)) = (compile(port_pattern), compile(type_pattern)) else {
            ffi::error("jack_get_ports: cannot compile a regular expression");
            return std::ptr::null_mut();
        };
        let flags = flags as u32;
        let names: Vec<String> = lc
            .client
            .snapshot_now()
            .ports
            .iter()
            .filter(|p: &&PortSnap| p.flags & flags == flags)
            .filter(|p| pr.as_ref().is_none_or(|r| r.is_match(&p.name)))
            .filter(|p| tr.as_ref().is_none_or(|r| r.is_match(p.type_name)))
            .map(|p| p.name.clone())
            .collect();
        ffi::string_array(&names)
    })
}

/// # Safety
/// `client` NULL or open; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_by_name(
    client_: *mut c_void,
    name: *const c_char,
) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_port_by_name") }) else {
            return std::ptr::null_mut();
        };
        // SAFETY: per the function contract.
        let Some(n) = (unsafe { ffi::str_arg(name) }) else {
            ffi::error("jack_port_by_name: called with a NULL port name");
            return std::ptr::null_mut();
        };
        match lc.client.snapshot_now().port(&n) {
            Some(p) => intern(lc, p.id),
            None => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_by_id(client_: *mut c_void, id: jack_port_id_t) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_port_by_id") }) else {
            return std::ptr::null_mut();
        };
        if lc.departing_name(id).is_some() {
            return intern(lc, id);
        }
        let t = lc.client.table(lc.client.current_table_index());
        match t.port_info(id) {
            Some((1, ..)) => intern(lc, id),
            _ => std::ptr::null_mut(),
        }
    })
}
