//! Who may talk to the server: the peer's credentials (SO_PEERCRED and
//! SO_PEERGROUPS) checked on every connection before anything but a refusal
//! is sent, with one rate-limited log line per refusal; and whose threads a
//! session may name (a thread of its own process for `Activate`, a thread
//! of a process of its own user for `ReserveExternal`).
//!
//! The rule: the server's own user and root may connect (root can read
//! and trace the server anyway, so refusing it protects nothing, and jackd
//! lets it in too); with `--allow-group GROUP` (or jackd's
//! `JACK_PROMISCUOUS_SERVER=GROUP`) so may members of GROUP (primary or
//! supplementary); everyone else is refused.
//!
//! Threads: [`Access::resolve`] on the main thread at start-up; the checks
//! on session threads (without the state lock).

use super::log_limit::{more, SharedLogLimit};
use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use tracing::warn;

/// The credentials of a connected peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Peer {
    /// Process id (0 if unknown).
    pub(super) pid: u32,
    /// Effective user id when it connected.
    pub(super) uid: u32,
    /// Effective group id when it connected.
    pub(super) gid: u32,
}

impl Peer {
    /// The peer of `stream`, from SO_PEERCRED; None if the kernel does not say.
    pub(super) fn of(stream: &UnixStream) -> Option<Peer> {
        let c = rustix::net::sockopt::socket_peercred(stream).ok()?;
        Some(Peer {
            pid: c.pid.as_raw_nonzero().get() as u32,
            uid: c.uid.as_raw(),
            gid: c.gid.as_raw(),
        })
    }
}

/// The access policy of one server.
pub(super) struct Access {
    /// The server's effective uid.
    uid: u32,
    /// The server's user name, for messages.
    user: String,
    /// The group let in, with its name (`--allow-group`).
    group: Option<(u32, String)>,
    /// Limits the refusal log lines.
    log: SharedLogLimit,
}

impl Access {
    /// The policy from `--allow-group`, else `JACK_PROMISCUOUS_SERVER`
    /// (empty: the server's primary group). An unknown group is an error.
    pub(super) fn resolve(allow_group: Option<&str>) -> Result<Access, String> {
        let uid = rustix::process::geteuid().as_raw();
        let env = std::env::var("JACK_PROMISCUOUS_SERVER").ok();
        let group = match allow_group.or(env.as_deref()) {
            None => None,
            Some("") => {
                let gid = rustix::process::getegid().as_raw();
                Some((gid, group_name(gid)))
            }
            Some(g) => Some(lookup_group(g)?),
        };
        Ok(Access {
            uid,
            user: user_name(uid),
            group,
            log: SharedLogLimit::default(),
        })
    }

    /// The gid of the group let in, if any.
    pub(super) fn group(&self) -> Option<u32> {
        self.group.as_ref().map(|g| g.0)
    }

    /// Whether `peer` on `stream` may use server `server`; the refusal
    /// message otherwise (also logged, rate-limited).
    pub(super) fn admit(
        &self,
        server: &str,
        stream: &UnixStream,
        peer: &Peer,
    ) -> Result<(), String> {
        if peer.uid == self.uid || peer.uid == 0 {
            return Ok(());
        }
        if let Some((gid, _)) = &self.group {
            if peer.gid == *gid || peer_groups(stream, peer.pid).contains(gid) {
                return Ok(());
            }
        }
        let why = match &self.group {
            None => "start it with --allow-group GROUP to let a group in".to_string(),
            Some((_, g)) => format!("it lets in members of group {g} only"),
        };
        let m = format!(
            "resoundd {server} runs as user {}; user {} may not use it ({why})",
            self.user,
            user_name(peer.uid)
        );
        self.log_refusal(&m, peer.pid);
        Err(m)
    }

    /// One log line per refusal, at most one a second (the others are
    /// counted in the next line).
    fn log_refusal(&self, m: &str, pid: u32) {
        if let Some(skipped) = self.log.allow() {
            warn!(
                "refused a connection from pid {pid}: {m}{}",
                more(skipped, "refused")
            );
        }
    }
}

/// The peer's supplementary groups: SO_PEERGROUPS (Linux 4.13+), else the
/// `Groups:` line of `/proc/PID/status`.
fn peer_groups(stream: &UnixStream, pid: u32) -> Vec<u32> {
    let mut buf = [0 as libc::gid_t; 256];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `buf`, which is that
    // large, and stores the written length in `len`; the fd is a live socket.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERGROUPS,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r == 0 {
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        return buf[..n.min(buf.len())].to_vec();
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether thread `tid` belongs to a process whose real, effective and
/// saved user ids are all `uid` (what ptrace asks of a caller that is not
/// root), or the caller is root. Err says why not.
pub(super) fn may_reserve(caller_uid: u32, tid: i32) -> Result<(), String> {
    if tid <= 0 {
        return Err(format!("invalid thread id {tid}"));
    }
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .map_err(|_| format!("no thread {tid}"))?;
    if resound_sched::owner::may_change(caller_uid, &status) {
        return Ok(());
    }
    Err(format!(
        "thread {tid} belongs to a process of another user (uids {:?}); user {} may reserve only its own processes' threads",
        resound_sched::owner::uids(&status),
        user_name(caller_uid)
    ))
}

/// A user's name, or `uid N` if it has none.
pub(super) fn user_name(uid: u32) -> String {
    // SAFETY: passwd is a C struct of integers and pointers; all-zero is valid.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut out = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local of the right type; buf's
    // length is passed; on success `out` points to `pw`, whose strings
    // point into `buf`, both alive while we read them below.
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() || pw.pw_name.is_null() {
        return format!("uid {uid}");
    }
    // SAFETY: pw_name is a NUL-terminated string inside `buf` (see above).
    let name = unsafe { CStr::from_ptr(pw.pw_name) };
    name.to_string_lossy().into_owned()
}

/// A group's name, or its number.
fn group_name(gid: u32) -> String {
    // SAFETY: group is a C struct of integers and pointers; all-zero is valid.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out = std::ptr::null_mut();
    // SAFETY: as in `user_name`, with getgrgid_r.
    let r = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() || gr.gr_name.is_null() {
        return gid.to_string();
    }
    // SAFETY: gr_name is a NUL-terminated string inside `buf`.
    let name = unsafe { CStr::from_ptr(gr.gr_name) };
    name.to_string_lossy().into_owned()
}

/// A group by name or number: (gid, name).
fn lookup_group(g: &str) -> Result<(u32, String), String> {
    if let Ok(gid) = g.parse::<u32>() {
        return Ok((gid, group_name(gid)));
    }
    let c = std::ffi::CString::new(g).map_err(|_| format!("invalid group name {g:?}"))?;
    // SAFETY: group is a C struct of integers and pointers; all-zero is valid.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out = std::ptr::null_mut();
    // SAFETY: as in `user_name`, with getgrnam_r and a NUL-terminated name.
    let r = unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() {
        return Err(format!(
            "no group named {g:?} (--allow-group / JACK_PROMISCUOUS_SERVER): give an existing group's name or number"
        ));
    }
    Ok((gr.gr_gid, g.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_and_root_threads_rule() {
        let me = rustix::process::geteuid().as_raw();
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        assert!(may_reserve(me, tid).is_ok());
        assert!(may_reserve(0, tid).is_ok());
        assert!(may_reserve(me, -1).is_err());
        assert!(may_reserve(me, i32::MAX)
            .unwrap_err()
            .starts_with("no thread"));
        let other = me.wrapping_add(4242);
        let e = may_reserve(other, tid).unwrap_err();
        assert!(e.contains("another user"), "{e}");
    }

    #[test]
    fn groups_resolve_by_name_and_number() {
        assert_eq!(lookup_group("0").unwrap().0, 0);
        assert_eq!(lookup_group("root").unwrap().0, 0);
        assert!(lookup_group("no-such-group-resound")
            .unwrap_err()
            .contains("no group named"));
    }
}
