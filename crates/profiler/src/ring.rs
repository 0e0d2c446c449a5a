//! Reading a profile ring into a [`Profile`]: which records to take (the
//! newest seconds, or all the ring holds), the records themselves
//! ([`ProfileRing::read_from`]), and the clients' names from the ring's
//! name records. Pure (no I/O beyond reading the mapped ring), so `resound
//! profile`, `resound monitor` and the `profile_reader` fuzz target run the
//! same code on a ring's contents.
//!
//! Threads: ordinary (non-real-time) threads of a reading process.

use crate::{Profile, ServerInfo};
use resound_shm::profile::ProfileRing;

impl Profile {
    /// Reads the newest `last` seconds of cycles of `period_ns` each (all
    /// the ring holds when None) out of `ring`. Clients are named from the
    /// ring's name records, then from `names` (which win: the server's
    /// current names).
    pub fn from_ring(
        ring: &ProfileRing,
        info: ServerInfo,
        period_ns: u64,
        last: Option<f64>,
        names: &[(u64, String)],
    ) -> Profile {
        let written = ring.cycles_written();
        let cap = ring.layout().cycle_capacity as u64;
        let (from, max) = match last {
            Some(s) => {
                let n = (s * 1e9 / period_ns.max(1) as f64).ceil() as u64;
                (written.saturating_sub(n), n as usize)
            }
            None => (written.saturating_sub(cap), cap as usize),
        };
        let (records, lost) = ring.read_from(from, max);
        let mut all: Vec<(u64, String)> = ring
            .names()
            .into_iter()
            .map(|(uuid, _, _, name)| (uuid, name))
            .collect();
        all.extend_from_slice(names);
        Profile::from_records(info, &records, &all, lost)
    }
}
