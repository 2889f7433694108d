//! Sampling during a measurement: every counter and register file is opened once and
//! read with one `pread` per tick. Per-counter blocks and registers are differenced
//! with wrap arithmetic at their width; all-at-once blocks are read in windows
//! (`enable` 0, read, `enable` 1), which also keeps 32-bit crspace counters and L3's
//! split registers from wrapping or tearing between reads. Groups of a multiplexed
//! block take turns at each tick.
//!
//! Every tick also checks that nobody else changed what the measurement owns, with
//! the reads that can tell: a 64-bit counter that went backwards was reset or
//! re-programmed (programming resets it); an all-at-once block's `enable` must
//! still read 1 and its `count_clock` the mask programmed; where values cannot tell
//! (all-at-once and multiplexed blocks, whose counters restart each window or
//! turn), every active `event<N>` is read back. A count so touched is marked
//! invalid for the interval and the block's counters are programmed again.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::block::Mechanism;
use crate::device::plan::Switch;
use crate::device::values::event_number;
use crate::device::values::parse_number;
use crate::device::Device;
use crate::error::{io_error, Error, Result};
use crate::kinds::Role;
use crate::measure::plan::{BlockPlan, Slot};
use crate::measure::session::program_group;
use crate::sysfs::{layout, value_text, ValueFile};

mod acc;
mod all_at_once;
mod lend;
mod per_counter;

pub(crate) use acc::{Acc, Detection, Foreign};

struct Reader<'d> {
    rel: String,
    file: Box<dyn ValueFile + 'd>,
    /// An `event<N>` file's last content and the event it named: read back at
    /// every tick, it is parsed again only when its bytes change.
    last_event: Option<(Vec<u8>, Option<u32>)>,
}

impl Reader<'_> {
    /// The event an `event<N>` file names now (None: nothing nameable).
    fn event(&mut self) -> Result<Option<u32>> {
        let bytes = match self.file.read_bytes() {
            Ok(bytes) => bytes,
            Err(e) if e.raw_os_error() == Some(crate::error::errno::EINVAL) => return Ok(None),
            Err(e) => return Err(io_error("reading", &self.rel, None, e)),
        };
        if let Some((last, number)) = &self.last_event {
            if last.as_slice() == bytes {
                return Ok(*number);
            }
        }
        let text = value_text(bytes).map_err(|e| io_error("reading", &self.rel, None, e))?;
        let number = event_number(text);
        // Made again only when the file changed: at the first read, or after
        // another program's write.
        self.last_event = Some((bytes.to_vec(), number));
        Ok(number)
    }

    fn value(&mut self) -> Result<u64> {
        let bytes = self
            .file
            .read_bytes()
            .map_err(|e| io_error("reading", &self.rel, None, e))?;
        parse_number(bytes).ok_or_else(|| Error::BadContent {
            file: self.rel.clone(),
            content: String::from_utf8_lossy(bytes)
                .trim_end()
                .chars()
                .take(80)
                .collect(),
            expected: "a number such as 0x1f",
        })
    }
}

struct BlockState<'d> {
    group: usize,
    accs: Vec<Acc>,
    /// Last raw value, by counter number (counter blocks) or register item.
    last: Vec<u64>,
    /// Readers by counter number (counter blocks).
    counters: Vec<Option<Reader<'d>>>,
    /// `event<N>` readers by counter number, where values cannot reveal a change.
    events: Vec<Option<Reader<'d>>>,
    /// `enable` and `count_clock` read back (all-at-once blocks).
    enable_state: Option<Reader<'d>>,
    clock_state: Option<Reader<'d>>,
    registers: Vec<Reader<'d>>,
    /// Which registers are levels (latest value, not a count), decided once.
    levels: Vec<bool>,
    enable: Option<Switch<'d>>,
    last_ns: u64,
    /// When each item's last turn ended (multiplexing), ns.
    turn_end: Vec<u64>,
    /// The counters were just programmed: a reset cannot show in their values yet.
    fresh: bool,
    /// A read failed (this one) and the values could not be read again since: the
    /// next tick takes new baselines instead of counting.
    stale: Option<Foreign>,
    /// All-at-once blocks: each counter's value at the last probe in this window.
    window_last: Vec<u64>,
    /// Items whose current window a probe found spoiled: the tick leaves it out.
    spoiled: Vec<usize>,
    /// When each counter (counter blocks) or register was last read, ns: where
    /// its count since starts.
    read_ns: Vec<u64>,
    /// All-at-once blocks: when the current window opened (its `enable` write), ns,
    /// and how far from that the opening may have been.
    open_ns: u64,
    open_half: u64,
    /// All-at-once blocks: how long the block was stopped after the last tick's
    /// `now` (from its stop to its restart), ns; not counted.
    gap_ns: u64,
    /// How long its counters take to wrap at their clock (narrower than 64 bits,
    /// the clock known), ns: a count over longer is not known.
    wrap_ns: Option<u64>,
    width_mask: u64,
    saved_mask: u32,
    /// Counters lent to other measurements, joining or leaving at the next window.
    lending: lend::Lending,
}

impl<'d> BlockState<'d> {
    fn counter(&mut self, c: u32) -> Result<u64> {
        match self.counters.get_mut(c as usize).and_then(Option::as_mut) {
            Some(r) => r.value(),
            None => Ok(0),
        }
    }

    fn enable(&mut self, on: bool) -> Result<()> {
        match &mut self.enable {
            Some(s) => s.set(on),
            None => Ok(()),
        }
    }
}

/// What the driver refusing an `enable` write while sampling means.
const ENABLE_EINVAL: &str =
    "the kernel refused to switch the block's counting; its counts for this interval are left out";

/// A failure to read or write as the reason a count is invalid.
fn fault_of(e: &Error) -> Foreign {
    Foreign::Fault {
        errno: e.io_error().and_then(|e| e.raw_os_error()),
    }
}

/// The clock a sampler times its reads and writes with, ns (the measurement's).
pub type Stamp<'d> = std::sync::Arc<dyn Fn() -> u64 + Send + Sync + 'd>;

/// The measurement's state: readers, accumulators, current groups.
pub struct Sampler<'d> {
    device: &'d Device,
    stamp: Stamp<'d>,
    /// What each block counts, and in which turns.
    pub plans: Vec<BlockPlan<'d>>,
    states: Vec<BlockState<'d>>,
    /// Other programs' writes found since the log was last taken.
    log: Vec<Detection>,
    /// Lent counters the kernel would not put back, said.
    put_back_failures: Vec<String>,
    /// The last tick's pass over the blocks: when it began and ended (the
    /// sampler's clock, ns).
    pass: (u64, u64),
}

/// What one counter gained in a turn, and the times that qualify it.
#[derive(Clone, Copy)]
struct Gain {
    /// The events counted.
    delta: u64,
    /// The turn's share of the ticks' time, less the gap an all-at-once block was
    /// stopped in (what coverage is made of), ns.
    turn: u64,
    /// How long the counter counted, from its own bounds (what the rate is made of), ns.
    counted: u64,
    /// The time the turn stands for: longer than `turn` when other groups had the
    /// turns between, or the block was stopped to be read, ns.
    span: u64,
    /// A window of a block stopped to be read: its bounds are its own writes, not
    /// the ticks' times, so its count is always scaled to the span.
    window: bool,
}

impl Gain {
    /// A counter's gain from `last` to `v`, wrapped at its width; None when a
    /// 64-bit value went backwards (reset by someone else: nothing of that window
    /// is known).
    fn of(last: u64, v: u64, width_mask: u64, turn: u64, counted: u64, span: u64) -> Option<Gain> {
        if v < last && width_mask == u64::MAX {
            return None;
        }
        Some(Gain {
            delta: v.wrapping_sub(last) & width_mask,
            turn,
            counted,
            span,
            window: false,
        })
    }

    /// An all-at-once block's gain over a window that started at 0.
    fn of_window(v: u64, width_mask: u64, turn: u64, counted: u64, span: u64) -> Option<Gain> {
        let g = Gain::of(0, v, width_mask, turn, counted, span)?;
        Some(Gain { window: true, ..g })
    }

    /// What the gain adds to the running estimate: the count itself where the
    /// counter counted the whole span between the ticks (the exported raw counter);
    /// otherwise the count scaled to the span at the rate it counted at over its
    /// own bounds.
    fn estimate(&self) -> u64 {
        let counted = if self.counted > 0 {
            self.counted
        } else {
            self.turn
        };
        if (self.window || self.span != self.turn) && counted > 0 {
            (self.delta as u128 * self.span as u128 / counted as u128) as u64
        } else {
            self.delta
        }
    }
}

/// Adds a turn's gain: its count, times and estimate.
fn accumulate(acc: &mut Acc, g: Gain) {
    acc.active_ns += g.turn;
    acc.counted_ns += g.counted;
    acc.total += g.delta;
    acc.estimate += g.estimate();
}

/// The time `f` ran at, ns: the middle of the clock's readings before and after,
/// which bound the moment a read or write took effect.
fn timed<T>(stamp: &Stamp<'_>, f: impl FnOnce() -> T) -> (T, u64) {
    let (out, mid, _) = timed_within(stamp, f);
    (out, mid)
}

/// The times of reads made back to back, as [`timed`] would give each, from one
/// clock reading between two reads instead of two: a read's reading after is the
/// next read's reading before (the work between lies within that bound). A pass
/// of n reads reads the clock n + 1 times.
struct Chain {
    before: u64,
}

impl Chain {
    fn start(stamp: &Stamp<'_>) -> Chain {
        Chain { before: stamp() }
    }

    /// `f`'s result and the middle of the readings that bound it.
    fn timed<T>(&mut self, stamp: &Stamp<'_>, f: impl FnOnce() -> T) -> (T, u64) {
        let out = f();
        let after = stamp().max(self.before);
        let mid = self.before + (after - self.before) / 2;
        self.before = after;
        (out, mid)
    }
}

/// [`timed`], and how far from that middle the moment may be (half the time `f`
/// took: long when the process was preempted around it), ns.
fn timed_within<T>(stamp: &Stamp<'_>, f: impl FnOnce() -> T) -> (T, u64, u64) {
    let mut chain = Chain::start(stamp);
    let before = chain.before;
    let (out, mid) = chain.timed(stamp, f);
    (out, mid, mid - before)
}

/// How precisely an all-at-once window's opening is wanted, ns: an `enable` write
/// that took longer (the process preempted around it) is made again.
const TIGHT_NS: u64 = 50_000;

/// A window is counted when its bounds are known to within this share of its length
/// (1/200: 0.5 %) or to within [`TIGHT_NS`]; a window whose writes took longer (the
/// process preempted) is left out, its time not counted, so that no rate rests on a
/// bound that is not known — unless it is its items' first, which is kept. The
/// running estimate keeps every window: a series left a sweep behind would put a
/// `rate()` off by a whole interval, where the bound is off by its writes' delay.
const UNCERTAIN_PER: u64 = 200;

/// Whether bounds `unknown` ns off leave a rate over `counted` ns not known well
/// enough: beyond [`TIGHT_NS`] and beyond 1/[`UNCERTAIN_PER`] of it. One rule for a
/// window (left out) and for a span holding a kept first window (marked).
fn unknown_beyond_bound(unknown: u64, counted: u64) -> bool {
    unknown > TIGHT_NS && unknown.saturating_mul(UNCERTAIN_PER) > counted
}

/// Why a counter went backwards: another event programmed over it (the events
/// were read before that write landed, so its event is read once more), or a reset.
#[cold]
fn reset_cause(events: Option<&mut Reader<'_>>, p: &BlockPlan, s: &Slot) -> Result<Foreign> {
    if let Some(reader) = events {
        let found = reader.event()?;
        if found != p.items[s.item].number() {
            return Ok(Foreign::EventChanged {
                counter: s.counter,
                found,
            });
        }
    }
    Ok(Foreign::Reset { counter: s.counter })
}

fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// How long counters of `b` take to wrap, counting at most one event a cycle of its
/// clock: None for 64-bit counters, registers and blocks whose clock is unknown.
fn wrap_ns(device: &Device, b: &crate::block::Block) -> Option<u64> {
    if b.width_bits >= 64 || b.mechanism == Mechanism::Registers {
        return None;
    }
    let hz = super::pll_hz(device, b.def().clock_pll?)?.max(1);
    Some(((1u128 << b.width_bits) * 1_000_000_000 / hz as u128) as u64)
}

/// Opens a file to be read with one pread each time.
fn reader<'d>(device: &'d Device, rel: String) -> Result<Reader<'d>> {
    let file = device
        .fs()
        .open_value(&rel)
        .map_err(|e| io_error("opening", &rel, None, e))?;
    Ok(Reader {
        rel,
        file,
        last_event: None,
    })
}

/// Opens, for each counter the plan uses, the file `file` names (its counter, or
/// its event where it counts an event), by counter number.
fn per_counter<'d>(
    device: &'d Device,
    p: &BlockPlan<'d>,
    events_only: bool,
    file: impl Fn(&str, u32) -> String,
) -> Result<Vec<Option<Reader<'d>>>> {
    let slots = p.block.counters.iter().max().map_or(0, |m| *m as usize + 1);
    let mut out: Vec<Option<Reader<'d>>> = (0..slots).map(|_| None).collect();
    for s in p.groups.iter().flatten() {
        let is_event = matches!(p.items[s.item], crate::spec::Item::Event { .. });
        if out[s.counter as usize].is_none() && (is_event || !events_only) {
            out[s.counter as usize] = Some(reader(device, file(&p.block.name, s.counter))?);
        }
    }
    Ok(out)
}

/// The state of one block's sampling: every file it reads opened, nothing read yet.
fn block_state<'d>(
    device: &'d Device,
    p: &BlockPlan<'d>,
    saved_mask: u32,
) -> Result<BlockState<'d>> {
    let b = p.block;
    let slots = b.counters.iter().max().map_or(0, |m| *m as usize + 1);
    let counters = per_counter(device, p, false, layout::counter)?;
    // Read back at every tick: values do not always reveal another event.
    let events = per_counter(device, p, true, layout::event)?;
    let all_at_once = b.mechanism == Mechanism::AllAtOnce;
    let optional = |has: bool, rel: String| has.then(|| reader(device, rel)).transpose();
    let enable_state = optional(all_at_once && b.has_enable, layout::enable(&b.name))?;
    let clock_state = optional(
        all_at_once && b.has_count_clock,
        layout::count_clock(&b.name),
    )?;
    let registers = match b.mechanism {
        Mechanism::Registers => p
            .items
            .iter()
            .map(|i| reader(device, layout::register(&b.name, i.label())))
            .collect::<Result<Vec<_>>>()?,
        _ => Vec::new(),
    };
    let levels = p
        .items
        .iter()
        .map(|i| b.def().role(i.label()) == Role::Level)
        .collect();
    let enable = match all_at_once {
        true => Some(Switch::open(
            device.fs(),
            layout::enable(&b.name),
            ENABLE_EINVAL,
        )?),
        false => None,
    };
    Ok(BlockState {
        group: 0,
        accs: vec![Acc::default(); p.items.len()],
        last: vec![0; slots.max(registers.len())],
        counters,
        events,
        enable_state,
        clock_state,
        registers,
        levels,
        enable,
        last_ns: 0,
        turn_end: vec![0; p.items.len()],
        fresh: true,
        stale: None,
        window_last: vec![0; slots],
        spoiled: Vec::new(),
        read_ns: vec![0; slots.max(p.items.len())],
        open_ns: 0,
        open_half: 0,
        gap_ns: 0,
        wrap_ns: wrap_ns(device, b),
        width_mask: mask(b.width_bits),
        saved_mask,
        lending: lend::Lending::default(),
    })
}

impl<'d> Sampler<'d> {
    /// Opens every file to be sampled (nothing is written); `stamp` is the clock
    /// every read and write that bounds a count is timed with.
    pub fn open(
        device: &'d Device,
        plans: Vec<BlockPlan<'d>>,
        saved_masks: &HashMap<String, u32>,
        stamp: Stamp<'d>,
    ) -> Result<Sampler<'d>> {
        let states = plans
            .iter()
            .map(|p| {
                let saved_mask = saved_masks.get(&p.block.name).copied().unwrap_or(0);
                block_state(device, p, saved_mask)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Sampler {
            device,
            stamp,
            plans,
            states,
            log: Vec::new(),
            put_back_failures: Vec::new(),
            pass: (0, 0),
        })
    }

    /// As [`Sampler::open`], taking over from `old` the blocks whose plan is the
    /// same in both (`kept[i]`: the index of plan `i` in `old`): they go on
    /// counting as they were, their files, baselines and counts kept. Start the
    /// others with [`Sampler::start_others`].
    pub fn open_keeping(
        device: &'d Device,
        plans: Vec<BlockPlan<'d>>,
        saved_masks: &HashMap<String, u32>,
        old: Sampler<'d>,
        kept: &[Option<usize>],
    ) -> Result<Sampler<'d>> {
        let mut old_states: Vec<Option<BlockState<'d>>> =
            old.states.into_iter().map(Some).collect();
        let states = plans
            .iter()
            .zip(kept)
            .map(
                |(p, k)| match k.and_then(|j| old_states.get_mut(j)?.take()) {
                    Some(st) => Ok(st),
                    None => {
                        let saved_mask = saved_masks.get(&p.block.name).copied().unwrap_or(0);
                        block_state(device, p, saved_mask)
                    }
                },
            )
            .collect::<Result<Vec<_>>>()?;
        Ok(Sampler {
            device,
            stamp: old.stamp,
            plans,
            states,
            log: old.log,
            put_back_failures: old.put_back_failures,
            pass: old.pass,
        })
    }

    /// As [`Sampler::start`], for the blocks that are not `kept` only.
    pub fn start_others(&mut self, now: u64, kept: &[Option<usize>]) -> Result<()> {
        let fresh = |i: usize| kept.get(i).is_none_or(Option::is_none);
        for (i, (p, st)) in self.plans.iter().zip(&mut self.states).enumerate() {
            if p.block.mechanism == Mechanism::Registers || !fresh(i) {
                continue;
            }
            program_group(self.device, p, 0, st.saved_mask)?;
            st.enable(true)?;
        }
        for i in (0..self.plans.len()).filter(|i| fresh(*i)) {
            let st = &mut self.states[i];
            st.last_ns = now;
            st.turn_end.iter_mut().for_each(|t| *t = now);
            self.rebaseline(i, now)?;
        }
        Ok(())
    }

    /// Programs the first group of every counter block and starts the all-at-once
    /// ones, then takes the baseline readings at `now`.
    pub fn start(&mut self, now: u64) -> Result<()> {
        for (p, st) in self.plans.iter().zip(&mut self.states) {
            if p.block.mechanism == Mechanism::Registers {
                continue;
            }
            program_group(self.device, p, 0, st.saved_mask)?;
            st.enable(true)?;
        }
        self.rebase(now)
    }

    /// New baselines at `now`, accumulators kept (a new window or a new run).
    pub fn rebase(&mut self, now: u64) -> Result<()> {
        for i in 0..self.plans.len() {
            let st = &mut self.states[i];
            st.last_ns = now;
            st.turn_end.iter_mut().for_each(|t| *t = now);
            self.rebaseline(i, now)?;
        }
        Ok(())
    }

    /// Zeroes the accumulators (the start of another run).
    pub fn reset_counts(&mut self) {
        for st in &mut self.states {
            st.accs.iter_mut().for_each(|a| *a = Acc::default());
        }
    }

    /// One tick at `now`: reads every active value once, checks for other
    /// programs' writes (programming the block again where it finds one), and moves
    /// multiplexed blocks to their next group. A block whose files fail is marked
    /// for that tick (its items invalid, with the reason) and sampled again at the
    /// next: one flaky read never ends a measurement.
    pub fn tick(&mut self, now: u64) -> Result<()> {
        let began = (self.stamp)();
        for i in 0..self.plans.len() {
            self.tick_block(i, now);
        }
        self.pass = (began, (self.stamp)());
        Ok(())
    }

    /// When the last tick's pass over the blocks began and ended (its first read
    /// and its last, within the work between them), ns of the sampler's clock.
    pub fn last_pass(&self) -> (u64, u64) {
        self.pass
    }

    fn tick_block(&mut self, i: usize, now: u64) {
        let dt = now.saturating_sub(self.states[i].last_ns);
        self.states[i].last_ns = now;
        if let Some(why) = self.states[i].stale {
            // Nothing is known of the span since the failure: it stays marked, and
            // counting starts again from values read now.
            let now = self.restart_at(i, now);
            let (stale, why) = match self.rebaseline(i, now) {
                Ok(()) => (None, why),
                Err(e) => (Some(fault_of(&e)), fault_of(&e)),
            };
            self.states[i].stale = stale;
            self.fault(i, why);
            return;
        }
        let found = match self.plans[i].block.mechanism {
            Mechanism::Registers => self.tick_registers(i, dt),
            Mechanism::PerCounter => self.tick_per_counter(i, dt),
            Mechanism::AllAtOnce => self.tick_all_at_once(i, dt),
        };
        match found {
            Ok(Some((items, why))) => self.note(i, items, why),
            Ok(None) => {}
            Err(e) => {
                let why = fault_of(&e);
                self.fault(i, why);
                let now = self.restart_at(i, now);
                self.states[i].stale = self.rebaseline(i, now).err().map(|e| fault_of(&e));
            }
        }
    }

    /// When block `i`'s counting starts again after a failure: as its values are read
    /// anew, which is later than the tick's `now` by the failed reads and their
    /// handling (milliseconds on a slow or emulated core). The span between is not
    /// counted, so the next interval's coverage says so and its value is scaled.
    #[cold]
    fn restart_at(&mut self, i: usize, now: u64) -> u64 {
        let at = (self.stamp)().max(now);
        self.states[i].last_ns = at;
        at
    }

    /// A check between ticks, at `now`: reads what would show another program's
    /// write without changing anything; a block where something is off is ticked at
    /// once (marking it and programming it again). Blocks whose tick only reads
    /// (per-counter blocks that do not take turns) are ticked.
    pub fn probe(&mut self, now: u64) {
        for i in 0..self.plans.len() {
            if self.states[i].stale.is_some() {
                continue;
            }
            let off = match self.plans[i].block.mechanism {
                // A cleared register shows at the next tick: it went backwards.
                Mechanism::Registers => Ok(false),
                // Its tick only reads (events included): it is the check.
                Mechanism::PerCounter if !self.plans[i].multiplexed() => Ok(true),
                Mechanism::PerCounter => self.probe_per_counter(i),
                Mechanism::AllAtOnce => self.probe_all_at_once(i),
            };
            // A failing read is the tick's to mark.
            if off.unwrap_or(true) {
                self.tick_block(i, now);
            }
        }
    }

    /// Reads block `i`'s values again as new baselines (at a start, or after a
    /// failure), without counting what they gained; an all-at-once block starts a
    /// new window from 0, not counting from `now` until it opens.
    fn rebaseline(&mut self, i: usize, now: u64) -> Result<()> {
        let (p, st, stamp) = (&self.plans[i], &mut self.states[i], &self.stamp);
        // Register blocks have no groups.
        for s in p.groups.get(st.group).into_iter().flatten() {
            st.turn_end[s.item] = now;
        }
        st.gap_ns = 0;
        match p.block.mechanism {
            Mechanism::Registers => {
                let mut chain = Chain::start(stamp);
                for r in 0..st.registers.len() {
                    let (v, at) = chain.timed(stamp, || st.registers[r].value());
                    (st.last[r], st.read_ns[r]) = (v?, at);
                }
            }
            Mechanism::PerCounter => {
                let mut chain = Chain::start(stamp);
                for s in &p.groups[st.group] {
                    let c = s.counter as usize;
                    let (v, at) = chain.timed(stamp, || st.counter(s.counter));
                    (st.last[c], st.read_ns[c]) = (v?, at);
                }
            }
            Mechanism::AllAtOnce => {
                st.window_last.iter_mut().for_each(|v| *v = 0);
                st.enable(false)?;
                let opened = self.reopen(i, now, false)?;
                self.states[i].gap_ns = opened.saturating_sub(now);
            }
        }
        Ok(())
    }

    /// Marks the items of block `i` sampled now after a failure.
    fn fault(&mut self, i: usize, why: Foreign) {
        let (p, st) = (&self.plans[i], &mut self.states[i]);
        let items: Vec<usize> = match p.block.mechanism {
            Mechanism::Registers => (0..p.items.len()).collect(),
            _ => p.groups[st.group].iter().map(|s| s.item).collect(),
        };
        self.note(i, items, why);
    }

    fn note(&mut self, block: usize, items: Vec<usize>, why: Foreign) {
        let p = &self.plans[block];
        for &i in &items {
            self.states[block].accs[i].touched(why);
        }
        self.log.push(Detection {
            block: p.block.name.clone(),
            items: items
                .iter()
                .map(|&i| p.items[i].label().to_string())
                .collect(),
            why,
        });
    }

    /// Other programs' writes found since the last call.
    pub fn take_log(&mut self) -> Vec<Detection> {
        std::mem::take(&mut self.log)
    }

    /// What every item has counted so far, by block.
    pub fn totals(&self) -> Vec<Vec<Acc>> {
        let mut out = Vec::new();
        self.totals_into(&mut out);
        out
    }

    /// [`Sampler::totals`] into `out`, keeping its room (once per `-I` interval).
    pub(crate) fn totals_into(&self, out: &mut Vec<Vec<Acc>>) {
        out.resize_with(self.states.len(), Vec::new);
        for (o, s) in out.iter_mut().zip(&self.states) {
            o.clone_from(&s.accs);
        }
    }

    /// The clock its reads and writes are timed with.
    pub(crate) fn stamp(&self) -> Stamp<'d> {
        self.stamp.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::Acc;

    /// An item whose first window (100 ms) a busy machine bounded to within 2 ms only.
    fn first_window() -> Acc {
        Acc {
            total: 1_000,
            active_ns: 100_000_000,
            counted_ns: 100_000_000,
            estimate: 1_000,
            uncertain_ns: 2_000_000,
            ..Acc::default()
        }
    }

    #[test]
    fn a_delayed_first_window_marks_the_spans_it_is_more_than_half_a_percent_of() {
        let first = first_window();
        // Its own interval: 2 ms of 100 ms, not known to 0.5 %.
        let why = first.since(&Acc::default()).unbounded().expect("marked");
        assert!(why.contains("2000 µs of the 100000 µs"), "{why}");
        // Later intervals do not hold it.
        let mut later = first;
        later.total += 1_000;
        later.counted_ns += 100_000_000;
        later.active_ns += 100_000_000;
        assert_eq!(later.since(&first).unbounded(), None);
        // A whole run of 0.3 s holds it at 0.67 %: marked; of 0.4 s at 0.5 %: known.
        let mut run = later;
        run.counted_ns += 100_000_000;
        assert!(run.since(&Acc::default()).unbounded().is_some());
        run.counted_ns += 100_000_000;
        assert_eq!(run.since(&Acc::default()).unbounded(), None);
    }

    #[test]
    fn a_small_delay_never_marks() {
        let mut acc = first_window();
        acc.uncertain_ns = 50_000;
        acc.counted_ns = 1_000_000;
        assert_eq!(acc.unbounded(), None);
    }
}
