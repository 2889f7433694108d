//! `bfperf list`: events, registers, metrics and groups across the device.

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::BlockKind;
use crate::cli::output::{to_json, Cell, Document, Report, Table};
use crate::ops::list::Listing;

/// `bfperf list`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListReport {
    /// What was found.
    #[serde(flatten)]
    pub listing: Listing,
    /// The patterns searched for (none: everything).
    pub patterns: Vec<String>,
    /// No device was found: every generation's events, each with the generations
    /// that have it.
    pub every_generation: bool,
}

impl Report for ListReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let mut d = Document::default();
        let last = match self.every_generation {
            true => "GENERATIONS",
            false => "BLOCKS",
        };
        let mut t = Table::new(&["KIND", "EVENT", "NAME", "DESCRIPTION", last]);
        for e in &self.listing.events {
            t.row(vec![
                Cell::text(e.kind.as_str()),
                Cell::text(
                    e.number
                        .map_or_else(|| e.what.into(), |n| format!("{n:#x}")),
                ),
                Cell::text(&e.spec),
                Cell::text(&e.description),
                Cell::text(match self.every_generation && e.kind != BlockKind::Perf {
                    true => e.generations.join(","),
                    false => blocks_text(&e.blocks),
                }),
            ]);
        }
        // Only metrics matched (`list --details ddr_bandwidth`): no empty table.
        if !self.listing.events.is_empty() {
            d.table(t);
        }
        for p in &self.listing.pmus {
            let on = p.cpus.as_ref().map_or_else(
                || "every CPU".to_string(),
                |c| {
                    format!(
                        "CPUs {}",
                        c.iter()
                            .map(|n| n.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                },
            );
            d.line(format!(
                "PMU {} (type {}): {} named events, counts on {on}",
                p.name, p.type_, p.events
            ));
        }
        if !self.listing.metrics.is_empty() {
            let mut m = Table::new(&["METRIC", "GROUP", "KIND", "UNIT", "DESCRIPTION"]);
            for x in &self.listing.metrics {
                m.row(vec![
                    Cell::text(&x.metric),
                    Cell::text(&x.group),
                    Cell::text(x.kind.as_str()),
                    Cell::text(&x.unit),
                    Cell::text(match &x.formula {
                        Some(f) => format!("{} = {f}", x.description),
                        None => x.description.clone(),
                    }),
                ]);
            }
            d.table(m);
            for (g, names) in &self.listing.groups {
                d.line(format!("group {g}: {}", names.join(", ")));
            }
        }
        d
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&["what", "kind", "number", "name", "description", "blocks"]);
        for e in &self.listing.events {
            t.row(vec![
                Cell::text(e.what),
                Cell::text(e.kind.as_str()),
                Cell::text(e.number.map(|n| n.to_string()).unwrap_or_default()),
                Cell::text(match e.kind {
                    BlockKind::Perf => &e.spec,
                    _ => &e.name,
                }),
                Cell::text(&e.description),
                Cell::text(match e.generations.is_empty() {
                    true => e.blocks.join(" "),
                    false => e.generations.join(" "),
                }),
            ]);
        }
        for m in &self.listing.metrics {
            t.row(vec![
                Cell::text("metric"),
                Cell::text(m.kind.as_str()),
                Cell::text(""),
                Cell::text(&m.metric),
                Cell::text(&m.description),
                Cell::text(""),
            ]);
        }
        Some(t)
    }
}

/// `tile0-7` style when the blocks are one kind numbered in a row, else a list.
fn blocks_text(blocks: &[String]) -> String {
    match blocks.len() {
        0..=3 => blocks.join(","),
        n => format!("{} … {} ({n})", blocks[0], blocks[n - 1]),
    }
}
