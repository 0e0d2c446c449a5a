//! `resound soak` for two minutes: churn around a sample-exact chain, and
//! every server resource back where it started (the long run, short).

mod common;
use common::*;
use std::process::Command;

#[test]
fn a_two_minute_soak_is_flat_and_loses_no_unexplained_cycle() {
    let _serial = common::one_at_a_time();
    let dir = TestDir::new("soak", "two-minutes");
    let out = Command::new(RESOUND)
        .args(["soak", "--minutes", "2", "--seed", "1", "--out"])
        .arg(&*dir)
        .output()
        .expect("run resound soak");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "soak failed:\n{text}");
    assert!(text.contains("== flat"), "{text}");
    // cyclictest (installed by the test command's setup) watched for
    // machine stalls, and the chain's losses were split by them.
    for want in [
        "CPU(s) probed; worst wake-up",
        "joined",
        "killed (SIGKILL)",
        "stopped (SIGSTOP)",
        "open fds",
        "memfds",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let csv = std::fs::read_to_string(dir.join("soak.csv")).unwrap();
    assert!(csv.lines().count() > 50, "a sample every 2 s: {csv}");
    assert!(std::fs::metadata(dir.join("soak.png")).unwrap().len() > 10_000);
    assert!(std::fs::read_to_string(dir.join("resoundd.log"))
        .unwrap()
        .contains("evicted from the cycle"));
}
