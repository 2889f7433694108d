//! Clocks for the simulator: real time, or a manual clock that tests move.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A monotonic clock in nanoseconds.
pub trait Clock: Send + Sync {
    /// The time now, ns.
    fn now_ns(&self) -> u64;
}

/// Real time since the simulator started.
#[derive(Debug)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock reading the system's monotonic time.
    pub fn new() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock {
    ns: AtomicU64,
}

impl ManualClock {
    /// A clock at `ns` that moves only when told.
    pub fn new(ns: u64) -> Self {
        ManualClock {
            ns: AtomicU64::new(ns),
        }
    }

    /// Moves it `ns` on.
    pub fn advance_ns(&self, ns: u64) {
        self.ns.fetch_add(ns, Ordering::SeqCst);
    }

    /// Moves it `secs` seconds on.
    pub fn advance_secs(&self, secs: u64) {
        self.advance_ns(secs * 1_000_000_000);
    }

    /// Sets it to `ns`.
    pub fn set_ns(&self, ns: u64) {
        self.ns.store(ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.ns.load(Ordering::SeqCst)
    }
}
