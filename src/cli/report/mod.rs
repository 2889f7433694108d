//! The typed results of the commands, each with its JSON form (serde, with a JSON
//! Schema generated from the same type) and its document for tables and CSV.
//!
//! One vocabulary across commands: `block` is a block's name, `kind` its kind,
//! `counter` a counter's number, `register` a register's name, `event` an event
//! number and `event_name` its name, `value` a raw count.

mod device;
mod diff;
mod list;
mod metrics;
mod read;
mod stat;
mod write;

pub(crate) use device::{BlockRow, BlocksReport, EventsReport, InfoReport};
pub(crate) use diff::DiffReport;
pub(crate) use list::ListReport;
pub(crate) use metrics::{metric_table, MetricRow, MetricsReport};
pub(crate) use read::{ReadReport, SnapshotReport};
pub(crate) use stat::{Ending, StatFormat, StatWriter};
pub(crate) use write::{ControlReport, ProgramReport};

use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::output::{Document, Report, Table};

/// The report of a writing command on one block, or on several (a kind, a glob or a
/// list): one object, or an array of them.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Report + Serialize> OneOrMany<T> {
    pub(crate) fn of(mut items: Vec<T>) -> OneOrMany<T> {
        if items.len() == 1 {
            OneOrMany::One(items.remove(0))
        } else {
            OneOrMany::Many(items)
        }
    }

    fn items(&self) -> &[T] {
        match self {
            OneOrMany::One(t) => std::slice::from_ref(t),
            OneOrMany::Many(v) => v,
        }
    }
}

impl<T: Report + Serialize> Report for OneOrMany<T> {
    fn json(&self) -> serde_json::Value {
        crate::cli::output::to_json(self)
    }

    fn document(&self) -> Document {
        let mut d = Document::default();
        for i in self.items() {
            d.parts.extend(i.document().parts);
        }
        d
    }

    fn records(&self) -> Option<Table> {
        let mut all: Option<Table> = None;
        for i in self.items() {
            let t = i.records()?;
            match &mut all {
                Some(a) => a.rows.extend(t.rows),
                None => all = Some(t),
            }
        }
        all
    }

    fn writes_made(&self) -> Vec<String> {
        self.items().iter().flat_map(|i| i.writes_made()).collect()
    }
}

#[cfg(test)]
fn schema<T: JsonSchema>() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default()
}

/// The JSON Schema of every command's `--json` output, by command name; checked in
/// under docs/schema/ as `<name>.schema.json` (a unit test keeps them current).
#[cfg(test)]
pub(crate) fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("info", schema::<InfoReport>()),
        ("blocks", schema::<BlocksReport>()),
        ("events", schema::<EventsReport>()),
        ("read", schema::<ReadReport>()),
        ("snapshot", schema::<crate::ops::snapshot::Snapshot>()),
        ("diff", schema::<DiffReport>()),
        ("program", schema::<OneOrMany<ProgramReport>>()),
        ("control", schema::<OneOrMany<ControlReport>>()),
        ("metrics", schema::<MetricsReport>()),
        ("list", schema::<ListReport>()),
    ]
}

#[cfg(test)]
mod tests {
    /// docs/schema/ matches the report types; `BFPERF_BLESS=1 cargo test --lib
    /// generated_` writes it anew.
    #[test]
    fn generated_schemas_are_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
        for (name, schema) in super::schemas() {
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            crate::cli::manual::check_generated(&dir.join(format!("{name}.schema.json")), &text);
        }
    }
}
