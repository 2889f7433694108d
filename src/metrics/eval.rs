//! Evaluation: each metric's value from the counts of a span, with its coverage,
//! or the reason it has none; and the PCIe link parameters.

use super::*;

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
pub(super) struct Eval {
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
pub(super) type Lookup<'a> =
    dyn Fn(&str, Option<&'a str>) -> std::result::Result<Eval, String> + 'a;

/// The unscaled value of a metric on a block (Some) or a kind's sum (None);
/// `metric` gives the value of another metric already evaluated.
pub(super) fn value_of<'a>(
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
    let value = compiled.expr.eval(&values)?;
    Ok(Eval { value, coverage })
}

/// The block of `kind` whose values a per-block value of `m` on `block` uses: the one
/// block of a kind that has one per device, or the paired block (`PairBlocks`).
/// Otherwise the metric is defined for the kind as a whole: a sum over every block
/// of `kind` set against one block would be no block's value.
pub(super) fn paired<'a>(
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
pub(super) fn instance(block: &str) -> Option<&str> {
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
