//! Metrics: counts turned into rates, ratios and bandwidths by formulas kept as data
//! ([`MetricDef`]). A set is loaded for a generation (built-ins, then user files), checked
//! (kind, syntax, every name, no cycles) and evaluated per block and for the sum of a
//! kind's blocks (events summed first, then the formula).

mod def;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

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
    /// `kind@EVENT@`: an event of another kind, summed over its blocks. With
    /// [`BlockKind::Perf`], a perf event counted system-wide: a generic name in perf's
    /// spelling (`instructions`, `task-clock`) or `PMU/EVENT/`.
    Other(BlockKind, String),
    /// `cycles`: the block's count_clock counter.
    Cycles,
    /// `duration_time`: seconds measured.
    Duration,
    /// `blocks`: how many blocks the value covers (1 per block).
    Blocks,
    /// Another metric, by name, and its kind.
    Metric(String, BlockKind),
    /// A value given on the command line (`pcie_link_bytes_per_s`).
    Param(String),
}

/// Names a formula may use that come from the command line.
pub(crate) const PARAMS: &[&str] = &["pcie_link_bytes_per_s"];

/// The deepest chain of metrics referring to metrics that is evaluated; deeper
/// ones are refused with their chain (perf's own metrics nest a few levels).
pub(crate) const MAX_DEPTH: usize = 256;

/// What a formula needs to be compiled: the generations and every metric's kind.
#[derive(Debug, Default)]
struct Context {
    gens: Vec<Generation>,
    kinds: HashMap<String, BlockKind>,
}

/// A formula parsed and its names classified (boxed: a parsed formula is ~20 KiB,
/// and every loaded metric holds room for one).
#[derive(Debug, Clone)]
struct Compiled {
    expr: Box<FlatEx<f64>>,
    vars: Vec<Var>,
}

/// A loaded metric. Its formula is parsed when it is first used (a parsed formula
/// is large, and a file may hold many metrics never asked for).
#[derive(Debug, Clone)]
pub struct Metric {
    /// Its definition as written.
    pub def: MetricDef,
    /// The block kind whose events it names plainly.
    pub kind: BlockKind,
    /// The factor from its formula's value to the displayed unit.
    pub scale: f64,
    /// The displayed unit (`GB/s`, `%`).
    pub unit: String,
    /// Where it was defined: `built-in` or a file.
    pub source: String,
    /// Other metrics its formula names.
    refs: Vec<String>,
    context: std::sync::Arc<Context>,
    compiled: std::sync::OnceLock<std::result::Result<Compiled, String>>,
    leads: std::sync::OnceLock<std::sync::Arc<[String]>>,
}

impl Metric {
    fn compiled(&self) -> &std::result::Result<Compiled, String> {
        self.compiled.get_or_init(|| {
            let expr = exmex::parse::<f64>(&braced(&self.def.expr))
                .map_err(|e| format!("MetricExpr does not parse: {e}"))?;
            let names: Vec<String> = expr.var_names().iter().map(|s| s.to_string()).collect();
            let c = &self.context;
            let vars = classify(&self.def, self.kind, &c.gens, &names, &c.kinds)?;
            Ok(Compiled {
                expr: Box::new(expr),
                vars,
            })
        })
    }

    /// Why the formula cannot be used, if it cannot.
    pub fn problem(&self) -> Option<&str> {
        self.compiled().as_ref().err().map(String::as_str)
    }

    /// Each name its formula uses and what it stands for (none when it does not
    /// compile), in the order [`Metric::eval`] takes their values.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        match self.compiled() {
            Ok(c) => c
                .expr
                .var_names()
                .iter()
                .map(|n| n.trim_start_matches('{').trim_end_matches('}').to_string())
                .zip(c.vars.iter().cloned())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The events of its own kind its formula counts (`cycles` for the clock), in
    /// the order the formula names them; worked out once, shared by every value.
    pub fn leads(&self) -> std::sync::Arc<[String]> {
        self.leads
            .get_or_init(|| {
                let mut named: Vec<(usize, String)> = self
                    .named_vars()
                    .into_iter()
                    .filter_map(|(name, var)| {
                        let event = match var {
                            Var::Event(e) => e,
                            Var::Other(k, e) if k == self.kind => e,
                            Var::Cycles => "cycles".to_string(),
                            _ => return None,
                        };
                        Some((self.def.expr.find(&name).unwrap_or(usize::MAX), event))
                    })
                    .collect();
                named.sort();
                named.into_iter().map(|(_, e)| e).collect()
            })
            .clone()
    }

    /// The formula's value for these values of its names (in `named_vars` order).
    pub fn eval(&self, values: &[f64]) -> Option<f64> {
        let c = self.compiled().as_ref().ok()?;
        c.expr.eval(values).ok().filter(|v| v.is_finite())
    }

    /// The names its formula uses, classified (none when it does not compile).
    pub fn vars(&self) -> &[Var] {
        match self.compiled() {
            Ok(c) => &c.vars,
            Err(_) => &[],
        }
    }
}

/// The names in a formula that are other metrics, found by a scan of its
/// identifiers (`kind@EVENT@` references are events, not metrics).
fn metric_refs(expr: &str, kinds: &HashMap<String, BlockKind>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if bytes.get(i) == Some(&b'@') {
                // kind@EVENT@: skip to the closing '@'.
                i += 1;
                while i < bytes.len() && bytes[i] != b'@' {
                    i += 1;
                }
                i += 1;
                continue;
            }
            let name = &expr[start..i];
            if kinds.contains_key(name) && !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
        } else if c.is_ascii_digit() || c == b'.' {
            // A number, with its exponent (1e-9): not a name.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// A metric that could not be loaded, kept so that asking for it says why.
#[derive(Debug, Clone)]
pub struct Broken {
    /// The metric's name.
    pub name: String,
    /// Where it was defined.
    pub source: String,
    /// Why it cannot be used.
    pub problem: String,
}

/// The metrics available on a generation.
#[derive(Debug, Clone, Default)]
pub struct MetricSet {
    /// The metrics loaded, built-ins first.
    pub metrics: Vec<Metric>,
    /// Where each metric is in `metrics`, by name.
    index: HashMap<String, usize>,
    /// Metrics that could not be loaded, and why.
    pub broken: Vec<Broken>,
    /// Files that could not be read at all (warned, not fatal).
    pub warnings: Vec<String>,
}

/// Writes numbers with an exponent (`1e9`, `1e-3`, as perf's formulas do) in plain
/// decimals, which the expression parser reads.
fn plain_numbers(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len() + 8);
    let mut rest = expr;
    while let Some(c) = rest.chars().next() {
        let len = if c.is_ascii_alphabetic() || c == '_' {
            // A name, and its @EVENT@ when it is a reference: copied whole.
            let mut n = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if rest[n..].starts_with('@') {
                n += 1 + rest[n + 1..]
                    .find('@')
                    .map_or(rest.len() - n - 1, |k| k + 1);
            }
            out.push_str(&rest[..n]);
            n
        } else if c.is_ascii_digit() || c == '.' {
            let n = number_len(rest);
            match rest[..n].parse::<f64>() {
                Ok(v) if rest[..n].contains(['e', 'E']) => out.push_str(&format!("{v}")),
                _ => out.push_str(&rest[..n]),
            }
            n
        } else {
            out.push(c);
            c.len_utf8()
        };
        rest = &rest[len..];
    }
    out
}

/// The length of the number `text` starts with: digits and dots, and an exponent.
fn number_len(text: &str) -> usize {
    let b = text.as_bytes();
    let mut i = b
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .count();
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let digits = b[j.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            i = j + digits;
        }
    }
    i
}

/// Wraps perf-style `kind@EVENT@` references in braces, the expression parser's
/// syntax for names with other characters; numbers are written plainly.
fn braced(expr: &str) -> String {
    let plain = plain_numbers(expr);
    let expr = plain.as_str();
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
    metrics: &HashMap<String, BlockKind>,
) -> std::result::Result<Vec<Var>, String> {
    names
        .iter()
        .map(|n| classify_one(def, kind, gens, n.trim_matches(['{', '}']), metrics))
        .collect()
}

/// A perf event in a formula: `perf@NAME@` for perf's generic names (hyphens and all),
/// `PMU@EVENT@` for a PMU's event (checked against the machine's PMUs when counted).
fn perf_var(pmu: &str, event: &str, n: &str) -> std::result::Result<Var, String> {
    if pmu != "perf" {
        return Ok(Var::Other(BlockKind::Perf, format!("{pmu}/{event}/")));
    }
    let name = crate::perf::generic_name(event).ok_or_else(|| {
        let names = crate::perf::GENERIC
            .iter()
            .flat_map(|(n, ..)| n.iter().copied());
        format!(
            "'{event}' is no generic perf event (in {n}){}; a PMU's event is PMU@EVENT@",
            did_you_mean(&suggest(event, names))
        )
    })?;
    Ok(Var::Other(BlockKind::Perf, name.to_string()))
}

fn classify_one(
    def: &MetricDef,
    kind: BlockKind,
    gens: &[Generation],
    n: &str,
    metrics: &HashMap<String, BlockKind>,
) -> std::result::Result<Var, String> {
    let generic = crate::perf::generic_name(n);
    Ok(if let Some((k, rest)) = n.split_once('@') {
        let event = rest.trim_end_matches('@');
        // A name that is no block kind is a perf PMU (`armv8_pmuv3_0@l2d_cache_refill@`).
        let Some(other) = BlockKind::parse(k) else {
            return perf_var(k, event, n);
        };
        if !table_has(other, gens, event) {
            return Err(format!(
                "{other:?} has no event '{event}' (in {n})",
                other = other.as_str()
            ));
        }
        Var::Other(other, event.to_string())
    } else if n == "duration_time" {
        Var::Duration
    } else if n == def.name {
        return Err("the metric refers to itself".into());
    } else if let (BlockKind::Perf, Some(g)) = (kind, generic) {
        // Unit `perf`: plain names are perf's generic events, cycles included.
        Var::Other(BlockKind::Perf, g.to_string())
    } else if n == "cycles" {
        if !kind.def().count_clock {
            return Err(format!(
                "cycles is a {kind} block's count_clock counter, which {kind} blocks have not; the Arm cores' cycles are perf@cycles@",
                kind = kind.as_str()
            ));
        }
        Var::Cycles
    } else if n == "blocks" {
        Var::Blocks
    } else if PARAMS.contains(&n) {
        Var::Param(n.to_string())
    } else if let Some(k) = metrics.get(n) {
        Var::Metric(n.to_string(), *k)
    } else if table_has(kind, gens, n) {
        Var::Event(n.to_string())
    } else if let Some(g) = generic {
        Var::Other(BlockKind::Perf, g.to_string())
    } else {
        let candidates: Vec<&str> = gens
            .iter()
            .flat_map(|g| builtin(kind, *g).iter().map(|d| d.name.trim_end()))
            .collect();
        return Err(format!(
            "'{n}' is no event of {} nor a metric nor a perf event{}",
            kind.as_str(),
            did_you_mean(&suggest(n, candidates.into_iter()))
        ));
    })
}

/// A name formulas and Prometheus both accept: `[A-Za-z_][A-Za-z0-9_]*`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A metric of a known kind, its formula not yet parsed.
fn load_one(
    def: MetricDef,
    source: &str,
    context: &std::sync::Arc<Context>,
) -> std::result::Result<Metric, String> {
    let kind = def
        .block_kind()
        .ok_or_else(|| format!("unknown kind '{}' in Unit", def.kind))?;
    if !valid_name(&def.name) {
        return Err(format!(
            "MetricName '{}' is not a usable name: letters, digits and _ only, not starting with a digit (it names a formula variable and a Prometheus series)",
            def.name.escape_debug()
        ));
    }
    if let Some(p) = def.pair_blocks.as_deref().filter(|p| *p != "index") {
        return Err(format!(
            "PairBlocks '{}' is not known: `index` pairs block N with the other kind's block N",
            p.escape_debug()
        ));
    }
    let mut refs = metric_refs(&def.expr, &context.kinds);
    refs.retain(|r| *r != def.name);
    let (scale, unit) = def.scale_and_unit();
    Ok(Metric {
        def,
        kind,
        scale,
        unit,
        source: source.to_string(),
        refs,
        context: context.clone(),
        compiled: std::sync::OnceLock::new(),
        leads: std::sync::OnceLock::new(),
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
            match crate::sysfs::read_config(f)
                .map_err(|e| e.to_string())
                .and_then(|t| read_file(&t))
            {
                Ok(list) => {
                    let mut at: HashMap<String, usize> = defs
                        .iter()
                        .enumerate()
                        .map(|(i, (d, _))| (d.name.clone(), i))
                        .collect();
                    for d in list {
                        // A user metric replaces a built-in of the same name.
                        let entry = (d, f.display().to_string());
                        match at.get(&entry.0.name) {
                            Some(&i) => defs[i] = entry,
                            None => {
                                at.insert(entry.0.name.clone(), defs.len());
                                defs.push(entry);
                            }
                        }
                    }
                }
                Err(e) => set.warnings.push(format!(
                    "metric file {}: {e}; its metrics are skipped",
                    f.display()
                )),
            }
        }
        defs.retain(|(d, _)| gens.iter().any(|g| d.applies_to(*g)));
        let context = std::sync::Arc::new(Context {
            gens: gens.to_vec(),
            kinds: defs
                .iter()
                .map(|(d, _)| (d.name.clone(), d.block_kind().unwrap_or_default()))
                .collect(),
        });
        for (d, source) in defs {
            let name = d.name.clone();
            match load_one(d, &source, &context) {
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

    /// Metrics that refer to one another in a circle cannot be evaluated, nor can
    /// those that use them. Found without recursion, in time linear in the metrics
    /// and their references; each is reported with its chain.
    fn drop_cycles(&mut self) {
        self.reindex();
        let n = self.metrics.len();
        let deps: Vec<Vec<usize>> = self
            .metrics
            .iter()
            .map(|m| {
                m.refs
                    .iter()
                    .filter_map(|name| self.index.get(name).copied())
                    .collect()
            })
            .collect();
        let Depths {
            resolved,
            depth,
            via,
        } = depths(&deps);
        // Each unresolved metric: follow unresolved references to a cycle.
        let mut problem: Vec<Option<String>> = vec![None; n];
        for start in 0..n {
            if resolved[start] || problem[start].is_some() {
                continue;
            }
            let mut path = vec![start];
            let mut on_path: HashMap<usize, usize> = HashMap::from([(start, 0)]);
            let verdict = loop {
                let at = *path.last().expect("never empty");
                let next = deps[at]
                    .iter()
                    .copied()
                    .find(|&d| !resolved[d])
                    .expect("an unresolved metric has an unresolved reference");
                if let Some(p) = &problem[next] {
                    break format!("uses {}, which {p}", self.metrics[next].def.name);
                }
                if let Some(&k) = on_path.get(&next) {
                    let chain = chain_text(path[k..].iter().map(|&i| &self.metrics[i].def.name));
                    break format!("refers to itself through {chain}");
                }
                on_path.insert(next, path.len());
                path.push(next);
            };
            for &i in &path {
                problem[i] = Some(verdict.clone());
            }
        }
        for i in (0..n).filter(|&i| resolved[i] && depth[i] > MAX_DEPTH) {
            let chain = std::iter::successors(Some(i), |&k| via[k]);
            let names = chain.map(|k| &self.metrics[k].def.name);
            problem[i] = Some(format!(
                "refers to metrics {} deep ({}); bfperf evaluates chains of at most {MAX_DEPTH}",
                depth[i],
                path_text(names, depth[i])
            ));
        }
        let metrics = std::mem::take(&mut self.metrics);
        for (m, p) in metrics.into_iter().zip(problem) {
            match p {
                None => self.metrics.push(m),
                Some(problem) => self.broken.push(Broken {
                    name: m.def.name,
                    source: m.source,
                    problem: format!("it cannot be evaluated: it {problem}"),
                }),
            }
        }
        self.reindex();
    }

    fn reindex(&mut self) {
        self.index = self
            .metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.def.name.clone(), i))
            .collect();
    }

    /// The metric of this name.
    pub fn get(&self, name: &str) -> Option<&Metric> {
        self.index.get(name).map(|&i| &self.metrics[i])
    }

    /// The metrics and everything they use, each once, dependencies first.
    pub fn in_order<'a>(&'a self, chosen: &[&'a Metric]) -> Vec<&'a Metric> {
        let mut out = Vec::new();
        let mut placed = HashSet::new();
        for m in chosen {
            self.with_dependencies(m, &mut out, &mut placed);
        }
        out
    }

    /// Metrics chosen by names or groups (comma lists), with the metrics they use.
    pub fn select(&self, wanted: &[String]) -> Result<Vec<&Metric>> {
        let mut out: Vec<&Metric> = Vec::new();
        let mut placed = HashSet::new();
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
                self.with_dependencies(m, &mut out, &mut placed);
            }
        }
        // Formulas are parsed now, for what was asked and what it uses.
        if let Some(m) = out.iter().find(|m| m.problem().is_some()) {
            return Err(Error::BadMetric {
                metric: m.def.name.clone(),
                source_file: m.source.clone(),
                problem: m.problem().unwrap_or_default().to_string(),
            });
        }
        Ok(out)
    }

    /// Adds `m` after the metrics it uses, unless `placed` has it (depth-first,
    /// with a stack of our own: any depth of references is fine).
    fn with_dependencies<'a>(
        &'a self,
        m: &'a Metric,
        out: &mut Vec<&'a Metric>,
        placed: &mut HashSet<&'a str>,
    ) {
        let mut stack: Vec<(&Metric, usize)> = vec![(m, 0)];
        while let Some((at, next)) = stack.pop() {
            if placed.contains(at.def.name.as_str()) {
                continue;
            }
            let dep = at.refs[next..].iter().enumerate().find_map(|(k, n)| {
                self.get(n)
                    .filter(|d| !placed.contains(d.def.name.as_str()))
                    .map(|d| (k, d))
            });
            match dep {
                Some((k, d)) => {
                    stack.push((at, next + k + 1));
                    stack.push((d, 0));
                }
                None => {
                    placed.insert(at.def.name.as_str());
                    out.push(at);
                }
            }
        }
    }
}

/// `a → b → c → …`, at most eight names of `len`.
fn path_text<'a>(names: impl Iterator<Item = &'a String>, len: usize) -> String {
    let mut shown: Vec<&str> = names.take(8).map(String::as_str).collect();
    if len > 8 {
        shown.push("…");
    }
    shown.join(" → ")
}

/// `a → b → c → a`, at most eight names.
fn chain_text<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&String> = names.collect();
    let mut shown: Vec<&str> = names.iter().take(8).map(|s| s.as_str()).collect();
    if names.len() > 8 {
        shown.push("…");
    }
    shown.push(names[0]);
    format!("{} ({} metrics)", shown.join(" → "), names.len())
}

/// The events each kind must count for these metrics: `KIND/EVENT,.../` specs, one
/// per metric and kind, so that multiplexing keeps a metric's events in one turn.
/// Their perf events are counted beside them.
pub fn specs_for(metrics: &[&Metric]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in metrics {
        let mut by_kind: BTreeMap<BlockKind, Vec<String>> = BTreeMap::new();
        for v in m.vars() {
            let (k, e) = match v {
                Var::Other(BlockKind::Perf, _) => continue,
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
        for (k, events) in by_kind {
            let spec = format!("{}/{}/", k.as_str(), events.join(","));
            if !out.contains(&spec) {
                out.push(spec);
            }
        }
    }
    out
}

/// The perf events these metrics name (`instructions`, `PMU/EVENT/`), each once.
pub(crate) fn perf_events_for(metrics: &[&Metric]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in metrics {
        for v in m.vars() {
            if let Var::Other(BlockKind::Perf, e) = v {
                if !out.contains(e) {
                    out.push(e.clone());
                }
            }
        }
    }
    out
}

/// Whether a metric needs perf events (which only `stat` counts).
pub(crate) fn uses_perf(m: &Metric) -> bool {
    !perf_events_for(&[m]).is_empty()
}

/// Where perf counts are kept among a formula's inputs: one pseudo-block, since a
/// perf event is counted system-wide, summed over CPUs.
pub(crate) const PERF_SCOPE: &str = "perf";

/// Counters per block a metric needs (its own kind's events and cycles; registers
/// need none).
pub(crate) fn counters_needed(m: &Metric, gen: Generation) -> usize {
    if m.kind.def().mechanism.get(gen) == Mechanism::Registers {
        return 0;
    }
    m.vars()
        .iter()
        .filter(|v| matches!(v, Var::Event(_) | Var::Cycles))
        .collect::<BTreeSet<_>>()
        .len()
}

/// One input of a formula: its value and the share of the span it was counted
/// (below 1 when multiplexed: the value is a scaled estimate), or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A value counted.
    Value {
        /// The count (scaled when multiplexed).
        value: f64,
        /// The share of the span it was counted, 0 to 1.
        coverage: f64,
    },
    /// No value, and why.
    Missing(String),
}

/// What metrics are evaluated on: per block, the count of each event (by name;
/// `cycles` for count_clock), the span, and the command line's values.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// block → (kind, event → input).
    pub blocks: BTreeMap<String, (BlockKind, HashMap<String, Input>)>,
    /// The span measured, seconds.
    pub duration_s: f64,
    /// Values from the command line (`pcie_link_bytes_per_s`).
    pub params: HashMap<String, f64>,
}

/// A value computed from inputs, and the least coverage among them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Eval {
    value: f64,
    coverage: f64,
}

impl Inputs {
    fn put(&mut self, block: &str, kind: BlockKind, event: &str, input: Input) {
        let entry = self
            .blocks
            .entry(block.to_string())
            .or_insert_with(|| (kind, HashMap::new()));
        entry.1.insert(event.to_string(), input);
    }

    /// A counted value (coverage 1 unless multiplexed).
    pub fn add(&mut self, block: &str, kind: BlockKind, event: &str, value: f64, coverage: f64) {
        self.put(block, kind, event, Input::Value { value, coverage });
    }

    /// An event that was asked for but has no usable value, and why.
    pub fn missing(&mut self, block: &str, kind: BlockKind, event: &str, why: String) {
        self.put(block, kind, event, Input::Missing(why));
    }

    fn one(&self, block: &str, event: &str) -> std::result::Result<Eval, String> {
        match self.blocks.get(block).and_then(|(_, e)| e.get(event)) {
            Some(Input::Value { value, coverage }) => Ok(Eval {
                value: *value,
                coverage: *coverage,
            }),
            Some(Input::Missing(why)) => Err(why.clone()),
            None => Err(format!("{event} of {block} was not measured")),
        }
    }

    /// The sum over a kind's blocks: missing when any block's value is.
    fn sum(&self, kind: BlockKind, event: &str) -> std::result::Result<Eval, String> {
        let mut total: Option<Eval> = None;
        for (block, (k, _)) in &self.blocks {
            if *k != kind {
                continue;
            }
            let e = self.one(block, event)?;
            total = Some(match total {
                None => e,
                Some(t) => Eval {
                    value: t.value + e.value,
                    coverage: t.coverage.min(e.coverage),
                },
            });
        }
        total.ok_or_else(|| format!("no {} block counted {event}", kind.as_str()))
    }

    fn count(&self, kind: BlockKind) -> usize {
        self.blocks.values().filter(|(k, _)| *k == kind).count()
    }
}

/// A metric's value for a block, or for the sum of a kind's blocks.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MetricValue {
    /// The metric's name.
    pub metric: String,
    /// The block, or the kind for the sum of its blocks.
    pub block: String,
    /// The metric's kind.
    pub kind: BlockKind,
    /// Null where it cannot be computed (a division by zero, a missing count or value).
    pub value: Option<f64>,
    /// The displayed unit.
    pub unit: String,
    /// Its groups (`;`-separated).
    pub group: String,
    /// What it measures.
    pub description: String,
    /// The least share of the span its inputs were counted: below 1, the value is
    /// an estimate from multiplexed (scaled) counts.
    pub coverage: f64,
    /// Why there is no value.
    pub reason: Option<String>,
    /// The value is for the sum of the kind's blocks, not one block.
    #[serde(skip)]
    pub of_kind: bool,
    /// The events of its own kind its formula counts (`cycles` for the clock), in
    /// the order the formula names them: perf's `-x` puts a metric on the line of
    /// the first one shown.
    #[serde(skip)]
    #[schemars(skip)]
    pub leads: std::sync::Arc<[String]>,
}

/// Evaluates the chosen metrics per block (when `per_block`) and for each kind's sum.
/// Metrics are evaluated once each, dependencies first (no recursion: any depth of
/// references costs the same per metric).
pub fn evaluate(
    set: &MetricSet,
    chosen: &[&Metric],
    inputs: &Inputs,
    per_block: bool,
) -> Vec<MetricValue> {
    type Memo<'a> = HashMap<(&'a str, Option<&'a str>), std::result::Result<Eval, String>>;
    let mut memo: Memo = HashMap::new();
    let scopes_of = |m: &Metric| -> Vec<Option<&str>> {
        let mut v: Vec<Option<&str>> = inputs
            .blocks
            .iter()
            .filter(|(_, (k, _))| *k == m.kind)
            .map(|(b, _)| Some(b.as_str()))
            .collect();
        v.push(None);
        v
    };
    for m in set.in_order(chosen) {
        for scope in scopes_of(m) {
            let v = value_of(m, inputs, scope, &|name, scope| {
                memo.get(&(name, scope))
                    .cloned()
                    .unwrap_or_else(|| Err(format!("metric {name} was not evaluated")))
            });
            memo.insert((m.def.name.as_str(), scope), v);
        }
    }
    let mut out = Vec::new();
    for m in chosen {
        let blocks = inputs.count(m.kind);
        let mut scopes: Vec<Option<&str>> = Vec::new();
        if per_block {
            scopes.extend(scopes_of(m).into_iter().flatten().map(Some));
        }
        if blocks > 0 && (!per_block || blocks > 1 || scopes.is_empty()) {
            scopes.push(None);
        }
        for scope in scopes {
            let r = memo
                .get(&(m.def.name.as_str(), scope))
                .cloned()
                .unwrap_or_else(|| Err("not evaluated".into()));
            let (value, coverage, reason) = match r {
                Ok(e) => (Some(e.value * m.scale), e.coverage, None),
                Err(why) => (None, 0.0, Some(why)),
            };
            out.push(MetricValue {
                metric: m.def.name.clone(),
                block: scope.map_or_else(|| m.kind.as_str().to_string(), str::to_string),
                kind: m.kind,
                value: value.filter(|v| v.is_finite()),
                unit: m.unit.clone(),
                group: m.def.group.clone(),
                description: m.def.description.clone(),
                coverage,
                reason,
                of_kind: scope.is_none(),
                leads: m.leads(),
            });
        }
    }
    out
}

/// The value of an evaluated metric, by name and scope.
type Lookup<'a> = dyn Fn(&str, Option<&'a str>) -> std::result::Result<Eval, String> + 'a;

/// The unscaled value of a metric on a block (Some) or a kind's sum (None);
/// `metric` gives the value of another metric already evaluated.
fn value_of<'a>(
    m: &Metric,
    inputs: &'a Inputs,
    block: Option<&'a str>,
    metric: &Lookup<'a>,
) -> std::result::Result<Eval, String> {
    let own = |event: &str| match block {
        Some(b) => inputs.one(b, event),
        None => inputs.sum(m.kind, event),
    };
    let exact = |value: f64| Eval {
        value,
        coverage: 1.0,
    };
    let compiled = m.compiled().as_ref().map_err(Clone::clone)?;
    // Whether the metric has a value for this block at all comes before what its
    // inputs hold: a metric of the kind as a whole says so, whatever its events.
    if let Some(b) = block {
        for v in &compiled.vars {
            if let Var::Other(k, _) | Var::Metric(_, k) = v {
                if *k != m.kind {
                    paired(m, inputs, b, *k)?;
                }
            }
        }
    }
    let mut values = Vec::with_capacity(compiled.vars.len());
    let mut coverage: f64 = 1.0;
    for v in &compiled.vars {
        let e = match v {
            Var::Event(e) => own(e)?,
            Var::Cycles => own("cycles")?,
            Var::Other(k, e) => match block {
                Some(b) if *k != m.kind => inputs.one(paired(m, inputs, b, *k)?, e)?,
                _ => inputs.sum(*k, e)?,
            },
            Var::Duration => exact(inputs.duration_s),
            Var::Blocks => exact(match block {
                Some(_) => 1.0,
                None => inputs.count(m.kind) as f64,
            }),
            Var::Param(p) => exact(*inputs.params.get(p).ok_or_else(|| {
                format!("{p} is not given (for PCIe: --pcie-link, e.g. gen4x16)")
            })?),
            // Unscaled, as perf does: ScaleUnit applies when a value is shown.
            Var::Metric(n, kind) => match block {
                Some(b) if *kind != m.kind => metric(n, Some(paired(m, inputs, b, *kind)?))?,
                _ => metric(n, block)?,
            },
        };
        coverage = coverage.min(e.coverage);
        values.push(e.value);
    }
    let value = compiled
        .expr
        .eval(&values)
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| "division by zero (nothing counted)".to_string())?;
    Ok(Eval { value, coverage })
}

/// The block of `kind` whose values a per-block value of `m` on `block` uses: the one
/// block of a kind that has one per device, or the paired block (`PairBlocks`).
/// Otherwise the metric is defined for the kind as a whole: a sum over every block
/// of `kind` set against one block would be no block's value.
fn paired<'a>(
    m: &Metric,
    inputs: &'a Inputs,
    block: &str,
    kind: BlockKind,
) -> std::result::Result<&'a str, String> {
    let mut of_kind = inputs
        .blocks
        .iter()
        .filter(|(_, (k, _))| *k == kind)
        .map(|(b, _)| b.as_str());
    if kind != BlockKind::Perf && kind.def().one_per_device {
        return of_kind
            .next()
            .ok_or_else(|| format!("no {} block was measured", kind.as_str()));
    }
    let whole = || {
        let what = match kind {
            BlockKind::Perf => "perf events, counted for the whole system".to_string(),
            k => format!("every {} block", k.as_str()),
        };
        format!("defined for the kind as a whole: it takes {what}, not one paired with {block}")
    };
    match m.def.pair_blocks.as_deref() {
        Some("index") if kind != BlockKind::Perf => {
            let n = instance(block).ok_or_else(whole)?;
            of_kind
                .find(|b| instance(b) == Some(n))
                .ok_or_else(|| format!("no {} block pairs with {block}", kind.as_str()))
        }
        _ => Err(whole()),
    }
}

/// A block's instance number: its name's trailing digits (`llt_miss3` → `3`).
fn instance(block: &str) -> Option<&str> {
    let digits = block.len() - block.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    (digits > 0).then(|| &block[block.len() - digits..])
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

/// The user metric files given on the command line, checked to be regular files
/// that can be opened (a missing one, a FIFO, a device or a directory is an error
/// that says which).
pub(crate) fn user_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    for p in paths {
        crate::sysfs::check_config(p, "cannot read the metric file")?;
    }
    Ok(paths.to_vec())
}

/// The metric graph, resolved in order (Kahn's algorithm): which metrics have every
/// reference resolvable (none in or behind a circle), how deep each one's references
/// go, and through which reference the deepest chain runs.
struct Depths {
    resolved: Vec<bool>,
    depth: Vec<usize>,
    via: Vec<Option<usize>>,
}

/// `deps[i]`: the metrics metric `i` refers to. Linear in metrics and references.
fn depths(deps: &[Vec<usize>]) -> Depths {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            users[j].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut out = Depths {
        resolved: vec![false; n],
        depth: vec![1usize; n],
        via: vec![None; n],
    };
    while let Some(i) = ready.pop() {
        out.resolved[i] = true;
        if let Some(&d) = deps[i].iter().max_by_key(|&&d| out.depth[d]) {
            out.depth[i] = out.depth[d] + 1;
            out.via[i] = Some(d);
        }
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(u);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_resolves_chains_and_leaves_circles_and_their_users() {
        // 0 <- 1 <- 2 (a chain); 3 <-> 4 (a circle); 5 uses 4.
        let deps = vec![vec![], vec![0], vec![1], vec![4], vec![3], vec![4]];
        let d = depths(&deps);
        assert_eq!(d.resolved, vec![true, true, true, false, false, false]);
        assert_eq!(&d.depth[..3], &[1, 2, 3]);
        assert_eq!(&d.via[..3], &[None, Some(0), Some(1)]);
    }

    #[test]
    fn exponents_are_written_plainly_and_names_are_left_alone() {
        assert_eq!(plain_numbers("a * 1e9"), "a * 1000000000");
        assert_eq!(plain_numbers("x / 1e-3 + 2.5E+2"), "x / 0.001 + 250");
        assert_eq!(plain_numbers("PLL_N1e9 * 1e0"), "PLL_N1e9 * 1");
        assert_eq!(plain_numbers("perf@cpu-clock@ * 2"), "perf@cpu-clock@ * 2");
        assert_eq!(plain_numbers("1e"), "1e");
    }

    fn compiled(expr: &str, unit: &str) -> std::result::Result<Vec<Var>, String> {
        let def = MetricDef {
            name: "m".into(),
            expr: expr.into(),
            group: String::new(),
            description: String::new(),
            scale_unit: String::new(),
            kind: unit.into(),
            compat: String::new(),
            pair_blocks: None,
        };
        let set = MetricSet::load(&[Generation::Bf3], &[]);
        let context = std::sync::Arc::new(Context {
            gens: vec![Generation::Bf3],
            kinds: set
                .metrics
                .iter()
                .map(|m| (m.def.name.clone(), m.kind))
                .collect(),
        });
        let m = load_one(def, "test", &context)?;
        // In any order (the parser sorts its names).
        m.compiled().clone().map(|c| {
            let mut v = c.vars;
            v.sort();
            v
        })
    }

    #[test]
    fn a_metric_of_the_kind_as_a_whole_says_so_per_block_whatever_its_inputs() {
        let def = MetricDef {
            name: "mix".into(),
            expr: "llt_miss@GDC_MISS_MACHINE_RD_REQ@ / GDC_BANK0_RD_REQ".into(),
            group: String::new(),
            description: String::new(),
            scale_unit: String::new(),
            kind: "llt".into(),
            compat: String::new(),
            pair_blocks: None,
        };
        let mut set = MetricSet::load(&[Generation::Bf3], &[]);
        let context = std::sync::Arc::new(Context {
            gens: vec![Generation::Bf3],
            kinds: HashMap::new(),
        });
        set.metrics.push(load_one(def, "test", &context).unwrap());
        let mut inputs = Inputs::default();
        // llt0's own event is invalid; llt1's counted.
        inputs.missing("llt0", BlockKind::Llt, "GDC_BANK0_RD_REQ", "invalid".into());
        inputs.add("llt1", BlockKind::Llt, "GDC_BANK0_RD_REQ", 10.0, 1.0);
        inputs.add(
            "llt_miss0",
            BlockKind::LltMiss,
            "GDC_MISS_MACHINE_RD_REQ",
            5.0,
            1.0,
        );
        let m = set.metrics.last().unwrap();
        for v in evaluate(&set, &[m], &inputs, true) {
            let reason = v.reason.unwrap_or_default();
            match v.block.as_str() {
                "llt" => assert_eq!(reason, "invalid"),
                _ => assert!(
                    reason.starts_with("defined for the kind as a whole"),
                    "{reason}"
                ),
            }
        }
    }

    #[test]
    fn perf_events_in_formulas_are_classified() {
        let perf = |e: &str| Var::Other(BlockKind::Perf, e.to_string());
        // A hyphen is a minus: perf's hyphenated names are written perf@NAME@.
        let err = compiled("instructions / cpu-cycles", "perf").unwrap_err();
        assert!(err.contains("'cpu' is no event"), "{err}");
        assert_eq!(
            compiled("instructions / cycles", "perf").unwrap(),
            vec![perf("cycles"), perf("instructions")]
        );
        assert_eq!(
            compiled("armv8_pmuv3_0@l2d_cache_refill@ / perf@cpu-cycles@", "mss").unwrap(),
            vec![perf("armv8_pmuv3_0/l2d_cache_refill/"), perf("cycles")]
        );
        assert_eq!(
            compiled("SKYLIB_DDN_TX_FLITS / instructions", "mss").unwrap(),
            vec![
                Var::Event("SKYLIB_DDN_TX_FLITS".into()),
                perf("instructions")
            ]
        );
        let err = compiled("FMON_CLK_LAST_COUNT_PLL_N1 / cycles", "clock_measure").unwrap_err();
        assert!(err.contains("perf@cycles@"), "{err}");
        let err = compiled("perf@instrucions@", "perf").unwrap_err();
        assert!(err.contains("did you mean instructions"), "{err}");
    }
}
