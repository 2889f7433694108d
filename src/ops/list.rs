//! `bfperf list`: one list across the device, as `perf list` gives: every event of
//! every kind present (with the blocks that have it), every statistics register, the
//! kernel's perf events and PMUs, and every metric and metric group, filtered by
//! patterns over names and descriptions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::{Block, BlockKind, Mechanism};
use crate::device::Device;
use crate::error::Result;
use crate::metrics::MetricSet;
use crate::perf::{Pmu, GENERIC};

/// An event or register of a kind, and the blocks that have it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ListedEvent {
    /// The kind (`tile`, `llt`, `pcie`; `perf` for the kernel's perf events).
    pub kind: BlockKind,
    /// `event` or `register`; `hardware event`, `software event` or `PMU event`.
    pub what: &'static str,
    /// What `-e` takes for it: `tile/MEMORY_READS/`, `cycles`, `PMU/EVENT/`.
    pub spec: String,
    /// The event number (null for registers).
    pub number: Option<u32>,
    /// The name, as `-e KIND/NAME/` takes it.
    pub name: String,
    /// The vendor's description, or "no vendor description".
    pub description: String,
    /// The vendor documents it as reserved for internal use.
    pub reserved: bool,
    /// The blocks that have it (a perf event: its PMU).
    pub blocks: Vec<String>,
    /// Without a device ([`list_generations`]): the generations that have it (`bf1`,
    /// `bf2`, `bf3`, as `--sim` takes them); empty on a device.
    pub generations: Vec<String>,
}

/// A perf_event PMU of the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ListedPmu {
    /// Its name under /sys/bus/event_source/devices.
    pub name: String,
    /// perf_event_attr.type.
    pub type_: u32,
    /// How many named events its `events/` lists.
    pub events: usize,
    /// The CPUs it counts on, when it is an uncore PMU (its `cpumask`).
    pub cpus: Option<Vec<usize>>,
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
    /// Events and registers, by kind then number; perf events last.
    pub events: Vec<ListedEvent>,
    /// The kernel's perf_event PMUs.
    pub pmus: Vec<ListedPmu>,
    /// Metrics.
    pub metrics: Vec<ListedMetric>,
    /// Metric groups and the metrics in each.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// Whether an entry of `kind` with these texts matches any of `patterns`: a kind's
/// name (`tile`, `perf`) matches that kind's entries only, as `perf list hw` does;
/// any other pattern is a glob (`*`, `?`, `[..]`) over a whole text, or a substring;
/// any case. No pattern matches everything.
/// Whether something of `kind` described by `texts` (its name first) is listed:
/// a pattern is a kind's name, one of perf list's classes (`hw`, `sw`), perf's
/// `KIND/EVENT/` form with globs (`tile/*READ*`), or a glob or substring of any text.
fn matches(patterns: &[String], kind: BlockKind, texts: &[&str]) -> bool {
    patterns.is_empty()
        || patterns.iter().any(|p| {
            let p = p.to_ascii_lowercase();
            if is_kind(&p) {
                return kind.as_str() == p;
            }
            if let Some(class) = perf_class(&p) {
                return kind == BlockKind::Perf && texts.contains(&class);
            }
            if let Some((of, event)) = p.split_once('/') {
                let event = event.trim_end_matches('/');
                return match kind {
                    // perf's events are listed as PMU/EVENT/: the whole form.
                    BlockKind::Perf => like(&format!("{of}/{event}/"), texts[0]),
                    _ => like(of, kind.as_str()) && like(event, texts[0]),
                };
            }
            texts.iter().any(|t| like(&p, t))
        })
}

/// `text` matches `pattern`: as a glob where it has one, else as a substring (any case).
/// A glob is compiled once per pattern, not once per entry listed.
fn like(pattern: &str, text: &str) -> bool {
    use crate::catalog::Glob;
    thread_local! {
        static GLOBS: std::cell::RefCell<BTreeMap<String, Option<Glob>>> =
            const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    let t = text.to_ascii_lowercase();
    if !pattern.contains(['*', '?', '[']) {
        return t.contains(pattern);
    }
    GLOBS.with(|globs| {
        let mut globs = globs.borrow_mut();
        if !globs.contains_key(pattern) {
            globs.insert(pattern.to_string(), Glob::new(pattern).ok());
        }
        match &globs[pattern] {
            Some(g) => g.matches(&t),
            None => t.contains(pattern),
        }
    })
}

/// perf list's classes of events: what its `hw` and `sw` (or their long names) select.
fn perf_class(pattern: &str) -> Option<&'static str> {
    match pattern {
        "hw" | "hardware" => Some("hardware event"),
        "sw" | "software" => Some("software event"),
        _ => None,
    }
}

fn is_kind(name: &str) -> bool {
    name == BlockKind::Perf.as_str() || BlockKind::parse(name).is_some()
}

/// Lists the device's events, registers, metrics and groups matching `patterns`
/// (names, descriptions, kinds and groups are searched).
pub fn list(
    device: &Device,
    pmus: &[Pmu],
    set: &MetricSet,
    patterns: &[String],
    details: bool,
) -> Result<Listing> {
    let all: Vec<&Block> = device.blocks().iter().collect();
    let listing = list_blocks(device, &all, set, patterns, details)?;
    Ok(with_perf(listing, pmus, set, patterns, details))
}

/// [`list`] without a device: every generation's events and registers (from the
/// driver's tables, as `devices` model them), each marked with the generations
/// that have it, and every generation's metrics; the kernel's perf events as ever.
pub fn list_generations(
    devices: &[(&str, &Device)],
    pmus: &[Pmu],
    set: &MetricSet,
    patterns: &[String],
    details: bool,
) -> Result<Listing> {
    // Merged by the order `list` shows them in.
    let mut merged: BTreeMap<(&'static str, Option<u32>, String), ListedEvent> = BTreeMap::new();
    let mut kinds = Vec::new();
    for (generation, device) in devices {
        let all: Vec<&Block> = device.blocks().iter().collect();
        kinds.extend(all.iter().map(|b| b.kind));
        let listing = list_blocks(device, &all, &MetricSet::default(), patterns, false)?;
        for e in listing.events {
            merged
                .entry(order(&e))
                .or_insert_with(|| ListedEvent {
                    blocks: Vec::new(),
                    ..e
                })
                .generations
                .push(generation.to_string());
        }
    }
    kinds.sort_by_key(|k| k.as_str());
    kinds.dedup();
    let (metrics, groups) = list_metrics(set, &kinds, patterns, details);
    let listing = Listing {
        events: merged.into_values().collect(),
        pmus: Vec::new(),
        metrics,
        groups,
    };
    Ok(with_perf(listing, pmus, set, patterns, details))
}

/// Where an event stands in a listing: by kind, then number, then name.
fn order(e: &ListedEvent) -> (&'static str, Option<u32>, String) {
    (e.kind.as_str(), e.number, e.name.clone())
}

/// A listing with the kernel's perf events, its PMUs and the perf metrics added.
fn with_perf(
    mut listing: Listing,
    pmus: &[Pmu],
    set: &MetricSet,
    patterns: &[String],
    details: bool,
) -> Listing {
    listing.events.extend(perf_events(pmus, patterns));
    listing.pmus = pmus
        .iter()
        .filter(|p| matches(patterns, BlockKind::Perf, &[&p.name]))
        .map(|p| ListedPmu {
            name: p.name.clone(),
            type_: p.type_,
            events: p.events.len(),
            cpus: p.cpus.clone(),
        })
        .collect();
    let perf_metrics = list_metrics(set, &[BlockKind::Perf], patterns, details);
    for (g, names) in perf_metrics.1 {
        let listed = listing.groups.entry(g).or_default();
        for n in names {
            if !listed.contains(&n) {
                listed.push(n);
            }
        }
    }
    listing.metrics.extend(perf_metrics.0);
    listing
}

/// perf's generic events, then each PMU's named events, matching `patterns`.
fn perf_events(pmus: &[Pmu], patterns: &[String]) -> Vec<ListedEvent> {
    let generic = GENERIC.iter().map(|(names, type_, _, _, description)| {
        let also = match names.len() {
            1 => String::new(),
            _ => format!(" (also {})", names[1..].join(", ")),
        };
        ListedEvent {
            kind: BlockKind::Perf,
            what: match *type_ {
                crate::perf::TYPE_HARDWARE => "hardware event",
                _ => "software event",
            },
            spec: names[0].to_string(),
            number: None,
            name: names[0].to_string(),
            description: format!("{description}{also}"),
            reserved: false,
            blocks: vec![crate::perf::generic_pmu(*type_).to_string()],
            generations: Vec::new(),
        }
    });
    let named = pmus.iter().flat_map(|p| {
        p.events.iter().map(|(name, terms)| ListedEvent {
            kind: BlockKind::Perf,
            what: "PMU event",
            spec: format!("{}/{name}/", p.name),
            number: None,
            name: name.clone(),
            description: terms.clone(),
            reserved: false,
            blocks: vec![p.name.clone()],
            generations: Vec::new(),
        })
    });
    generic
        .chain(named)
        .filter(|e| {
            matches(
                patterns,
                BlockKind::Perf,
                &[&e.spec, &e.description, e.what],
            )
        })
        .collect()
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
                .filter(|d| !d.trim().is_empty())
                .unwrap_or(crate::catalog::NO_DESCRIPTION);
            if !matches(patterns, b.kind, &[&e.name, description]) {
                continue;
            }
            events
                .entry((b.kind, e.name.to_string()))
                .or_insert_with(|| ListedEvent {
                    kind: b.kind,
                    what: if registers { "register" } else { "event" },
                    spec: format!("{}/{}/", b.kind.as_str(), e.name),
                    number: (!registers).then_some(e.number),
                    name: e.name.to_string(),
                    description: description.to_string(),
                    reserved: e.reserved,
                    blocks: Vec::new(),
                    generations: Vec::new(),
                })
                .blocks
                .push(b.name.clone());
        }
    }
    let mut events: Vec<ListedEvent> = events.into_values().collect();
    events.sort_by_cached_key(order);
    let kinds: Vec<BlockKind> = blocks.iter().map(|b| b.kind).collect();
    let (metrics, groups) = list_metrics(set, &kinds, patterns, details);
    Ok(Listing {
        events,
        pmus: Vec::new(),
        metrics,
        groups,
    })
}

/// The metrics of these kinds matching `patterns` (one listing of a metric that
/// several generations define alike), and the groups they are in, each whole: all
/// of its metrics of these kinds and perf's, matched or not.
fn list_metrics(
    set: &MetricSet,
    kinds: &[BlockKind],
    patterns: &[String],
    details: bool,
) -> (Vec<ListedMetric>, BTreeMap<String, Vec<String>>) {
    let mut metrics = Vec::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let usable = || {
        set.metrics
            .iter()
            .filter(|m| kinds.contains(&m.kind) && m.problem().is_none())
    };
    let in_groups = set.metrics.iter().filter(|m| {
        (kinds.contains(&m.kind) || m.kind == BlockKind::Perf) && m.problem().is_none()
    });
    let groups_of = |m: &crate::metrics::Metric| {
        m.def
            .group
            .split(';')
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    for m in usable() {
        if !matches(
            patterns,
            m.kind,
            &[&m.def.name, &m.def.description, &m.def.group],
        ) {
            continue;
        }
        let same = |l: &ListedMetric| {
            l.metric == m.def.name && l.kind == m.kind && l.description == m.def.description
        };
        if metrics.iter().any(same) {
            continue;
        }
        for g in groups_of(m) {
            groups.entry(g).or_default();
        }
        let mut events = crate::metrics::specs_for(&[m]);
        events.extend(crate::metrics::perf_events_for(&[m]));
        metrics.push(ListedMetric {
            metric: m.def.name.clone(),
            group: m.def.group.clone(),
            kind: m.kind,
            unit: m.unit.clone(),
            description: m.def.description.clone(),
            formula: details.then(|| m.def.expr.clone()),
            events: details.then_some(events),
        });
    }
    for m in in_groups {
        for g in groups_of(m) {
            if let Some(names) = groups.get_mut(&g) {
                if !names.contains(&m.def.name) {
                    names.push(m.def.name.clone());
                }
            }
        }
    }
    (metrics, groups)
}
