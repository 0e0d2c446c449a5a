//! Where servers put their sockets.
//!
//! One directory per user, mode 0700: `$XDG_RUNTIME_DIR/resound` when that
//! variable names an existing directory, else `/tmp/resound-$UID`. A server
//! named `NAME` listens on `DIR/NAME.sock`. `RESOUND_DIR` overrides the
//! directory (tests use it to keep servers apart).

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

/// Name of the server when none is given (`-n`), as jackd's "default".
pub const DEFAULT_SERVER_NAME: &str = "default";

/// The per-user directory (not created).
pub fn socket_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RESOUND_DIR") {
        return PathBuf::from(d);
    }
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        let p = PathBuf::from(x);
        if p.is_dir() {
            return p.join("resound");
        }
    }
    PathBuf::from(format!(
        "/tmp/resound-{}",
        rustix::process::getuid().as_raw()
    ))
}

/// Server name to use: the explicit one, else `$RESOUND_SERVER`, else `$JACK_DEFAULT_SERVER`, else "default".
pub fn server_name(explicit: Option<&str>) -> String {
    if let Some(n) = explicit {
        return n.to_string();
    }
    for var in ["RESOUND_SERVER", "JACK_DEFAULT_SERVER"] {
        if let Ok(v) = std::env::var(var) {
            if !v.is_empty() {
                return v;
            }
        }
    }
    DEFAULT_SERVER_NAME.to_string()
}

/// Socket path of a named server.
pub fn socket_path(server: &str) -> PathBuf {
    socket_dir().join(format!("{server}.sock"))
}

/// Validates a server name: used in a file name, so no '/' and not empty.
pub fn check_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 || name.contains('/') || name.starts_with('.') {
        return Err(format!(
            "invalid server name {name:?}: 1 to 63 bytes, no '/', not starting with '.'"
        ));
    }
    Ok(())
}

/// Creates the directory with mode 0700 if missing, and refuses one that is
/// not ours or that others can enter.
pub fn ensure_socket_dir() -> io::Result<PathBuf> {
    let dir = socket_dir();
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let md = std::fs::metadata(&dir)?;
    let uid = rustix::process::getuid().as_raw();
    if md.uid() != uid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {}, not to us (uid {uid})",
                dir.display(),
                md.uid()
            ),
        ));
    }
    if md.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}
