//! Where servers put their sockets, and the start-up check that keeps that
//! directory private.
//!
//! One directory per user, mode 0700: `$XDG_RUNTIME_DIR/resound` when that
//! variable names an existing directory, else `/tmp/resound-$UID`. A server
//! named `NAME` listens on `DIR/NAME.sock`. `RESOUND_DIR` overrides the
//! directory (tests use it to keep servers apart). With jackd's
//! `JACK_PROMISCUOUS_SERVER` set (and no `RESOUND_DIR`), servers and clients
//! of every user meet in the shared [`PROMISCUOUS_DIR`] instead, as jackd's
//! do in its shared directory; the server makes it group-accessible only
//! (see [`ensure_socket_dir`]).
//!
//! Threads: whoever asks (the server's main thread at start-up, clients when
//! they connect).

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

/// Name of the server when none is given (`-n`), as jackd's "default".
pub const DEFAULT_SERVER_NAME: &str = "default";

/// The shared directory of promiscuous servers (`JACK_PROMISCUOUS_SERVER`).
pub const PROMISCUOUS_DIR: &str = "/tmp/resound-shared";

/// The per-user directory (not created).
pub fn socket_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RESOUND_DIR") {
        return PathBuf::from(d);
    }
    if std::env::var_os("JACK_PROMISCUOUS_SERVER").is_some() {
        return PathBuf::from(PROMISCUOUS_DIR);
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

/// Creates the socket directory if missing (mode 0700; 0770 with its group
/// set to `group`) and checks it is private: a directory that is a symbolic
/// link, is not owned by this process's user, or that others may write
/// (world-writable, or group-writable without `group` or by another group)
/// is refused, never used or repaired, since anyone who could write there
/// may already have planted a socket. Read or search bits for others are
/// taken away. The caller refuses to start on an error.
pub fn ensure_socket_dir(group: Option<u32>) -> io::Result<PathBuf> {
    let dir = socket_dir();
    let mode = if group.is_some() { 0o770 } else { 0o700 };
    match std::fs::DirBuilder::new()
        .mode(mode)
        .recursive(true)
        .create(&dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    check_private_dir(&dir, group)?;
    if let Some(gid) = group {
        std::os::unix::fs::chown(&dir, None, Some(gid))?;
    }
    if std::fs::metadata(&dir)?.permissions().mode() & 0o7777 != mode {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(dir)
}

/// Refuses a socket directory that others control (see [`ensure_socket_dir`]).
pub fn check_private_dir(dir: &std::path::Path, group: Option<u32>) -> io::Result<()> {
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: {why}; refusing to use it (remove it, or point RESOUND_DIR at a directory only you can write)",
                dir.display()
            ),
        ))
    };
    let md = std::fs::symlink_metadata(dir)?;
    if md.file_type().is_symlink() {
        return refuse("is a symbolic link".into());
    }
    if !md.is_dir() {
        return refuse("is not a directory".into());
    }
    let uid = rustix::process::geteuid().as_raw();
    if md.uid() != uid {
        return refuse(format!(
            "belongs to uid {}, not to us (uid {uid})",
            md.uid()
        ));
    }
    check_ancestors(dir, uid).or_else(&refuse)?;
    let m = md.permissions().mode();
    if m & 0o002 != 0 {
        return refuse(format!("is writable by every user (mode {:o})", m & 0o7777));
    }
    if m & 0o020 != 0 && group != Some(md.gid()) {
        return refuse(format!(
            "is writable by group {} (mode {:o}) and no --allow-group lets that group in",
            md.gid(),
            m & 0o7777
        ));
    }
    Ok(())
}

/// Every directory above `dir` must be owned by us or root and, if others
/// may write it, sticky (as `/tmp`): else someone else could rename `dir`
/// away and put their own in its place. Err says which one and why.
fn check_ancestors(dir: &std::path::Path, uid: u32) -> Result<(), String> {
    let full = std::fs::canonicalize(dir).map_err(|e| e.to_string())?;
    for a in full.ancestors().skip(1) {
        let md = std::fs::metadata(a).map_err(|e| format!("{}: {e}", a.display()))?;
        let m = md.permissions().mode();
        if md.uid() != uid && md.uid() != 0 {
            return Err(format!(
                "its parent {} belongs to uid {}, who could replace it",
                a.display(),
                md.uid()
            ));
        }
        if m & 0o022 != 0 && m & 0o1000 == 0 {
            return Err(format!(
                "its parent {} is writable by others without the sticky bit (mode {:o}), so they could replace it",
                a.display(),
                m & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str, mode: u32) -> PathBuf {
        let d = std::env::temp_dir().join(format!("resound-paths-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    #[test]
    fn only_a_private_directory_passes() {
        let gid = rustix::process::getegid().as_raw();
        let cases = [
            (0o700, None, true),
            (0o755, None, true),
            (0o777, None, false),
            (0o1777, None, false),
            (0o770, None, false),
            (0o770, Some(gid), true),
            (0o770, Some(gid.wrapping_add(12345)), false),
            (0o707, Some(gid), false),
        ];
        for (i, (mode, group, ok)) in cases.into_iter().enumerate() {
            let d = dir(&i.to_string(), mode);
            let r = check_private_dir(&d, group);
            let _ = std::fs::remove_dir_all(&d);
            assert_eq!(r.is_ok(), ok, "mode {mode:o} group {group:?}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("refusing to use it"), "{e}");
            }
        }
    }

    #[test]
    fn a_directory_others_could_replace_is_refused() {
        let parent = dir("parent", 0o777);
        let d = parent.join("sock");
        std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        let loose = check_private_dir(&d, None);
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let sticky = check_private_dir(&d, None);
        let _ = std::fs::remove_dir_all(&parent);
        let e = loose.unwrap_err().to_string();
        assert!(e.contains("without the sticky bit"), "{e}");
        assert!(sticky.is_ok(), "{sticky:?}");
    }
}
