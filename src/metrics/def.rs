//! Metric definitions: perf's pmu-events metric JSON (`MetricName`, `MetricExpr`,
//! `MetricGroup`, `BriefDescription`, `ScaleUnit`), with `Unit` naming the block kind
//! the formula's plain event names belong to (`perf`: perf events) and `Compat` the
//! generations (`BlueField-2`, or several joined by `|`; empty: every one). Built-ins
//! are embedded from `metrics/`; users add files of the same shape.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::block::{BlockKind, Generation};

/// One metric as written in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetricDef {
    /// Its name (a Prometheus-valid name).
    #[serde(rename = "MetricName")]
    pub name: String,
    /// Its formula.
    #[serde(rename = "MetricExpr")]
    pub expr: String,
    /// Its groups, `;`-separated.
    #[serde(rename = "MetricGroup", default)]
    pub group: String,
    /// What it measures.
    #[serde(rename = "BriefDescription", default)]
    pub description: String,
    /// A scale and a unit: `100%`, `1e-9GB/s`, `1MHz`.
    #[serde(rename = "ScaleUnit", default)]
    pub scale_unit: String,
    /// The block kind whose events the formula names plainly.
    #[serde(rename = "Unit")]
    pub kind: String,
    /// The generations it applies to, joined by `|`; empty: all.
    #[serde(rename = "Compat", default)]
    pub compat: String,
    /// How its per-block values pair the kind's blocks with another kind's whose
    /// counts the formula names: `index`, block N with the other kind's block N
    /// (`llt3` with `llt_miss3`, as the hardware pairs them). Absent: such a formula
    /// has a value for the kind as a whole only.
    #[serde(
        rename = "PairBlocks",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pair_blocks: Option<String>,
}

impl MetricDef {
    /// It applies to this generation.
    pub fn applies_to(&self, gen: Generation) -> bool {
        self.compat.is_empty() || self.compat.split('|').any(|c| c.trim() == gen.label())
    }

    /// `100%` → (100, "%"); `1e-9GB/s` → (1e-9, "GB/s"); `` → (1, "").
    pub fn scale_and_unit(&self) -> (f64, String) {
        let s = self.scale_unit.trim();
        let split = s
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_digit()
                    || c == '.'
                    || ((c == 'e' || c == 'E') && i > 0)
                    || ((c == '-' || c == '+') && s[..i].ends_with(['e', 'E'])))
            })
            .map(|(i, _)| i)
            .unwrap_or(s.len());
        let scale = s[..split].parse().unwrap_or(1.0);
        (scale, s[split..].to_string())
    }

    /// The kind named in `Unit`, when known: a block kind, or `perf` for formulas
    /// whose plain names are perf events (`instructions / cycles`).
    pub fn block_kind(&self) -> Option<BlockKind> {
        match self.kind.eq_ignore_ascii_case("perf") {
            true => Some(BlockKind::Perf),
            false => BlockKind::parse(&self.kind),
        }
    }
}

/// The built-in definitions, by generation file.
pub(super) const BUILTIN: &[(&str, &str)] = &[
    ("metrics/bf1.json", include_str!("../../metrics/bf1.json")),
    ("metrics/bf2.json", include_str!("../../metrics/bf2.json")),
    ("metrics/bf3.json", include_str!("../../metrics/bf3.json")),
    ("metrics/cpu.json", include_str!("../../metrics/cpu.json")),
];

/// Where users keep their metric files, searched in this order after `--metrics`.
pub(super) fn user_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))
    {
        dirs.push(home.join("bfperf/metrics"));
    }
    dirs.push(PathBuf::from("/etc/bfperf/metrics"));
    dirs
}
