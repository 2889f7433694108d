//! Metrics: counts turned into rates, ratios and bandwidths by formulas kept as data
//! ([`MetricDef`]). A set is loaded for a generation (built-ins, then user files), checked
//! (kind, syntax, every name, no cycles) and evaluated per block and for the sum of a
//! kind's blocks (events summed first, then the formula).

mod def;
mod eval;
mod expr;
mod formula;
mod graph;

pub use eval::{evaluate, pcie_link_bytes_per_s, Input, Inputs, MetricValue};
use formula::*;
use graph::*;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

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

/// A formula parsed and its names classified.
#[derive(Debug, Clone)]
struct Compiled {
    expr: expr::Formula,
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
            let expr = expr::Formula::parse(&self.def.expr)?;
            let c = &self.context;
            let vars = classify(&self.def, self.kind, &c.gens, expr.names(), &c.kinds)?;
            Ok(Compiled { expr, vars })
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
                .names()
                .iter()
                .cloned()
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
        c.expr.eval(values).ok()
    }

    /// The names its formula uses, classified (none when it does not compile).
    pub fn vars(&self) -> &[Var] {
        match self.compiled() {
            Ok(c) => &c.vars,
            Err(_) => &[],
        }
    }
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

/// The user metric files given on the command line, checked to be regular files
/// that can be opened (a missing one, a FIFO, a device or a directory is an error
/// that says which).
pub(crate) fn user_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    for p in paths {
        crate::sysfs::check_config(p, "cannot read the metric file")?;
    }
    Ok(paths.to_vec())
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
