//! `resound devices`: the sound cards and the PCMs ALSA knows, with the
//! capabilities of those that can be opened (through the ALSA driver's
//! device listing, `resound_engine::driver::alsa::devices`).
//!
//! Runs on the command's main thread.

use resound_engine::driver::alsa::devices::{cards, pcms, Caps};

/// Prints the cards, then every PCM with its capabilities per direction.
pub fn run() -> Result<(), String> {
    let cards = cards();
    if cards.is_empty() {
        println!("no sound cards");
    } else {
        println!("sound cards:");
        for c in &cards {
            println!("  hw:{}  {} ({})", c.index, c.name, c.long_name);
        }
    }
    println!("PCMs:");
    for p in pcms()? {
        println!("  {}  {}", p.name, p.desc);
        for (dir, caps) in &p.caps {
            let what = format!("{dir:?}").to_lowercase();
            match caps {
                Ok(c) => println!("      {what}: {}", describe(c)),
                Err(e) => println!("      {what}: cannot open: {e}"),
            }
        }
    }
    Ok(())
}

/// "rates 44100, 48000 (8000..192000 Hz); formats S16_LE, ...; channels 1..2; period 16..4096 frames".
fn describe(c: &Caps) -> String {
    let rates: Vec<String> = c.rates.iter().map(u32::to_string).collect();
    format!(
        "rates {} ({}..{} Hz); formats {}; channels {}..{}; period {}..{} frames",
        if rates.is_empty() {
            "-".into()
        } else {
            rates.join(", ")
        },
        c.rate_range.0,
        c.rate_range.1,
        if c.formats.is_empty() {
            "-".into()
        } else {
            c.formats.join(", ")
        },
        c.channels.0,
        c.channels.1,
        c.periods.0,
        c.periods.1
    )
}
