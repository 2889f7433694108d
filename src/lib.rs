//! bfperf: the hardware performance counters of NVIDIA BlueField DPUs, as exposed by
//! the `mlxbf-pmc` driver's hwmon device, for people and programs.
//!
//! Layers, from the bottom: [`sysfs`] (file access relative to the device, real or
//! simulated), the domain ([`block`], [`catalog`], [`device`]), the operations
//! ([`ops`]), and the command line ([`cli`]).

pub mod block;
pub mod catalog;
pub mod cli;
pub mod device;
pub mod error;
pub mod ops;
pub mod sim;
pub mod sysfs;

pub use block::{Block, BlockKind, Generation, Mechanism};
pub use catalog::{Catalog, Event};
pub use device::Device;
pub use error::{Error, Result};
pub use sysfs::{RealFs, Sysfs};
