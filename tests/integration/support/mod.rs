//! What the integration tests share, in one place (as cargo keeps its
//! `cargo-test-support`): each test file takes it whole with `use crate::support::*`.
//!
//! - [`sim`]: the binary (`bfperf()`, `sim_stat`), fixture copies, the FUSE simulator
//!   (`Mount`: started, lost, revived at another `hwmonN`), the in-process simulator on
//!   a manual clock (`Rig`), the simulator's rates as truth (`bf3_event_rate`,
//!   `assert_rate`), and `required`, which makes a missing real component a failure
//!   under `BFPERF_REQUIRE=all` (as `.ci/run` sets it) and a skip elsewhere.
//! - [`exporter`]: the exporter as a process (`Running`, killed on drop, showing what it
//!   said when a test fails), its port as it announced it, `get` and `sample` of its
//!   exposition, reloads, and asking it to count over its socket.
//! - [`prometheus`]: promtool and a real Prometheus scraping an exporter on loopback,
//!   its HTTP API, and the window a `rate()` may span (`RateWindow`), so that a rate is
//!   held to the simulator's truth within bounds the samples' own stamps give.
//! - [`push`]: exporters that push (remote write, OTLP) and a receiver that refuses.
//! - [`tmux`]: a terminal for `bfperf top`, its screen and keys.
//! - [`wait`]: polling a condition with a deadline.
//!
//! The rule every helper keeps: no sleep stands for "done". A wait polls a condition
//! with a deadline and says what it waited for when the deadline passes; a bound on a
//! rate, a time or memory comes from something measured (the simulator's clock, the
//! exporter's own gauges, perf, the kernel's accounting) or an event waited for.

pub(crate) mod exporter;
pub(crate) mod prometheus;
pub(crate) mod push;
pub(crate) mod sim;
pub(crate) mod tmux;
pub(crate) mod wait;

pub(crate) use exporter::*;
pub(crate) use prometheus::*;
pub(crate) use push::*;
pub(crate) use sim::*;
pub(crate) use tmux::*;
pub(crate) use wait::*;
