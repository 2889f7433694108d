//! The measurement engine behind `stat`, `top` and the exporter: count chosen events
//! during a command or a period, across many blocks, at intervals, and leave the
//! device as it was.
//!
//! The flow: resolve the specs ([`crate::spec`]), place them on counters ([`place`]),
//! record the configuration (`session::save`) in a journal, program and start,
//! sample every tick ([`Sampler`]), check for foreign re-programming, restore.

pub(crate) mod compose;
pub mod control;
pub(crate) mod defaults;
pub mod gate;
pub(crate) mod order;
pub(crate) mod owner;
pub(crate) mod plan;
pub(crate) mod repeat;
pub(crate) mod sampler;
pub mod series;
pub(crate) mod session;
pub(crate) mod shadow;

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::BlockKind;
use crate::device::Device;
use crate::error::Result;
use crate::spec::Item;
use gate::{Excluded, Gate, Switch};
pub use plan::{place, BlockPlan};
use sampler::Acc;
pub use sampler::{Sampler, Stamp};

/// How often multiplexed groups take turns: short enough that every group counts
/// several times in a second, so a short measurement still covers them all.
pub const MULTIPLEX_TICK: Duration = Duration::from_millis(100);

/// Time for a measurement: the monotonic clock and sleeping, or a manual clock in
/// tests.
pub trait Pacer: Sync {
    /// The time now, ns (monotonic).
    fn now_ns(&self) -> u64;
    /// Waits `d`.
    fn sleep(&self, d: Duration);
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
fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The clock's reading `d` after `at`, saturated as [`ns`] is.
fn after(at: u64, d: Duration) -> u64 {
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
    /// programs' writes (reads only; see [`sampler::Sampler::probe`]).
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

/// One item's count over a span.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Count {
    /// The block, or (aggregated) the kind of the blocks summed.
    pub block: String,
    /// The block's kind (or of the blocks summed).
    pub kind: BlockKind,
    /// How many blocks are summed (1 with -A).
    pub blocks: usize,
    /// The counter (per block, when not multiplexed); null for registers and sums.
    pub counter: Option<u32>,
    /// The event's name, `cycles`, or the register's name.
    pub event: String,
    /// The event number; null for cycles and registers.
    pub event_number: Option<u32>,
    /// The estimate: what was counted, scaled to the span at the rate it counted at
    /// between the reads or writes that bound its counting (its share of the span
    /// when multiplexed or stopped to be read). Null when it was not counted at all
    /// (its turn never came, or its only window was left out because a busy machine
    /// left its bounds unknown).
    pub value: Option<u64>,
    /// What the counters counted.
    pub raw: u64,
    /// What the value counts (`events`, `cycles`, `bytes`...).
    pub unit: &'static str,
    /// The share of the span its counter counted it: 1 unless multiplexed, or (an
    /// all-at-once block) stopped to be read between windows.
    pub coverage: f64,
    /// The time it was enabled within the span, ns: the enabled time for the
    /// device's blocks, the kernel's time enabled for a perf event (summed over
    /// the CPUs or blocks of a sum).
    pub enabled_ns: u64,
    /// The time it counted, ns: the enabled time times its coverage for the
    /// device's blocks, the kernel's time running for a perf event.
    pub running_ns: u64,
    /// False when it never got a turn: `<not counted>`, never a 0.
    pub counted: bool,
    /// False when another program re-programmed, reset, stopped or cleared it meanwhile.
    pub valid: bool,
    /// Why it is not valid; for a valid count, why it was not counted or covers
    /// part of its span only (counting disabled by `--delay` or `--control`).
    pub invalid: Option<String>,
    /// False when the kernel refused to count the event (perf's `<not supported>`;
    /// `invalid` says why). Always true for the device's blocks.
    pub supported: bool,
}

impl Count {
    /// What perf prints for a count without a value: `<not supported>` when the kernel
    /// refused the event, `<not counted>` when it never ran.
    pub fn missing_text(&self) -> &'static str {
        match self.supported {
            false => "<not supported>",
            true => "<not counted>",
        }
    }

    /// The count of a perf event over a span: named for its PMU, or for its CPU
    /// (`CPU0`, as perf stat -A) when counted per CPU.
    pub fn of_perf(r: &crate::perf::Reading) -> Count {
        Count {
            block: match r.cpu {
                Some(cpu) => format!("CPU{cpu}"),
                None => r.event.pmu.clone(),
            },
            kind: BlockKind::Perf,
            blocks: 1,
            counter: None,
            event: r.event.name.clone(),
            event_number: None,
            value: r.value,
            raw: r.raw,
            unit: r.event.unit,
            coverage: r.coverage,
            enabled_ns: r.enabled_ns,
            running_ns: r.running_ns,
            counted: r.value.is_some(),
            valid: r.unsupported.is_none(),
            invalid: r.unsupported.clone(),
            supported: r.unsupported.is_none(),
        }
    }

    /// The value, if it can be used: counted and valid.
    pub fn usable(&self) -> Option<u64> {
        self.value.filter(|_| self.valid)
    }
}

fn unit(item: &Item) -> &'static str {
    match item {
        Item::Cycles => "cycles",
        Item::Event { .. } => "events",
        Item::Register { name } => crate::kinds::register_unit(name),
    }
}

/// The values of the `chosen` metrics of `set` over `counts` of `span_s` seconds,
/// with the command line's `params` (per block too, when `per_block`).
pub(crate) fn metric_values(
    set: &crate::metrics::MetricSet,
    chosen: &[&crate::metrics::Metric],
    counts: &[Count],
    span_s: f64,
    params: &std::collections::HashMap<String, f64>,
    per_block: bool,
) -> Vec<crate::metrics::MetricValue> {
    if chosen.is_empty() {
        return Vec::new();
    }
    let mut inputs = metric_inputs(counts, span_s);
    inputs.params = params.clone();
    crate::metrics::evaluate(set, chosen, &inputs, per_block)
}

/// The inputs of metrics: every count of a run or interval, per block.
pub fn metric_inputs(counts: &[Count], span_s: f64) -> crate::metrics::Inputs {
    let mut inputs = crate::metrics::Inputs {
        duration_s: span_s,
        ..Default::default()
    };
    // perf counts split per CPU (-A) are one system-wide count to a metric.
    let is_perf = |c: &&Count| c.kind == BlockKind::Perf;
    let perf: Vec<Count> = counts.iter().filter(is_perf).cloned().collect();
    let perf = aggregate(&perf);
    for c in counts.iter().filter(|c| !is_perf(c)).chain(&perf) {
        let why = if !c.supported {
            Some(format!(
                "{} is not supported here: {}",
                c.event,
                c.invalid.as_deref().unwrap_or("the kernel refused it")
            ))
        } else if !c.counted {
            Some(format!("{} of {} was not counted", c.event, c.block))
        } else if !c.valid {
            Some(format!(
                "{} of {} is invalid: {}",
                c.event,
                c.block,
                c.invalid.as_deref().unwrap_or("touched by another program")
            ))
        } else {
            None
        };
        // perf counts are system-wide: one scope, whichever PMU counted them.
        let block = match c.kind {
            BlockKind::Perf => crate::metrics::PERF_SCOPE,
            _ => &c.block,
        };
        match (c.usable(), why) {
            (Some(v), None) => inputs.add(block, c.kind, &c.event, v as f64, c.coverage),
            (_, why) => inputs.missing(
                block,
                c.kind,
                &c.event,
                why.unwrap_or_else(|| "no value".into()),
            ),
        }
    }
    inputs
}

/// Counts of every item of every block over a span of `span_ns` (0: unscaled).
pub(crate) fn counts(plans: &[BlockPlan], accs: &[Vec<Acc>], span_ns: u64) -> Vec<Count> {
    let mut out = Vec::new();
    for (p, accs) in plans.iter().zip(accs) {
        for (ii, (item, acc)) in p.items.iter().zip(accs).enumerate() {
            let coverage = if span_ns == 0 {
                1.0
            } else {
                (acc.active_ns as f64 / span_ns as f64).min(1.0)
            };
            let value = if coverage <= 0.0 {
                None
            } else if acc.level || span_ns == 0 {
                Some(acc.total)
            } else if acc.counted_ns > 0 {
                // The rate it counted at over its own bounds, for the whole span.
                Some((acc.total as f64 * span_ns as f64 / acc.counted_ns as f64).round() as u64)
            } else {
                Some((acc.total as f64 / coverage).round() as u64)
            };
            let counter = p.counter_of(ii);
            let unbounded = acc.unbounded();
            out.push(Count {
                block: p.block.name.clone(),
                kind: p.block.kind,
                blocks: 1,
                counter,
                event: item.label().to_string(),
                event_number: item.number(),
                counted: value.is_some(),
                value,
                raw: acc.total,
                unit: unit(item),
                coverage,
                enabled_ns: span_ns,
                running_ns: (span_ns as f64 * coverage).round() as u64,
                valid: acc.foreign == 0 && unbounded.is_none(),
                invalid: acc.why.map(|w| w.describe()).or(unbounded),
                supported: true,
            });
        }
    }
    out
}

/// Sums counts of the same kind and event across blocks.
pub fn aggregate(counts: &[Count]) -> Vec<Count> {
    let mut out: Vec<Count> = Vec::new();
    // A sum of one block is named for that block (`tile2`, not `tile`, which reads
    // as every tile), with its counter.
    let mut first: Vec<(String, Option<u32>)> = Vec::new();
    // Each sum's blocks' reasons, to be said once for the blocks that share one.
    let mut reasons: Vec<Vec<(String, String)>> = Vec::new();
    for c in counts {
        let reason = c.invalid.clone().map(|w| (c.block.clone(), w));
        match out
            .iter()
            .position(|o| o.kind == c.kind && o.event == c.event)
        {
            Some(i) => {
                // A sum missing a block's count is no count.
                let o = &mut out[i];
                o.blocks += 1;
                o.value = o.value.zip(c.value).map(|(a, b)| a + b);
                o.counted &= c.counted;
                o.raw += c.raw;
                o.coverage = o.coverage.min(c.coverage);
                o.enabled_ns += c.enabled_ns;
                o.running_ns += c.running_ns;
                o.valid &= c.valid;
                o.supported &= c.supported;
                reasons[i].extend(reason);
            }
            None => {
                first.push((c.block.clone(), c.counter));
                reasons.push(reason.into_iter().collect());
                // Its reason is the sum's, said below.
                out.push(Count {
                    block: c.kind.as_str().to_string(),
                    kind: c.kind,
                    blocks: c.blocks,
                    counter: None,
                    event: c.event.clone(),
                    event_number: c.event_number,
                    value: c.value,
                    raw: c.raw,
                    unit: c.unit,
                    coverage: c.coverage,
                    enabled_ns: c.enabled_ns,
                    running_ns: c.running_ns,
                    counted: c.counted,
                    valid: c.valid,
                    invalid: None,
                    supported: c.supported,
                })
            }
        }
    }
    for ((o, (block, counter)), why) in out.iter_mut().zip(first).zip(reasons) {
        o.invalid = reasons_of(&why, o.blocks);
        if o.blocks == 1 {
            (o.block, o.counter) = (block, counter);
        }
    }
    out
}

/// A sum's reason from its blocks' (block, reason) pairs: each reason once, after the
/// blocks that gave it (`mss0, mss2: …`), or alone when every block of the sum gave
/// it (a one-block sum's label already names its block).
fn reasons_of(why: &[(String, String)], blocks: usize) -> Option<String> {
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for (block, reason) in why {
        match groups.iter_mut().find(|(_, r)| r == reason) {
            Some((bs, _)) => bs.push(block),
            None => groups.push((vec![block], reason)),
        }
    }
    let said: Vec<String> = groups
        .iter()
        .map(|(bs, r)| match bs.len() == blocks {
            true => r.to_string(),
            false => format!("{}: {r}", bs.join(", ")),
        })
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

/// The counts of one interval (`-I`), from the start of the run.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Interval {
    /// The run (from 1), with -r.
    pub run: u32,
    /// Seconds from the start of the run to the end of this interval.
    pub time_s: f64,
    /// The interval's length in seconds (the last may be shorter).
    pub span_s: f64,
    /// How much of it counting was enabled, seconds (`--delay`, `--control`): the
    /// span its counts, rates and metrics cover.
    pub enabled_s: f64,
    /// Each item's count over the interval.
    pub counts: Vec<Count>,
}

/// The counts of one run.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Run {
    /// The run (from 1).
    pub run: u32,
    /// Seconds it lasted.
    pub elapsed_s: f64,
    /// Seconds counting was enabled (`--delay`, `--control`; all of `elapsed_s`
    /// otherwise): the span its counts, rates and metrics cover.
    pub enabled_s: f64,
    /// Each item's count over the run.
    pub counts: Vec<Count>,
}

/// A measurement in progress: where its counts come from and the accounting of
/// intervals.
pub struct Measurement<'d> {
    source: Source<'d>,
    perf: Option<crate::perf::Counters>,
}

/// Where a measurement's device counts come from: its own sampler (it programmed the
/// device), or the device's owner (`share`), which counts for it.
enum Source<'d> {
    Own(Sampler<'d>),
    Shared(owner::protocol::Shared<'d>),
}

impl<'d> Source<'d> {
    fn plans(&self) -> &[BlockPlan<'d>] {
        match self {
            Source::Own(s) => &s.plans,
            Source::Shared(s) => &s.plans,
        }
    }

    /// Samples at `now`; returns when the values were read (the owner's time for a
    /// shared source).
    fn tick(&mut self, now: u64) -> Result<u64> {
        match self {
            Source::Own(s) => s.tick(now).map(|()| now),
            Source::Shared(s) => s.tick().map(|()| s.at_ns),
        }
    }

    fn probe(&mut self, now: u64) {
        if let Source::Own(s) = self {
            s.probe(now)
        }
    }

    fn totals(&self) -> Vec<Vec<Acc>> {
        match self {
            Source::Own(s) => s.totals(),
            Source::Shared(s) => s.totals(),
        }
    }

    /// Samples now, as [`Source::tick`], where the values must be read after the
    /// call (a shared source's owner may answer with an earlier reading otherwise).
    fn tick_fresh(&mut self, pacer: &dyn Pacer) -> Result<u64> {
        match self {
            Source::Own(_) => self.tick(pacer.now_ns()),
            Source::Shared(s) => s.tick_fresh(pacer).map(|()| s.at_ns),
        }
    }

    /// Counts from 0 with new baselines now; returns when they were read.
    fn restart(&mut self, pacer: &dyn Pacer) -> Result<u64> {
        match self {
            Source::Own(s) => {
                let now = pacer.now_ns();
                s.reset_counts();
                s.rebase(now).map(|()| now)
            }
            Source::Shared(s) => s.rebase(pacer).map(|()| s.at_ns),
        }
    }
}

impl<'d> Measurement<'d> {
    /// Opens the files and programs the counters (after `session::save`).
    pub fn start(
        device: &'d Device,
        plans: Vec<BlockPlan<'d>>,
        saved: &[session::Saved],
        pacer: &'d dyn Pacer,
    ) -> Result<Measurement<'d>> {
        let stamp: sampler::Stamp<'d> = std::sync::Arc::new(move || pacer.now_ns());
        let mut sampler = Sampler::open(device, plans, &session::clock_masks(saved), stamp)?;
        sampler.start(pacer.now_ns())?;
        Ok(Measurement {
            source: Source::Own(sampler),
            perf: None,
        })
    }

    /// Counts these perf events in the same windows (opened now, started by
    /// [`Measurement::begin`]).
    pub fn with_perf(mut self, counters: crate::perf::Counters) -> Self {
        self.perf = (!counters.is_empty()).then_some(counters);
        self
    }

    /// Counts with these perf counters from now on (a run's command's, opened
    /// when it started); the previous ones are stopped.
    pub fn set_perf(&mut self, counters: crate::perf::Counters) {
        self.stop_perf();
        self.perf = (!counters.is_empty()).then_some(counters);
    }

    /// The perf counts since the window opened.
    fn perf_counts(&mut self) -> Vec<Count> {
        match &mut self.perf {
            Some(p) => p.read().iter().map(Count::of_perf).collect(),
            None => Vec::new(),
        }
    }

    /// Stops the perf counters.
    pub fn stop_perf(&mut self) {
        if let Some(p) = &mut self.perf {
            p.stop();
        }
    }

    /// The plans: what each block counts, and in which turns.
    pub fn plans(&self) -> &[BlockPlan<'d>] {
        self.source.plans()
    }

    /// Starts a run's window now: counts from 0, new baselines. Returns its start.
    pub fn begin(&mut self, pacer: &dyn Pacer) -> Result<u64> {
        let start = self.source.restart(pacer)?;
        if let Some(p) = &mut self.perf {
            p.start();
        }
        Ok(start)
    }

    /// One run from `start` (see [`Measurement::begin`]): samples until `until` says
    /// so or `stop` is set, counting while `gate` enables it, calling `on_interval`
    /// at every `-I` boundary.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        number: u32,
        start: u64,
        pacer: &dyn Pacer,
        timing: Timing,
        until: &mut dyn Until,
        stop: &AtomicBool,
        gate: &mut dyn Gate,
        on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
    ) -> Result<Run> {
        let tick = timing.interval.map_or(timing.tick, |i| i.min(timing.tick));
        let mut next_tick = after(start, tick);
        let probe = (timing.probe < tick).then_some(ns(timing.probe));
        let mut next_probe = probe.map(|p| start.saturating_add(p));
        let interval_ns = timing.interval.map(ns);
        let mut next_interval = interval_ns.map(|i| start.saturating_add(i));
        let mut off = Excluded::default();
        if !gate.starts_enabled() {
            off.pause(start, self.source.totals());
            // Started with the window (system-wide, `-p`): what they counted
            // since is left out.
            if let Some(p) = &mut self.perf {
                p.clear();
            }
        }
        let mut previous = self.first_mark(start, &off);
        loop {
            let mut now = pacer.now_ns();
            let elapsed = Duration::from_nanos(now.saturating_sub(start));
            // Whether the run ends is known first, so that every word written
            // before the command exited is carried out within the run.
            let finished = until.done(elapsed) || stop.load(Ordering::SeqCst);
            let switches = match finished {
                true => gate.last(elapsed),
                false => gate.due(elapsed),
            };
            if !switches.is_empty() {
                now = self.switch(&switches, pacer, &mut off, gate)?;
                next_tick = after(now, tick);
            }
            let interval_due = next_interval.is_some_and(|at| now >= at);
            if finished || interval_due || now >= next_tick {
                // A shared source's values were read at the owner's time.
                now = self.source.tick(now)?;
                next_tick = after(now, tick);
                next_probe = probe.map(|p| now.saturating_add(p));
            } else if let (Some(at), Some(p)) = (next_probe, probe) {
                if now >= at {
                    self.source.probe(now);
                    next_probe = Some(now.saturating_add(p));
                }
            }
            if let (Some(at), Some(every)) = (next_interval, interval_ns) {
                if now >= at || finished {
                    let mark = self.mark(now, &off);
                    on_interval(&self.interval(number, start, &previous, &mark))?;
                    previous = mark;
                    if now >= at {
                        next_interval = Some(next_deadline(at, every, now));
                    }
                }
            }
            if finished {
                return Ok(self.finish(number, start, now, &off));
            }
            let mut wake = next_interval.map_or(next_tick, |i| i.min(next_tick));
            if let Some(p) = next_probe {
                wake = wake.min(p);
            }
            for at in [until.deadline(), gate.next_at()].into_iter().flatten() {
                wake = wake.min(after(start, at));
            }
            let nap = Duration::from_nanos(wake.saturating_sub(pacer.now_ns()));
            if !nap.is_zero() {
                until.wait(pacer, nap, gate.fd());
            }
        }
    }

    /// The run's counts at its end, `now`: over the time counting was enabled.
    fn finish(&mut self, number: u32, start: u64, now: u64, off: &Excluded) -> Run {
        let elapsed_ns = now.saturating_sub(start);
        let (totals, off_ns) = off.enabled(now, &self.source.totals());
        let on_ns = elapsed_ns.saturating_sub(off_ns);
        let mut all = counts(self.plans(), &totals, on_ns);
        all.extend(self.perf_counts());
        disabled_for(&mut all, on_ns, elapsed_ns);
        Run {
            run: number,
            elapsed_s: elapsed_ns as f64 / 1e9,
            enabled_s: on_ns as f64 / 1e9,
            counts: all,
        }
    }

    /// Carries out `switches` now: one read of every counter is the boundary
    /// between what is counted and what is left out. Returns when it was read.
    fn switch(
        &mut self,
        switches: &[Switch],
        pacer: &dyn Pacer,
        off: &mut Excluded,
        gate: &mut dyn Gate,
    ) -> Result<u64> {
        let now = self.source.tick_fresh(pacer)?;
        let totals = self.source.totals();
        for s in switches {
            match s {
                Switch::Enable if off.is_paused() => {
                    off.resume(now, &totals);
                    self.pause_perf(false);
                }
                Switch::Disable if !off.is_paused() => {
                    off.pause(now, totals.clone());
                    self.pause_perf(true);
                }
                _ => {}
            }
            gate.done(*s);
        }
        Ok(now)
    }

    /// Disables (or enables again) the perf counters, keeping their counts.
    fn pause_perf(&mut self, pause: bool) {
        if let Some(p) = &mut self.perf {
            match pause {
                true => p.stop(),
                false => p.resume(),
            }
        }
    }

    /// Where the counts stand at the run's `start`: the start of its first
    /// interval. The perf counters count from the run's start (reset then, or
    /// opened for the command and enabled at its exec): whatever they read by the
    /// time the loop first looks was counted within the run, so they start from
    /// 0 and the intervals add up to the run's total.
    fn first_mark(&mut self, start: u64, off: &Excluded) -> Mark {
        let mut mark = self.mark(start, off);
        for c in &mut mark.perf {
            c.raw = 0;
            c.value = c.value.map(|_| 0);
            c.enabled_ns = 0;
            c.running_ns = 0;
        }
        mark
    }

    /// Where the counts stand at `now`: the start of the next interval.
    fn mark(&mut self, now: u64, off: &Excluded) -> Mark {
        let (totals, off_ns) = off.enabled(now, &self.source.totals());
        Mark {
            totals,
            perf: self.perf_counts(),
            ns: now,
            off_ns,
        }
    }

    /// The interval of run `number` (which started at `start`) between two marks.
    fn interval(&self, number: u32, start: u64, from: &Mark, to: &Mark) -> Interval {
        let delta = Acc::all_since(&to.totals, &from.totals);
        let span = to.ns - from.ns;
        let on = span.saturating_sub(to.off_ns.saturating_sub(from.off_ns));
        let mut interval_counts = counts(self.plans(), &delta, on);
        interval_counts.extend(perf_since(&to.perf, &from.perf));
        disabled_for(&mut interval_counts, on, span);
        Interval {
            run: number,
            time_s: (to.ns - start) as f64 / 1e9,
            span_s: span as f64 / 1e9,
            enabled_s: on as f64 / 1e9,
            counts: interval_counts,
        }
    }

    /// Counters that another program re-programmed: (block index, item index).
    pub fn foreign(&self) -> Result<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        // The owner of a shared device checks its counters; its counts say so.
        let Source::Own(sampler) = &self.source else {
            return Ok(out);
        };
        for (bi, (p, g)) in self.plans().iter().zip(sampler.groups()).enumerate() {
            if p.groups.is_empty() {
                continue;
            }
            for item in session::foreign_changes(sampler.device(), p, g)? {
                out.push((bi, item));
            }
        }
        Ok(out)
    }

    /// Marks the counts of re-programmed counters invalid.
    pub fn mark_foreign(&self, run: &mut Run, foreign: &[(usize, usize)]) {
        let names: Vec<(String, String)> = foreign
            .iter()
            .map(|&(b, i)| {
                let p = &self.plans()[b];
                (p.block.name.clone(), p.items[i].label().to_string())
            })
            .collect();
        for c in &mut run.counts {
            if names.iter().any(|(b, e)| *b == c.block && *e == c.event) {
                c.valid = false;
                c.invalid
                    .get_or_insert_with(|| "another program programmed its counter".into());
            }
        }
    }

    /// Other programs' writes found during the ticks so far, said once each.
    pub fn detections(&mut self) -> Vec<sampler::Detection> {
        match &mut self.source {
            Source::Own(s) => s.take_log(),
            Source::Shared(_) => Vec::new(),
        }
    }
}

/// The interval deadline after one due at `at` and served at `now`: the next of
/// the run's `every` grid that is at least half an interval away, so that a late
/// tick (a busy machine) makes that interval longer, never leaves a sliver after it.
/// Only a run's last interval can be short.
fn next_deadline(at: u64, every: u64, now: u64) -> u64 {
    let next = at + every * ((now - at) / every + 1);
    if next - now < every / 2 {
        next + every
    } else {
        next
    }
}

/// Counts of a span of `span` ns that counted `on` ns of it (`--delay`,
/// `--control`): `<not counted>` when disabled throughout, else said on each valid
/// count when partly.
fn disabled_for(counts: &mut [Count], on: u64, span: u64) {
    if on >= span {
        return;
    }
    for c in counts.iter_mut().filter(|c| c.valid) {
        if on == 0 {
            c.value = None;
            c.counted = false;
            c.coverage = 0.0;
            c.invalid = Some("counting was disabled (--delay, --control)".into());
        } else {
            c.invalid = Some(format!(
                "counting enabled {:.3} s of {:.3} s (--delay, --control)",
                on as f64 / 1e9,
                span as f64 / 1e9
            ));
        }
    }
}

/// perf counts of an interval: what the counters counted, and their times enabled
/// and running, since its start; scaled as perf scales an interval (by its own
/// times), and not counted where the counter did not run in it.
pub(crate) fn perf_since(now: &[Count], before: &[Count]) -> Vec<Count> {
    now.iter()
        .zip(before)
        .map(|(n, b)| {
            let mut c = n.clone();
            c.raw = n.raw.saturating_sub(b.raw);
            c.enabled_ns = n.enabled_ns.saturating_sub(b.enabled_ns);
            c.running_ns = n.running_ns.saturating_sub(b.running_ns);
            c.coverage = match c.enabled_ns {
                0 => 0.0,
                e => (c.running_ns as f64 / e as f64).min(1.0),
            };
            c.value = (n.supported && c.running_ns > 0).then(|| {
                (c.raw as f64 * c.enabled_ns.max(c.running_ns) as f64 / c.running_ns as f64)
                    .round() as u64
            });
            c.counted = c.value.is_some();
            if n.supported && !c.counted {
                c.invalid = Some(
                    "its counter did not run in this span (nothing it counts ran, or it waited its turn)"
                        .into(),
                );
            }
            c
        })
        .collect()
}

/// What to measure and how.
#[derive(Debug, Clone)]
pub struct StatRequest {
    /// The `-e` specs (metrics already turned into specs).
    pub specs: Vec<String>,
    /// How long, and how often to print.
    pub timing: Timing,
    /// Runs (`-r`); at least 1.
    pub repeat: u32,
    /// Put the device back as it was (unless `--no-restore`).
    pub restore: bool,
    /// Let more events than counters take turns (unless `--no-multiplex`).
    pub multiplex: bool,
    /// Record the prior programming in the device's journal before the first write
    /// (beside the writer lock); a leftover journal is restored
    /// first.
    pub journal: bool,
    /// perf_event events counted in the same window (system-wide, per CPU).
    pub perf: Vec<crate::perf::PerfEvent>,
    /// The CPUs system-wide perf events are counted on ([`crate::perf::online_cpus`]).
    pub perf_cpus: Vec<usize>,
    /// Each CPU's perf counts apart (perf stat -A), system-wide: counts named `CPU0`...
    pub perf_per_cpu: bool,
    /// Count the perf events for the measured command's process tree instead of
    /// system-wide: the [`Until`] of each run opens them ([`Until::take_perf`]).
    pub per_process: bool,
}

impl StatRequest {
    /// These specs with the defaults: one run, restored, multiplexed, no journal, no
    /// perf events (what checking a spec against a device needs).
    pub fn for_specs(specs: Vec<String>) -> StatRequest {
        StatRequest {
            specs,
            timing: Timing::default(),
            repeat: 1,
            restore: true,
            multiplex: true,
            journal: false,
            perf: Vec::new(),
            perf_cpus: Vec::new(),
            perf_per_cpu: false,
            per_process: false,
        }
    }
}

/// The result of a measurement.
#[derive(Debug)]
pub struct StatOutcome {
    /// Each run's counts.
    pub runs: Vec<Run>,
    /// What the user must know (duplicate event names, foreign writes).
    pub warnings: Vec<String>,
    /// Another program re-programmed counters during the measurement.
    pub foreign: bool,
}

/// Validates the specs against the device and places them; writes nothing.
pub fn prepare<'d>(
    device: &'d Device,
    req: &StatRequest,
) -> Result<(Vec<BlockPlan<'d>>, Vec<String>)> {
    if req.specs.is_empty() && !req.perf.is_empty() {
        // Only perf events: nothing of the device is touched.
        return Ok((Vec::new(), Vec::new()));
    }
    let resolved = crate::spec::resolve(device, &req.specs)?;
    let plans = plan::place(resolved.blocks, req.multiplex)?;
    Ok((plans, resolved.warnings))
}

/// The frequency of a PLL as `clock_measure` reports it, in Hz (MHz = last count /
/// reference window × 156.25).
pub(crate) fn pll_hz(device: &Device, pll: &str) -> Option<u64> {
    let block = device
        .blocks()
        .iter()
        .find(|b| b.kind == BlockKind::ClockMeasure)?;
    let read = |name: String| {
        crate::device::values::read_number(
            device.fs(),
            &crate::sysfs::layout::register(&block.name, &name),
        )
        .ok()
    };
    let last = read(format!("FMON_CLK_LAST_COUNT_{pll}"))?;
    let window = read(format!("REFERENCE_WINDOW_WIDTH_{pll}"))?;
    (window > 0).then(|| last * 156_250_000 / window)
}

/// The longest tick that keeps every all-at-once counter from wrapping within a
/// window: half the time its clock takes to fill its width (a counter counts at most
/// one event per cycle). Blocks whose clock is unknown keep `tick`.
pub(crate) fn safe_tick(device: &Device, plans: &[BlockPlan], tick: Duration) -> Duration {
    plans
        .iter()
        .filter(|p| {
            p.block.mechanism == crate::block::Mechanism::AllAtOnce && p.block.width_bits < 64
        })
        .filter_map(|p| {
            let hz = pll_hz(device, p.block.def().clock_pll?)?;
            let fill_s = (1u64 << p.block.width_bits) as f64 / hz.max(1) as f64;
            Some(Duration::from_secs_f64(fill_s / 2.0))
        })
        .fold(tick, Duration::min)
}

/// What the user must know of perf counters: the events refused, and a count of
/// user space only. Each said once.
fn perf_warnings(perf: &crate::perf::Counters, warnings: &mut Vec<String>) {
    let mut said: Vec<String> = perf
        .refusals()
        .into_iter()
        .map(|(event, why)| format!("{event}: {why}; it shows <not supported>"))
        .collect();
    if perf.user_only() {
        said.push("perf events count user space only: kernel.perf_event_paranoid forbids the kernel's share (set it to 1 or less, or run as root)".into());
    }
    for w in said {
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }
}

/// What the user is told of other programs' writes and device failures found while
/// measuring, each once, and of counters found re-programmed at the end.
fn detections_said(detections: &[sampler::Detection], foreign_at_end: usize) -> Vec<String> {
    let mut said: Vec<String> = Vec::new();
    for d in detections {
        let then = match d.why.is_write() {
            true => "its count is marked invalid, and bfperf programmed the block again (two tools programming the same counters reset each other)",
            false => "its count is marked invalid, and sampling went on",
        };
        let line = format!(
            "{} of {}: {}; {then}",
            d.items.join(", "),
            d.block,
            d.why.describe()
        );
        if !said.contains(&line) {
            said.push(line);
        }
    }
    if foreign_at_end > 0 {
        said.push(format!(
            "{foreign_at_end} counter(s) were found re-programmed by another program at the end of the measurement; their counts are marked invalid"
        ));
    }
    said
}

/// The counts at one moment of a run: an interval runs from one mark to the next.
struct Mark {
    /// The totals counted while enabled.
    totals: Vec<Vec<Acc>>,
    perf: Vec<Count>,
    ns: u64,
    /// The time counting was disabled so far, ns.
    off_ns: u64,
}

/// Runs a measurement: records the configuration, programs, samples each run until
/// `until(run)` says so (or `stop` is set), checks for foreign writes, and restores
/// the device whatever happened.
pub fn measure<'d>(
    device: &'d Device,
    req: &StatRequest,
    pacer: &'d dyn Pacer,
    stop: &AtomicBool,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
) -> Result<StatOutcome> {
    measure_gated(
        device,
        req,
        pacer,
        stop,
        &mut gate::Always,
        until,
        on_interval,
    )
}

/// [`measure`], counting only while `gate` enables it (perf's `--delay` and
/// `--control`): what is counted while disabled is left out, with its time.
pub fn measure_gated<'d>(
    device: &'d Device,
    req: &StatRequest,
    pacer: &'d dyn Pacer,
    stop: &AtomicBool,
    gate: &mut dyn Gate,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
) -> Result<StatOutcome> {
    let (plans, mut warnings) = prepare(device, req)?;
    let mut timing = req.timing;
    timing.tick = safe_tick(device, &plans, timing.tick);
    if plans.iter().any(|p| p.multiplexed()) {
        timing.tick = timing.tick.min(MULTIPLEX_TICK);
    }
    // Perf events alone touch nothing of the device (and hold no lock): no journal.
    let journal = req.journal && !plans.is_empty();
    if journal {
        if let Some(r) = crate::measure::owner::journal::restore_leftover(device)? {
            warnings.push(r.describe());
        }
    }
    let saved = session::save(device, &plans)?;
    let journal = match journal && req.restore {
        true => Some(crate::measure::owner::journal::write(device, &saved)?),
        false => None,
    };
    let outcome = Measurement::start(device, plans, &saved, pacer).and_then(|m| {
        let ctx = RunCtx {
            req,
            timing,
            pacer,
            stop,
        };
        run_all(m, &ctx, gate, until, on_interval, warnings)
    });
    if !req.restore {
        return outcome;
    }
    let restored = crate::measure::owner::journal::put_back(device, &saved, journal);
    match (outcome, restored) {
        (Ok(o), Ok(())) => Ok(o),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(r)) => Err(crate::error::with_context(e, &r.to_string())),
    }
}

/// What every run of a measurement shares.
struct RunCtx<'a> {
    req: &'a StatRequest,
    timing: Timing,
    pacer: &'a dyn Pacer,
    stop: &'a AtomicBool,
}

/// Every run of a started measurement, then what the user must know.
fn run_all<'d>(
    mut m: Measurement<'d>,
    ctx: &RunCtx,
    gate: &mut dyn Gate,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
    mut warnings: Vec<String>,
) -> Result<StatOutcome> {
    let RunCtx {
        req,
        timing,
        pacer,
        stop,
    } = *ctx;
    if !req.per_process {
        let perf = crate::perf::Counters::open(&req.perf, &req.perf_cpus).per_cpu(req.perf_per_cpu);
        perf_warnings(&perf, &mut warnings);
        m = m.with_perf(perf);
    }
    let mut runs = Vec::new();
    for number in 1..=req.repeat.max(1) {
        // The window opens before the command starts.
        let start = m.begin(pacer)?;
        let mut u = until(number)?;
        if let Some(perf) = u.take_perf() {
            perf_warnings(&perf, &mut warnings);
            m.set_perf(perf);
        }
        let run = m.run(
            number,
            start,
            pacer,
            timing,
            u.as_mut(),
            stop,
            gate,
            on_interval,
        )?;
        runs.push(run);
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    m.stop_perf();
    let foreign = m.foreign()?;
    for run in &mut runs {
        m.mark_foreign(run, &foreign);
    }
    let said = detections_said(&m.detections(), foreign.len());
    let touched = !said.is_empty();
    warnings.extend(said);
    Ok(StatOutcome {
        runs,
        warnings,
        foreign: touched,
    })
}

/// [`measure`] on `device`, or by its owner (the exporter) when `shared` is given:
/// then nothing is programmed here, the owner rotates turns, checks for other
/// programs' writes and puts its counters back when the connection ends; perf
/// events are counted here as always.
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure_via<'d>(
    device: &'d Device,
    shared: Option<owner::protocol::Shared<'d>>,
    req: &StatRequest,
    pacer: &'d dyn Pacer,
    stop: &AtomicBool,
    gate: &mut dyn Gate,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
) -> Result<StatOutcome> {
    let Some(shared) = shared else {
        return measure_gated(device, req, pacer, stop, gate, until, on_interval);
    };
    let mut timing = req.timing;
    timing.probe = timing.tick;
    let m = Measurement {
        source: Source::Shared(shared),
        perf: None,
    };
    let ctx = RunCtx {
        req,
        timing,
        pacer,
        stop,
    };
    run_all(m, &ctx, gate, until, on_interval, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::next_deadline;

    #[test]
    fn a_sum_says_each_reason_once_naming_the_blocks_only_where_not_all_gave_it() {
        let pair = |b: &str, r: &str| (b.to_string(), r.to_string());
        let why = [
            pair("mss0", "counting enabled 1.0 s of 1.5 s"),
            pair("mss1", "counting enabled 1.0 s of 1.5 s"),
        ];
        assert_eq!(
            super::reasons_of(&why, 2).as_deref(),
            Some("counting enabled 1.0 s of 1.5 s")
        );
        assert_eq!(
            super::reasons_of(&why[..1], 2).as_deref(),
            Some("mss0: counting enabled 1.0 s of 1.5 s")
        );
        let mixed = [pair("tile0", "a"), pair("tile1", "b"), pair("tile2", "a")];
        assert_eq!(
            super::reasons_of(&mixed, 4).as_deref(),
            Some("tile0, tile2: a; tile1: b")
        );
        assert_eq!(super::reasons_of(&[], 3), None);
    }

    #[test]
    fn a_late_tick_lengthens_the_next_interval_and_never_leaves_a_sliver() {
        let ms = 1_000_000;
        // On time: the next of the grid.
        assert_eq!(next_deadline(200 * ms, 100 * ms, 201 * ms), 300 * ms);
        // 74 ms late: 300 would leave a 26 ms sliver; 400 instead.
        assert_eq!(next_deadline(200 * ms, 100 * ms, 274 * ms), 400 * ms);
        // More than an interval late: the grid point after, half an interval away.
        assert_eq!(next_deadline(200 * ms, 100 * ms, 340 * ms), 400 * ms);
        assert_eq!(next_deadline(200 * ms, 100 * ms, 360 * ms), 500 * ms);
    }
}
