//! # resound-fuzz
//!
//! The bodies of resound's coverage-guided fuzz targets: each module takes
//! the fuzzer's bytes to the code the server (or the client library, or a
//! profile reader) runs on what a client can send or write, and checks that
//! it neither panics nor breaks an invariant. The `fuzz_targets/*.rs`
//! binaries hand libFuzzer's input to each module's `run` function;
//! `cargo test` in the main workspace replays every committed corpus and
//! crash reproducer through the same functions (see [`replay_dir`]).
//!
//! | target | drives |
//! |---|---|
//! | [`wire_frame`] | the server's frame reader, `Hello` check and `Envelope` decoder |
//! | [`graph_requests`] | graph edits on a `resound_graph::Graph`, compile, the shared table |
//! | [`midi_buffer`] | the MIDI buffer reader and the merge into an input port's buffer |
//! | [`metadata`] | the server's metadata store |
//! | [`transport_mailbox`] | the driver's transport step on scribbled mailboxes |
//! | [`profile_reader`] | the profile ring reader and the profiler's decoding |
//!
//! [`seeds`] builds each target's seed inputs with the project's own encoders.
//!
//! Threads: whichever thread the fuzzer or the test harness runs; nothing
//! here is real-time.

pub mod graph_requests;
pub mod metadata;
pub mod midi_buffer;
pub mod profile_reader;
pub mod seeds;
pub mod transport_mailbox;
pub mod wire_frame;

use std::path::Path;

/// A target's body: runs one input, panics on a broken invariant.
pub type Body = fn(&[u8]);

/// Every target by name, with its body.
pub const TARGETS: [(&str, Body); 6] = [
    ("wire_frame", wire_frame::run),
    ("graph_requests", graph_requests::run),
    ("midi_buffer", midi_buffer::run),
    ("metadata", metadata::run),
    ("transport_mailbox", transport_mailbox::run),
    ("profile_reader", profile_reader::run),
];

/// The body of target `name`.
pub fn target(name: &str) -> Option<Body> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Runs `body` on every file in `dir` (none if it does not exist); returns
/// how many files ran. A panic names the file.
pub fn replay_dir(body: Body, dir: &Path) -> std::io::Result<usize> {
    if !dir.is_dir() {
        return Ok(0);
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    let mut n = 0;
    for f in files.iter().filter(|f| f.is_file()) {
        let data = std::fs::read(f)?;
        if std::panic::catch_unwind(|| body(&data)).is_err() {
            panic!("fuzz input {} fails", f.display());
        }
        n += 1;
    }
    Ok(n)
}
