//! `bfperf metrics`: the metrics available, with their formulas and what they need.

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::BlockKind;
use crate::cli::output::{to_json, Cell, Document, Report, Table};
use crate::metrics::MetricValue;

/// The terminal width from which the list is a table.
const WIDE: usize = 140;

/// One metric in the list.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MetricRow {
    pub metric: String,
    pub group: String,
    pub kind: BlockKind,
    pub unit: String,
    pub description: String,
    pub formula: String,
    /// The events and registers it counts, as `stat -e` specs.
    pub events: Vec<String>,
    /// Counters it needs on each block of its kind (0 for registers).
    pub counters_per_block: usize,
    pub compat: String,
    /// `built-in ...` or the file it comes from.
    pub source: String,
}

/// `bfperf metrics`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MetricsReport {
    pub metrics: Vec<MetricRow>,
    /// Metrics that could not be loaded, and why.
    pub broken: Vec<String>,
}

impl Report for MetricsReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let mut t = Table::new(&["METRIC", "GROUP", "KIND", "UNIT", "DESCRIPTION", "FORMULA"]);
        for m in &self.metrics {
            t.row(vec![
                Cell::text(&m.metric),
                Cell::text(&m.group),
                Cell::text(m.kind.as_str()),
                Cell::text(&m.unit),
                Cell::text(&m.description),
                Cell::text(&m.formula),
            ]);
        }
        let mut d = Document::default();
        d.table(t);
        for b in &self.broken {
            d.line(format!("not loaded: {b}"));
        }
        d
    }

    /// Narrower than the table needs, as perf list lays out its metrics: a line of
    /// name, group, kind and unit, then the description and the formula indented.
    fn document_at(&self, width: Option<u16>) -> Document {
        let wide = width.is_none_or(|w| usize::from(w) >= WIDE);
        if wide || self.metrics.is_empty() {
            return self.document();
        }
        let mut d = Document::default();
        let name_w = self
            .metrics
            .iter()
            .map(|m| m.metric.len())
            .max()
            .unwrap_or(0);
        for m in &self.metrics {
            d.line(format!(
                "{:<name_w$}  {} {} [{}]",
                m.metric,
                m.group,
                m.kind.as_str(),
                m.unit
            ));
            d.line(format!("    {}", m.description));
            d.line(format!("    = {}", m.formula));
        }
        for b in &self.broken {
            d.line(format!("not loaded: {b}"));
        }
        d
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "metric",
            "group",
            "kind",
            "unit",
            "description",
            "formula",
            "events",
            "counters_per_block",
            "compat",
            "source",
        ]);
        for m in &self.metrics {
            t.row(vec![
                Cell::text(&m.metric),
                Cell::text(&m.group),
                Cell::text(m.kind.as_str()),
                Cell::text(&m.unit),
                Cell::text(&m.description),
                Cell::text(&m.formula),
                Cell::text(m.events.join(" ")),
                Cell::Int(m.counters_per_block as u64),
                Cell::text(&m.compat),
                Cell::text(&m.source),
            ]);
        }
        Some(t)
    }
}

/// Metric values as a table for people.
pub(crate) fn metric_table(values: &[MetricValue]) -> Table {
    let mut t = Table::new(&["METRIC", "BLOCK", "VALUE", "UNIT", "NOTE"]);
    for v in values {
        let (value, unit) = match v.value {
            Some(x) => crate::cli::output::readable(x, &v.unit),
            None => ("-".to_string(), v.unit.clone()),
        };
        t.row(vec![
            Cell::text(&v.metric),
            Cell::text(&v.block),
            Cell::text(value),
            Cell::text(unit),
            Cell::text(metric_note(v)),
        ]);
    }
    t
}

/// Why a metric has no value, or that it is an estimate and from how much counting.
pub(super) fn metric_note(v: &MetricValue) -> String {
    match (&v.reason, v.value) {
        (Some(why), _) => format!("no value: {why}"),
        (None, Some(_)) if v.coverage < 1.0 => {
            format!(
                "estimate: inputs counted {}% of the time",
                crate::cli::output::percent(v.coverage)
            )
        }
        _ => String::new(),
    }
}
