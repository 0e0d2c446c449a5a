//! # resound-legacy
//!
//! Legacy multimedia applications (a video player, a VoIP client, a game)
//! were never written for a reservation API: they block in `read`, `poll`,
//! `nanosleep` or `futex` and wake once per frame. This crate finds that
//! heartbeat from outside and schedules the process under SCHED_DEADLINE
//! with a budget that follows its needs, with no change to the program
//! (after "The Wizard of OS: a Heartbeat for Legacy Multimedia
//! Applications", Cucinotta, Abeni, Palopoli, Checconi).
//!
//! | module | owns | threads |
//! |---|---|---|
//! | [`events`] | the event model: per thread, time-stamped blocking-call entries/exits and wake-ups | any |
//! | [`trace`] | the two tracers (ptrace; kernel tracepoints) that fill it | the tracer's own thread |
//! | [`detect`] | the period detector (a pure function of events) | any |
//! | [`analyze`] | supply-bound function of a CBS and minimum budgets per server period | any |
//! | [`lfs`] | the legacy feedback scheduler and the percentile budget controller (pure, clock injected) | the controller's thread |
//! | [`attach`] | putting a process's periodic threads under reservations and taking them off | the controller's thread |

pub mod analyze;
pub mod attach;
pub mod detect;
pub mod events;
pub mod lfs;
pub mod trace;
