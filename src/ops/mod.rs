//! One-shot operations on a device: reading values, programming counters, starting,
//! stopping and clearing, snapshots and their differences, the catalog listed. Each
//! write to the device, here or by a measurement, goes through a
//! plan built from
//! validated input, so a rejected command writes nothing.

pub mod control;
pub mod diff;
pub mod list;
pub mod program;
pub mod read;
pub mod snapshot;
pub mod watch;
