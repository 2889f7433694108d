//! The measurement engine behind `stat`, `top` and the exporter: count chosen events
//! during a command or a period, across many blocks, at intervals, and leave the
//! device as it was.
//!
//! The flow: resolve the specs ([`crate::spec`]), place them on counters ([`place`]),
//! record the configuration (`session::save`) in a journal, program and start,
//! sample every tick ([`Sampler`]), check for foreign re-programming, restore.
//!
//! What runs only at a start, an end, a failure or another program's write is
//! `#[cold]`: kept out of the tick's code, which a tick on a busy machine pays for
//! line by line (docs/performance.md).

pub(crate) mod compose;
pub mod control;
mod count;
pub(crate) mod defaults;
pub mod gate;
pub(crate) mod order;
pub(crate) mod owner;
pub(crate) mod pace;
pub(crate) mod plan;
pub(crate) mod repeat;
pub(crate) mod request;
pub(crate) mod sampler;
pub mod series;
pub(crate) mod session;
pub(crate) mod shadow;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::BlockKind;
use crate::device::Device;
use crate::error::Result;
use gate::{Excluded, Gate, Switch};
pub use plan::{place, BlockPlan};
use sampler::Acc;
pub use sampler::{Sampler, Stamp};

pub use count::{aggregate, aggregate_into, metric_inputs, Count, Name};
pub(crate) use count::{counts, counts_since_into, disabled_for, metric_values, perf_since};
#[cfg(feature = "sim")]
pub use pace::VirtualPacer;
pub(crate) use pace::{after, next_deadline, ns, poll_readable, poll_writable};
pub use pace::{For, Forever, Pacer, RealPacer, Timing, Until};
pub(crate) use request::pll_hz;
pub use request::{measure, measure_gated, prepare, StatOutcome, StatRequest};

/// How often multiplexed groups take turns: short enough that every group counts
/// several times in a second, so a short measurement still covers them all.
pub const MULTIPLEX_TICK: Duration = Duration::from_millis(100);

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
    /// The room of the last interval's counts, for the next's.
    counts: Vec<Count>,
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

    /// [`Source::totals`] into `out`, keeping its room where it can.
    fn totals_into(&self, out: &mut Vec<Vec<Acc>>) {
        match self {
            Source::Own(s) => s.totals_into(out),
            Source::Shared(s) => *out = s.totals(),
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
            counts: Vec::new(),
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
        let mut spare: Option<Mark> = None; // the mark before `previous`, for its room
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
                    let mark = self.mark(now, &off, spare.take());
                    self.hand_over(number, start, &previous, &mark, on_interval)?;
                    spare = Some(std::mem::replace(&mut previous, mark));
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
    #[cold]
    fn finish(&mut self, number: u32, start: u64, now: u64, off: &Excluded) -> Run {
        let elapsed_ns = now.saturating_sub(start);
        let (totals, off_ns) = off.enabled(now, self.source.totals());
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
    #[cold]
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
    #[cold]
    fn first_mark(&mut self, start: u64, off: &Excluded) -> Mark {
        let mut mark = self.mark(start, off, None);
        for c in &mut mark.perf {
            c.raw = 0;
            c.value = c.value.map(|_| 0);
            c.enabled_ns = 0;
            c.running_ns = 0;
        }
        mark
    }

    /// Where the counts stand at `now`: the start of the next interval (in the
    /// room of a `spare` mark no longer needed).
    fn mark(&mut self, now: u64, off: &Excluded, spare: Option<Mark>) -> Mark {
        let mut totals = spare.map(|m| m.totals).unwrap_or_default();
        self.source.totals_into(&mut totals);
        let (totals, off_ns) = off.enabled(now, totals);
        Mark {
            totals,
            perf: self.perf_counts(),
            ns: now,
            off_ns,
        }
    }

    /// The interval between two marks, handed to `on_interval`; the room of its
    /// counts is kept for the next.
    fn hand_over(
        &mut self,
        number: u32,
        start: u64,
        from: &Mark,
        to: &Mark,
        on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
    ) -> Result<()> {
        let interval = self.interval(number, start, from, to);
        let handed = on_interval(&interval);
        self.counts = interval.counts;
        handed
    }

    /// The interval of run `number` (which started at `start`) between two marks.
    fn interval(&mut self, number: u32, start: u64, from: &Mark, to: &Mark) -> Interval {
        let span = to.ns - from.ns;
        let on = span.saturating_sub(to.off_ns.saturating_sub(from.off_ns));
        let mut interval_counts = std::mem::take(&mut self.counts);
        counts_since_into(
            &mut interval_counts,
            self.plans(),
            &to.totals,
            &from.totals,
            on,
        );
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

    /// Counters that another program re-programmed: (block index, item index),
    /// read back through the files the sampler holds open (the device's files
    /// where it was opened: a device gone since fails the read, and whatever took
    /// its place is never read).
    pub fn foreign(&mut self) -> Result<Vec<(usize, usize)>> {
        match &mut self.source {
            Source::Own(sampler) => sampler.reprogrammed(),
            // The owner of a shared device checks its counters; its counts say so.
            Source::Shared(_) => Ok(Vec::new()),
        }
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
            if names
                .iter()
                .any(|(b, e)| **b == *c.block && **e == *c.event)
            {
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

/// The counts at one moment of a run: an interval runs from one mark to the next.
struct Mark {
    /// The totals counted while enabled.
    totals: Vec<Vec<Acc>>,
    perf: Vec<Count>,
    ns: u64,
    /// The time counting was disabled so far, ns.
    off_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::next_deadline;

    #[test]
    fn a_sum_says_each_reason_once_naming_the_blocks_only_where_not_all_gave_it() {
        let pair = |b: &str, r: &str| (super::Name::from(b), r.to_string());
        let why = [
            pair("mss0", "counting enabled 1.0 s of 1.5 s"),
            pair("mss1", "counting enabled 1.0 s of 1.5 s"),
        ];
        assert_eq!(
            super::count::reasons_of(&why, 2).as_deref(),
            Some("counting enabled 1.0 s of 1.5 s")
        );
        assert_eq!(
            super::count::reasons_of(&why[..1], 2).as_deref(),
            Some("mss0: counting enabled 1.0 s of 1.5 s")
        );
        let mixed = [pair("tile0", "a"), pair("tile1", "b"), pair("tile2", "a")];
        assert_eq!(
            super::count::reasons_of(&mixed, 4).as_deref(),
            Some("tile0, tile2: a; tile1: b")
        );
        assert_eq!(super::count::reasons_of(&[], 3), None);
    }

    #[test]
    fn sums_made_again_in_kept_room_are_the_sums_made_anew() {
        use super::{aggregate, aggregate_into, Count};
        use crate::block::BlockKind;
        let mut reads = Count::example("tile0", BlockKind::Tile, "MEMORY_READS", 5);
        reads.counter = Some(0);
        let mut touched = Count::example("tile1", BlockKind::Tile, "MEMORY_READS", 7);
        (touched.valid, touched.invalid) = (false, Some("written".into()));
        let mut alone = Count::example("mss1", BlockKind::Mss, "EVENT_A", 3);
        alone.counter = Some(2);
        let counts = [reads, touched, alone];
        let sums = aggregate(&counts);
        assert_eq!(sums.len(), 2);
        let (tile, mss) = (&sums[0], &sums[1]);
        assert_eq!(
            (&*tile.block, tile.blocks, tile.value),
            ("tile", 2, Some(12))
        );
        assert_eq!(
            (tile.valid, tile.invalid.as_deref()),
            (false, Some("tile1: written"))
        );
        // A sum of one block is named for it, with its counter.
        assert_eq!(
            (&*mss.block, mss.counter, mss.value),
            ("mss1", Some(2), Some(3))
        );
        // The room of an earlier interval's sums, of other counts, holds none of them.
        let mut room = aggregate(&[Count::example("mss0", BlockKind::Mss, "EVENT_B", 1)]);
        aggregate_into(&mut room, &counts);
        assert_eq!(room, sums);
        aggregate_into(&mut room, &counts);
        assert_eq!(room, sums);
        // In the room of the same sums in another order, and of a sum of several
        // tiles where one tile is left: each as made anew, the tile named for it
        // with its counter, no reason kept from before.
        room.reverse();
        aggregate_into(&mut room, &counts);
        assert_eq!(room, sums);
        let mut left = Count::example("tile1", BlockKind::Tile, "MEMORY_READS", 7);
        left.counter = Some(1);
        let one = [left, counts[2].clone()];
        aggregate_into(&mut room, &one);
        assert_eq!(room, aggregate(&one));
        assert_eq!(
            (
                &*room[0].block,
                room[0].counter,
                room[0].valid,
                room[0].invalid.as_deref()
            ),
            ("tile1", Some(1), true, None)
        );
        aggregate_into(&mut room, &counts);
        assert_eq!(room, sums);
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
