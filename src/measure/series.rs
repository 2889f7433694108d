//! Time series from `bfperf stat -I MS --json` runs (NDJSON), for charts: one chart
//! per metric and one per kind and unit of raw counts (as rates per second), a line
//! per block (or per kind total) and per run.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The largest run file read (a day of 100 ms intervals of a full device is less).
const MAX_RUN_BYTES: u64 = 512 << 20;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// What it shows: the block (or kind), and the run's file when there are several.
    pub label: String,
    /// (seconds from the run's start, value).
    pub points: Vec<(f64, f64)>,
}

/// One chart: a metric, or a kind's raw counts in one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Its title.
    pub title: String,
    /// The unit of its values.
    pub unit: String,
    /// Its lines.
    pub lines: Vec<Line>,
    /// Values that are not finite numbers (infinite, NaN, or too large to scale),
    /// left out of the lines and said in the title.
    pub not_finite: usize,
}

/// A chart's place (metrics first), title and unit.
type ChartKey = (u8, String, String);

/// The records of a run that are drawn.
#[derive(Debug, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
enum Record {
    Interval {
        run: u32,
        time_s: f64,
        block: String,
        kind: String,
        event: String,
        value: Option<f64>,
        unit: String,
    },
    Metric {
        /// `interval` or `total`; absent from files made before it was written.
        of: Option<String>,
        time_s: f64,
        metric: String,
        block: String,
        kind: String,
        value: Option<f64>,
        unit: String,
    },
    Total,
    End {
        command: Option<String>,
    },
    #[serde(other)]
    Other,
}

/// Points gathered from runs, by chart and line.
type Gathered = BTreeMap<ChartKey, BTreeMap<String, Vec<(f64, f64)>>>;

/// Charts of runs, and a title naming what was measured. `per_block`: a line per
/// block (runs made with `-A`) instead of per kind total.
pub fn charts(files: &[&Path], per_block: bool) -> Result<(String, Vec<Chart>)> {
    let mut charts = Gathered::new();
    let mut commands = Vec::new();
    for path in files {
        let label = |block: &str| match files.len() {
            1 => block.to_string(),
            _ => format!(
                "{} {block}",
                path.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            ),
        };
        let mut run = Run {
            charts: &mut charts,
            label: &label,
            per_block,
            last_time: BTreeMap::new(),
            after_total: false,
        };
        commands.extend(run.gather(path)?);
    }
    if charts.is_empty() {
        return Err(Error::BadConfig {
            path: files.first().map(|p| p.to_path_buf()).unwrap_or_default(),
            problem: format!(
                "no intervals to draw{}: make the run with `bfperf stat -I MS --json`",
                if per_block {
                    " per block (was it made with -A?)"
                } else {
                    ""
                }
            ),
        });
    }
    let title = match commands.is_empty() {
        true => format!("bfperf stat: {}", names(files)),
        false => format!("bfperf stat -- {}", commands.join(" | ")),
    };
    Ok((title, charts.into_iter().map(chart).collect()))
}

/// One run file being read into the charts.
struct Run<'a> {
    charts: &'a mut Gathered,
    /// A line's label from its block (and the file, when there are several).
    label: &'a dyn Fn(&str) -> String,
    per_block: bool,
    /// The start of each item's current interval, to turn counts into rates.
    last_time: BTreeMap<(u32, String, String), f64>,
    /// In files without `of`, the metrics after a run's totals are the totals'.
    after_total: bool,
}

impl Run<'_> {
    /// Reads a run's records into the charts; returns the commands it measured.
    fn gather(&mut self, path: &Path) -> Result<Vec<String>> {
        let text = read_run(path)?;
        let mut commands = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let record: Record = serde_json::from_str(line).map_err(|e| Error::BadConfig {
                path: path.to_path_buf(),
                problem: format!(
                    "line {}: not a `bfperf stat --json` record ({e}); make runs with `bfperf stat -I MS --json`",
                    n + 1
                ),
            })?;
            commands.extend(self.record(record));
        }
        Ok(commands)
    }

    /// Adds one record's point; an end record's command is returned.
    fn record(&mut self, record: Record) -> Option<String> {
        match record {
            Record::Interval {
                run,
                time_s,
                block,
                kind,
                event,
                value,
                unit,
            } => {
                self.after_total = false;
                let key = (run, block.clone(), event.clone());
                let start = self.last_time.insert(key, time_s).unwrap_or(0.0);
                let span = time_s - start;
                if let (Some(v), true) =
                    (value, wanted(&block, &kind, self.per_block) && span > 0.0)
                {
                    let key = (1, format!("{kind}: {unit} per second"), format!("{unit}/s"));
                    self.point(key, &format!("{block} {event}"), (time_s, v / span));
                }
            }
            Record::Metric {
                of,
                time_s,
                metric,
                block,
                kind,
                value,
                unit,
            } => {
                let interval = of.map_or(!self.after_total, |of| of == "interval");
                if let (Some(v), true) = (value, interval && wanted(&block, &kind, self.per_block))
                {
                    self.point((0, metric, unit), &block, (time_s, v));
                }
            }
            Record::Total => self.after_total = true,
            Record::End { command } => {
                self.after_total = false;
                return command;
            }
            Record::Other => {}
        }
        None
    }

    fn point(&mut self, chart: ChartKey, line: &str, point: (f64, f64)) {
        self.charts
            .entry(chart)
            .or_default()
            .entry((self.label)(line))
            .or_default()
            .push(point);
    }
}

/// A chart from its gathered lines; points that are not finite are left out and
/// counted.
fn chart(((_, title, unit), lines): (ChartKey, BTreeMap<String, Vec<(f64, f64)>>)) -> Chart {
    let all: usize = lines.values().map(Vec::len).sum();
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|(label, points)| Line {
            label,
            points: points
                .into_iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect(),
        })
        .collect();
    let not_finite = all - lines.iter().map(|l| l.points.len()).sum::<usize>();
    Chart {
        title,
        unit,
        lines,
        not_finite,
    }
}

/// A per-block record with `per_block`, a kind's total without it.
fn wanted(block: &str, kind: &str, per_block: bool) -> bool {
    (block != kind) == per_block
}

fn names(files: &[&Path]) -> String {
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run file: a regular file of at most [`MAX_RUN_BYTES`], read without blocking.
fn read_run(path: &Path) -> Result<String> {
    let bytes = crate::sysfs::read_regular(path, "cannot read the run", MAX_RUN_BYTES)?;
    String::from_utf8(bytes).map_err(|_| Error::BadConfig {
        path: path.to_path_buf(),
        problem: "not UTF-8 text: make runs with `bfperf stat -I MS --json`".into(),
    })
}
