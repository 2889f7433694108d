//! `program`, `start`, `stop`, `clear`: what was written (or would be, on a dry run).

use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::output::{to_json, Cell, Document, Report, Table};
use crate::device::plan::Plan;
use crate::front::escape::escape;
use crate::ops::control::{Action, ControlOutcome};
use crate::ops::program::{ProgramOutcome, Programmed};
use crate::ops::read::BlockReading;

/// One write to the device: the file relative to the device and the exact bytes.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct WriteRecord {
    pub path: String,
    pub data: String,
    /// On a dry run: what is written instead if the kernel refuses `data`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

fn planned(plan: &Plan) -> Vec<WriteRecord> {
    plan.writes
        .iter()
        .map(|w| WriteRecord {
            path: w.path.clone(),
            data: w.data.clone(),
            fallback: w.fallback.clone(),
        })
        .collect()
}

fn made(plan: &Plan, written: &[String]) -> Vec<WriteRecord> {
    plan.writes
        .iter()
        .zip(written)
        .map(|(w, d)| WriteRecord {
            path: w.path.clone(),
            data: d.clone(),
            fallback: None,
        })
        .collect()
}

fn dry_run_lines(d: &mut Document, location: &str, writes: &[WriteRecord]) {
    d.line("dry run: nothing written; these writes would be made:");
    for w in writes {
        let mut line = format!("  write {location}/{}: {:?}", w.path, w.data);
        if let Some(f) = &w.fallback {
            line.push_str(&format!(" (if refused: {f:?})"));
        }
        d.line(line);
    }
}

fn writes_table(writes: &[WriteRecord]) -> Table {
    let mut t = Table::new(&["path", "data", "fallback"]);
    for w in writes {
        t.row(vec![
            Cell::text(&w.path),
            Cell::text(&w.data),
            Cell::opt_text(w.fallback.clone()),
        ]);
    }
    t
}

fn summary(writes: &[WriteRecord]) -> Vec<String> {
    writes
        .iter()
        .map(|w| format!("wrote {:?} to {}", w.data, escape(&w.path)))
        .collect()
}

/// `bfperf program`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProgramReport {
    pub block: String,
    pub dry_run: bool,
    pub counters: Vec<Programmed>,
    /// An all-at-once block was started (`enable` 1) after programming.
    pub started: bool,
    /// The writes made (or, on a dry run, planned), in order.
    pub writes: Vec<WriteRecord>,
    pub notes: Vec<String>,
    /// What the user must know (an event the kernel's table lists twice); also said
    /// on stderr.
    pub warnings: Vec<String>,
    #[serde(skip)]
    #[schemars(skip)]
    pub location: String,
}

impl ProgramReport {
    pub(crate) fn new(o: ProgramOutcome, dry_run: bool, location: String) -> ProgramReport {
        let writes = if dry_run {
            planned(&o.plan)
        } else {
            made(&o.plan, &o.written)
        };
        ProgramReport {
            block: o.block,
            dry_run,
            counters: o.counters,
            started: o.started && !dry_run,
            writes,
            notes: o.notes,
            warnings: o.warnings,
            location,
        }
    }
}

impl Report for ProgramReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let mut d = Document::default();
        if self.dry_run {
            dry_run_lines(&mut d, &self.location, &self.writes);
        }
        for c in self.counters.iter().filter(|_| !self.dry_run) {
            let what = match (c.event, &c.event_name) {
                (Some(n), Some(name)) => format!("{name} (0x{n:x})"),
                (Some(n), None) => format!("event 0x{n:x} (not in the table)"),
                (None, _) => "clock cycles".to_string(),
            };
            let what = if c.counts_clock && c.event.is_some() {
                format!("clock cycles (event {what} kept)")
            } else {
                what
            };
            d.line(match &c.readback {
                Some(rb) => format!(
                    "{} counter {}: {what}; event{} reads {rb}",
                    self.block, c.counter, c.counter
                ),
                None => format!("{} counter {}: {what}", self.block, c.counter),
            });
        }
        if self.started {
            d.note(format!(
                "started {}: all its counters were reset to 0 and count together",
                self.block
            ));
        }
        for n in &self.notes {
            d.note(n);
        }
        d
    }

    fn records(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "block",
            "counter",
            "event",
            "event_name",
            "counts_clock",
            "readback",
        ]);
        for c in &self.counters {
            t.row(vec![
                Cell::text(&self.block),
                Cell::Int(c.counter.into()),
                Cell::opt_hex(c.event),
                Cell::opt_text(c.event_name.clone()),
                Cell::text(c.counts_clock.to_string()),
                Cell::opt_text(c.readback.clone()),
            ]);
        }
        Some(t)
    }

    fn writes_made(&self) -> Vec<String> {
        if self.dry_run {
            return Vec::new();
        }
        summary(&self.writes)
    }
}

/// `bfperf start|stop|clear`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ControlReport {
    pub block: String,
    pub action: Action,
    pub dry_run: bool,
    /// The writes made (or, on a dry run, planned), in order; `data` is what was
    /// written (a stop falls back to 0xff where DISABLE is refused).
    pub writes: Vec<WriteRecord>,
    /// A stop of a per-counter block: the stopped counters just before the stop.
    pub final_values: Option<BlockReading>,
    pub notes: Vec<String>,
    #[serde(skip)]
    #[schemars(skip)]
    pub location: String,
    #[serde(skip)]
    #[schemars(skip)]
    refused: Vec<Option<String>>,
}

impl ControlReport {
    pub(crate) fn new(o: ControlOutcome, dry_run: bool, location: String) -> ControlReport {
        let (writes, refused) = if dry_run {
            (planned(&o.plan), Vec::new())
        } else {
            let refused = o
                .plan
                .writes
                .iter()
                .zip(&o.written)
                .map(|(w, d)| (*d != w.data).then(|| w.data.clone()))
                .collect();
            (made(&o.plan, &o.written), refused)
        };
        ControlReport {
            block: o.block,
            action: o.action,
            dry_run,
            writes,
            final_values: o.final_values,
            notes: if dry_run { Vec::new() } else { o.notes },
            location,
            refused,
        }
    }
}

impl Report for ControlReport {
    fn json(&self) -> serde_json::Value {
        to_json(self)
    }

    fn document(&self) -> Document {
        let mut d = Document::default();
        if self.dry_run {
            dry_run_lines(&mut d, &self.location, &self.writes);
            return d;
        }
        if let Some(r) = &self.final_values {
            for c in &r.counters {
                d.line(format!(
                    "{} counter {} before the stop: {} ({})",
                    r.block,
                    c.counter,
                    crate::cli::output::group(c.value),
                    c.event_name.as_deref().unwrap_or("not programmed")
                ));
            }
        }
        for (w, refused) in self.writes.iter().zip(&self.refused) {
            let extra = match refused {
                Some(r) => format!(" (the kernel refused {r}, so {} was written)", w.data),
                None => String::new(),
            };
            d.line(format!("{}: wrote {}{extra}", w.path, w.data));
        }
        for n in &self.notes {
            d.note(n);
        }
        d
    }

    fn records(&self) -> Option<Table> {
        Some(writes_table(&self.writes))
    }

    fn writes_made(&self) -> Vec<String> {
        if self.dry_run {
            return Vec::new();
        }
        summary(&self.writes)
    }
}
