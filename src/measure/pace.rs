//! Time in a measurement: the clock and its sleeps ([`Pacer`]), when a run ends
//! ([`Until`]), how often it ticks and prints ([`Timing`]), and the `-I` grid.

use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Time for a measurement: the monotonic clock and sleeping, or a manual clock in
/// tests.
pub trait Pacer: Sync {
    /// The time now, ns (monotonic).
    fn now_ns(&self) -> u64;
    /// Waits `d`.
    fn sleep(&self, d: Duration);
    /// Whether time passes only as this pacer sleeps (a simulator's virtual clock):
    /// every wait is then its sleep, never the real clock's.
    fn is_virtual(&self) -> bool {
        false
    }
}

/// Real time.
pub struct RealPacer;

impl Pacer for RealPacer {
    fn now_ns(&self) -> u64 {
        crate::device::values::monotonic_ns()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// The time of a simulator's [`ManualClock`](crate::sim::ManualClock), moved on by
/// each sleep: a measurement of `--sim` under `BFPERF_SIM_CLOCK=virtual`.
#[cfg(feature = "sim")]
pub struct VirtualPacer(pub std::sync::Arc<crate::sim::ManualClock>);

#[cfg(feature = "sim")]
impl Pacer for VirtualPacer {
    fn now_ns(&self) -> u64 {
        crate::sim::Clock::now_ns(&*self.0)
    }
    fn sleep(&self, d: Duration) {
        self.0.advance_ns(d.as_nanos() as u64);
    }
    fn is_virtual(&self) -> bool {
        true
    }
}

/// How long a measurement runs.
pub trait Until {
    /// True when the measurement should end (the command exited, the time is up).
    fn done(&mut self, elapsed: Duration) -> bool;

    /// When the measurement ends by itself, from its start (a fixed duration).
    fn deadline(&self) -> Option<Duration> {
        None
    }

    /// Waits `timeout` at most, returning early when the measurement may have to
    /// end (the command exited, a signal came) or `also` becomes readable (a
    /// control word came). By default the pacer sleeps, or `also` is polled.
    fn wait(&mut self, pacer: &dyn Pacer, timeout: Duration, also: Option<BorrowedFd<'_>>) {
        match also {
            None => pacer.sleep(timeout),
            Some(fd) => {
                poll_readable(fd, timeout);
            }
        }
    }

    /// perf counters opened for the command this run started (`--per-process`),
    /// taken once.
    fn take_perf(&mut self) -> Option<crate::perf::Counters> {
        None
    }
}

/// Waits `timeout` at most for `fd` to become readable (0: looks only); whether a
/// read of it now returns at once (data, or its end).
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one pollfd that lives across the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

/// Whether a write of a few bytes (less than `PIPE_BUF`) to `fd` would not block now:
/// `Some(true)`; `None` when no reader is left.
pub(crate) fn poll_writable(fd: BorrowedFd<'_>) -> Option<bool> {
    let mut p = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd that lives across the call.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    match (n > 0, p.revents) {
        (true, r) if r & libc::POLLOUT != 0 => Some(true),
        (true, r) if r & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 => None,
        _ => Some(false),
    }
}

/// A duration in nanoseconds, saturated: a delay or a duration too long for 64 bits
/// of them (584 years) waits as long as any can.
pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The clock's reading `d` after `at`, saturated as [`ns`] is.
pub(crate) fn after(at: u64, d: Duration) -> u64 {
    at.saturating_add(ns(d))
}

/// A fixed duration.
pub struct For(pub Duration);

impl Until for For {
    fn done(&mut self, elapsed: Duration) -> bool {
        elapsed >= self.0
    }

    fn deadline(&self) -> Option<Duration> {
        Some(self.0)
    }
}

/// Until interrupted.
pub struct Forever;

impl Until for Forever {
    fn done(&mut self, _: Duration) -> bool {
        false
    }
}

/// How to sample. Between samples the measurement sleeps until the next tick, the
/// next interval or the end of its duration, whichever comes first, or until
/// [`Until::wait`] returns (the command exited, a signal came).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Report every this long (`-I`).
    pub interval: Option<Duration>,
    /// The longest time between two samples of a block.
    pub tick: Duration,
    /// How often, between samples, what the measurement owns is checked for other
    /// programs' writes (reads only; see [`super::sampler::Sampler::probe`]).
    pub probe: Duration,
}

/// The default time between checks for other programs' writes: a write is found
/// within it, and only a write within the first check of a counter's window can go
/// unseen. A check of every value of a BlueField-2 (90 values) takes 25 µs on tmpfs
/// (`cargo bench --bench stat`): 0.03 % of a core at one check per 100 ms.
pub(crate) const PROBE: Duration = Duration::from_millis(100);

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            interval: None,
            tick: Duration::from_secs(1),
            probe: PROBE,
        }
    }
}

/// The interval deadline after one due at `at` and served at `now`: the next of
/// the run's `every` grid that is at least half an interval away, so that a late
/// tick (a busy machine) makes that interval longer, never leaves a sliver after it.
/// Only a run's last interval can be short.
pub(crate) fn next_deadline(at: u64, every: u64, now: u64) -> u64 {
    let next = at + every * ((now - at) / every + 1);
    if next - now < every / 2 {
        next + every
    } else {
        next
    }
}
