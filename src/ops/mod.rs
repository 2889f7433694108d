//! Operations on a device: reading values, programming counters, starting, stopping and
//! clearing, snapshots and their differences. Each writing operation first builds a
//! [`Plan`] from validated input, so a rejected command writes nothing.

pub mod control;
pub mod diff;
pub mod export;
pub mod journal;
pub mod list;
pub mod lock;
pub mod metrics;
pub mod outfile;
pub mod perf;
pub mod plan;
pub mod program;
pub mod read;
pub mod resolve;
pub mod series;
pub mod snapshot;
pub mod stat;
pub mod watch;

pub use plan::{Plan, PlannedWrite};

/// Parses a value the driver printed (`0x1a2b`, or decimal from other drivers).
pub fn parse_value(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}
