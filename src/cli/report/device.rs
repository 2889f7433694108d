//! `info`, `blocks`, `events`: what the device has.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::block::{BlockKind, Generation, Mechanism};
use crate::catalog::{Event, Source};
use crate::cli::output::{to_json, Cell, Document, Report, Table};

/// `bfperf info`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct InfoReport {
    /// The hwmon directory.
    pub device: String,
    pub generation: Generation,
    /// How many blocks the device has.
    pub blocks: usize,
    /// Block counts by kind.
    pub kinds: BTreeMap<String, usize>,
}

impl Report for InfoReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let by_kind: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let mut d = Document::default();
        d.fields(vec![
            ("device", Cell::text(&self.device)),
            ("generation", Cell::text(self.generation.label())),
            (
                "blocks",
                Cell::text(format!("{} ({})", self.blocks, by_kind.join(", "))),
            ),
        ]);
        d
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&["device", "generation", "blocks", "kind", "kind_blocks"]);
        for (kind, n) in &self.kinds {
            t.row(vec![
                Cell::text(&self.device),
                Cell::text(self.generation.label()),
                Cell::Int(self.blocks as u64),
                Cell::text(kind),
                Cell::Int(*n as u64),
            ]);
        }
        Some(t)
    }
}

/// One block in `bfperf blocks`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BlockRow {
    pub block: String,
    pub kind: BlockKind,
    pub mechanism: Mechanism,
    /// The number of `counter<N>` files.
    pub counters: usize,
    /// Register file names (registers blocks; else empty).
    pub registers: Vec<String>,
    /// The `enable` state; null where the block has none.
    pub enabled: Option<bool>,
    /// The number of events in its catalog.
    pub events: usize,
}

/// `bfperf blocks`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BlocksReport {
    pub device: String,
    pub generation: Generation,
    pub blocks: Vec<BlockRow>,
}

impl Report for BlocksReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let mut t = Table::new(&[
            "BLOCK",
            "KIND",
            "MECHANISM",
            "COUNTERS",
            "ENABLED",
            "EVENTS",
        ]);
        for b in &self.blocks {
            t.row(vec![
                Cell::text(&b.block),
                Cell::text(b.kind.as_str()),
                Cell::text(b.mechanism.as_str()),
                if b.mechanism == Mechanism::Registers {
                    Cell::text(format!("{} registers", b.registers.len()))
                } else {
                    Cell::Int(b.counters as u64)
                },
                match b.enabled {
                    Some(true) => Cell::text("yes"),
                    Some(false) => Cell::text("no"),
                    None => Cell::None,
                },
                Cell::Int(b.events as u64),
            ]);
        }
        let mut d = Document::default();
        d.table(t);
        d
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "block",
            "kind",
            "mechanism",
            "counters",
            "registers",
            "enabled",
            "events",
        ]);
        for b in &self.blocks {
            t.row(vec![
                Cell::text(&b.block),
                Cell::text(b.kind.as_str()),
                Cell::text(b.mechanism.as_str()),
                Cell::Int(b.counters as u64),
                Cell::Int(b.registers.len() as u64),
                Cell::opt_text(b.enabled.map(|e| e.to_string())),
                Cell::Int(b.events as u64),
            ]);
        }
        Some(t)
    }
}

/// `bfperf events BLOCK [PATTERN]`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct EventsReport {
    pub block: String,
    pub kind: BlockKind,
    pub mechanism: Mechanism,
    /// The driver cut the device's `event_list` at a page; events marked `builtin`
    /// come from bfperf's table.
    pub truncated_event_list: bool,
    pub events: Vec<Event>,
    /// The filter given, if any.
    pub pattern: Option<String>,
}

impl Report for EventsReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let registers = self.mechanism == Mechanism::Registers;
        let mut t = Table::new(if registers {
            &["OFFSET", "REGISTER", "DESCRIPTION"]
        } else {
            &["NUMBER", "NAME", "DESCRIPTION"]
        });
        for e in &self.events {
            t.row(vec![
                if e.number == u32::MAX {
                    Cell::None
                } else {
                    Cell::Hex(e.number)
                },
                match e.source {
                    Source::Builtin => Cell::text(format!("{}*", e.name)),
                    _ => Cell::lasting(e.name.clone()),
                },
                Cell::lasting(e.description.unwrap_or(crate::catalog::NO_DESCRIPTION)),
            ]);
        }
        let mut d = Document::default();
        d.table(t);
        if self.events.iter().any(|e| e.source == Source::Builtin) {
            d.line(format!(
                "* not in {}'s event_list (the driver cuts it at one page): from bfperf's built-in table",
                self.block
            ));
        }
        d
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "block",
            "event",
            "event_name",
            "description",
            "reserved",
            "source",
        ]);
        for e in &self.events {
            t.row(vec![
                Cell::text(&self.block),
                if e.number == u32::MAX {
                    Cell::None
                } else {
                    Cell::Hex(e.number)
                },
                Cell::lasting(e.name.clone()),
                e.description.map_or(Cell::None, Cell::lasting),
                Cell::text(e.reserved.to_string()),
                Cell::text(match e.source {
                    Source::Device => "device",
                    Source::Builtin => "builtin",
                }),
            ]);
        }
        Some(t)
    }
}
