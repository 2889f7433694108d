//! Metrics: counts turned into rates, ratios and bandwidths by formulas kept as data
//! ([`def`]). A set is loaded for a generation (built-ins, then user files), checked
//! (kind, syntax, every name, no cycles) and evaluated per block and for the sum of a
//! kind's blocks (events summed first, then the formula).

pub mod def;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use exmex::prelude::*;
use schemars::JsonSchema;
use serde::Serialize;

use crate::block::{BlockKind, Generation, Mechanism};
use crate::catalog::{builtin, did_you_mean, suggest};
use crate::error::{Error, Result};
pub use def::MetricDef;

/// What a name in a formula stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Var {
    /// An event or register of the metric's own kind.
    Event(String),
    /// `kind@EVENT@`: an event of another kind, summed over its blocks.
    Other(BlockKind, String),
    /// `cycles`: the block's count_clock counter.
    Cycles,
    /// `duration_time`: seconds measured.
    Duration,
    /// `blocks`: how many blocks the value covers (1 per block).
    Blocks,
    /// Another metric, by name.
    Metric(String),
    /// A value given on the command line (`pcie_link_bytes_per_s`).
    Param(String),
}

/// Names a formula may use that come from the command line.
pub const PARAMS: &[&str] = &["pcie_link_bytes_per_s"];

/// A checked metric, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Metric {
    pub def: MetricDef,
    pub kind: BlockKind,
    pub scale: f64,
    pub unit: String,
    /// Where it was defined: `built-in` or a file.
    pub source: String,
    expr: FlatEx<f64>,
    vars: Vec<Var>,
}

impl Metric {
    pub fn vars(&self) -> &[Var] {
        &self.vars
    }
}

/// A metric that could not be loaded, kept so that asking for it says why.
#[derive(Debug, Clone)]
pub struct Broken {
    pub name: String,
    pub source: String,
    pub problem: String,
}

/// The metrics available on a generation.
#[derive(Debug, Clone, Default)]
pub struct MetricSet {
    pub metrics: Vec<Metric>,
    pub broken: Vec<Broken>,
    /// Files that could not be read at all (warned, not fatal).
    pub warnings: Vec<String>,
}

/// Wraps perf-style `kind@EVENT@` references in braces, the expression parser's
/// syntax for names with other characters.
fn braced(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len() + 8);
    let mut rest = expr;
    while let Some(at) = rest.find('@') {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let Some(end) = rest[at + 1..].find('@') else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push('{');
        out.push_str(&rest[start..at + 1 + end + 1]);
        out.push('}');
        rest = &rest[at + 1 + end + 1..];
    }
    out.push_str(rest);
    out
}

fn table_has(kind: BlockKind, gens: &[Generation], name: &str) -> bool {
    gens.iter()
        .any(|g| builtin(kind, *g).iter().any(|d| d.name.trim_end() == name))
}

/// Classifies a formula's names; `metrics` are the names of every metric loaded.
fn classify(
    def: &MetricDef,
    kind: BlockKind,
    gens: &[Generation],
    names: &[String],
    metrics: &BTreeSet<String>,
) -> std::result::Result<Vec<Var>, String> {
    let mut vars = Vec::new();
    for n in names {
        let var = if let Some((k, rest)) = n.split_once('@') {
            let event = rest.trim_end_matches('@');
            let other = BlockKind::parse(k).ok_or_else(|| format!("unknown kind '{k}' in {n}"))?;
            if !table_has(other, gens, event) {
                return Err(format!(
                    "{other:?} has no event '{event}' (in {n})",
                    other = other.as_str()
                ));
            }
            Var::Other(other, event.to_string())
        } else if n == "cycles" {
            if !kind.def().count_clock {
                return Err(format!(
                    "cycles needs count_clock, which {} blocks have not",
                    kind.as_str()
                ));
            }
            Var::Cycles
        } else if n == "duration_time" {
            Var::Duration
        } else if n == "blocks" {
            Var::Blocks
        } else if PARAMS.contains(&n.as_str()) {
            Var::Param(n.clone())
        } else if n == &def.name {
            return Err("the metric refers to itself".into());
        } else if metrics.contains(n) {
            Var::Metric(n.clone())
        } else if table_has(kind, gens, n) {
            Var::Event(n.clone())
        } else {
            let candidates: Vec<&str> = gens
                .iter()
                .flat_map(|g| builtin(kind, *g).iter().map(|d| d.name.trim_end()))
                .collect();
            return Err(format!(
                "'{n}' is no event of {} nor a metric{}",
                kind.as_str(),
                did_you_mean(&suggest(n, candidates.into_iter()))
            ));
        };
        vars.push(var);
    }
    Ok(vars)
}

fn compile(
    def: MetricDef,
    source: &str,
    gens: &[Generation],
    metrics: &BTreeSet<String>,
) -> std::result::Result<Metric, String> {
    let kind = def
        .block_kind()
        .ok_or_else(|| format!("unknown kind '{}' in Unit", def.kind))?;
    let expr = exmex::parse::<f64>(&braced(&def.expr))
        .map_err(|e| format!("MetricExpr does not parse: {e}"))?;
    let names: Vec<String> = expr.var_names().iter().map(|s| s.to_string()).collect();
    let vars = classify(&def, kind, gens, &names, metrics)?;
    let (scale, unit) = def.scale_and_unit();
    Ok(Metric {
        def,
        kind,
        scale,
        unit,
        source: source.to_string(),
        expr,
        vars,
    })
}

/// Reads a metric file: a JSON array of definitions.
fn read_file(text: &str) -> std::result::Result<Vec<MetricDef>, String> {
    serde_json::from_str(text).map_err(|e| format!("not a JSON array of metrics: {e}"))
}

impl MetricSet {
    /// The built-ins and user files for `gens` (one generation, or all with `--all`).
    /// A broken user file never hides the built-ins: it is warned about, and a
    /// broken metric fails only when asked for.
    pub fn load(gens: &[Generation], user_files: &[PathBuf]) -> MetricSet {
        let mut defs: Vec<(MetricDef, String)> = Vec::new();
        let mut set = MetricSet::default();
        for (path, text) in def::BUILTIN {
            match read_file(text) {
                Ok(list) => defs.extend(list.into_iter().map(|d| (d, format!("built-in {path}")))),
                Err(e) => set.warnings.push(format!("built-in {path}: {e}")),
            }
        }
        let mut files: Vec<PathBuf> = user_files.to_vec();
        for dir in def::user_dirs() {
            if let Ok(rd) = std::fs::read_dir(&dir) {
                let mut found: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect();
                found.sort();
                files.extend(found);
            }
        }
        for f in &files {
            match std::fs::read_to_string(f)
                .map_err(|e| e.to_string())
                .and_then(|t| read_file(&t))
            {
                Ok(list) => {
                    for d in list {
                        // A user metric replaces a built-in of the same name.
                        defs.retain(|(o, _)| o.name != d.name);
                        defs.push((d, f.display().to_string()));
                    }
                }
                Err(e) => set.warnings.push(format!(
                    "metric file {}: {e}; its metrics are skipped",
                    f.display()
                )),
            }
        }
        defs.retain(|(d, _)| gens.iter().any(|g| d.applies_to(*g)));
        let names: BTreeSet<String> = defs.iter().map(|(d, _)| d.name.clone()).collect();
        for (d, source) in defs {
            let name = d.name.clone();
            match compile(d, &source, gens, &names) {
                Ok(m) => set.metrics.push(m),
                Err(problem) => set.broken.push(Broken {
                    name,
                    source,
                    problem,
                }),
            }
        }
        set.drop_cycles();
        set
    }

    /// Metrics that refer to one another in a circle cannot be evaluated.
    fn drop_cycles(&mut self) {
        let deps: HashMap<String, Vec<String>> = self
            .metrics
            .iter()
            .map(|m| {
                let d = m.vars.iter().filter_map(|v| match v {
                    Var::Metric(n) => Some(n.clone()),
                    _ => None,
                });
                (m.def.name.clone(), d.collect())
            })
            .collect();
        fn reaches(
            deps: &HashMap<String, Vec<String>>,
            from: &str,
            target: &str,
            seen: &mut BTreeSet<String>,
        ) -> bool {
            for d in deps.get(from).into_iter().flatten() {
                if d == target || (seen.insert(d.clone()) && reaches(deps, d, target, seen)) {
                    return true;
                }
            }
            false
        }
        let cyclic: Vec<String> = deps
            .keys()
            .filter(|n| reaches(&deps, n, n, &mut BTreeSet::new()))
            .cloned()
            .collect();
        for name in cyclic {
            if let Some(i) = self.metrics.iter().position(|m| m.def.name == name) {
                let m = self.metrics.remove(i);
                self.broken.push(Broken {
                    name,
                    source: m.source,
                    problem: "it refers to itself through other metrics".into(),
                });
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.def.name == name)
    }

    /// Metrics chosen by names or groups (comma lists), with the metrics they use.
    pub fn select(&self, wanted: &[String]) -> Result<Vec<&Metric>> {
        let mut out: Vec<&Metric> = Vec::new();
        for w in wanted
            .iter()
            .flat_map(|w| w.split(','))
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            if let Some(b) = self.broken.iter().find(|b| b.name == w) {
                return Err(Error::BadMetric {
                    metric: b.name.clone(),
                    source_file: b.source.clone(),
                    problem: b.problem.clone(),
                });
            }
            let chosen: Vec<&Metric> = self
                .metrics
                .iter()
                .filter(|m| m.def.name == w || m.def.group.split(';').any(|g| g == w))
                .collect();
            if chosen.is_empty() {
                let names = self.metrics.iter().map(|m| m.def.name.as_str());
                let groups: BTreeSet<&str> = self
                    .metrics
                    .iter()
                    .flat_map(|m| m.def.group.split(';'))
                    .collect();
                let sugg = suggest(w, names.chain(groups.iter().copied()));
                return Err(Error::BadMetric {
                    metric: w.to_string(),
                    source_file: String::new(),
                    problem: format!(
                        "no metric or group of that name on this device{}; `bfperf metrics` lists them",
                        did_you_mean(&sugg)
                    ),
                });
            }
            for m in chosen {
                self.with_dependencies(m, &mut out);
            }
        }
        Ok(out)
    }

    fn with_dependencies<'a>(&'a self, m: &'a Metric, out: &mut Vec<&'a Metric>) {
        for v in &m.vars {
            if let Var::Metric(n) = v {
                if let Some(d) = self.get(n) {
                    self.with_dependencies(d, out);
                }
            }
        }
        if !out.iter().any(|o| o.def.name == m.def.name) {
            out.push(m);
        }
    }
}

/// The events each kind must count for these metrics: `KIND/EVENT,.../` specs.
pub fn specs_for(metrics: &[&Metric]) -> Vec<String> {
    let mut by_kind: BTreeMap<BlockKind, Vec<String>> = BTreeMap::new();
    for m in metrics {
        for v in &m.vars {
            let (k, e) = match v {
                Var::Event(e) => (m.kind, e.clone()),
                Var::Other(k, e) => (*k, e.clone()),
                Var::Cycles => (m.kind, "cycles".to_string()),
                _ => continue,
            };
            let list = by_kind.entry(k).or_default();
            if !list.contains(&e) {
                list.push(e);
            }
        }
    }
    by_kind
        .into_iter()
        .map(|(k, events)| format!("{}/{}/", k.as_str(), events.join(",")))
        .collect()
}

/// Counters per block a metric needs (its own kind's events and cycles; registers
/// need none).
pub fn counters_needed(m: &Metric, gen: Generation) -> usize {
    if m.kind.def().mechanism.get(gen) == Mechanism::Registers {
        return 0;
    }
    m.vars
        .iter()
        .filter(|v| matches!(v, Var::Event(_) | Var::Cycles))
        .collect::<BTreeSet<_>>()
        .len()
}

/// What metrics are evaluated on: per block, the count of each event (by name;
/// `cycles` for count_clock), the span, and the command line's values.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// block → (kind, event → count).
    pub blocks: BTreeMap<String, (BlockKind, HashMap<String, f64>)>,
    pub duration_s: f64,
    pub params: HashMap<String, f64>,
}

impl Inputs {
    pub fn add(&mut self, block: &str, kind: BlockKind, event: &str, value: f64) {
        let entry = self
            .blocks
            .entry(block.to_string())
            .or_insert_with(|| (kind, HashMap::new()));
        entry.1.insert(event.to_string(), value);
    }

    fn sum(&self, kind: BlockKind, event: &str) -> Option<f64> {
        let values: Vec<f64> = self
            .blocks
            .values()
            .filter(|(k, _)| *k == kind)
            .filter_map(|(_, e)| e.get(event).copied())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    }

    fn count(&self, kind: BlockKind) -> usize {
        self.blocks.values().filter(|(k, _)| *k == kind).count()
    }
}

/// A metric's value for a block, or for the sum of a kind's blocks.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MetricValue {
    pub metric: String,
    /// The block, or the kind for the sum of its blocks.
    pub block: String,
    pub kind: BlockKind,
    /// Null where it cannot be computed (a division by zero, a missing count or value).
    pub value: Option<f64>,
    pub unit: String,
    pub group: String,
    pub description: String,
}

/// Evaluates the chosen metrics per block (when `per_block`) and for each kind's sum.
pub fn evaluate(
    set: &MetricSet,
    chosen: &[&Metric],
    inputs: &Inputs,
    per_block: bool,
) -> Vec<MetricValue> {
    let mut out = Vec::new();
    for m in chosen {
        let mut scopes: Vec<Option<&str>> = Vec::new();
        if per_block {
            scopes.extend(
                inputs
                    .blocks
                    .iter()
                    .filter(|(_, (k, _))| *k == m.kind)
                    .map(|(b, _)| Some(b.as_str())),
            );
        }
        if inputs.count(m.kind) > 0 && (!per_block || inputs.count(m.kind) > 1 || scopes.is_empty())
        {
            scopes.push(None);
        }
        for scope in scopes {
            let raw = value_of(set, m, inputs, scope, 0);
            out.push(MetricValue {
                metric: m.def.name.clone(),
                block: scope.map_or_else(|| m.kind.as_str().to_string(), str::to_string),
                kind: m.kind,
                value: raw.map(|v| v * m.scale).filter(|v| v.is_finite()),
                unit: m.unit.clone(),
                group: m.def.group.clone(),
                description: m.def.description.clone(),
            });
        }
    }
    out
}

/// The unscaled value of a metric on a block (Some) or a kind's sum (None).
fn value_of(
    set: &MetricSet,
    m: &Metric,
    inputs: &Inputs,
    block: Option<&str>,
    depth: usize,
) -> Option<f64> {
    if depth > 16 {
        return None;
    }
    let own = |event: &str| -> Option<f64> {
        match block {
            Some(b) => inputs
                .blocks
                .get(b)
                .and_then(|(_, e)| e.get(event).copied()),
            None => inputs.sum(m.kind, event),
        }
    };
    let mut values = Vec::with_capacity(m.vars.len());
    for v in &m.vars {
        values.push(match v {
            Var::Event(e) => own(e)?,
            Var::Cycles => own("cycles")?,
            Var::Other(k, e) => inputs.sum(*k, e)?,
            Var::Duration => inputs.duration_s,
            Var::Blocks => match block {
                Some(_) => 1.0,
                None => inputs.count(m.kind) as f64,
            },
            Var::Param(p) => *inputs.params.get(p)?,
            Var::Metric(n) => {
                let d = set.get(n)?;
                let scope = if d.kind == m.kind { block } else { None };
                // Unscaled, as perf does: ScaleUnit applies when a value is shown.
                value_of(set, d, inputs, scope, depth + 1)?
            }
        });
    }
    m.expr.eval(&values).ok().filter(|v| v.is_finite())
}

/// Known PCIe links: `gen4x16` and the like; bytes per second in each direction
/// after line coding.
pub fn pcie_link_bytes_per_s(link: &str) -> Option<f64> {
    let l = link.to_ascii_lowercase();
    let (gen, lanes) = l.strip_prefix("gen")?.split_once('x')?;
    let per_lane = match gen {
        "1" => 250e6,
        "2" => 500e6,
        "3" => 8e9 * 128.0 / 130.0 / 8.0,
        "4" => 16e9 * 128.0 / 130.0 / 8.0,
        "5" => 32e9 * 128.0 / 130.0 / 8.0,
        _ => return None,
    };
    let lanes: f64 = match lanes {
        "1" | "2" | "4" | "8" | "16" => lanes.parse().ok()?,
        _ => return None,
    };
    Some(per_lane * lanes)
}

/// The user metric files given on the command line, checked to exist.
pub fn user_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    for p in paths {
        if !Path::new(p).is_file() {
            return Err(Error::File {
                what: "cannot read the metric file",
                path: p.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
    }
    Ok(paths.to_vec())
}
