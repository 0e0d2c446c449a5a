//! JACK internal clients from shared objects (`jack_load NAME OBJECT`,
//! `jack_internal_client_load`): an object exporting `jack_initialize` and
//! `jack_finish`, as the distribution ships them in its JACK
//! internal-clients directory (`inprocess.so`, ...), runs inside `resoundd`.
//!
//! The server loads its own `libjack.so.0` (the one next to `resoundd`)
//! into itself with `RTLD_GLOBAL` first, so every JACK function the object
//! calls resolves to resound's, ahead of whatever JACK library the object
//! itself was linked with (jackd2's internal clients need
//! `libjackserver.so.0`, which is loaded but never called). The object's
//! client is an ordinary client of the server, opened in-process through
//! the server's socket like the built-in ones; `jack_initialize` gets it
//! with the load's init string, `jack_finish` gets its process argument
//! when it is unloaded, as on jackd.
//!
//! Only bare object names are accepted (no `/`, no `..`): the server opens
//! `NAME.so` in `$RESOUND_INTERNAL_DIR` (set when `resoundd` starts) or the
//! distribution's JACK directories, never a path a client chooses.
//!
//! Threads: the session thread that loads or unloads (without the server's
//! state lock: opening the client goes through the socket).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where JACK internal clients are looked for, after `$RESOUND_INTERNAL_DIR`.
const JACK_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/jack",
    "/usr/lib/aarch64-linux-gnu/jack",
    "/usr/lib/jack",
    "/usr/local/lib/jack",
];

type OpenInServer =
    unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, *mut c_int) -> *mut c_void;
type ClientFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type CloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type Initialize = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;
type Finish = unsafe extern "C" fn(*mut c_void);

/// resound's JACK library, loaded into the server.
struct Api {
    open: OpenInServer,
    process_arg: ClientFn,
    uuid: ClientFn,
    close: CloseFn,
    free: FreeFn,
}

/// A loaded internal client object.
pub struct ObjectClient {
    /// `dlopen` handle of the object.
    object: *mut c_void,
    /// Its `jack_client_t *` (from resound's libjack).
    client: *mut c_void,
    finish: Option<Finish>,
    api: &'static Api,
    /// Client uuid.
    pub uuid: u64,
}

// SAFETY: the handles are process-global objects of the dynamic loader and
// of libjack, usable from any thread; the server moves an ObjectClient
// between its session threads under the internal clients' mutex only.
unsafe impl Send for ObjectClient {}

/// The last `dlerror` message.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a C string valid until the next dl*
    // call on this thread, copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Symbol `name` of `handle` as a function pointer of type `T`.
///
/// # Safety
/// `handle` is a live dlopen handle and `T` is the symbol's function type.
unsafe fn symbol<T: Copy>(handle: *mut c_void, name: &str) -> Result<T, String> {
    let c = CString::new(name).expect("no NUL in symbol names");
    // SAFETY: per the function contract, `handle` is live; `c` is a C string.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("no symbol {name}: {}", dl_error()));
    }
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is a function pointer type (same size as a data pointer
    // on this platform, checked above) and the caller names its real type.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// resound's libjack.so.0 loaded globally into the server (once).
fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load_api).as_ref().map_err(|e| e.clone())
}

fn load_api() -> Result<Api, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find resoundd: {e}"))?;
    let lib = exe.with_file_name("libjack.so.0");
    let c = CString::new(lib.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a C string path; RTLD_GLOBAL makes its symbols
    // resolve the JACK calls of objects loaded after it.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        return Err(format!("cannot load {}: {}", lib.display(), dl_error()));
    }
    // SAFETY: `h` is live for the rest of the process (never closed) and
    // each type is the exported function's C signature.
    unsafe {
        Ok(Api {
            open: symbol(h, "resound_libjack_open_in_server")?,
            process_arg: symbol(h, "resound_libjack_process_arg")?,
            uuid: symbol(h, "jack_client_get_uuid")?,
            close: symbol(h, "jack_client_close")?,
            free: symbol(h, "jack_free")?,
        })
    }
}

/// The object file for `load_name`, if the name is a bare one and the file exists.
pub fn find(load_name: &str) -> Option<PathBuf> {
    let bare = !load_name.is_empty()
        && !load_name.contains("..")
        && load_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !bare {
        return None;
    }
    let file = if load_name.ends_with(".so") {
        load_name.to_string()
    } else {
        format!("{load_name}.so")
    };
    let env = std::env::var_os("RESOUND_INTERNAL_DIR").map(PathBuf::from);
    env.into_iter()
        .chain(JACK_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
}

impl ObjectClient {
    /// Loads `path`, opens client `name` on server `server` (socket
    /// directory `dir`) and runs the object's `jack_initialize` with `init`.
    pub fn load(
        path: &Path,
        name: &str,
        server: &str,
        dir: &Path,
        init: &str,
    ) -> Result<ObjectClient, String> {
        let api = api()?;
        let object = open_object(path)?;
        // SAFETY: `object` is live; the types are the JACK internal-client
        // entry points' C signatures.
        let (initialize, finish) = unsafe {
            (
                symbol::<Initialize>(object, "jack_initialize"),
                symbol::<Finish>(object, "jack_finish").ok(),
            )
        };
        let initialize = initialize.inspect_err(|_| close_object(object))?;
        let client = open_client(api, name, server, dir).inspect_err(|_| close_object(object))?;
        let init = CString::new(init).unwrap_or_default();
        // SAFETY: the object's entry point with a live client of resound's
        // libjack and a C string, as jackd calls it.
        let r = unsafe { initialize(client, init.as_ptr()) };
        let me = ObjectClient {
            object,
            client,
            finish,
            api,
            uuid: client_uuid(api, client),
        };
        if r != 0 {
            me.unload();
            return Err(format!("its jack_initialize failed ({r})"));
        }
        Ok(me)
    }

    /// Closes the object's client, calls its `jack_finish` with the
    /// client's process argument and unloads it. In that order, as jackd:
    /// closing deactivates the client and waits for its process thread to
    /// stop, and `jack_finish` frees what the process callback uses (the
    /// distribution's inprocess.so frees its port pair there).
    pub fn unload(self) {
        // SAFETY: the client is open (closed only here) and the object is
        // live. The process argument is read while the client is still open;
        // it is the object's own pointer, which closing does not touch.
        unsafe {
            let arg = (self.api.process_arg)(self.client);
            (self.api.close)(self.client);
            if let Some(f) = self.finish {
                f(arg);
            }
        }
        close_object(self.object);
    }
}

fn open_object(path: &Path) -> Result<*mut c_void, String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a C string path of a file the server chose.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        Err(format!("cannot load {}: {}", path.display(), dl_error()))
    } else {
        Ok(h)
    }
}

fn close_object(h: *mut c_void) {
    // SAFETY: `h` is a live handle from open_object, closed once.
    unsafe { libc::dlclose(h) };
}

fn open_client(api: &Api, name: &str, server: &str, dir: &Path) -> Result<*mut c_void, String> {
    let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
    let (n, s, d) = (c(name)?, c(server)?, c(&dir.to_string_lossy())?);
    let mut st = 0;
    // SAFETY: three C strings and a writable int, per the function's contract.
    let client = unsafe { (api.open)(n.as_ptr(), s.as_ptr(), d.as_ptr(), &mut st) };
    if client.is_null() {
        Err(format!("cannot open its client {name:?} (status {st:#x})"))
    } else {
        Ok(client)
    }
}

fn client_uuid(api: &Api, client: *mut c_void) -> u64 {
    // SAFETY: `client` is open; the returned string is freed with jack_free.
    unsafe {
        let p = (api.uuid)(client) as *mut c_char;
        if p.is_null() {
            return 0;
        }
        let u = CStr::from_ptr(p).to_str().ok().and_then(|s| s.parse().ok());
        (api.free)(p as *mut c_void);
        u.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::find;

    #[test]
    fn only_bare_names_are_looked_up() {
        for bad in [
            "",
            "../x",
            "/usr/lib/x86_64-linux-gnu/jack/inprocess",
            "a/b",
            "x\0y",
        ] {
            assert_eq!(find(bad), None, "{bad:?}");
        }
    }
}
