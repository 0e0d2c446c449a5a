//! # resound-engine
//!
//! Everything on the driver thread (real-time): the loop ([`engine`]) and
//! one audio cycle ([`cycle`]), the device behind the [`driver::Driver`]
//! seam ([`driver::dummy`], [`driver::alsa`], [`driver::file`] for offline rendering), time behind the [`clock::Clock`] seam
//! (a simulated clock for tests), the look-back [`verdict`]s, the
//! reservations of the graph's real-time threads ([`reserve`]), the
//! [`transport`] state machine, the DSP [`load`] statistics, and the
//! [`events`] ring to the control side with the [`shared`] atomics, and the
//! admission of threads outside the graph into the same ledger ([`external`]).
//!
//! Dependencies between the modules go one way: `events` and `verdict` at
//! the bottom, `reserve` on them, `cycle`/`engine` on everything.

pub mod clock;
pub mod cycle;
pub mod departed;
pub mod driver;
pub mod engine;
pub mod events;
pub mod external;
pub mod load;
pub mod reserve;
pub mod shared;
pub mod transport;
pub mod verdict;
pub mod wake_floor;
mod warm;

pub use clock::{Clock, MonotonicClock, SimClock, SimPoint};
pub use driver::alsa::{AlsaConfig, AlsaDriver};
pub use driver::dummy::DummyDriver;
pub use driver::file::{FileDriver, FileSpec, RenderControl};
pub use driver::{Driver, Fault, Latencies, Period, Wake};
pub use engine::{Engine, EngineConfig, FREEWHEEL_WAIT_NS};
pub use events::{EventSink, RtEvent};
pub use external::{ExternalReply, ExternalVerdict};
pub use reserve::{kind, Command, Mode, ResStat, Reservations};
pub use shared::EngineShared;
