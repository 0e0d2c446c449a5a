//! A PM QoS request on `/dev/cpu_dma_latency`, held while the server runs
//! (`resoundd --cpu-dma-latency US`) or while the bench runs (`resound
//! bench jackd --cpu-dma-latency US`, for every server alike). With it, no
//! idle CPU enters a sleep state it takes longer than US microseconds to
//! leave (0: idle CPUs poll), so a wake-up of the graph's threads does not
//! wait for a CPU to come out of a deep C-state, or on a virtual machine
//! for the hypervisor to run a halted virtual CPU again. The kernel drops the request when the file is closed,
//! also when the process is killed, so nothing is left behind.
//!
//! Runs once at start-up on the caller's thread.

use std::fs::{File, OpenOptions};
use std::io::Write;

/// The kernel's PM QoS device for CPU wake-up latency.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// The largest latency (us) the options accept: a second, far above any
/// CPU's deepest sleep state.
pub const MAX_US: u32 = 1_000_000;

/// A held request; dropping it withdraws it.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    /// The open device: the request lasts as long as it stays open.
    _device: File,
    /// The latency asked for (us).
    pub us: u32,
}

/// Asks that idle CPUs stay able to wake within `us` microseconds, for as
/// long as the returned request lives. Errors: the device is missing or
/// not writable (it belongs to root), with what to do.
pub fn hold(us: u32) -> Result<CpuLatencyRequest, String> {
    let mut device = OpenOptions::new().write(true).open(DEVICE).map_err(|e| {
        format!("cannot hold a CPU wake-up latency of {us} us: {DEVICE}: {e} (it is root's; run as root or give this user write access to it)")
    })?;
    // The device takes the latency as a native-endian 32-bit integer.
    let value =
        i32::try_from(us).map_err(|_| format!("a wake-up latency of {us} us: too large"))?;
    device
        .write_all(&value.to_ne_bytes())
        .map_err(|e| format!("cannot hold a CPU wake-up latency of {us} us: {DEVICE}: {e}"))?;
    Ok(CpuLatencyRequest {
        _device: device,
        us,
    })
}
