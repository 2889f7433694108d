//! Clocks for the simulator: real time, or a manual clock that tests move.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A monotonic clock in nanoseconds.
pub trait Clock: Send + Sync {
    /// The time now, ns.
    fn now_ns(&self) -> u64;
}

/// Real time since the machine booted (CLOCK_MONOTONIC): the same in every process,
/// so that simulators in two processes are one device, as a DPU is to two commands.
#[derive(Debug)]
pub struct SystemClock;

impl SystemClock {
    /// A clock reading the system's monotonic time.
    pub fn new() -> Self {
        SystemClock
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        crate::device::values::monotonic_ns()
    }
}

/// Another clock's time since a moment: where a workload's phases start.
pub(super) struct Since {
    clock: Arc<dyn Clock>,
    origin: u64,
}

impl Since {
    /// `clock`'s time from now on.
    pub(super) fn now(clock: Arc<dyn Clock>) -> Since {
        let origin = clock.now_ns();
        Since { clock, origin }
    }
}

impl Clock for Since {
    fn now_ns(&self) -> u64 {
        self.clock.now_ns().saturating_sub(self.origin)
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

/// Where a virtual clock starts: an hour after a boot, as a device's counters
/// would be read on a machine that has run a while.
const VIRTUAL_START_NS: u64 = 3_600_000_000_000;

/// Whether `BFPERF_SIM_CLOCK=virtual` asks for virtual time.
pub fn virtual_time_asked() -> bool {
    std::env::var_os("BFPERF_SIM_CLOCK").is_some_and(|v| v == "virtual")
}

static VIRTUAL: std::sync::OnceLock<Arc<ManualClock>> = std::sync::OnceLock::new();

/// Puts the in-process simulator of this process on virtual time: a [`ManualClock`]
/// that a measurement moves as it waits, so that `--sim` runs take no real time and
/// give the same output every time (the golden outputs of `stat`). Only a command
/// whose waits the clock can follow (`stat` of a period) takes it; every other keeps
/// real time whatever the environment says.
pub fn take_virtual_clock() -> Arc<ManualClock> {
    VIRTUAL
        .get_or_init(|| Arc::new(ManualClock::new(VIRTUAL_START_NS)))
        .clone()
}

/// The virtual clock, once [`take_virtual_clock`] has made it.
pub fn virtual_clock() -> Option<Arc<ManualClock>> {
    VIRTUAL.get().cloned()
}
