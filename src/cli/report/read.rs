//! `read` and `snapshot`: values of counters and registers.

use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::output::{to_json, Cell, Document, Report, Table};
use crate::ops::read::{BlockReading, Unreadable};
use crate::ops::snapshot::Snapshot;

/// `bfperf read`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReadReport {
    pub device: String,
    /// Wall-clock time of the reads, RFC 3339 UTC.
    pub timestamp: String,
    pub blocks: Vec<BlockReading>,
}

/// One value, as both `read` and `snapshot` show it.
struct Value<'a> {
    block: &'a str,
    counter: Option<u32>,
    register: Option<&'a str>,
    event: Option<u32>,
    event_name: Option<&'a str>,
    counts_clock: bool,
    value: u64,
    enabled: Option<bool>,
}

impl<'a> Value<'a> {
    fn counter(
        block: &'a str,
        enabled: Option<bool>,
        (counter, event, event_name, counts_clock, value): (
            u32,
            Option<u32>,
            Option<&'a str>,
            bool,
            u64,
        ),
    ) -> Value<'a> {
        Value {
            block,
            counter: Some(counter),
            register: None,
            event,
            event_name,
            counts_clock,
            value,
            enabled,
        }
    }

    fn register(block: &'a str, register: &'a str, value: u64) -> Value<'a> {
        Value {
            block,
            counter: None,
            register: Some(register),
            event: None,
            event_name: None,
            counts_clock: false,
            value,
            enabled: None,
        }
    }

    fn item(&self) -> String {
        match (self.counter, self.register) {
            (Some(c), _) => format!("counter{c}"),
            (None, r) => r.unwrap_or_default().to_string(),
        }
    }

    fn event_label(&self) -> Cell {
        if self.register.is_some() {
            return Cell::text("");
        }
        Cell::text(match (self.event, self.event_name) {
            _ if self.counts_clock => "(clock cycles)".to_string(),
            (Some(n), Some(name)) => format!("0x{n:x} {name}"),
            _ => "(not programmed)".to_string(),
        })
    }
}

fn human(values: &[Value]) -> Document {
    let mut t = Table::new(&["BLOCK", "ITEM", "EVENT", "VALUE", "STATE"]);
    for v in values {
        t.row(vec![
            Cell::text(v.block),
            Cell::text(v.item()),
            v.event_label(),
            Cell::Int(v.value),
            Cell::text(match v.enabled {
                Some(true) if v.counter.is_some() => "running",
                Some(false) if v.counter.is_some() => "stopped",
                _ => "",
            }),
        ]);
    }
    let mut d = Document::default();
    d.table(t);
    d
}

/// The values as records; a value that could not be read is a row with no value and
/// the problem, never a row left out.
fn records(values: &[Value], unreadable: &[&Unreadable]) -> Table {
    let mut t = Table::new(&[
        "block",
        "counter",
        "register",
        "event",
        "event_name",
        "counts_clock",
        "value",
        "problem",
    ]);
    for v in values {
        t.row(vec![
            Cell::text(v.block),
            v.counter.map(|c| Cell::Int(c.into())).unwrap_or(Cell::None),
            Cell::opt_text(v.register),
            Cell::opt_hex(v.event),
            Cell::opt_text(if v.counts_clock {
                Some("CLOCK_CYCLES")
            } else {
                v.event_name
            }),
            if v.register.is_some() {
                Cell::None
            } else {
                Cell::text(v.counts_clock.to_string())
            },
            Cell::Int(v.value),
            Cell::None,
        ]);
    }
    for u in unreadable {
        let (block, file) = u.file.split_once('/').unwrap_or(("", &u.file));
        let counter = file
            .strip_prefix("counter")
            .and_then(|n| n.parse::<u32>().ok());
        t.row(vec![
            Cell::text(block),
            counter.map(|c| Cell::Int(c.into())).unwrap_or(Cell::None),
            match counter {
                Some(_) => Cell::None,
                None => Cell::text(file),
            },
            Cell::None,
            Cell::None,
            Cell::None,
            Cell::None,
            Cell::text(format!("not read: {}", u.problem)),
        ]);
    }
    t
}

impl ReadReport {
    fn values(&self) -> Vec<Value<'_>> {
        let mut out = Vec::new();
        for b in &self.blocks {
            out.extend(b.counters.iter().map(|c| {
                Value::counter(
                    &b.block,
                    b.enabled,
                    (
                        c.counter,
                        c.event,
                        c.event_name.as_deref(),
                        c.counts_clock,
                        c.value,
                    ),
                )
            }));
            out.extend(
                b.registers
                    .iter()
                    .map(|r| Value::register(&b.block, &r.register, r.value)),
            );
        }
        out
    }
}

impl Report for ReadReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let mut d = human(&self.values());
        for u in self.blocks.iter().flat_map(|b| &b.unreadable) {
            d.line(format!("{}: not read, left out: {}", u.file, u.problem));
        }
        d
    }

    fn records(&self) -> Option<Table> {
        let unreadable: Vec<&Unreadable> = self.blocks.iter().flat_map(|b| &b.unreadable).collect();
        Some(records(&self.values(), &unreadable))
    }
}

/// `bfperf snapshot`: the snapshot document itself.
pub(crate) struct SnapshotReport(pub Snapshot);

impl SnapshotReport {
    /// The snapshot's values as `read` shows them.
    fn as_read(&self) -> ReadReport {
        use crate::ops::read::{BlockReading, CounterReading, RegisterReading};
        let blocks = self
            .0
            .blocks
            .iter()
            .map(|b| BlockReading {
                block: b.block.clone(),
                kind: b.kind,
                mechanism: b.mechanism,
                enabled: b.enabled,
                count_clock: None,
                width_bits: b.counters.first().map_or(64, |c| c.width_bits),
                counters: b
                    .counters
                    .iter()
                    .map(|c| CounterReading {
                        counter: c.counter,
                        event: c.event,
                        event_name: c.event_name.clone(),
                        counts_clock: c.counts_clock,
                        value: c.value,
                    })
                    .collect(),
                registers: b
                    .registers
                    .iter()
                    .map(|r| RegisterReading {
                        register: r.register.clone(),
                        value: r.value,
                    })
                    .collect(),
                unreadable: b.unreadable.clone(),
            })
            .collect();
        ReadReport {
            device: self.0.device.clone(),
            timestamp: self.0.timestamp.clone(),
            blocks,
        }
    }
}

impl Report for SnapshotReport {
    fn json(&self) -> serde_json::Value {
        to_json(&self.0)
    }

    fn write_json(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
        // The snapshot's fields are declared in the order of their names (a test
        // holds this to the tree's output): a snapshot of every block is thousands
        // of values, and the tree cost more than reading them. Written into memory
        // first: the serializer's many small writes, each through `dyn Write`, cost
        // as much again.
        let bytes = serde_json::to_vec_pretty(&self.0)?;
        out.write_all(&bytes).map_err(serde_json::Error::io)
    }

    fn document(&self) -> Document {
        self.as_read().document()
    }

    fn records(&self) -> Option<Table> {
        self.as_read().records()
    }
}
