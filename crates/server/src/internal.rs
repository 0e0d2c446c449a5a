//! Internal clients: resound's built-in clients that run inside `resoundd`
//! (JACK's `jack_load` / `jack_internal_client_load`).
//!
//! An internal client is an ordinary client of the graph (its own slot,
//! ports, activation record and real-time process thread, under the same
//! reservation as any other) whose threads live in the server process. It
//! opens through the server's own socket with the native client library, so
//! it takes exactly the path every other client takes; what it gains from
//! living in the server is direct access to the server's memory (the
//! profiler reads the profile ring the server maps).
//!
//! Shared objects (`jack_initialize`/`jack_finish`, the distribution's
//! JACK internal clients) are loaded by [`crate::internal_object`].
//!
//! Built-ins: `profiler` (the jack_profiler of "Timing measurements in JACK2": timing measures as audio
//! signals; options `-c` cpu load, `-p` driver period, `-e` driver end time;
//! per client `NAME:scheduling` and `NAME:duration` always).
//!
//! Threads: [`Internals::load`] and [`Internals::unload`] run on a session
//! thread *without* the server's state lock (opening a client goes through
//! the socket, whose session thread takes that lock).

use resound_client::{Client, Control, OpenOptions, PortFlags, PortKind};
use resound_protocol::wire::Notification;
use resound_protocol::wire::{ErrorCode, WireError};
use resound_shm::profile::{measures, NodeData, ProfileSegment, MAX_ROWS_PER_CYCLE};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Names of the built-in clients, for error messages and `resound load --help`.
pub const BUILTINS: &[&str] = &["profiler"];

/// What an internal client needs from the server that loads it.
#[derive(Clone)]
pub struct Host {
    /// Server name.
    pub server: String,
    /// Socket directory.
    pub dir: std::path::PathBuf,
    /// The profile ring (None: profiling off).
    pub profile: Option<Arc<ProfileSegment>>,
}

/// A loaded internal client: built in, or from a shared object.
enum Loaded {
    Builtin(Client),
    Object(crate::internal_object::ObjectClient),
}

/// The loaded internal clients, by uuid.
#[derive(Default)]
pub struct Internals {
    loaded: Mutex<HashMap<u64, Loaded>>,
}

fn err(code: ErrorCode, m: impl Into<String>) -> WireError {
    WireError::new(code, m)
}

impl Internals {
    /// Loads built-in `load_name` as client `client_name` (empty: the
    /// built-in's name) with argument string `init`. Returns (uuid, name).
    pub fn load(
        &self,
        host: &Host,
        client_name: &str,
        load_name: &str,
        init: &str,
    ) -> Result<(u64, String), WireError> {
        let name = if client_name.is_empty() {
            load_name
        } else {
            client_name
        };
        let (r, loaded) = match load_name {
            "profiler" => {
                let c = start_profiler(host, name, init)?;
                ((c.uuid(), c.name().to_string()), Loaded::Builtin(c))
            }
            other => {
                let Some(path) = crate::internal_object::find(other) else {
                    return Err(err(
                        ErrorCode::NotAllowed,
                        format!(
                            "no internal client called {other:?} (built in: {}; or a bare name of a JACK internal client object NAME.so in $RESOUND_INTERNAL_DIR or the distribution's JACK directory)",
                            BUILTINS.join(", ")
                        ),
                    ));
                };
                let o = crate::internal_object::ObjectClient::load(
                    &path,
                    name,
                    &host.server,
                    &host.dir,
                    init,
                )
                .map_err(|e| err(ErrorCode::Internal, format!("{}: {e}", path.display())))?;
                ((o.uuid, name.to_string()), Loaded::Object(o))
            }
        };
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(r.0, loaded);
        Ok(r)
    }

    /// Unloads (deactivates and closes) an internal client.
    pub fn unload(&self, uuid: u64) -> Result<(), WireError> {
        let c = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&uuid)
            .ok_or_else(|| {
                err(
                    ErrorCode::NotAllowed,
                    format!("no internal client with uuid {uuid}"),
                )
            })?;
        match c {
            Loaded::Builtin(c) => c
                .close()
                .map_err(|e| err(ErrorCode::Internal, format!("closing: {e}"))),
            Loaded::Object(o) => {
                o.unload();
                Ok(())
            }
        }
    }

    /// Whether `uuid` is a loaded internal client.
    pub fn contains(&self, uuid: u64) -> bool {
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&uuid)
    }
}

fn open(host: &Host, name: &str) -> Result<Client, WireError> {
    Client::open(
        name,
        OpenOptions {
            server: Some(host.server.clone()),
            dir: Some(host.dir.clone()),
            exact_name: false,
        },
    )
    .map_err(|e| match e {
        resound_client::Error::Server(w) => w,
        e => err(ErrorCode::Internal, e.to_string()),
    })
}

/// Per-slot port pair of the profiler, shared between its notification
/// thread (writes) and its process thread (reads). Port ids are stored +1
/// (0 = none); the uuid says which client the ports belong to.
#[derive(Default)]
struct SlotPorts {
    uuid: AtomicU64,
    scheduling: AtomicU32,
    duration: AtomicU32,
}

/// Which general ports the profiler has (jack_profiler's -c, -p, -e).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProfilerOptions {
    /// `profiler:cpu_load`.
    pub cpu_load: bool,
    /// `profiler:driver_period`.
    pub driver_period: bool,
    /// `profiler:driver_end_time`.
    pub driver_end: bool,
}

/// Parses the profiler's argument string: `-c`, `-p`, `-e` (combinable, as `-cpe`).
pub fn parse_profiler_options(init: &str) -> Result<ProfilerOptions, String> {
    let mut o = ProfilerOptions::default();
    for a in init.split_whitespace() {
        let flags = match a.strip_prefix('-') {
            Some(f) if !f.is_empty() && !f.starts_with('-') => f,
            _ => match a {
                "--cpu-load" => "c",
                "--driver-period" => "p",
                "--driver-end-time" => "e",
                _ => return Err(format!("profiler: unknown option {a:?} (use -c, -p, -e)")),
            },
        };
        for ch in flags.chars() {
            match ch {
                'c' => o.cpu_load = true,
                'p' => o.driver_period = true,
                'e' => o.driver_end = true,
                _ => return Err(format!("profiler: unknown option -{ch} (use -c, -p, -e)")),
            }
        }
    }
    Ok(o)
}

/// The values the profiler puts on its ports for one cycle ("Timing measurements in JACK2", §3):
/// each a fraction of the nominal period, clamped to the documented range.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProfilerValues {
    /// DSP load: (end of the graph - cycle start) / period, in [0, 1]. The end of the
    /// graph is the latest client end date (the driver's own end date when no client ran).
    pub cpu_load: f32,
    /// (measured period - nominal) / nominal, in [-1, 1].
    pub driver_period: f32,
    /// Driver end date / period, in [0, 1].
    pub driver_end: f32,
}

/// `ns` as a fraction of `period_ns`, clamped to [0, 1].
fn unit(ns: u64, period_ns: u64) -> f32 {
    (measures::fraction_of_period(ns, period_ns) as f32).clamp(0.0, 1.0)
}

/// Scheduling latency and duration of one client row, as fractions of the
/// period in [0, 1]. A late client's duration is 1 (it used the whole cycle).
pub fn client_values(row: &NodeData, period_ns: u64) -> (f32, f32) {
    let sched = row.scheduling_ns().map_or(0.0, |ns| unit(ns, period_ns));
    let dur = match row.duration_ns() {
        Some(ns) => unit(ns, period_ns),
        None if row.is_late() => 1.0,
        None => 0.0,
    };
    (sched, dur)
}

/// General values of a cycle; `prev_awake_ns` is the previous cycle's driver wake-up.
pub fn general_values(
    c: &resound_shm::profile::CycleData,
    rows: &[NodeData],
    prev_awake_ns: Option<u64>,
) -> ProfilerValues {
    ProfilerValues {
        cpu_load: unit(c.graph_end_ns(rows), c.period_ns),
        driver_period: prev_awake_ns.map_or(0.0, |p| {
            let ns = measures::measured_period_ns(p, c.awake_ns);
            (c.fraction(ns) as f32 - 1.0).clamp(-1.0, 1.0)
        }),
        driver_end: unit(c.driver_end_ns(), c.period_ns),
    }
}

fn start_profiler(host: &Host, name: &str, init: &str) -> Result<Client, WireError> {
    let opts = parse_profiler_options(init).map_err(|m| err(ErrorCode::NotAllowed, m))?;
    let Some(seg) = host.profile.clone() else {
        return Err(err(
            ErrorCode::NotAllowed,
            "profiling is off in this server (--profile-seconds 0); the profiler has nothing to read",
        ));
    };
    let client = open(host, name)?;
    let me = client.slot();
    let general = |on: bool, short: &str| -> Result<u32, WireError> {
        if !on {
            return Ok(0);
        }
        client
            .register_port(short, PortKind::Audio, PortFlags::OUTPUT)
            .map(|p| p.id() + 1)
            .map_err(|e| err(ErrorCode::Internal, format!("profiler port {short}: {e}")))
    };
    let gp = [
        general(opts.cpu_load, "cpu_load")?,
        general(opts.driver_period, "driver_period")?,
        general(opts.driver_end, "driver_end_time")?,
    ];
    let slots: Arc<[SlotPorts]> = (0..client.view().layout().caps.max_clients)
        .map(|_| SlotPorts::default())
        .collect();
    let sync_ports = {
        let slots = slots.clone();
        move |c: &Client| sync_client_ports(c, &slots)
    };
    sync_ports(&client);
    {
        let sync_ports = sync_ports.clone();
        client.set_notification_handler(move |c: &Client, n: &Notification| {
            if matches!(n, Notification::ClientRegistration { .. }) {
                sync_ports(c);
            }
        });
    }
    let ring = *seg.ring();
    let mut rows = vec![NodeData::default(); MAX_ROWS_PER_CYCLE as usize];
    let mut prev_awake: Option<(u64, u64)> = None;
    let rt_slots = slots.clone();
    client
        .activate(move |ps: &mut resound_client::ProcessScope| {
            // Keep the segment mapped while the process thread reads it.
            let _keep = &seg;
            let fill = |port_plus1: u32, v: f32| {
                if port_plus1 == 0 {
                    return;
                }
                if let Some(p) = ps.raw_buffer(port_plus1 - 1, me) {
                    // SAFETY: our own output port's buffer, max_frames ≥ frames f32;
                    // only this thread writes it.
                    unsafe { std::slice::from_raw_parts_mut(p, ps.frames()) }.fill(v);
                }
            };
            let written = ring.cycles_written();
            if written == 0 {
                return Control::Continue;
            }
            let n = written - 1;
            let Ok((c, k)) = ring.read_cycle(n, &mut rows) else {
                return Control::Continue;
            };
            let prev = prev_awake
                .filter(|&(cy, _)| cy + 1 == c.cycle)
                .map(|(_, a)| a);
            prev_awake = Some((c.cycle, c.awake_ns));
            let v = general_values(&c, &rows[..k], prev);
            fill(gp[0], v.cpu_load);
            fill(gp[1], v.driver_period);
            fill(gp[2], v.driver_end);
            // Every client port: its value this cycle, 0 when it did not run.
            for s in rt_slots.iter() {
                let (a, b) = (
                    s.scheduling.load(Ordering::Acquire),
                    s.duration.load(Ordering::Acquire),
                );
                if a != 0 || b != 0 {
                    let uuid = s.uuid.load(Ordering::Acquire);
                    let row = rows[..k].iter().find(|r| r.uuid == uuid);
                    let (sv, dv) = row.map_or((0.0, 0.0), |r| client_values(r, c.period_ns));
                    fill(a, sv);
                    fill(b, dv);
                }
            }
            Control::Continue
        })
        .map_err(|e| err(ErrorCode::Internal, format!("profiler activation: {e}")))?;
    Ok(client)
}

/// Notification thread: gives every other client a port pair, removes the
/// pairs of clients that left.
fn sync_client_ports(c: &Client, slots: &[SlotPorts]) {
    let snap = c.snapshot();
    let me = c.slot();
    let t = c.view().table(c.view().current_index());
    for (slot, s) in slots.iter().enumerate() {
        let slot = slot as u32;
        let present = snap
            .clients
            .iter()
            .find(|(sl, _, _)| *sl == slot && slot != me && slot != 0);
        let uuid = if present.is_some() {
            t.client_uuid(slot)
        } else {
            0
        };
        let have = s.uuid.load(Ordering::Acquire);
        let has_ports = s.scheduling.load(Ordering::Acquire) != 0;
        if has_ports && (have != uuid || present.is_none()) {
            // The client left (or its slot was reused): drop its ports first
            // from the real-time side's view, then from the graph.
            let a = s.scheduling.swap(0, Ordering::AcqRel);
            let b = s.duration.swap(0, Ordering::AcqRel);
            s.uuid.store(0, Ordering::Release);
            for id in [a, b].into_iter().filter(|&x| x != 0) {
                let _ = c.unregister_port_id(id - 1);
            }
        }
        if let Some((_, name, _)) = present {
            if s.scheduling.load(Ordering::Acquire) == 0 && uuid != 0 {
                let a = c.register_port(
                    &format!("{name}:scheduling"),
                    PortKind::Audio,
                    PortFlags::OUTPUT,
                );
                let b = c.register_port(
                    &format!("{name}:duration"),
                    PortKind::Audio,
                    PortFlags::OUTPUT,
                );
                if let (Ok(a), Ok(b)) = (&a, &b) {
                    s.uuid.store(uuid, Ordering::Release);
                    s.duration.store(b.id() + 1, Ordering::Release);
                    s.scheduling.store(a.id() + 1, Ordering::Release);
                } else {
                    for p in [a, b].into_iter().flatten() {
                        let _ = c.unregister_port(p);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resound_shm::profile::{node_flags, CycleData};

    #[test]
    fn options() {
        assert_eq!(
            parse_profiler_options("").unwrap(),
            ProfilerOptions::default()
        );
        let o = parse_profiler_options("-c -pe").unwrap();
        assert!(o.cpu_load && o.driver_period && o.driver_end);
        assert!(parse_profiler_options("-x").unwrap_err().contains("-x"));
        assert!(
            parse_profiler_options("--driver-period")
                .unwrap()
                .driver_period
        );
    }

    #[test]
    fn values_are_fractions_of_the_period() {
        let c = CycleData {
            cycle: 5,
            start_ns: 1_000_000,
            awake_ns: 1_010_000,
            end_ns: 1_100_000,
            period_ns: 1_000_000,
            ..Default::default()
        };
        let row = NodeData {
            flags: node_flags::SIGNALLED | node_flags::AWAKE | node_flags::FINISHED,
            signal_ns: 1_020_000,
            awake_ns: 1_070_000,
            finish_ns: 1_320_000,
            ..Default::default()
        };
        let (s, d) = client_values(&row, c.period_ns);
        assert!((s - 0.05).abs() < 1e-6 && (d - 0.25).abs() < 1e-6);
        let v = general_values(&c, &[row], Some(10_000));
        assert!((v.cpu_load - 0.32).abs() < 1e-6);
        assert!((v.driver_end - 0.1).abs() < 1e-6);
        assert_eq!(v.driver_period, 0.0, "exactly one period apart");
        let v = general_values(&c, &[row], Some(0));
        assert!((v.driver_period - 0.01).abs() < 1e-6);
        let late = NodeData {
            flags: node_flags::LATE,
            ..Default::default()
        };
        assert_eq!(client_values(&late, 1000), (0.0, 1.0));
        assert_eq!(general_values(&c, &[late], None).cpu_load, 1.0);
    }

    #[test]
    fn hostile_times_give_clamped_values_not_a_panic() {
        // A client can write anything into its activation record; the driver
        // copies the numbers into the profile ring as they are.
        let all = node_flags::SIGNALLED | node_flags::AWAKE | node_flags::FINISHED;
        for (s, a, f) in [
            (u64::MAX, 0x7fff_ffff_ffff_ffff, 0),
            (0, u64::MAX, 1),
            (u64::MAX, u64::MAX, u64::MAX),
            (0, 0, u64::MAX),
        ] {
            let row = NodeData {
                flags: all,
                signal_ns: s,
                awake_ns: a,
                finish_ns: f,
                ..Default::default()
            };
            let (sv, dv) = client_values(&row, 1_000_000);
            assert!((0.0..=1.0).contains(&sv) && (0.0..=1.0).contains(&dv));
            let c = CycleData {
                start_ns: s,
                awake_ns: a,
                end_ns: f,
                period_ns: 1,
                ..Default::default()
            };
            let v = general_values(&c, &[row], Some(u64::MAX));
            assert!((0.0..=1.0).contains(&v.cpu_load));
            assert!((-1.0..=1.0).contains(&v.driver_period));
            assert!((0.0..=1.0).contains(&v.driver_end));
        }
    }
}
