//! `diff`: deltas and rates between two snapshots, and the PCIe summary.

use crate::cli::output::{group_f, to_json, Cell, Document, Report, Table};
use crate::metrics::MetricValue;
use crate::ops::diff::{Diff, Flag, IntervalSource, ValueDiff};

/// `bfperf diff OLD NEW`: the differences and the metrics they allow.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct DiffReport {
    #[serde(flatten)]
    pub diff: Diff,
    /// Every metric of the snapshots' generation whose inputs both snapshots hold,
    /// per block and summed per kind.
    pub metrics: Vec<MetricValue>,
}

fn item(v: &ValueDiff) -> String {
    match (&v.counter, &v.register) {
        (Some(c), _) => format!("counter{c}"),
        (None, r) => r.clone().unwrap_or_default(),
    }
}

fn flag(f: Option<Flag>) -> &'static str {
    match f {
        Some(Flag::Wrapped) => "wrapped",
        Some(Flag::Reset) => "reset",
        Some(Flag::EventChanged) => "event changed",
        Some(Flag::Level) => "level",
        Some(Flag::Control) => "control",
        None => "",
    }
}

impl Report for DiffReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let d = &self.diff;
        let mut doc = Document::default();
        doc.line(format!(
            "interval: {:.3} s ({})",
            d.interval_s,
            match d.interval_source {
                IntervalSource::Monotonic => "monotonic",
                IntervalSource::WallClock => "wall clock",
            }
        ));
        let mut t = Table::new(&[
            "BLOCK",
            "ITEM",
            "EVENT",
            "OLD",
            "NEW",
            "DELTA",
            "PER SECOND",
            "NOTE",
        ]);
        for v in &d.values {
            t.row(vec![
                Cell::text(&v.block),
                Cell::text(item(v)),
                Cell::text(v.event_name.clone().unwrap_or_default()),
                Cell::Int(v.old),
                Cell::Int(v.new),
                Cell::opt_int(v.delta),
                Cell::opt_float(v.rate_per_s),
                Cell::text(flag(v.flag)),
            ]);
        }
        doc.table(t);
        for b in &d.only_in_old {
            doc.line(format!("only in the old snapshot: {b}"));
        }
        for b in &d.only_in_new {
            doc.line(format!("only in the new snapshot: {b}"));
        }
        for p in &d.pcie {
            doc.line("");
            doc.line(format!("PCIe {}:", p.block));
            doc.line(format!(
                "  inbound   {} B/s ({:.3} Gb/s), {} packets/s",
                group_f(p.in_bytes_per_s),
                p.in_gbit_per_s,
                group_f(p.in_packets_per_s)
            ));
            doc.line(format!(
                "  outbound  {} B/s ({:.3} Gb/s), {} packets/s",
                group_f(p.out_bytes_per_s),
                p.out_gbit_per_s,
                group_f(p.out_packets_per_s)
            ));
            for (label, b) in [
                ("inbound  bytes/s  ", &p.in_bytes_per_s_by_type),
                ("outbound bytes/s  ", &p.out_bytes_per_s_by_type),
                ("inbound  packets/s", &p.in_packets_per_s_by_type),
                ("outbound packets/s", &p.out_packets_per_s_by_type),
            ] {
                doc.line(format!(
                    "  {label}  posted {}  non-posted {}  completion {}",
                    group_f(b.posted),
                    group_f(b.non_posted),
                    group_f(b.completion)
                ));
            }
        }
        if !self.metrics.is_empty() {
            doc.line("");
            doc.table(crate::cli::report::metric_table(&self.metrics));
        }
        doc
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "block",
            "counter",
            "register",
            "event",
            "event_name",
            "old",
            "new",
            "delta",
            "rate_per_s",
            "flag",
        ]);
        for v in &self.diff.values {
            t.row(vec![
                Cell::text(&v.block),
                v.counter.map(|c| Cell::Int(c.into())).unwrap_or(Cell::None),
                Cell::opt_text(v.register.clone()),
                Cell::opt_hex(v.event),
                Cell::opt_text(v.event_name.clone()),
                Cell::Int(v.old),
                Cell::Int(v.new),
                Cell::opt_int(v.delta),
                Cell::opt_float(v.rate_per_s),
                Cell::text(match v.flag {
                    Some(Flag::Wrapped) => "wrapped",
                    Some(Flag::Reset) => "reset",
                    Some(Flag::EventChanged) => "event_changed",
                    Some(Flag::Level) => "level",
                    Some(Flag::Control) => "control",
                    None => "",
                }),
            ]);
        }
        Some(t)
    }
}
