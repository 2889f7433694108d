//! Differences between two snapshots: deltas, rates, wraps, resets, and a PCIe summary.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::BlockKind;
use crate::error::{Error, Result};
use crate::kinds::Role;
use crate::ops::snapshot::{Snapshot, SnapshotBlock};

/// Why a value's delta is not a plain subtraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// A counter narrower than 64 bits went down: it wrapped once.
    Wrapped,
    /// A register or 64-bit counter went down: it was reset; delta counted from 0.
    Reset,
    /// The counter's event changed between the snapshots: no delta.
    EventChanged,
    /// A level (a measurement), not a count: shown, not differenced.
    Level,
    /// A control register: shown, not differenced.
    Control,
}

/// One counter's or register's change between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ValueDiff {
    /// The block.
    pub block: String,
    /// The counter's number; null for a register.
    pub counter: Option<u32>,
    /// The register's name; null for a counter.
    pub register: Option<String>,
    /// The counter's event number in the newer snapshot.
    pub event: Option<u32>,
    /// The event's name in the newer snapshot.
    pub event_name: Option<String>,
    /// The older snapshot's value.
    pub old: u64,
    /// The newer snapshot's value.
    pub new: u64,
    /// new − old, over a wrap when the width allows; null when it cannot be known (reset, re-programmed).
    pub delta: Option<u64>,
    /// The delta per second of the interval.
    pub rate_per_s: Option<f64>,
    /// Why the delta is not a plain difference (wrapped, reset, re-programmed...).
    pub flag: Option<Flag>,
}

/// Traffic of one PCIe block over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PcieSummary {
    /// The pcie block.
    pub block: String,
    /// Inbound bytes per second (posted + non-posted + completions).
    pub in_bytes_per_s: f64,
    /// Outbound bytes per second.
    pub out_bytes_per_s: f64,
    /// Inbound gigabits per second.
    pub in_gbit_per_s: f64,
    /// Outbound gigabits per second.
    pub out_gbit_per_s: f64,
    /// Inbound packets per second.
    pub in_packets_per_s: f64,
    /// Outbound packets per second.
    pub out_packets_per_s: f64,
    /// Bytes/s by type: posted, non-posted, completion.
    pub in_bytes_per_s_by_type: Breakdown,
    /// Outbound bytes/s by type.
    pub out_bytes_per_s_by_type: Breakdown,
    /// Inbound packets/s by type.
    pub in_packets_per_s_by_type: Breakdown,
    /// Outbound packets/s by type.
    pub out_packets_per_s_by_type: Breakdown,
}

/// A PCIe rate split by transaction type.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default, JsonSchema)]
pub struct Breakdown {
    /// Posted (memory writes).
    pub posted: f64,
    /// Non-posted (reads, configuration).
    pub non_posted: f64,
    /// Completions (read data returned).
    pub completion: f64,
}

/// Which clock the interval was measured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntervalSource {
    /// Both snapshots come from the same boot of the same host.
    Monotonic,
    /// The snapshots' wall clocks (different boots or hosts): less exact.
    WallClock,
}

/// The difference between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Diff {
    /// Seconds between them.
    pub interval_s: f64,
    /// Which clock measured the interval.
    pub interval_source: IntervalSource,
    /// How far every rate may be off, as a share of it: each snapshot's time is the
    /// middle of its read pass, so a pass a busy machine stretched leaves its values'
    /// moment known to half its length. A warning says so above 0.5 %.
    #[serde(default)]
    pub rate_uncertainty: f64,
    /// Differences between the snapshots' host, device or generation.
    pub warnings: Vec<String>,
    /// Each value present in both.
    pub values: Vec<ValueDiff>,
    /// Values only the older snapshot has (`block/counter`).
    pub only_in_old: Vec<String>,
    /// Values only the newer snapshot has.
    pub only_in_new: Vec<String>,
    /// PCIe traffic per pcie block.
    pub pcie: Vec<PcieSummary>,
}

fn interval(old: &Snapshot, new: &Snapshot) -> (f64, IntervalSource) {
    let wall = (new.timestamp_unix_ns as f64 - old.timestamp_unix_ns as f64) / 1e9;
    let mono = (new.monotonic_ns as f64 - old.monotonic_ns as f64) / 1e9;
    let same_boot = old.hostname == new.hostname
        && new.monotonic_ns > old.monotonic_ns
        && (mono - wall).abs() <= (wall.abs() * 0.01).max(1.0);
    if same_boot {
        (mono, IntervalSource::Monotonic)
    } else {
        (wall, IntervalSource::WallClock)
    }
}

fn counter_delta(old: u64, new: u64, width: u32) -> (u64, Option<Flag>) {
    if new >= old {
        (new - old, None)
    } else if width < 64 {
        (
            ((1u128 << width) + new as u128 - old as u128) as u64,
            Some(Flag::Wrapped),
        )
    } else {
        (new, Some(Flag::Reset))
    }
}

/// What differs between the two snapshots' origins (host, device, generation).
fn origin_differences(old: &Snapshot, new: &Snapshot) -> Vec<String> {
    [
        ("host", &old.hostname, &new.hostname),
        ("device", &old.device, &new.device),
        ("generation", &old.generation, &new.generation),
    ]
    .into_iter()
    .filter(|(_, a, b)| a != b)
    .map(|(what, a, b)| format!("the snapshots come from different {what}s: {a} and {b}"))
    .collect()
}

/// A counter or register recorded with a different width in the two snapshots.
fn width_mismatch(old: &Snapshot, new: &Snapshot) -> Option<String> {
    let widths = |s: &Snapshot| -> HashMap<(String, String), u32> {
        s.blocks
            .iter()
            .flat_map(|b| {
                b.counters
                    .iter()
                    .map(|c| {
                        (
                            (b.block.clone(), format!("counter{}", c.counter)),
                            c.width_bits,
                        )
                    })
                    .chain(
                        b.registers
                            .iter()
                            .map(|r| ((b.block.clone(), r.register.clone()), r.width_bits)),
                    )
            })
            .collect()
    };
    let newer = widths(new);
    let mut found: Vec<String> = widths(old)
        .into_iter()
        .filter_map(|(key, w)| {
            let n = *newer.get(&key)?;
            (n != w).then(|| {
                format!(
                    "{} {} is {w} bits wide in the first and {n} in the second",
                    key.0, key.1
                )
            })
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Checks that two snapshots can be compared: the older first; every value of one
/// width in both; from one host, device and generation (a warning each, or an error
/// with `strict`). `names` are the two files, for messages. Returns the warnings.
pub fn check(
    old: &Snapshot,
    new: &Snapshot,
    strict: bool,
    names: (&str, &str),
) -> Result<Vec<String>> {
    if let Some(problem) = width_mismatch(old, new) {
        return Err(Error::SnapshotMismatch {
            problem: format!(
                "{} and {} disagree: {problem}; a delta across widths means nothing (snapshots of different devices or drivers?)",
                names.0, names.1
            ),
        });
    }
    let (secs, _) = interval(old, new);
    if secs < 0.0 {
        return Err(Error::SnapshotMismatch {
            problem: format!(
                "the second snapshot ({}) was taken before the first ({}): give the older one first (swap the two)",
                new.timestamp, old.timestamp
            ),
        });
    }
    let warnings = origin_differences(old, new);
    if strict && !warnings.is_empty() {
        return Err(Error::SnapshotMismatch {
            problem: format!("{} (--strict)", warnings.join("; ")),
        });
    }
    Ok(warnings)
}

/// The values a snapshot could not read, said (they have no difference).
fn unread(snap: &Snapshot, which: &str) -> Vec<String> {
    snap.blocks
        .iter()
        .flat_map(|b| &b.unreadable)
        .map(|u| {
            format!(
                "{} was not read in the {which} snapshot ({}): it has no difference",
                u.file, u.problem
            )
        })
        .collect()
}

/// The share of a rate above which its uncertainty is said.
const UNCERTAIN: f64 = 0.005;

/// Compares two snapshots, in time linear in their size.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Diff {
    let (secs, source) = interval(old, new);
    let rate = |d: u64| (secs > 0.0).then(|| d as f64 / secs);
    let new_blocks: HashMap<&str, _> = new.blocks.iter().map(|b| (b.block.as_str(), b)).collect();
    let old_names: std::collections::HashSet<&str> =
        old.blocks.iter().map(|b| b.block.as_str()).collect();
    let mut values = Vec::new();
    let mut only_in_old = Vec::new();
    for ob in &old.blocks {
        match new_blocks.get(ob.block.as_str()) {
            Some(nb) => {
                values.extend(counter_diffs(ob, nb));
                values.extend(register_diffs(ob, nb));
            }
            None => only_in_old.push(ob.block.clone()),
        }
    }
    for v in &mut values {
        v.rate_per_s = v.delta.and_then(rate);
    }
    let only_in_new = new
        .blocks
        .iter()
        .filter(|b| !old_names.contains(b.block.as_str()))
        .map(|b| b.block.clone())
        .collect();
    let (pcie, incomplete) = pcie_summaries(new, &values);
    let uncertainty = match secs > 0.0 {
        true => (old.read_window_ns + new.read_window_ns) as f64 / 2.0 / (secs * 1e9),
        false => 0.0,
    };
    let uncertain = (uncertainty > UNCERTAIN).then(|| {
        format!(
            "the snapshots' reads took up to {:.1} ms: every rate is known to ±{:.2} % only (a busy machine; take them further apart)",
            old.read_window_ns.max(new.read_window_ns) as f64 / 1e6,
            uncertainty * 100.0
        )
    });
    Diff {
        interval_s: secs,
        interval_source: source,
        rate_uncertainty: uncertainty,
        warnings: origin_differences(old, new)
            .into_iter()
            .chain(unread(old, "older"))
            .chain(unread(new, "newer"))
            .chain(incomplete)
            .chain(uncertain)
            .collect(),
        values,
        only_in_old,
        only_in_new,
        pcie,
    }
}

/// The counters of a block in both snapshots: their gain, or why there is none (the
/// event changed; a wrap or a reset is flagged). Rates are the caller's.
fn counter_diffs(ob: &SnapshotBlock, nb: &SnapshotBlock) -> Vec<ValueDiff> {
    let new_counters: HashMap<u32, _> = nb.counters.iter().map(|c| (c.counter, c)).collect();
    let mut out = Vec::new();
    for oc in &ob.counters {
        let Some(nc) = new_counters.get(&oc.counter) else {
            continue;
        };
        let changed = oc.event != nc.event
            || oc.event_name != nc.event_name
            || oc.counts_clock != nc.counts_clock;
        let (delta, flag) = if changed {
            (None, Some(Flag::EventChanged))
        } else {
            // A value below the old one on a counter that only grows: narrower
            // counters wrapped (L3 57-bit never wraps in practice: reset).
            let width = if nc.width_bits <= 32 {
                nc.width_bits
            } else {
                64
            };
            let (d, f) = counter_delta(oc.value, nc.value, width);
            (Some(d), f)
        };
        out.push(ValueDiff {
            block: ob.block.clone(),
            counter: Some(oc.counter),
            register: None,
            event: nc.event,
            event_name: nc.event_name.clone(),
            old: oc.value,
            new: nc.value,
            delta,
            rate_per_s: None,
            flag,
        });
    }
    out
}

/// The registers of a block in both snapshots, by their role: counts gain (or were
/// reset), levels and controls have no gain.
fn register_diffs(ob: &SnapshotBlock, nb: &SnapshotBlock) -> Vec<ValueDiff> {
    let new_registers: HashMap<&str, _> = nb
        .registers
        .iter()
        .map(|r| (r.register.as_str(), r))
        .collect();
    let mut out = Vec::new();
    for or in &ob.registers {
        let Some(nr) = new_registers.get(or.register.as_str()) else {
            continue;
        };
        let (delta, flag) = match nr.role {
            Role::Level => (None, Some(Flag::Level)),
            Role::Control => (None, Some(Flag::Control)),
            Role::Count if nr.value >= or.value => (Some(nr.value - or.value), None),
            Role::Count => (Some(nr.value), Some(Flag::Reset)),
        };
        out.push(ValueDiff {
            block: ob.block.clone(),
            counter: None,
            register: Some(or.register.clone()),
            event: None,
            event_name: None,
            old: or.value,
            new: nr.value,
            delta,
            rate_per_s: None,
            flag,
        });
    }
    out
}

/// The PCIe summary of each block whose every register has a rate; for a block
/// where one has none (not read, or cleared), why it has no summary.
fn pcie_summaries(new: &Snapshot, values: &[ValueDiff]) -> (Vec<PcieSummary>, Vec<String>) {
    let rates: HashMap<(&str, &str), f64> = values
        .iter()
        .filter_map(|v| Some(((v.block.as_str(), v.register.as_deref()?), v.rate_per_s?)))
        .collect();
    let (mut out, mut said) = (Vec::new(), Vec::new());
    for b in new.blocks.iter().filter(|b| b.kind == BlockKind::Pcie) {
        let missing = std::cell::RefCell::new(Vec::new());
        let get = |dir: &str, ty: &str, unit: &str| -> f64 {
            let name = format!("{dir}_{ty}_{unit}_CNT");
            let rate = rates.get(&(b.block.as_str(), name.as_str())).copied();
            if rate.is_none() {
                missing.borrow_mut().push(name);
            }
            rate.unwrap_or(0.0)
        };
        let breakdown = |dir: &str, unit: &str| Breakdown {
            posted: get(dir, "P", unit),
            non_posted: get(dir, "NP", unit),
            completion: get(dir, "C", unit),
        };
        let sum = |b: Breakdown| b.posted + b.non_posted + b.completion;
        let (ib, ob) = (breakdown("IN", "BYTE"), breakdown("OUT", "BYTE"));
        let (ip, op) = (breakdown("IN", "PKT"), breakdown("OUT", "PKT"));
        let missing = missing.into_inner();
        if !missing.is_empty() {
            said.push(format!(
                "{}: no PCIe summary, since {} {} no rate over the interval",
                b.block,
                missing.join(", "),
                if missing.len() == 1 { "has" } else { "have" }
            ));
            continue;
        }
        out.push(PcieSummary {
            block: b.block.clone(),
            in_bytes_per_s: sum(ib),
            out_bytes_per_s: sum(ob),
            in_gbit_per_s: sum(ib) * 8.0 / 1e9,
            out_gbit_per_s: sum(ob) * 8.0 / 1e9,
            in_packets_per_s: sum(ip),
            out_packets_per_s: sum(op),
            in_bytes_per_s_by_type: ib,
            out_bytes_per_s_by_type: ob,
            in_packets_per_s_by_type: ip,
            out_packets_per_s_by_type: op,
        });
    }
    (out, said)
}

/// Every metric of `set` that the differences allow (levels count as their latest
/// value, counts as their delta), per block and per kind; those without a value are
/// left out.
pub fn metrics(
    d: &Diff,
    new: &Snapshot,
    set: &crate::metrics::MetricSet,
    params: HashMap<String, f64>,
) -> Vec<crate::metrics::MetricValue> {
    use crate::metrics::{evaluate, Inputs, Metric};
    let mut inputs = Inputs {
        duration_s: d.interval_s,
        params,
        ..Default::default()
    };
    let kinds: HashMap<&str, BlockKind> = new
        .blocks
        .iter()
        .map(|b| (b.block.as_str(), b.kind))
        .collect();
    for v in &d.values {
        let kind = kinds.get(v.block.as_str()).copied().unwrap_or_default();
        let name = v.register.as_deref().or(v.event_name.as_deref());
        let value = match v.flag {
            Some(Flag::Level) => Some(v.new),
            _ => v.delta,
        };
        if let (Some(name), Some(value)) = (name, value) {
            inputs.add(&v.block, kind, name, value as f64, 1.0);
        }
    }
    let all: Vec<&Metric> = set.metrics.iter().collect();
    evaluate(set, &all, &inputs, true)
        .into_iter()
        .filter(|m| m.value.is_some())
        .collect()
}
