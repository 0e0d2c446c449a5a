//! `resoundd --cpu-dma-latency US`: while the server runs, the kernel's
//! wake-up latency target for idle CPUs is US; once it stops, the target is
//! what it was before (the kernel drops a request with its file).

mod common;
use common::*;
use std::io::Read;
use std::time::{Duration, Instant};

/// The kernel's current target (us), or why it cannot be read.
fn target_us() -> Result<i32, String> {
    let dev = resound_sched::cpu_latency::DEVICE;
    let mut f = std::fs::File::open(dev).map_err(|e| format!("{dev}: {e}"))?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b).map_err(|e| e.to_string())?;
    Ok(i32::from_ne_bytes(b))
}

/// Waits up to 5 s for the target to become `want`; returns the last read.
fn wait_for_target(want: i32) -> i32 {
    let t0 = Instant::now();
    loop {
        let now = target_us().expect("readable");
        if now == want || t0.elapsed() > Duration::from_secs(5) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_server_holds_idle_cpus_to_the_asked_wake_up_latency_while_it_runs() {
    let _serial = one_at_a_time();
    const ASKED: i32 = 7;
    let before = match target_us() {
        Ok(v) => v,
        Err(e) => {
            println!("SKIP cpu_dma_latency: cannot read it ({e}; it is root's)");
            return;
        }
    };
    if before <= ASKED {
        println!("SKIP cpu_dma_latency: another process already holds {before} us");
        return;
    }
    let mut srv = Srv::start(&[
        "--cpu-dma-latency",
        "7",
        "-d",
        "dummy",
        "-r",
        "48000",
        "-p",
        "256",
    ]);
    assert_eq!(wait_for_target(ASKED), ASKED, "{}", srv.log());
    assert!(
        srv.log()
            .contains("idle CPUs held to a wake-up latency of 7 us"),
        "{}",
        srv.log()
    );
    srv.stop();
    assert_eq!(wait_for_target(before), before, "withdrawn when it stops");
}
