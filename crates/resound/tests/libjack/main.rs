//! libjack.so.0: unmodified JACK programs on resound.
//!
//! C programs in `crates/libjack/tests/c/` are compiled against the
//! distribution's JACK headers and linked with `-ljack` (the distribution's
//! libjack, so this proves binary compatibility), then run through
//! `resound run`, which puts resound's libjack.so.0 first in the loader
//! path, against a real resoundd. The distribution's own JACK programs run
//! the same way, and so does a Rust program on the crates.io `jack` crate.
//! Where a needed tool is missing the test prints `SKIP <name>: <reason>`
//! (under `scripts/test.sh`, which installs them all, it fails instead).

#[path = "../common/mod.rs"]
mod common;
mod programs;

mod c_api;
mod distribution;
mod internal_clients;
mod jack_crate;
mod streams;
