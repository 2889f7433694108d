//! bfperf: the hardware performance counters of NVIDIA BlueField DPUs, as exposed by
//! the `mlxbf-pmc` driver's hwmon device, for people and programs.
//!
//! Layers, from the bottom: [`sysfs`] (file access relative to the device, real or
//! simulated), the domain ([`block`], [`kinds`], [`catalog`], [`device`]), then the
//! subsystems: one-shot operations ([`ops`]: read, program, start/stop/clear,
//! snapshot and diff, list), the event grammar ([`spec`]), measurement over a window
//! with multiplexing and restore ([`measure`]), metrics ([`metrics`]), the kernel's
//! perf_event counters ([`perf`]), the exporter's core ([`collector`]) and the
//! Prometheus exposition ([`exposition`]). The
//! command line (`cli`, feature `cli`) is the binary's: only its entry point is
//! public, and it is not part of the library's API.
//!
//! Features: `sim` (the in-process simulator), `cli` (the command line: clap,
//! tables), `sim-mount` (the simulator over FUSE) and `exporter` (its HTTP server and
//! TLS) are on by default for the binary; with `default-features = false` the library
//! has the device, the catalog, the operations, the measurement and the metrics, and
//! `features = ["sim"]` adds the simulator.
//!
//! On a DPU, open the device with `Device::discover(Path::new("/sys"))`. The same
//! operations run on the simulator:
//!
//! ```
//! use std::sync::Arc;
//! use bfperf::ops::{program, read};
//! use bfperf::sim::{Kernel, Sim};
//! use bfperf::{Device, Generation};
//!
//! let (sim, clock) = Sim::with_manual_clock(Generation::Bf2, Kernel::V6_16);
//! let device = Device::open(Box::new(Arc::new(sim)))?;
//! let assignments = program::parse_assignments(&["3".into(), "HNF_REQUESTS".into()], false)?;
//! program::program(&device, "tile2", &assignments, &Default::default())?;
//! clock.advance_secs(1);
//!
//! let tile2 = device.block("tile2")?;
//! let readings = read::read_blocks(&device, &[tile2])?;
//! let counter = &readings.blocks[0].counters[3];
//! assert_eq!(counter.event_name.as_deref(), Some("HNF_REQUESTS"));
//! assert_eq!(counter.value, 46_875_000);
//! # Ok::<(), bfperf::Error>(())
//! ```

#![deny(missing_docs)]
// What the library keeps to itself is `pub(crate)`, and the compiler checks it.
#![warn(unreachable_pub)]
// Some crate-private pieces of the subsystems (the writer lock, the recording rules,
// repeat statistics, the metric translator) serve only the command line; without it
// they are unused, not dead.
#![cfg_attr(not(feature = "cli"), allow(dead_code))]

pub mod block;
pub mod catalog;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod collector;
pub mod device;
pub mod error;
#[cfg(feature = "exporter")]
#[doc(hidden)]
pub mod exporter;
pub mod exposition;
#[cfg(feature = "cli")]
pub(crate) mod front;
pub mod kinds;
pub(crate) mod lock;
pub mod measure;
pub mod metrics;
pub mod ops;
pub(crate) mod outfile;
pub mod perf;
#[cfg(feature = "sim")]
pub mod sim;
pub mod spec;
pub mod sysfs;

pub use block::{Block, BlockKind, Generation, Mechanism};
pub use catalog::{Catalog, Event};
pub use device::Device;
pub use error::{Error, Result};
pub use sysfs::{RealFs, Sysfs};
