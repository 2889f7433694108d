//! Metrics for Prometheus: their values in base units (Prometheus' naming rules:
//! `_bytes_per_second`, `_ratio` from 0 to 1, `_hertz`), and their formulas turned
//! into PromQL recording rules over the exporter's raw counters, so that every
//! Prometheus server computes them over its own window.
//!
//! A formula translates when its value does not depend on the length of the window
//! it is measured over (counts divided by counts or by `duration_time`): each count
//! becomes its `rate()`, `duration_time` becomes 1. Levels (clock monitors) are
//! taken as they are; a block's values are matched to a kind's or the device's sums
//! with `ignoring(...) group_left`.

use std::collections::HashMap;
use std::fmt::Write;

use crate::block::{BlockKind, Mechanism};
use crate::kinds::{self, Role};
use crate::metrics::{Metric, MetricSet, Var};

/// Displayed units (the unit part of a ScaleUnit) and, for each, the base unit's
/// name suffix and the factor from the displayed unit to it.
const BASE_UNITS: &[(&str, &str, f64)] = &[
    ("%", "ratio", 0.01),
    ("B/s", "bytes_per_second", 1.0),
    ("kB/s", "bytes_per_second", 1e3),
    ("MB/s", "bytes_per_second", 1e6),
    ("GB/s", "bytes_per_second", 1e9),
    ("Gb/s", "bytes_per_second", 1.25e8),
    ("/s", "per_second", 1.0),
    ("1/s", "per_second", 1.0),
    ("B", "bytes", 1.0),
    ("Hz", "hertz", 1.0),
    ("kHz", "hertz", 1e3),
    ("MHz", "hertz", 1e6),
    ("GHz", "hertz", 1e9),
    ("s", "seconds", 1.0),
    ("", "", 1.0),
];

/// A metric's name in Prometheus (`l3_hit_ratio`, `pcie_in_bandwidth_bytes_per_second`)
/// and the factor from its formula's (unscaled) value to the base unit.
pub(crate) fn base_name(m: &Metric) -> (String, f64) {
    let (suffix, to_base) = BASE_UNITS
        .iter()
        .find(|(u, _, _)| *u == m.unit)
        .map_or(("", 1.0), |(_, s, f)| (*s, *f));
    let mut name = m.def.name.clone();
    let has = |s: &str| name.ends_with(&format!("_{s}")) || name.contains(&format!("_{s}_"));
    if !suffix.is_empty() && !has(suffix) {
        name = format!("{name}_{suffix}");
    }
    let factor = m.scale * to_base;
    let factor = if (factor - 1.0).abs() < 1e-12 {
        1.0
    } else {
        factor
    };
    (name, factor)
}

/// How far a series' labels reach: a block, a kind's sum, the device's sum, or a
/// plain number. Each level has the labels of the next plus one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Scalar,
    Device,
    Kind,
    Block,
}

/// Where a rule is evaluated: per block or per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// Per block.
    Block,
    /// Per kind, its blocks summed first.
    Kind,
}

impl Scope {
    fn level(self) -> Level {
        match self {
            Scope::Block => Level::Block,
            Scope::Kind => Level::Kind,
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Scope::Block => "block",
            Scope::Kind => "kind",
        }
    }
}

/// The recording rule name of a metric at a scope: `block:bfperf_l3_hit_ratio:rate1m`.
pub(crate) fn rule_name(m: &Metric, scope: Scope, window: &str) -> String {
    format!("{}:bfperf_{}:rate{window}", scope.prefix(), base_name(m).0)
}

/// The labels a level has beyond the level below it (what `ignoring` drops).
fn extra_labels(high: Level, low: Level) -> Vec<&'static str> {
    let mut out = Vec::new();
    if high >= Level::Block && low < Level::Block {
        out.push("block");
    }
    if high >= Level::Kind && low < Level::Kind {
        out.push("kind");
    }
    out
}

/// A formula's syntax tree.
#[derive(Debug, Clone)]
enum Node {
    Num(f64),
    Name(String),
    Neg(Box<Node>),
    Bin(char, Box<Node>, Box<Node>),
}

/// Parses `+ - * /`, parentheses, numbers and names (`kind@EVENT@` included).
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn parse(text: &str) -> Result<Node, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let n = p.sum()?;
        p.skip();
        match p.s.get(p.i) {
            None => Ok(n),
            Some(c) => Err(format!("'{}' is not translated to PromQL", *c as char)),
        }
    }

    fn skip(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip();
        self.s.get(self.i).copied()
    }

    fn sum(&mut self) -> Result<Node, String> {
        let mut left = self.product()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            left = Node::Bin(op as char, Box::new(left), Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Node, String> {
        let mut left = self.unary()?;
        while let Some(op @ (b'*' | b'/')) = self.peek() {
            self.i += 1;
            left = Node::Bin(op as char, Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, String> {
        match self.peek() {
            Some(b'-') => {
                self.i += 1;
                Ok(Node::Neg(Box::new(self.unary()?)))
            }
            Some(b'(') => {
                self.i += 1;
                let n = self.sum()?;
                match self.peek() {
                    Some(b')') => {
                        self.i += 1;
                        Ok(n)
                    }
                    _ => Err("unbalanced parentheses".into()),
                }
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => Ok(self.name()),
            Some(c) => Err(format!("'{}' is not translated to PromQL", c as char)),
            None => Err("the formula ends early".into()),
        }
    }

    fn number(&mut self) -> Result<Node, String> {
        let start = self.i;
        while let Some(&c) = self.s.get(self.i) {
            let exp_sign = (c == b'-' || c == b'+')
                && matches!(self.s.get(self.i.wrapping_sub(1)), Some(b'e' | b'E'));
            if c.is_ascii_digit() || c == b'.' || c == b'e' || c == b'E' || exp_sign {
                self.i += 1;
            } else {
                break;
            }
        }
        let text = String::from_utf8_lossy(&self.s[start..self.i]);
        text.parse()
            .map(Node::Num)
            .map_err(|_| format!("'{text}' is not a number"))
    }

    fn name(&mut self) -> Node {
        let start = self.i;
        let word = |p: &mut Self| {
            while p
                .s
                .get(p.i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                p.i += 1;
            }
        };
        word(self);
        if self.s.get(self.i) == Some(&b'@') {
            self.i += 1;
            while self.s.get(self.i).is_some_and(|c| *c != b'@') {
                self.i += 1;
            }
            self.i += 1;
        }
        let end = self.i.min(self.s.len());
        Node::Name(String::from_utf8_lossy(&self.s[start..end]).into_owned())
    }
}

/// PromQL for the raw series behind an event or register of `kind`, at `level`
/// (Block: per block; Kind: summed over the kind's blocks; Device: summed over
/// every block of the kind, without the kind label).
fn series(kind: BlockKind, name: &str, level: Level, window: &str) -> Result<String, String> {
    let def = kind.def();
    let drop = |own: &[&str]| -> String {
        let mut labels: Vec<&str> = own.to_vec();
        labels.extend(extra_labels(Level::Block, level));
        labels.join(", ")
    };
    let k = kind.as_str();
    let registers = def.mechanism.bf12 == Mechanism::Registers;
    if !registers {
        let sel = match name {
            "cycles" => format!("bfperf_cycles_total{{kind=\"{k}\"}}"),
            e => format!("bfperf_events_total{{kind=\"{k}\",event=\"{e}\"}}"),
        };
        return Ok(format!(
            "sum without ({}) (rate({sel}[{window}]))",
            drop(&["counter", "event"])
        ));
    }
    if let Some(f) = def.frequencies {
        if let Some((pll, is_count)) = f.pll_of(name) {
            // count / window × reference = hertz: the count stands for hertz /
            // reference (per window of 1).
            if !is_count {
                return Ok("1".into());
            }
            return Ok(format!(
                "(sum without ({}) (bfperf_pll_frequency_hertz{{kind=\"{k}\",pll=\"{pll}\"}}) / {})",
                drop(&["pll"]),
                f.reference_hz
            ));
        }
    }
    let (family, counted) = match def.role(name) {
        Role::Count => match kinds::register_unit(name) {
            "bytes" => ("bfperf_register_bytes_total", true),
            "packets" => ("bfperf_register_packets_total", true),
            _ => ("bfperf_register_events_total", true),
        },
        Role::Level => ("bfperf_level", false),
        Role::Control => ("bfperf_register_value", false),
    };
    let sel = format!("{family}{{kind=\"{k}\",register=\"{name}\"}}");
    let sel = if counted {
        format!("rate({sel}[{window}])")
    } else {
        sel
    };
    Ok(format!("sum without ({}) ({sel})", drop(&["register"])))
}

/// Whether a name's value grows with the window (a count) or not (a level, a
/// parameter, a number of blocks, another metric).
fn is_count(kind: BlockKind, var: &Var) -> bool {
    let counted = |k: BlockKind, e: &str| {
        let d = k.def();
        d.mechanism.bf12 != Mechanism::Registers || d.role(e) == Role::Count
    };
    match var {
        Var::Event(e) => counted(kind, e),
        Var::Other(k, e) => counted(*k, e),
        Var::Cycles | Var::Duration => true,
        Var::Blocks | Var::Metric(..) | Var::Param(_) => false,
    }
}

/// Checks that the formula is a rate or a ratio: its value is the same when every
/// count and the duration grow in proportion (so `rate()`s and 1 stand for them).
fn window_free(m: &Metric) -> Result<(), String> {
    let vars = m.named_vars();
    if !vars
        .iter()
        .any(|(_, v)| is_count(m.kind, v) || matches!(v, Var::Metric(..)))
    {
        return Err("it counts nothing: the exporter exports its inputs as they are".into());
    }
    let value = |t: f64| {
        let values: Vec<f64> = vars
            .iter()
            .enumerate()
            .map(|(i, (_, v))| {
                let x = 1.0 + (i as f64 * 0.618_034).fract() * 7.0;
                if is_count(m.kind, v) {
                    x * t
                } else {
                    x
                }
            })
            .collect();
        m.eval(&values)
    };
    match (value(1.0), value(3.7)) {
        (Some(a), Some(b)) if (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) => Ok(()),
        (Some(_), Some(_)) => {
            Err("its value depends on how long it is measured (not a rate or a ratio)".into())
        }
        _ => Err("its formula could not be evaluated".into()),
    }
}

/// Another kind's per-block series as the paired blocks of `to` (`llt_miss3` as
/// `llt3`), so that they match `to`'s own series label for label.
fn relabel(expr: &str, from: BlockKind, to: BlockKind) -> String {
    let (f, t) = (from.as_str(), to.as_str());
    format!(
        "label_replace(label_replace({expr}, \"block\", \"{t}$1\", \"block\", \"{f}([0-9]+)\"), \"kind\", \"{t}\", \"kind\", \".*\")"
    )
}

/// Translates formulas into PromQL.
struct Translator<'a> {
    set: &'a MetricSet,
    window: &'a str,
    /// Metrics translated so far, per scope (a formula may name them), and the
    /// factor from their formula's value to their rule's.
    done: &'a HashMap<(String, Scope), f64>,
}

impl Translator<'_> {
    fn leaf(&self, m: &Metric, scope: Scope, var: &Var) -> Result<(String, Level), String> {
        let w = self.window;
        Ok(match var {
            Var::Event(e) => (series(m.kind, e, scope.level(), w)?, scope.level()),
            Var::Cycles => (series(m.kind, "cycles", scope.level(), w)?, scope.level()),
            Var::Other(BlockKind::Perf, e) => {
                return Err(format!(
                    "it needs the perf event {e}, which the exporter does not count"
                ))
            }
            Var::Other(k, e) => match self.pairing(m, scope, *k)? {
                false => (series(*k, e, Level::Device, w)?, Level::Device),
                true => (
                    relabel(&series(*k, e, Level::Block, w)?, *k, m.kind),
                    Level::Block,
                ),
            },
            Var::Duration => ("1".into(), Level::Scalar),
            Var::Blocks => match scope {
                Scope::Block => ("1".into(), Level::Scalar),
                Scope::Kind => (self.blocks(m)?, Level::Kind),
            },
            Var::Param(p) => (
                format!("sum without (name) (bfperf_parameter{{name=\"{p}\"}})"),
                Level::Device,
            ),
            Var::Metric(n, k) => {
                let other = self.set.get(n).ok_or_else(|| format!("no metric {n}"))?;
                let paired = *k != m.kind && self.pairing(m, scope, *k)?;
                let (sel, level, of) = match (*k == m.kind, paired) {
                    (true, _) => (rule_name(other, scope, w), scope.level(), scope),
                    (false, true) => (
                        relabel(&rule_name(other, Scope::Block, w), *k, m.kind),
                        Level::Block,
                        Scope::Block,
                    ),
                    (false, false) => (
                        format!("sum without (kind) ({})", rule_name(other, Scope::Kind, w)),
                        Level::Device,
                        Scope::Kind,
                    ),
                };
                let factor = self
                    .done
                    .get(&(n.clone(), of))
                    .ok_or_else(|| format!("it needs {n}, which has no rule"))?;
                match *factor == 1.0 {
                    true => (sel, level),
                    false => (format!("({sel} / {factor})"), level),
                }
            }
        })
    }

    /// Whether, per block, another kind's values come from the paired block (true)
    /// or from the whole device (false: at the kind's scope, or a kind with one block
    /// per device); an error when the metric is defined for its kind as a whole.
    fn pairing(&self, m: &Metric, scope: Scope, other: BlockKind) -> Result<bool, String> {
        if scope == Scope::Kind || other == m.kind || other.def().one_per_device {
            return Ok(false);
        }
        match m.def.pair_blocks.as_deref() {
            Some("index") => Ok(true),
            _ => Err(format!(
                "defined for the kind as a whole: it takes every {} block, and PairBlocks is not set",
                other.as_str()
            )),
        }
    }

    /// The number of the metric's kind's blocks, per instance.
    fn blocks(&self, m: &Metric) -> Result<String, String> {
        let first = m
            .named_vars()
            .into_iter()
            .find_map(|(_, v)| match v {
                Var::Event(e) => Some(e),
                Var::Cycles => Some("cycles".into()),
                _ => None,
            })
            .ok_or("`blocks` needs an event of the metric's kind")?;
        let per_block = series(m.kind, &first, Level::Block, self.window)?;
        Ok(format!("count without (block) ({per_block})"))
    }

    fn node(
        &self,
        m: &Metric,
        scope: Scope,
        names: &HashMap<String, Var>,
        n: &Node,
    ) -> Result<(String, Level), String> {
        Ok(match n {
            Node::Num(x) => (format!("{x}"), Level::Scalar),
            Node::Name(name) => {
                let var = names
                    .get(name)
                    .ok_or_else(|| format!("'{name}' is not known"))?;
                self.leaf(m, scope, var)?
            }
            Node::Neg(inner) => {
                let (e, l) = self.node(m, scope, names, inner)?;
                (format!("-({e})"), l)
            }
            Node::Bin(op, a, b) => {
                let (l, la) = self.node(m, scope, names, a)?;
                let (r, lb) = self.node(m, scope, names, b)?;
                if matches!(op, '*' | '/') && r == "1" {
                    return Ok((l, la));
                }
                let matching = if la == lb || la == Level::Scalar || lb == Level::Scalar {
                    String::new()
                } else {
                    let (high, low) = (la.max(lb), la.min(lb));
                    let side = if la > lb { "group_left" } else { "group_right" };
                    format!(" ignoring({}) {side}()", extra_labels(high, low).join(", "))
                };
                if matching.is_empty() {
                    (format!("({l} {op} {r})"), la.max(lb))
                } else {
                    (format!("(({l}) {op}{matching} ({r}))"), la.max(lb))
                }
            }
        })
    }

    fn translate(&self, m: &Metric, scope: Scope) -> Result<String, String> {
        window_free(m)?;
        let names: HashMap<String, Var> = m.named_vars().into_iter().collect();
        let tree = Parser::parse(&m.def.expr)?;
        let (expr, _) = self.node(m, scope, &names, &tree)?;
        let (_, factor) = base_name(m);
        Ok(match factor == 1.0 {
            true => expr,
            false => format!("{expr} * {factor}"),
        })
    }
}

/// A Prometheus rules file (YAML) recording `chosen` per block and per kind, rates
/// over `window` (`1m`). Metrics that cannot be recorded are listed in comments
/// with the reason.
pub(crate) fn rules(set: &MetricSet, chosen: &[&Metric], window: &str) -> String {
    let mut done: HashMap<(String, Scope), f64> = HashMap::new();
    let mut body = String::new();
    let mut skipped = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for m in set.in_order(chosen) {
        if seen.contains(&m.def.name.as_str()) {
            continue;
        }
        seen.push(&m.def.name);
        let t = Translator {
            set,
            window,
            done: &done,
        };
        let translated = [Scope::Block, Scope::Kind].map(|s| (s, t.translate(m, s)));
        if let (_, Err(why)) = &translated[1] {
            let _ = writeln!(skipped, "#   {}: {}", m.def.name, one_line(why));
            continue;
        }
        for (scope, expr) in translated {
            match expr {
                Ok(expr) => {
                    let _ = write!(
                        body,
                        "      # {}\n      - record: {}\n        expr: {}\n",
                        one_line(&m.def.description),
                        rule_name(m, scope, window),
                        yaml_string(&expr)
                    );
                    done.insert((m.def.name.clone(), scope), base_name(m).1);
                }
                Err(why) => {
                    let _ = writeln!(skipped, "#   {} per block: {}", m.def.name, one_line(&why));
                }
            }
        }
    }
    let mut out = String::from(
        "# Prometheus recording rules for bfperf's metrics, generated by\n\
         # `bfperf metrics --format prometheus-rules`. Each metric is recorded per block\n\
         # (block:...) and per kind (kind:..., the kind's blocks summed first), in base\n\
         # units, from the raw counters bfperf's exporter exports.\n",
    );
    if !skipped.is_empty() {
        out.push_str("# Not recorded:\n");
        out.push_str(&skipped);
    }
    let _ = write!(out, "groups:\n  - name: bfperf\n    rules:\n{body}");
    if body.is_empty() {
        out = out.replace("    rules:\n", "    rules: []\n");
    }
    out
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A YAML single-quoted scalar (PromQL's double quotes need no escaping there).
fn yaml_string(s: &str) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    format!("'{}'", clean.replace('\'', "''"))
}
