//! `bfperf list`: one list across the device, as `perf list` gives: every event of
//! every kind present (with the blocks that have it), every statistics register, and
//! every metric and metric group, filtered by patterns over names and descriptions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::metrics::MetricSet;
use crate::block::{Block, BlockKind, Mechanism};
use crate::device::Device;
use crate::error::Result;

/// An event or register of a kind, and the blocks that have it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ListedEvent {
    /// The kind (`tile`, `llt`, `pcie`).
    pub kind: BlockKind,
    /// `event` or `register`.
    pub what: &'static str,
    /// The event number (null for registers).
    pub number: Option<u32>,
    /// The name, as `-e KIND/NAME/` takes it.
    pub name: String,
    /// The vendor's description, or "no vendor description".
    pub description: String,
    /// The vendor documents it as reserved for internal use.
    pub reserved: bool,
    /// The blocks that have it.
    pub blocks: Vec<String>,
}

/// A metric or a metric group.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ListedMetric {
    /// The metric's name.
    pub metric: String,
    /// Its groups (`;`-separated).
    pub group: String,
    /// The kind it is computed on.
    pub kind: BlockKind,
    /// Its displayed unit.
    pub unit: String,
    /// What it measures.
    pub description: String,
    /// Its formula (with `--details`).
    pub formula: Option<String>,
    /// The `-e` specs it needs (with `--details`).
    pub events: Option<Vec<String>>,
}

/// What `list` found.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Listing {
    /// Events and registers, by kind then number.
    pub events: Vec<ListedEvent>,
    /// Metrics.
    pub metrics: Vec<ListedMetric>,
    /// Metric groups and the metrics in each.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// Whether `text` matches any of `patterns`: a glob (`*`, `?`, `[..]`) over the
/// whole text, or a substring; any case. No pattern matches everything.
fn matches(patterns: &[String], texts: &[&str]) -> bool {
    patterns.is_empty()
        || patterns.iter().any(|p| {
            let p = p.to_ascii_lowercase();
            texts.iter().any(|t| {
                let t = t.to_ascii_lowercase();
                match glob::Pattern::new(&p) {
                    Ok(g) if p.contains(['*', '?', '[']) => g.matches(&t),
                    _ => t.contains(&p),
                }
            })
        })
}

/// Lists the device's events, registers, metrics and groups matching `patterns`
/// (names, descriptions, kinds and groups are searched).
pub fn list(
    device: &Device,
    set: &MetricSet,
    patterns: &[String],
    details: bool,
) -> Result<Listing> {
    let all: Vec<&Block> = device.blocks().iter().collect();
    list_blocks(device, &all, set, patterns, details)
}

/// [`list`] over some blocks only (`bfperf events tile`, `events 'llt*'`).
pub fn list_blocks(
    device: &Device,
    blocks: &[&Block],
    set: &MetricSet,
    patterns: &[String],
    details: bool,
) -> Result<Listing> {
    let mut events: BTreeMap<(BlockKind, String), ListedEvent> = BTreeMap::new();
    for b in blocks {
        let catalog = device.catalog(b)?;
        let registers = b.mechanism == Mechanism::Registers;
        for e in catalog
            .events
            .iter()
            .filter(|e| e.name != crate::catalog::DISABLE)
        {
            let description = e
                .description
                .clone()
                .filter(|d| !d.trim().is_empty())
                .unwrap_or_else(|| crate::catalog::NO_DESCRIPTION.into());
            if !matches(patterns, &[&e.name, &description, b.kind.as_str()]) {
                continue;
            }
            events
                .entry((b.kind, e.name.clone()))
                .or_insert_with(|| ListedEvent {
                    kind: b.kind,
                    what: if registers { "register" } else { "event" },
                    number: (!registers).then_some(e.number),
                    name: e.name.clone(),
                    description,
                    reserved: e.reserved,
                    blocks: Vec::new(),
                })
                .blocks
                .push(b.name.clone());
        }
    }
    let mut events: Vec<ListedEvent> = events.into_values().collect();
    events.sort_by(|a, b| {
        (a.kind.as_str(), a.number, &a.name).cmp(&(b.kind.as_str(), b.number, &b.name))
    });
    let kinds: Vec<BlockKind> = blocks.iter().map(|b| b.kind).collect();
    let mut metrics = Vec::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in set
        .metrics
        .iter()
        .filter(|m| kinds.contains(&m.kind) && m.problem().is_none())
    {
        if !matches(
            patterns,
            &[
                &m.def.name,
                &m.def.description,
                &m.def.group,
                m.kind.as_str(),
            ],
        ) {
            continue;
        }
        for g in m.def.group.split(';').filter(|g| !g.is_empty()) {
            groups
                .entry(g.to_string())
                .or_default()
                .push(m.def.name.clone());
        }
        metrics.push(ListedMetric {
            metric: m.def.name.clone(),
            group: m.def.group.clone(),
            kind: m.kind,
            unit: m.unit.clone(),
            description: m.def.description.clone(),
            formula: details.then(|| m.def.expr.clone()),
            events: details.then(|| super::metrics::specs_for(&[m])),
        });
    }
    Ok(Listing {
        events,
        metrics,
        groups,
    })
}
