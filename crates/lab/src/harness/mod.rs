//! The one child-process harness of resound: what the end-to-end tests, the
//! activation bench, the experiment runner and the demo use to run a real
//! `resoundd` and real `resound-tool` client processes.
//!
//! * [`Bins`]: where the binaries are (given by the caller, or found next to
//!   the current executable; never hard-coded);
//! * [`Server`]: a `resoundd` under a unique name in its own runtime
//!   directory (`RESOUND_DIR`), ready once it accepts control sessions;
//! * [`Child`]: any child process, its stdout JSON lines collected
//!   ([`JsonLines`]) and its stderr kept ([`StderrLog`]);
//! * [`chain`]: the sample-exact chain the long runs watch;
//! * [`stalls`]: machine stalls as cyclictest sees them, and [`losses`]:
//!   which of the chain's lost blocks they explain;
//! * [`Jackd`]: Debian's jackd under a unique name, the reference server
//!   programs are compared with;
//! * every process is stopped (SIGTERM, then SIGKILL) and every directory
//!   removed by drop guards, on error paths too.
//!
//! Runs on the caller's thread, plus one reader thread per captured pipe.
//! Nothing here is on the real-time path.

pub mod alsa;
mod bins;
pub mod chain;
mod child;
mod jackd;
pub mod losses;
mod output;
mod server;
pub mod stalls;

pub use bins::{sibling, Bins};
pub use child::{signal, Child, ChildOptions, StderrMode};
pub use jackd::Jackd;
pub use output::{JsonLines, LineWait, StderrLog};
pub use server::{dummy_driver_args, remove_stale_dirs, Server, ServerSpec};
