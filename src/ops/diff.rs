//! Differences between two snapshots: deltas, rates, wraps, resets, and a PCIe summary.

use serde::Serialize;

use super::snapshot::Snapshot;

/// Why a value's delta is not a plain subtraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// A counter narrower than 64 bits went down: it wrapped once.
    Wrapped,
    /// A register or 64-bit counter went down: it was reset; delta counted from 0.
    Reset,
    /// The counter's event changed between the snapshots: no delta.
    EventChanged,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueDiff {
    pub block: String,
    /// `counter3` or the register name.
    pub item: String,
    pub event_name: Option<String>,
    pub old: u64,
    pub new: u64,
    pub delta: Option<u64>,
    pub rate_per_s: Option<f64>,
    pub flag: Option<Flag>,
}

/// Traffic of one PCIe block over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PcieSummary {
    pub block: String,
    pub in_bytes_per_s: f64,
    pub out_bytes_per_s: f64,
    pub in_gbit_per_s: f64,
    pub out_gbit_per_s: f64,
    pub in_packets_per_s: f64,
    pub out_packets_per_s: f64,
    /// Bytes/s by type: posted, non-posted, completion.
    pub in_bytes_per_s_by_type: Breakdown,
    pub out_bytes_per_s_by_type: Breakdown,
    pub in_packets_per_s_by_type: Breakdown,
    pub out_packets_per_s_by_type: Breakdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Breakdown {
    pub posted: f64,
    pub non_posted: f64,
    pub completion: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub interval_s: f64,
    /// `monotonic` when both snapshots come from the same boot of the same host,
    /// `wall_clock` otherwise.
    pub interval_source: &'static str,
    pub values: Vec<ValueDiff>,
    pub only_in_old: Vec<String>,
    pub only_in_new: Vec<String>,
    pub pcie: Vec<PcieSummary>,
}

fn interval(old: &Snapshot, new: &Snapshot) -> (f64, &'static str) {
    let wall = (new.timestamp_unix_ns as f64 - old.timestamp_unix_ns as f64) / 1e9;
    let mono = (new.monotonic_ns as f64 - old.monotonic_ns as f64) / 1e9;
    let same_boot = old.hostname == new.hostname
        && new.monotonic_ns > old.monotonic_ns
        && (mono - wall).abs() <= (wall.abs() * 0.01).max(1.0);
    if same_boot {
        (mono, "monotonic")
    } else {
        (wall, "wall_clock")
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

/// Compares two snapshots.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Diff {
    let (secs, source) = interval(old, new);
    let rate = |d: u64| (secs > 0.0).then(|| d as f64 / secs);
    let mut values = Vec::new();
    let mut only_in_old = Vec::new();
    for ob in &old.blocks {
        let Some(nb) = new.blocks.iter().find(|b| b.name == ob.name) else {
            only_in_old.push(ob.name.clone());
            continue;
        };
        for oc in &ob.counters {
            let Some(nc) = nb.counters.iter().find(|c| c.index == oc.index) else {
                continue;
            };
            let changed = oc.event != nc.event
                || oc.event_name != nc.event_name
                || oc.counts_clock != nc.counts_clock;
            let (delta, flag) = if changed {
                (None, Some(Flag::EventChanged))
            } else {
                // A value below the old one on a counter that only grows:
                // narrower counters wrapped (L3 57-bit never wraps in practice: reset).
                let width = if nc.width_bits <= 32 {
                    nc.width_bits
                } else {
                    64
                };
                let (d, f) = counter_delta(oc.value, nc.value, width);
                (Some(d), f)
            };
            values.push(ValueDiff {
                block: ob.name.clone(),
                item: format!("counter{}", oc.index),
                event_name: nc.event_name.clone(),
                old: oc.value,
                new: nc.value,
                delta,
                rate_per_s: delta.and_then(rate),
                flag,
            });
        }
        for or in &ob.registers {
            let Some(nr) = nb.registers.iter().find(|r| r.name == or.name) else {
                continue;
            };
            let (d, f) = if nr.value >= or.value {
                (nr.value - or.value, None)
            } else {
                (nr.value, Some(Flag::Reset))
            };
            values.push(ValueDiff {
                block: ob.name.clone(),
                item: or.name.clone(),
                event_name: None,
                old: or.value,
                new: nr.value,
                delta: Some(d),
                rate_per_s: rate(d),
                flag: f,
            });
        }
    }
    let only_in_new = new
        .blocks
        .iter()
        .filter(|b| !old.blocks.iter().any(|o| o.name == b.name))
        .map(|b| b.name.clone())
        .collect();
    let pcie = pcie_summaries(new, &values);
    Diff {
        interval_s: secs,
        interval_source: source,
        values,
        only_in_old,
        only_in_new,
        pcie,
    }
}

fn pcie_summaries(new: &Snapshot, values: &[ValueDiff]) -> Vec<PcieSummary> {
    let mut out = Vec::new();
    for b in new.blocks.iter().filter(|b| b.kind == "pcie") {
        let get = |dir: &str, ty: &str, unit: &str| -> f64 {
            let name = format!("{dir}_{ty}_{unit}_CNT");
            values
                .iter()
                .find(|v| v.block == b.name && v.item == name)
                .and_then(|v| v.rate_per_s)
                .unwrap_or(0.0)
        };
        let breakdown = |dir: &str, unit: &str| Breakdown {
            posted: get(dir, "P", unit),
            non_posted: get(dir, "NP", unit),
            completion: get(dir, "C", unit),
        };
        let sum = |b: Breakdown| b.posted + b.non_posted + b.completion;
        let (ib, ob) = (breakdown("IN", "BYTE"), breakdown("OUT", "BYTE"));
        let (ip, op) = (breakdown("IN", "PKT"), breakdown("OUT", "PKT"));
        out.push(PcieSummary {
            block: b.name.clone(),
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
    out
}
