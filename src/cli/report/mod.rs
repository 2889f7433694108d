//! The typed results of the commands, each with its JSON form (serde, with a JSON
//! Schema generated from the same type) and its document for tables and CSV.
//!
//! One vocabulary across commands: `block` is a block's name, `kind` its kind,
//! `counter` a counter's number, `register` a register's name, `event` an event
//! number and `event_name` its name, `value` a raw count.

mod device;
mod diff;
mod read;
mod stat;
mod write;

pub use device::{BlockRow, BlocksReport, EventsReport, InfoReport};
pub use diff::DiffReport;
pub use read::{ReadReport, SnapshotReport};
pub use stat::{Ending, StatFormat, StatWriter};
pub use write::{ControlReport, ProgramReport, WriteRecord};

use schemars::JsonSchema;

fn schema<T: JsonSchema>() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default()
}

/// The JSON Schema of every command's `--json` output, by command name; checked in
/// under docs/schema/ as `<name>.schema.json`.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("info", schema::<InfoReport>()),
        ("blocks", schema::<BlocksReport>()),
        ("events", schema::<EventsReport>()),
        ("read", schema::<ReadReport>()),
        ("snapshot", schema::<crate::ops::snapshot::Snapshot>()),
        ("diff", schema::<crate::ops::diff::Diff>()),
        ("program", schema::<ProgramReport>()),
        ("control", schema::<ControlReport>()),
    ]
}
