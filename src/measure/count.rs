//! A count and what is made of counts: an item's estimate over a span from its
//! accumulator, sums per kind, perf's counts of an interval, and the inputs of the
//! metrics.

use schemars::JsonSchema;
use serde::Serialize;

use super::plan::BlockPlan;
use super::sampler::Acc;
use crate::block::BlockKind;
use crate::spec::Item;

/// A block's or an event's name in a [`Count`]: shared, so that the counts of
/// every interval name their items without copying the names.
pub type Name = std::sync::Arc<str>;

/// One item's count over a span.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Count {
    /// The block, or (aggregated) the kind of the blocks summed.
    pub block: Name,
    /// The block's kind (or of the blocks summed).
    pub kind: BlockKind,
    /// How many blocks are summed (1 with -A).
    pub blocks: usize,
    /// The counter (per block, when not multiplexed); null for registers and sums.
    pub counter: Option<u32>,
    /// The event's name, `cycles`, or the register's name.
    pub event: Name,
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
                Some(cpu) => format!("CPU{cpu}").into(),
                None => r.event.pmu.as_str().into(),
            },
            kind: BlockKind::Perf,
            blocks: 1,
            counter: None,
            event: r.event.name.as_str().into(),
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

#[cfg(test)]
impl Count {
    /// A valid count of `value` events of `event` in `block`, counted over all of
    /// its span (1 ns), for tests.
    pub(crate) fn example(block: &str, kind: BlockKind, event: &str, value: u64) -> Count {
        Count {
            block: block.into(),
            kind,
            blocks: 1,
            counter: None,
            event: event.into(),
            event_number: None,
            value: Some(value),
            raw: value,
            unit: "events",
            coverage: 1.0,
            enabled_ns: 1,
            running_ns: 1,
            counted: true,
            valid: true,
            invalid: None,
            supported: true,
        }
    }
}

pub(crate) fn unit(item: &Item) -> &'static str {
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
    counts_of(
        &mut out,
        plans,
        accs.iter().map(|a| a.iter().copied()),
        span_ns,
    );
    out
}

/// [`counts`] of what the accumulators of `now` gathered since `then` (a run's
/// totals at two moments), made item by item with no copy of the accumulators
/// between, into `out`: an interval's counts are made in the places of the
/// interval's before, and a count whose place held the same item keeps its names
/// (every interval of a run has the same items in the same order: its names are
/// not taken again at every interval).
pub(crate) fn counts_since_into(
    out: &mut Vec<Count>,
    plans: &[BlockPlan],
    now: &[Vec<Acc>],
    then: &[Vec<Acc>],
    span_ns: u64,
) {
    let since = now
        .iter()
        .zip(then)
        .map(|(n, t)| n.iter().zip(t).map(|(n, t)| n.since(t)));
    counts_of(out, plans, since, span_ns);
}

/// The counts of each block's accumulators, block by block as the plans go, in
/// the places of `out`'s.
fn counts_of<B: Iterator<Item = Acc>>(
    out: &mut Vec<Count>,
    plans: &[BlockPlan],
    blocks: impl Iterator<Item = B>,
    span_ns: u64,
) {
    let mut n = 0;
    for (p, accs) in plans.iter().zip(blocks) {
        for (ii, (item, acc)) in p.items.iter().zip(accs).enumerate() {
            let (block, event) = (&p.names.block, &p.names.items[ii]);
            let same = |c: &Count| {
                std::sync::Arc::ptr_eq(&c.block, block) && std::sync::Arc::ptr_eq(&c.event, event)
            };
            put(
                out,
                n,
                same,
                block,
                event,
                Numbers::estimate(p, ii, item, &acc, span_ns),
            );
            n += 1;
        }
    }
    out.truncate(n);
}

// The numbers are made in their place: `put`, `set_numbers` and both makers of
// `Numbers` inlined, an interval writes each count's fields once (not inlined, a
// tick took 1.5 k instructions more, each count's numbers copied twice).
/// Place `n` of `out` given these numbers: the count there keeps its names where
/// it is `same` item, or is made with `block` and `event`.
#[inline(always)]
fn put(
    out: &mut Vec<Count>,
    n: usize,
    same: impl FnOnce(&Count) -> bool,
    block: &Name,
    event: &Name,
    numbers: Numbers,
) {
    match out.get_mut(n) {
        Some(c) if same(c) => c.set_numbers(numbers),
        Some(c) => *c = Count::of(block.clone(), event.clone(), numbers),
        None => out.push(Count::of(block.clone(), event.clone(), numbers)),
    }
}

/// Everything of a [`Count`] but its names: what an interval makes anew for each.
struct Numbers {
    kind: BlockKind,
    blocks: usize,
    counter: Option<u32>,
    event_number: Option<u32>,
    value: Option<u64>,
    raw: u64,
    unit: &'static str,
    coverage: f64,
    enabled_ns: u64,
    running_ns: u64,
    counted: bool,
    valid: bool,
    invalid: Option<String>,
    supported: bool,
}

impl Numbers {
    /// Item `ii` of plan `p` over a span of `span_ns` (0: unscaled), from its
    /// accumulator.
    #[inline(always)]
    fn estimate(p: &BlockPlan, ii: usize, item: &Item, acc: &Acc, span_ns: u64) -> Numbers {
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
        let unbounded = acc.unbounded();
        Numbers {
            kind: p.block.kind,
            blocks: 1,
            counter: p.counter_of(ii),
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
        }
    }

    /// A sum begun with count `c`: its numbers (its reason is the sum's, said
    /// after).
    #[inline(always)]
    fn of_first(c: &Count) -> Numbers {
        Numbers {
            kind: c.kind,
            blocks: c.blocks,
            counter: c.counter,
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
        }
    }
}

impl Count {
    /// The count of `event` in `block` with these numbers.
    fn of(block: Name, event: Name, numbers: Numbers) -> Count {
        // Every field but the names is set from `numbers` below: a field added
        // to `Count` belongs in `Numbers`, where its makers and `set_numbers`
        // must name it.
        let mut c = Count {
            block,
            kind: numbers.kind,
            blocks: 0,
            counter: None,
            event,
            event_number: None,
            value: None,
            raw: 0,
            unit: "",
            coverage: 0.0,
            enabled_ns: 0,
            running_ns: 0,
            counted: false,
            valid: false,
            invalid: None,
            supported: false,
        };
        c.set_numbers(numbers);
        c
    }

    /// Its numbers, its names kept (every field of [`Numbers`] named: one added
    /// there must be set here, and made by both of its makers).
    #[inline(always)]
    fn set_numbers(&mut self, numbers: Numbers) {
        let Numbers {
            kind,
            blocks,
            counter,
            event_number,
            value,
            raw,
            unit,
            coverage,
            enabled_ns,
            running_ns,
            counted,
            valid,
            invalid,
            supported,
        } = numbers;
        self.kind = kind;
        self.blocks = blocks;
        self.counter = counter;
        self.event_number = event_number;
        self.value = value;
        self.raw = raw;
        self.unit = unit;
        self.coverage = coverage;
        self.enabled_ns = enabled_ns;
        self.running_ns = running_ns;
        self.counted = counted;
        self.valid = valid;
        self.invalid = invalid;
        self.supported = supported;
    }
}

/// Sums counts of the same kind and event across blocks.
pub fn aggregate(counts: &[Count]) -> Vec<Count> {
    let mut out = Vec::new();
    aggregate_into(&mut out, counts);
    out
}

/// [`aggregate`] into `out`, keeping its room (this runs at every -I interval): a
/// sum whose place held the same sum keeps its names.
pub fn aggregate_into(out: &mut Vec<Count>, counts: &[Count]) {
    let mut n = 0;
    for c in counts {
        match out[..n]
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
            }
            None => {
                // Named for its first block until a second joins (below); a place
                // that held this sum of several keeps the kind's name.
                let same = |o: &Count| o.kind == c.kind && o.event == c.event;
                put(out, n, same, &c.block, &c.event, Numbers::of_first(c));
                let o = &mut out[n];
                if o.block != c.block && *o.block != *c.kind.as_str() {
                    o.block = c.block.clone();
                }
                n += 1;
            }
        }
    }
    out.truncate(n);
    let any_reason = counts.iter().any(|c| c.invalid.is_some());
    for o in out.iter_mut() {
        // Each reason of the sum's blocks, said once for the blocks that share it.
        if any_reason {
            let why: Vec<(Name, String)> = counts
                .iter()
                .filter(|c| c.kind == o.kind && c.event == o.event)
                .filter_map(|c| Some((c.block.clone(), c.invalid.clone()?)))
                .collect();
            o.invalid = reasons_of(&why, o.blocks);
        }
        if o.blocks != 1 {
            if *o.block != *o.kind.as_str() {
                o.block = kind_name(o.kind);
            }
            o.counter = None;
        } else if *o.block == *o.kind.as_str() {
            // A sum of one block keeps that block's name (`tile2`, not `tile`, which
            // reads as every tile), where its place held a sum of several.
            if let Some(first) = counts
                .iter()
                .find(|c| c.kind == o.kind && c.event == o.event)
            {
                if first.block != o.block {
                    o.block = first.block.clone();
                }
            }
        }
    }
}

/// A kind's name as a sum's block is named: made once per kind, shared by every
/// interval's sums.
#[cold]
fn kind_name(kind: BlockKind) -> Name {
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<Vec<(BlockKind, Name)>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, n)) = names.iter().find(|(k, _)| *k == kind) {
        return n.clone();
    }
    let n: Name = kind.as_str().into();
    names.push((kind, n.clone()));
    n
}

/// A sum's reason from its blocks' (block, reason) pairs: each reason once, after the
/// blocks that gave it (`mss0, mss2: …`), or alone when every block of the sum gave
/// it (a one-block sum's label already names its block).
#[cold]
pub(crate) fn reasons_of(why: &[(Name, String)], blocks: usize) -> Option<String> {
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

/// Counts of a span of `span` ns that counted `on` ns of it (`--delay`,
/// `--control`): `<not counted>` when disabled throughout, else said on each valid
/// count when partly.
pub(crate) fn disabled_for(counts: &mut [Count], on: u64, span: u64) {
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
