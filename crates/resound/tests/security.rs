//! Who may talk to a server: a runtime directory others may write is refused
//! at start-up; a process of another user (a temporary user made here with
//! `useradd`, run through `setpriv`) is refused even when the directory and
//! socket were loosened after start, cannot open the server's memfds
//! through `/proc`, and cannot reserve threads; `--allow-group` lets a
//! group's members in; a client naming another process's thread, or a
//! built-in by path, is refused. Tests that make users need root and
//! `setpriv` and print SKIP otherwise.

mod common;

use common::{call, call_with_fd, raw_client, Srv, RESOUND, RESOUNDD, TOOL};
use resound_protocol::wire::{self, ErrorCode, Hello, HelloKind, Reply, Request, Welcome};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};

/// Temporary users and a group made for one test, removed when dropped
/// (also when the test fails).
struct TempUsers {
    users: Vec<String>,
    group: String,
}

impl TempUsers {
    /// Makes group `group` and users `(name, in_group)`; None (and a printed
    /// SKIP) without root, `useradd` or `setpriv`.
    fn make(group: &str, users: &[(&str, bool)]) -> Option<TempUsers> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIP: making users and switching to them needs root");
            return None;
        }
        for tool in ["setpriv", "useradd", "groupadd"] {
            if Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .map_or(true, |o| !o.status.success())
            {
                common::skip_missing_tool("security", &format!("{tool} is not installed"));
                return None;
            }
        }
        let mut made = TempUsers {
            users: Vec::new(),
            group: String::new(),
        };
        if !run_ok(Command::new("groupadd").args(["-r", group])) {
            println!("SKIP: cannot make a temporary group with groupadd");
            return None;
        }
        made.group = group.to_string();
        for (name, in_group) in users {
            let mut c = Command::new("useradd");
            c.args(["-M", "-r", "-s", "/usr/sbin/nologin"]);
            if *in_group {
                c.args(["-G", group]);
            }
            if !run_ok(c.arg(name)) {
                println!("SKIP: cannot make a temporary user with useradd");
                return None;
            }
            made.users.push(name.to_string());
        }
        Some(made)
    }
}

impl Drop for TempUsers {
    fn drop(&mut self) {
        for n in &self.users {
            let _ = Command::new("userdel").arg(n).output();
        }
        if !self.group.is_empty() {
            let _ = Command::new("groupdel").arg(&self.group).output();
        }
    }
}

fn run_ok(c: &mut Command) -> bool {
    c.output().is_ok_and(|o| o.status.success())
}

/// `id FLAG NAME` as a number.
fn id(flag: &str, name: &str) -> u32 {
    let out = Command::new("id").args([flag, name]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// `prog` run as user `name` with its own groups (primary and
/// supplementary, as after a login) and `RESOUND_DIR` set to `dir`.
fn as_user(name: &str, dir: &Path, prog: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", id("-u", name)))
        .arg(format!("--regid={}", id("-g", name)))
        .arg("--init-groups")
        .arg(prog)
        .env("RESOUND_DIR", dir);
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Makes `path` mode `mode` (what a wrong umask or a shared directory does).
fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The server's memfd descriptors: `/proc/PID/fd/N` paths.
fn memfds(pid: u32) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let link = std::fs::read_link(e.path()).unwrap_or_default();
        if link.to_string_lossy().starts_with("/memfd:") {
            v.push(e.path().to_string_lossy().into_owned());
        }
    }
    v
}

#[test]
fn a_runtime_directory_others_may_write_is_refused_at_start() {
    let dir = common::TestDir::new("sec", "loose");
    for (mode, why) in [
        (0o777, "writable by every user"),
        (0o770, "writable by group"),
    ] {
        chmod(&dir, mode);
        let out = Command::new(RESOUNDD)
            .env("RESOUND_DIR", &*dir)
            .args(["-n", "loose", "-d", "dummy"])
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "mode {mode:o}: {t}");
        assert!(t.contains(why) && t.contains("refusing to use it"), "{t}");
        assert!(!dir.join("loose.sock").exists(), "a socket was made: {t}");
    }
    // A symbolic link to a private directory is refused too.
    chmod(&dir, 0o700);
    let link = dir.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&*dir, &link).unwrap();
    let out = Command::new(RESOUNDD)
        .env("RESOUND_DIR", &link)
        .args(["-n", "loose", "-d", "dummy"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&link);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("symbolic link"), "{}", text(&out));
    // An unknown group is a clear error.
    let out = Command::new(RESOUNDD)
        .env("RESOUND_DIR", &*dir)
        .args([
            "-n",
            "loose",
            "--allow-group",
            "no-such-group-resound",
            "-d",
            "dummy",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no group named"), "{}", text(&out));
}

#[test]
fn socket_and_memfds_are_private() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    let dir_mode = std::fs::metadata(&srv.dir).unwrap().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    let sock = srv.dir.join(format!("{}.sock", srv.name));
    assert_eq!(std::fs::metadata(&sock).unwrap().mode() & 0o777, 0o600);
    let _c = srv.client("holder");
    let fds = memfds(srv.pid());
    assert!(fds.len() >= 2, "server memfds: {fds:?}");
    for fd in &fds {
        let md = std::fs::metadata(fd).unwrap();
        assert_eq!(md.mode() & 0o777, 0o600, "{fd}");
        let info = std::fs::read_to_string(fd.replace("/fd/", "/fdinfo/")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        assert_ne!(
            flags & libc::O_CLOEXEC as u32,
            0,
            "{fd} is not close-on-exec"
        );
        // Seals are the inode's: reopening (as root, the owner) shows them.
        let f = std::fs::File::open(fd).unwrap();
        // SAFETY: F_GET_SEALS on a descriptor we own reads an integer.
        let seals = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&f), libc::F_GET_SEALS) };
        let want = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        assert_eq!(seals & want, want, "{fd}: seals {seals:#x}");
    }
}

#[test]
fn a_client_may_name_only_its_own_threads() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    let s = raw_client(&srv, "thief");
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    for tid in [other.id() as i32, srv.pid() as i32] {
        match call(&s, Request::Activate { tid }) {
            Reply::Err(e) => {
                assert_eq!(e.code, ErrorCode::NotAllowed, "{e:?}");
                assert!(e.message.contains("does not belong"), "{}", e.message);
            }
            r => panic!("activation with thread {tid} of another process accepted: {r:?}"),
        }
    }
    let _ = other.kill();
    let _ = other.wait();
    assert!(srv
        .status()
        .clients
        .iter()
        .all(|c| !c.active || c.name != "thief"));
}

#[test]
fn built_ins_are_loaded_by_bare_name_only() {
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    for bad in ["/tmp/evil.so", "../profiler", "profiler/../../x"] {
        let out = srv.cli(&["load", bad]);
        let t = text(&out);
        assert!(!out.status.success(), "{bad} loaded: {t}");
        assert!(t.contains("no internal client called"), "{bad}: {t}");
    }
}

/// Sends `ReserveExternal { tid }` as user `uid`/`gid` (a forked child that
/// drops to that user, then speaks the protocol on a plain socket) and
/// returns the server's answer as text.
fn reserve_as(srv: &Srv, uid: u32, gid: u32, tid: i32) -> String {
    let sock = srv.dir.join(format!("{}.sock", srv.name));
    let (mut rd, wr) = std::io::pipe().unwrap();
    // SAFETY: the child only calls async-signal-safe functions and glibc's
    // malloc (made fork-safe by glibc's atfork handlers) before _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let answer = child_reserve(&sock, uid, gid, tid);
        let mut wr = wr;
        let _ = std::io::Write::write_all(&mut wr, answer.as_bytes());
        // SAFETY: ending the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(0) };
    }
    drop(wr);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut rd, &mut out).unwrap();
    let mut st = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    out
}

fn child_reserve(sock: &Path, uid: u32, gid: u32, tid: i32) -> String {
    let groups = [gid];
    // SAFETY: plain system calls changing this (forked, single-threaded) process's credentials.
    let dropped = unsafe {
        libc::setgroups(1, groups.as_ptr()) == 0
            && libc::setresgid(gid, gid, gid) == 0
            && libc::setresuid(uid, uid, uid) == 0
    };
    if !dropped {
        return "could not drop to the user".into();
    }
    let Ok(s) = UnixStream::connect(sock) else {
        return "connect failed".into();
    };
    let hello = Hello {
        protocol: wire::PROTOCOL_VERSION,
        kind: HelloKind::Control,
    };
    if wire::send_frame(&s, &hello).is_err() {
        return "hello failed".into();
    }
    let mut rd = s.try_clone().unwrap();
    match wire::read_frame(&mut rd, 1 << 20).map(|p| wire::decode::<Welcome>(&p)) {
        Ok(Ok(Welcome::Control { .. })) => {}
        Ok(Ok(Welcome::Refused(e))) => return format!("refused: {}", e.message),
        other => return format!("handshake: {other:?}"),
    }
    match call(
        &s,
        Request::ReserveExternal {
            tid,
            bandwidth: 0.01,
        },
    ) {
        Reply::Err(e) => format!("error {:?}: {}", e.code, e.message),
        r => format!("reply {r:?}"),
    }
}

#[test]
fn another_user_is_refused_and_a_group_lets_its_members_in() {
    let _serial = common::one_at_a_time();
    let tag = std::process::id() % 100_000;
    let (grp, other, member) = (
        format!("rssecg{tag}"),
        format!("rssecx{tag}"),
        format!("rssecm{tag}"),
    );
    let Some(_users) = TempUsers::make(&grp, &[(&other, false), (&member, true)]) else {
        return;
    };
    // The issue's scenario: the server runs, then its directory and socket
    // are made world-writable (a shared runtime directory, a wrong umask).
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    let sock = srv.dir.join(format!("{}.sock", srv.name));
    chmod(&srv.dir, 0o777);
    chmod(&sock, 0o777);
    let out = as_user(&other, &srv.dir, RESOUND)
        .args(["-s", &srv.name, "status"])
        .output()
        .unwrap();
    let t = text(&out);
    assert!(!out.status.success(), "another user read the status: {t}");
    assert!(
        t.contains(&format!("user {other} may not use it")) && t.contains("--allow-group"),
        "{t}"
    );
    let out = as_user(&other, &srv.dir, RESOUND)
        .args([
            "-s",
            &srv.name,
            "connect",
            "system:capture_1",
            "system:playback_1",
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && text(&out).contains("may not use it"),
        "{}",
        text(&out)
    );
    let out = as_user(&other, &srv.dir, TOOL)
        .args(["-s", &srv.name, "-n", "intruder", "sine"])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && text(&out).contains("may not use it"),
        "{}",
        text(&out)
    );
    // An unmodified JACK program (Debian's jack_lsp on resound's libjack).
    if Path::new("/usr/bin/jack_lsp").exists() {
        let out = as_user(&other, &srv.dir, RESOUND)
            .args(["-s", &srv.name, "run", "--", "/usr/bin/jack_lsp"])
            .env_remove("JACK_DEFAULT_SERVER")
            .output()
            .unwrap();
        let t = text(&out);
        assert!(!out.status.success(), "jack_lsp listed ports: {t}");
        assert!(t.contains("may not use it"), "{t}");
    } else {
        common::skip_missing_tool("security", "/usr/bin/jack_lsp missing (jackd2)");
    }
    // Its shared memory cannot be opened through /proc either.
    for fd in memfds(srv.pid()) {
        let out = as_user(&other, &srv.dir, "cat").arg(&fd).output().unwrap();
        assert!(!out.status.success(), "{other} read {fd}");
        assert!(text(&out).contains("Permission denied"), "{}", text(&out));
    }
    // Nor reserve a thread, of the server or anyone's.
    let (uid, gid) = (id("-u", &other), id("-g", &other));
    let r = reserve_as(&srv, uid, gid, srv.pid() as i32);
    assert!(
        r.starts_with("refused:") && r.contains("may not use it"),
        "{r}"
    );
    let out = as_user(&other, &srv.dir, RESOUND)
        .args([
            "reserve",
            "--runtime",
            "100",
            "--period",
            "10000",
            &srv.pid().to_string(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("belongs to another user"),
        "{}",
        text(&out)
    );
    assert!(
        srv.status().clients.is_empty(),
        "another user opened a client"
    );
    let refusals = srv.log().matches("refused a connection from pid").count();
    assert!(refusals >= 1, "no refusal logged:\n{}", srv.log());
    drop(srv);

    // --allow-group: private to the group, never to the world.
    let srv = Srv::start(&[
        "--allow-group",
        &grp,
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "256",
    ]);
    let sock = srv.dir.join(format!("{}.sock", srv.name));
    let (dmd, smd) = (
        std::fs::metadata(&srv.dir).unwrap(),
        std::fs::metadata(&sock).unwrap(),
    );
    assert_eq!((dmd.mode() & 0o777, smd.mode() & 0o777), (0o770, 0o660));
    let group_gid = group_id(&grp);
    assert_eq!((dmd.gid(), smd.gid()), (group_gid, group_gid));
    let out = as_user(&member, &srv.dir, RESOUND)
        .args(["-s", &srv.name, "status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "group member refused: {}", text(&out));
    assert!(
        text(&out).contains(&format!("server        {}", srv.name)),
        "{}",
        text(&out)
    );
    // The member may not reserve the server's (root's) threads.
    let r = reserve_as(&srv, id("-u", &member), group_gid, srv.pid() as i32);
    assert!(
        r.contains("NotAllowed") && r.contains("another user"),
        "{r}"
    );
    // Someone outside the group is refused even once the directory is loosened.
    chmod(&srv.dir, 0o777);
    chmod(&sock, 0o777);
    let out = as_user(&other, &srv.dir, RESOUND)
        .args(["-s", &srv.name, "status"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("members of group {grp} only")),
        "{}",
        text(&out)
    );
    drop(srv);

    // jackd's JACK_PROMISCUOUS_SERVER=GROUP does what --allow-group does.
    let srv = Srv::start_with_env(
        &["-d", "dummy", "-r", "48000", "-p", "256"],
        &[("JACK_PROMISCUOUS_SERVER", &grp)],
    );
    let dmd = std::fs::metadata(&srv.dir).unwrap();
    assert_eq!((dmd.mode() & 0o777, dmd.gid()), (0o770, group_gid));
    let out = as_user(&member, &srv.dir, RESOUND)
        .args(["-s", &srv.name, "status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "group member refused: {}", text(&out));
}

/// A group's gid from `getent group NAME`.
fn group_id(name: &str) -> u32 {
    let out = Command::new("getent")
        .args(["group", name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .nth(2)
        .and_then(|g| g.trim().parse().ok())
        .unwrap_or_else(|| panic!("no group {name}"))
}

#[test]
fn a_thread_reserved_by_one_session_is_refused_to_another() {
    use resound_client::Requests;
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let tid = sleeper.id() as i32;
    let (a, b) = (srv.ctl(), srv.ctl());
    let reserve = |s: &resound_client::ControlSession, bandwidth| {
        s.call(Request::ReserveExternal { tid, bandwidth })
    };
    assert!(matches!(reserve(&a, 0.01), Ok(Reply::Ok)));
    for bw in [0.01, 0.0] {
        match reserve(&b, bw) {
            Err(resound_client::Error::Server(e)) => {
                assert_eq!(e.code, ErrorCode::NotAllowed, "{e:?}");
                assert!(e.message.contains("another session"), "{}", e.message);
            }
            r => panic!("second session changed thread {tid}'s admission: {r:?}"),
        }
    }
    assert!(matches!(reserve(&a, 0.0), Ok(Reply::Ok)));
    assert!(matches!(reserve(&b, 0.01), Ok(Reply::Ok)));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// Sends `AttachNode` on a raw session with `fd` attached (or none) and
/// returns the reply.
fn attach(s: &UnixStream, fd: Option<std::os::fd::BorrowedFd<'_>>) -> Reply {
    call_with_fd(s, Request::AttachNode, fd)
}

/// The message of an error reply, which must carry `code`.
fn refusal(r: Reply, code: ErrorCode) -> String {
    match r {
        Reply::Err(e) => {
            assert_eq!(e.code, code, "{e:?}");
            e.message
        }
        other => panic!("accepted: {other:?}"),
    }
}

#[test]
fn only_a_sealed_memfd_of_the_right_size_becomes_a_clients_shared_memory() {
    use std::os::fd::AsFd;
    let _serial = common::one_at_a_time();
    let srv = Srv::start(&["-d", "dummy", "-r", "48000", "-p", "256"]);
    let s = raw_client(&srv, "forger");
    // No activation without its own shared memory.
    let tid = resound_sched::policy::gettid();
    let m = refusal(call(&s, Request::Activate { tid }), ErrorCode::Protocol);
    assert!(m.contains("not attached"), "{m}");
    // No descriptor at all.
    let m = refusal(attach(&s, None), ErrorCode::Protocol);
    assert!(m.contains("memfd"), "{m}");
    // A file on disk: the server never maps a path a client chose.
    let file = std::fs::File::open("/etc/hostname").unwrap();
    let m = refusal(attach(&s, Some(file.as_fd())), ErrorCode::NotAllowed);
    assert!(m.contains("memfd"), "{m}");
    // A memfd the client could still write through another mapping.
    let size = resound_client::Client::open(
        "probe",
        resound_client::OpenOptions {
            server: Some(srv.name.clone()),
            dir: Some(srv.dir.to_path_buf()),
            ..Default::default()
        },
    )
    .unwrap()
    .view()
    .layout()
    .node_bytes;
    let open = resound_shm::Segment::create("forged", size).unwrap();
    let m = refusal(attach(&s, Some(open.fd())), ErrorCode::NotAllowed);
    assert!(m.contains("sealed"), "{m}");
    // Sealed, but of another size.
    let small = resound_shm::Segment::create("small", 4096).unwrap();
    small.seal(true).unwrap();
    let m = refusal(attach(&s, Some(small.fd())), ErrorCode::NotAllowed);
    assert!(m.contains("bytes"), "{m}");
    // The real thing is taken, once.
    let good = resound_shm::Segment::create("good", size).unwrap();
    good.seal(true).unwrap();
    assert_eq!(attach(&s, Some(good.fd())), Reply::Ok);
    let m = refusal(attach(&s, Some(good.fd())), ErrorCode::Protocol);
    assert!(m.contains("already attached"), "{m}");
    // Another session cannot pass the same memory off as its own.
    let t = raw_client(&srv, "copycat");
    let m = refusal(attach(&t, Some(good.fd())), ErrorCode::NotAllowed);
    assert!(m.contains("another client"), "{m}");
}
