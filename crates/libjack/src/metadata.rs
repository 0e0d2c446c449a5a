//! metadata.h and uuid.h. Properties live in the server; the functions
//! without a client argument (jack_get_property & co) ask through the most
//! recently opened client of this process, or a control session to the
//! default server when none is open.

use crate::client::client;
use crate::ffi::{self, *};
use resound_client::prelude::*;
use resound_client::{ControlSession, MetadataApi, Result as RResult};
use resound_protocol::wire::Property;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs a metadata query through a client of this process or a control session.
fn query<T>(f: impl FnOnce(&MetadataApi<'_>) -> RResult<T>) -> RResult<T> {
    let mut f = Some(f);
    let r = crate::registry::with_client(|c| {
        c.map(|c| (f.take().expect("once"))(&c.client.metadata()))
    });
    match r {
        Some(r) => r,
        None => {
            let s = ControlSession::connect(None, None)?;
            let r = (f.take().expect("once"))(&s.metadata());
            r
        }
    }
}

fn fill_description(desc: *mut jack_description_t, subject: u64, props: &[Property]) {
    // SAFETY: `desc` is writable (checked by callers); the property array is
    // malloc'ed with room for every entry, each string malloc'ed by strdup.
    unsafe {
        let arr = if props.is_empty() {
            std::ptr::null_mut()
        } else {
            libc::malloc(std::mem::size_of::<jack_property_t>() * props.len())
                as *mut jack_property_t
        };
        let mut n = 0u32;
        if !arr.is_null() {
            for (i, p) in props.iter().enumerate() {
                arr.add(i).write(jack_property_t {
                    key: ffi::strdup(&p.key),
                    data: ffi::strdup(&p.value),
                    type_: if p.type_name.is_empty() {
                        std::ptr::null()
                    } else {
                        ffi::strdup(&p.type_name)
                    },
                });
                n += 1;
            }
        }
        desc.write(jack_description_t {
            subject,
            property_cnt: n,
            properties: arr,
            property_size: n,
        });
    }
}

/// # Safety
/// `client` NULL or open; strings NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_set_property(
    client_: *mut c_void,
    subject: jack_uuid_t,
    key: *const c_char,
    value: *const c_char,
    ty: *const c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_set_property") }) else {
            return -1;
        };
        // SAFETY: per the function contract.
        let (Some(k), Some(v)) = (unsafe { ffi::str_arg(key) }, unsafe { ffi::str_arg(value) })
        else {
            ffi::error("jack_set_property: NULL key or value");
            return -1;
        };
        // SAFETY: per the function contract.
        let t = unsafe { ffi::str_arg(ty) }.unwrap_or_default();
        match lc.client.set_property(subject, &k, &v, &t) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_property: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `key` NULL or a C string; `value`, `type` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_get_property(
    subject: jack_uuid_t,
    key: *const c_char,
    value: *mut *mut c_char,
    ty: *mut *mut c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(k) = (unsafe { ffi::str_arg(key) }) else {
            ffi::error("jack_get_property: NULL key");
            return -1;
        };
        match query(|m| m.get(subject, &k)) {
            Ok(Some(p)) => {
                // SAFETY: per the function contract.
                unsafe {
                    if !value.is_null() {
                        *value = ffi::strdup(&p.value);
                    }
                    if !ty.is_null() {
                        *ty = if p.type_name.is_empty() {
                            std::ptr::null_mut()
                        } else {
                            ffi::strdup(&p.type_name)
                        };
                    }
                }
                0
            }
            Ok(None) => -1,
            Err(e) => {
                ffi::error(&format!("jack_get_property: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `desc` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_get_properties(
    subject: jack_uuid_t,
    desc: *mut jack_description_t,
) -> c_int {
    ffi::guard(-1, || {
        if desc.is_null() {
            ffi::error("jack_get_properties: NULL description");
            return -1;
        }
        match query(|m| m.get_all(subject)) {
            Ok(props) => {
                fill_description(desc, subject, &props);
                props.len() as c_int
            }
            Err(e) => {
                ffi::error(&format!("jack_get_properties: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `descs` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_get_all_properties(descs: *mut *mut jack_description_t) -> c_int {
    ffi::guard(-1, || {
        if descs.is_null() {
            ffi::error("jack_get_all_properties: NULL result pointer");
            return -1;
        }
        match query(|m| m.all()) {
            Ok(all) => {
                // SAFETY: a malloc'ed array with one entry per subject, each filled.
                unsafe {
                    let arr = if all.is_empty() {
                        std::ptr::null_mut()
                    } else {
                        libc::malloc(std::mem::size_of::<jack_description_t>() * all.len())
                            as *mut jack_description_t
                    };
                    if arr.is_null() && !all.is_empty() {
                        return -1;
                    }
                    for (i, (subject, props)) in all.iter().enumerate() {
                        fill_description(arr.add(i), *subject, props);
                    }
                    *descs = arr;
                }
                all.len() as c_int
            }
            Err(e) => {
                ffi::error(&format!("jack_get_all_properties: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `desc` NULL or a description filled by this library.
#[no_mangle]
pub unsafe extern "C" fn jack_free_description(desc: *mut jack_description_t, free_itself: c_int) {
    crate::ffi::guard((), || {
        if desc.is_null() {
            return;
        }
        // SAFETY: per the function contract: every pointer came from malloc here.
        unsafe {
            let d = &mut *desc;
            if !d.properties.is_null() {
                for i in 0..d.property_cnt as usize {
                    let p = &*d.properties.add(i);
                    libc::free(p.key as *mut c_void);
                    libc::free(p.data as *mut c_void);
                    libc::free(p.type_ as *mut c_void);
                }
                libc::free(d.properties as *mut c_void);
                d.properties = std::ptr::null_mut();
                d.property_cnt = 0;
            }
            if free_itself != 0 {
                libc::free(desc as *mut c_void);
            }
        }
    })
}

/// # Safety
/// `client` NULL or open; `key` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_remove_property(
    client_: *mut c_void,
    subject: jack_uuid_t,
    key: *const c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(k)) = (unsafe { client(client_, "jack_remove_property") }, unsafe {
            ffi::str_arg(key)
        }) else {
            return -1;
        };
        match lc.client.remove_property(subject, &k) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_remove_property: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_remove_properties(
    client_: *mut c_void,
    subject: jack_uuid_t,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_remove_properties") }) else {
            return -1;
        };
        match lc.client.remove_properties(subject) {
            Ok(n) => n as c_int,
            Err(e) => {
                ffi::error(&format!("jack_remove_properties: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_remove_all_properties(client_: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_remove_all_properties") }) else {
            return -1;
        };
        match lc.client.remove_all_properties() {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_remove_all_properties: {e}"));
                -1
            }
        }
    })
}

// ---- uuid.h --------------------------------------------------------------

const CLIENT_TYPE: u64 = 2 << 32;
const PORT_TYPE: u64 = 1 << 32;
static GENERATED: AtomicU32 = AtomicU32::new(0);

#[no_mangle]
pub extern "C" fn jack_client_uuid_generate() -> jack_uuid_t {
    crate::ffi::guard(0, || {
        CLIENT_TYPE | (GENERATED.fetch_add(1, Ordering::Relaxed).wrapping_add(1)) as u64
    })
}

#[no_mangle]
pub extern "C" fn jack_port_uuid_generate(port_id: u32) -> jack_uuid_t {
    crate::ffi::guard(0, || PORT_TYPE | port_id.wrapping_add(1) as u64)
}

#[no_mangle]
pub extern "C" fn jack_uuid_to_index(u: jack_uuid_t) -> u32 {
    crate::ffi::guard(0, || ((u & 0xffff) as u32).wrapping_sub(1))
}

#[no_mangle]
pub extern "C" fn jack_uuid_compare(a: jack_uuid_t, b: jack_uuid_t) -> c_int {
    crate::ffi::guard(0, || match a.cmp(&b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })
}

/// # Safety
/// `dst` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_uuid_copy(dst: *mut jack_uuid_t, src: jack_uuid_t) {
    crate::ffi::guard((), || {
        if !dst.is_null() {
            // SAFETY: per the function contract.
            unsafe { *dst = src };
        }
    })
}

/// # Safety
/// `u` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_uuid_clear(u: *mut jack_uuid_t) {
    crate::ffi::guard((), || {
        if !u.is_null() {
            // SAFETY: per the function contract.
            unsafe { *u = 0 };
        }
    })
}

/// Parses a decimal UUID; 0 on success, -1 when malformed or without type bits.
///
/// # Safety
/// `buf` NULL or a C string; `u` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_uuid_parse(buf: *const c_char, u: *mut jack_uuid_t) -> c_int {
    crate::ffi::guard(-1, || {
        if buf.is_null() || u.is_null() {
            return -1;
        }
        // SAFETY: per the function contract.
        let s = unsafe { CStr::from_ptr(buf) }.to_string_lossy();
        match parse_uuid(&s) {
            Some(v) => {
                // SAFETY: per the function contract.
                unsafe { *u = v };
                0
            }
            None => -1,
        }
    })
}

/// A decimal UUID with type bits, as jack_uuid_parse accepts it.
pub fn parse_uuid(s: &str) -> Option<u64> {
    let digits: String = s
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let v: u64 = digits.parse().ok()?;
    (v >= 1 << 32).then_some(v)
}

/// # Safety
/// `buf` NULL or 37 writable bytes (JACK_UUID_STRING_SIZE).
#[no_mangle]
pub unsafe extern "C" fn jack_uuid_unparse(u: jack_uuid_t, buf: *mut c_char) {
    crate::ffi::guard((), || {
        // SAFETY: per the function contract.
        unsafe { ffi::copy_to(buf, 37, &u.to_string()) }
    })
}

#[no_mangle]
pub extern "C" fn jack_uuid_empty(u: jack_uuid_t) -> c_int {
    crate::ffi::guard(0, || (u == 0) as c_int)
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_client_get_uuid(client_: *mut c_void) -> *mut c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        match unsafe { client(client_, "jack_client_get_uuid") } {
            Some(lc) => ffi::strdup(&lc.client.uuid().to_string()),
            None => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// `client` NULL or open; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_get_uuid_for_client_name(
    client_: *mut c_void,
    name: *const c_char,
) -> *mut c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(n)) = (
            unsafe { client(client_, "jack_get_uuid_for_client_name") },
            unsafe { ffi::str_arg(name) },
        ) else {
            return std::ptr::null_mut();
        };
        match lc.client.clients().into_iter().find(|c| c.name == n) {
            Some(c) => ffi::strdup(&c.uuid.to_string()),
            None => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// `client` NULL or open; `uuid` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_get_client_name_by_uuid(
    client_: *mut c_void,
    uuid: *const c_char,
) -> *mut c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(u)) = (
            unsafe { client(client_, "jack_get_client_name_by_uuid") },
            unsafe { ffi::str_arg(uuid) },
        ) else {
            return std::ptr::null_mut();
        };
        let Some(u) = parse_uuid(&u) else {
            return std::ptr::null_mut();
        };
        match lc.client.clients().into_iter().find(|c| c.uuid == u) {
            Some(c) => ffi::strdup(&c.name),
            None => std::ptr::null_mut(),
        }
    })
}

/// Process id of a client of the server this process is connected to (0 if unknown).
///
/// # Safety
/// `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_get_client_pid(name: *const c_char) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(n) = (unsafe { ffi::str_arg(name) }) else {
            return 0;
        };
        crate::registry::with_client(|c| {
            c.and_then(|c| c.client.clients().into_iter().find(|x| x.name == n))
                .map_or(0, |x| x.pid as c_int)
        })
    })
}
