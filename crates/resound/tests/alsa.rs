//! End-to-end tests of the ALSA driver (`resoundd -d alsa`) on alsa-lib's
//! user-space PCMs (this machine has no sound card): the test writes an
//! ALSA configuration of its own and points alsa-lib at it with
//! `ALSA_CONFIG_PATH` (the machine's configuration is not touched).

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Writes the test's ALSA configuration (file-plugin PCMs over `null`)
/// into a directory of its own and points alsa-lib at it (children inherit).
fn alsa_config(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("resound-alsa-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.raw");
    // A counter in S16: frame i carries i mod 2^15 on both channels.
    let raw: Vec<u8> = (0..48000u32 * 2)
        .flat_map(|i| {
            let v = (i % 32768) as i16;
            [v.to_le_bytes(), v.to_le_bytes()].concat()
        })
        .collect();
    std::fs::write(&input, raw).unwrap();
    let conf = format!(
        "pcm.rtest_cap {{ type file slave.pcm {{ type null }} file \"/dev/null\" infile \"{}\" format \"raw\" }}\n\
         pcm.rtest_play {{ type file slave.pcm {{ type null }} file \"{}\" format \"raw\" }}\n",
        input.display(),
        dir.join("out.raw").display()
    );
    let path = dir.join("asound.conf");
    std::fs::write(&path, conf).unwrap();
    // SAFETY-free in edition 2021; every test sets the same variable to a
    // path that exists for the test's lifetime.
    std::env::set_var(
        "ALSA_CONFIG_PATH",
        format!("/usr/share/alsa/alsa.conf:{}", path.display()),
    );
    dir
}

#[test]
fn runs_cycles_on_file_plugin_pcms() {
    let dir = alsa_config("run");
    let mut srv = Srv::start(&[
        "-d",
        "alsa",
        "-C",
        "rtest_cap",
        "-P",
        "rtest_play",
        "-r",
        "48000",
        "-p",
        "256",
        "-i",
        "2",
        "-o",
        "2",
        "-S",
    ]);
    wait_for("cycles on the device", Duration::from_secs(10), || {
        srv.status().cycles > 200
    });
    let st = srv.status();
    assert_eq!(
        (st.driver.as_str(), st.sample_rate, st.buffer_frames),
        ("alsa", 48000, 256)
    );
    let out = std::fs::metadata(dir.join("out.raw")).unwrap().len();
    assert!(out >= 200 * 256 * 4, "playback written: {out} bytes");
    let ports = srv.cli(&["lsp"]);
    let text = String::from_utf8_lossy(&ports.stdout);
    assert!(
        text.contains("system:capture_2") && text.contains("system:playback_2"),
        "{text}"
    );
    assert!(
        !text.contains("system:capture_3"),
        "-i 2 gives two capture ports: {text}"
    );
    assert!(
        srv.log().contains("S16"),
        "-S negotiates 16-bit: {}",
        srv.log()
    );
    srv.stop();
}

#[test]
fn unknown_device_fails_before_start_with_a_clear_message() {
    alsa_config("missing");
    let out = Command::new(env!("CARGO_BIN_EXE_resoundd"))
        .args(["-n", &format!("alsa-missing-{}", std::process::id())])
        .args(["-d", "alsa", "-d", "no_such_pcm", "-p", "256"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot open capture device no_such_pcm"),
        "{err}"
    );
}

#[test]
fn devices_lists_user_space_pcms() {
    alsa_config("devices");
    let out = Command::new(env!("CARGO_BIN_EXE_resound"))
        .arg("devices")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("null"), "{text}");
    assert!(text.contains("rates") && text.contains("S16_LE"), "{text}");
}
