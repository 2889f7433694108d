//! `stat` output, streamed: each interval as it ends, then the totals. Tables for
//! people; NDJSON (one JSON object per line, so an interrupted run is still valid);
//! CSV (or `-x SEP`) with one header row and stable columns.

use std::io::{self, Write};

use serde::Serialize;

use crate::cli::output::{escape, group, pad_into, two_decimals, Cell, Document, Report, Table};
use crate::measure::order::SpecOrder;
use crate::measure::repeat::{mean_counts, mean_metrics, spread_of};
use crate::measure::{aggregate, Count, Interval, Run};
use crate::metrics::MetricValue;

use super::perf_csv::PerfCsv;

/// How `stat` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatFormat {
    Table,
    Ndjson,
    Csv(u8),
    /// perf stat -x: no header, perf's columns by position (`[time,]value,unit,
    /// event,run_time,percentage,metric_value,metric_unit`).
    PerfCsv(u8),
}

/// The end of a measurement, for the summary.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Ending {
    /// The command measured, or null for a duration.
    pub command: Option<String>,
    /// Its exit status (128 + signal when a signal ended it).
    pub exit_status: Option<i32>,
    /// The signal that interrupted the measurement, if any.
    pub interrupted_by: Option<String>,
    /// Whether --timeout ended the command (with SIGTERM: its exit status says so).
    pub ended_by_timeout: bool,
    pub restored: bool,
    pub warnings: Vec<String>,
    /// Where perf events were counted: `system-wide` (on `perf_cpus` CPUs) or
    /// `process` (the command or -p's process, and its children); null without perf events.
    pub perf_scope: Option<&'static str>,
    /// The CPUs system-wide perf events were counted on.
    pub perf_cpus: Option<usize>,
    /// CPU seconds the command (and the children it waited for) spent in user space
    /// and in the kernel, over every run; null without a command.
    pub user_s: Option<f64>,
    pub sys_s: Option<f64>,
}

/// Streams a measurement's records.
pub(crate) struct StatWriter<'w> {
    w: &'w mut dyn Write,
    format: StatFormat,
    /// CSV text fields escaped: the output is a terminal.
    escape: bool,
    aggregate: bool,
    width: Option<u16>,
    header_done: bool,
    /// Print metrics only (`--metric-only`).
    metric_only: bool,
    /// The order `-e` gave.
    order: SpecOrder,
    /// Runs are repeated (`-r`): perf's `-x` lines have a variance field, empty
    /// where there is none (intervals, metrics).
    repeated: bool,
    /// Counts with thousands' separators in tables (perf's default; --no-big-num).
    big_num: bool,
    /// The unit each metric's column of an interval table is shown in, by block and
    /// metric: chosen at its first value that is not 0, then kept.
    units: std::collections::HashMap<(String, String), String>,
    /// Intervals were printed (`-I`).
    intervals_done: bool,
    /// When the measurement started (wall clock): records carry `time_s` after it
    /// as an RFC 3339 `timestamp` too.
    started: std::time::SystemTime,
}

const COLUMNS: [&str; 18] = [
    "record",
    "run",
    "time_s",
    "block",
    "kind",
    "blocks",
    "counter",
    "event",
    "event_number",
    "value",
    "raw",
    "unit",
    "coverage",
    "counted",
    "valid",
    "reason",
    "stddev_pct",
    "of",
];

#[derive(Serialize)]
struct Line<'a> {
    record: &'static str,
    run: Option<u32>,
    time_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
    #[serde(flatten)]
    count: &'a Count,
    stddev_pct: Option<f64>,
}

#[derive(Serialize)]
struct MetricLine<'a> {
    record: &'static str,
    /// What the metric is computed over: `interval`, `total` (a run) or `mean` (the
    /// mean over -r runs).
    of: &'static str,
    run: Option<u32>,
    time_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
    #[serde(flatten)]
    value: &'a MetricValue,
}

/// A count's coverage; nothing for one the kernel refused (perf's `<not supported>`
/// has no share of time to speak of).
fn coverage_text(c: &Count) -> String {
    match c.supported {
        true => format!("{}%", crate::cli::output::percent(c.coverage)),
        false => String::new(),
    }
}

/// A count's value as a table or perf's CSV shows it.
enum Shown {
    Count(u64),
    /// perf's time events (task-clock, cpu-clock) count nanoseconds; perf shows
    /// them in milliseconds.
    Msec(f64),
    Missing(&'static str),
}

/// What a table or perf's CSV shows of a count: the value, and its unit.
fn shown(c: &Count) -> (Shown, &'static str) {
    let value = match c.value {
        None => Shown::Missing(c.missing_text()),
        Some(v) if c.unit == "ns" => Shown::Msec(v as f64 / 1e6),
        Some(v) => Shown::Count(v),
    };
    (value, if c.unit == "ns" { "msec" } else { c.unit })
}

/// The header line of an `-I` table.
const INTERVAL_HEADER: [&str; 6] = [
    "# TIME",
    "BLOCK",
    "EVENT OR METRIC",
    "VALUE",
    "UNIT",
    "NOTE",
];

/// One line of an `-I` table: time, block, event or metric, value, unit, note, in
/// the columns the header names (block and name escaped for the terminal).
fn interval_line(
    w: &mut dyn Write,
    [time, block, name, value, unit, note]: [&str; 6],
) -> io::Result<()> {
    // Built in one allocation of a line's usual length, padded in runs: the
    // formatter's padding writes one character at a time, on every line of every
    // interval.
    let mut line = String::with_capacity(128 + note.len());
    pad_into(&mut line, time, 10, true);
    line.push_str("  ");
    pad_into(&mut line, &escape(block), 14, false);
    line.push(' ');
    pad_into(&mut line, &escape(name), 34, false);
    line.push(' ');
    pad_into(&mut line, value, 18, true);
    line.push(' ');
    pad_into(&mut line, unit, 8, false);
    line.push(' ');
    line.push_str(note);
    let end = line.trim_end().len();
    line.truncate(end);
    line.push('\n');
    w.write_all(line.as_bytes())
}

/// What a table shows for a count's value: perf's `<not counted>` when it never
/// got a turn.
fn value_text(c: &Count, big_num: bool) -> String {
    match shown(c).0 {
        Shown::Count(v) if big_num => group(v),
        Shown::Count(v) => v.to_string(),
        Shown::Msec(ms) => crate::cli::output::group_f(ms),
        Shown::Missing(text) => text.into(),
    }
}

/// The note of a count: why it is invalid, or that it is an estimate.
fn note_text(c: &Count) -> String {
    if !c.supported {
        return c.invalid.clone().unwrap_or_default();
    }
    if !c.valid {
        return format!(
            "invalid: {}",
            c.invalid.as_deref().unwrap_or("touched by another program")
        );
    }
    if let (false, Some(why)) = (c.counted, &c.invalid) {
        return format!("not counted: {why}");
    }
    if !c.counted {
        return "not counted in this span: its turn never came, or a busy machine left its window's bounds unknown; count longer, or fewer events".into();
    }
    let mut note = match c.coverage < 1.0 {
        true => format!("estimate: counted {}", coverage_text(c)),
        false => String::new(),
    };
    // A span partly enabled (--delay, --control) says how much of it counted.
    if let Some(why) = &c.invalid {
        note = match note.is_empty() {
            true => why.clone(),
            false => format!("{note}; {why}"),
        };
    }
    note
}

impl<'w> StatWriter<'w> {
    pub(crate) fn new(
        w: &'w mut dyn Write,
        format: StatFormat,
        aggregate: bool,
        width: Option<u16>,
    ) -> Self {
        StatWriter {
            w,
            format,
            escape: false,
            aggregate,
            width,
            header_done: false,
            metric_only: false,
            order: SpecOrder::default(),
            repeated: false,
            big_num: true,
            units: Default::default(),
            intervals_done: false,
            started: std::time::SystemTime::now(),
        }
    }

    /// Counts with thousands' separators in tables, or not (--no-big-num).
    pub(crate) fn big_num(mut self, on: bool) -> Self {
        self.big_num = on;
        self
    }

    /// Runs are repeated (`-r` over 1): every `-x` line has perf's variance field.
    pub(crate) fn repeated(mut self, on: bool) -> Self {
        self.repeated = on;
        self
    }

    /// Counts in the order of `specs` (`-e`), as perf prints them.
    pub(crate) fn in_order_of(mut self, specs: &[String]) -> Self {
        self.order = SpecOrder::of(specs);
        self
    }

    /// Prints the metrics only, as perf stat --metric-only.
    pub(crate) fn metric_only(mut self, on: bool) -> Self {
        self.metric_only = on;
        self
    }

    /// The wall-clock time `time_s` after the start, RFC 3339.
    fn timestamp(&self, time_s: Option<f64>) -> Option<String> {
        let t = time_s.filter(|t| t.is_finite() && *t >= 0.0)?;
        let at = self.started + std::time::Duration::from_secs_f64(t);
        Some(crate::ops::snapshot::rfc3339(at))
    }

    /// Escapes control characters in CSV text (set when writing to a terminal).
    pub(crate) fn escaping(mut self, on: bool) -> Self {
        self.escape = on;
        self
    }

    fn text(&self, s: &str) -> String {
        if self.escape {
            escape(s).into_owned()
        } else {
            s.to_string()
        }
    }

    /// The counts shown: summed per kind unless -A, in `-e` order.
    fn shown(&self, counts: &[Count]) -> Vec<Count> {
        if self.metric_only {
            return Vec::new();
        }
        let mut shown = match self.aggregate {
            true => aggregate(counts),
            false => counts.to_vec(),
        };
        self.order.sort(&mut shown);
        shown
    }

    fn csv_rows(&mut self, rows: &[Line]) -> io::Result<()> {
        let StatFormat::Csv(sep) = self.format else {
            return Ok(());
        };
        let texts: Vec<[String; 3]> = rows
            .iter()
            .map(|l| {
                let c = l.count;
                [
                    self.text(&c.block),
                    self.text(&c.event),
                    self.text(c.invalid.as_deref().unwrap_or_default()),
                ]
            })
            .collect();
        let Self { w, .. } = self;
        let mut out = ::csv::WriterBuilder::new()
            .delimiter(sep)
            .has_headers(false)
            .from_writer(&mut **w);
        let to_io = |e: ::csv::Error| io::Error::other(e.to_string());
        if !self.header_done {
            out.write_record(COLUMNS).map_err(to_io)?;
            self.header_done = true;
        }
        for (l, [block, event, reason]) in rows.iter().zip(texts) {
            let c = l.count;
            let opt = |v: Option<String>| v.unwrap_or_default();
            out.write_record([
                l.record.to_string(),
                opt(l.run.map(|r| r.to_string())),
                opt(l.time_s.map(|t| format!("{t:.3}"))),
                block,
                c.kind.as_str().to_string(),
                c.blocks.to_string(),
                opt(c.counter.map(|x| x.to_string())),
                event,
                opt(c.event_number.map(|x| x.to_string())),
                opt(c.value.map(|x| x.to_string())),
                c.raw.to_string(),
                c.unit.to_string(),
                format!("{:.4}", c.coverage),
                c.counted.to_string(),
                c.valid.to_string(),
                reason,
                opt(l.stddev_pct.map(|s| format!("{s:.2}"))),
                l.record.to_string(),
            ])
            .map_err(to_io)?;
        }
        out.flush()
    }

    /// perf's `-x` writer of this output.
    fn perf_csv(&self, sep: u8) -> PerfCsv {
        PerfCsv {
            sep,
            aggregate: self.aggregate,
            repeated: self.repeated,
            escape: self.escape,
        }
    }

    /// Counts and metrics as perf stat -x writes them ([`PerfCsv`]).
    fn perf_rows(
        &mut self,
        sep: u8,
        time: Option<f64>,
        wall_s: f64,
        counts: &[Count],
        variance: Option<&[Option<f64>]>,
        metrics: &[MetricValue],
    ) -> io::Result<()> {
        let csv = self.perf_csv(sep);
        let wall_ns = (wall_s * 1e9).round() as u64;
        let rows = csv.rows(time, wall_ns, counts, variance, metrics);
        csv.write(self.w, &rows)
    }

    /// Metric values as CSV rows: the metric in `event`, its value in `value`.
    fn csv_metrics(
        &mut self,
        of: &'static str,
        run: Option<u32>,
        time_s: Option<f64>,
        values: &[MetricValue],
    ) -> io::Result<()> {
        let StatFormat::Csv(sep) = self.format else {
            return Ok(());
        };
        let mut out = ::csv::WriterBuilder::new()
            .delimiter(sep)
            .has_headers(false)
            .from_writer(&mut *self.w);
        let to_io = |e: ::csv::Error| io::Error::other(e.to_string());
        for v in values {
            out.write_record([
                "metric".to_string(),
                run.map(|r| r.to_string()).unwrap_or_default(),
                time_s.map(|t| format!("{t:.3}")).unwrap_or_default(),
                v.block.clone(),
                v.kind.as_str().to_string(),
                String::new(),
                String::new(),
                v.metric.clone(),
                String::new(),
                v.value.map(|x| x.to_string()).unwrap_or_default(),
                String::new(),
                v.unit.clone(),
                format!("{:.4}", v.coverage),
                v.value.is_some().to_string(),
                v.value.is_some().to_string(),
                v.reason.clone().unwrap_or_default(),
                String::new(),
                of.to_string(),
            ])
            .map_err(to_io)?;
        }
        out.flush()
    }

    /// Metric values computed over `of`: `interval` or `total`.
    fn metrics(
        &mut self,
        of: &'static str,
        run: Option<u32>,
        time_s: Option<f64>,
        values: &[MetricValue],
    ) -> io::Result<()> {
        match self.format {
            StatFormat::Ndjson => {
                for v in values {
                    self.ndjson(&MetricLine {
                        record: "metric",
                        of,
                        run,
                        time_s,
                        timestamp: self.timestamp(time_s),
                        value: v,
                    })?;
                }
                Ok(())
            }
            StatFormat::Csv(_) => self.csv_metrics(of, run, time_s, values),
            // On their counts' lines ([`StatWriter::perf_rows`]).
            StatFormat::PerfCsv(_) => Ok(()),
            StatFormat::Table => {
                for v in values {
                    let (value, unit) = match v.value {
                        Some(x) => self.in_column_unit(v, x),
                        None => {
                            let key = (v.block.clone(), v.metric.clone());
                            let unit = self.units.get(&key).unwrap_or(&v.unit);
                            ("-".into(), unit.clone())
                        }
                    };
                    let time = time_s.map(|t| format!("{t:.3}")).unwrap_or_default();
                    let note = crate::cli::report::metrics::metric_note(v);
                    let line = [&*time, &v.block, &v.metric, &value, &unit, &note];
                    interval_line(self.w, line)?;
                }
                Ok(())
            }
        }
    }

    /// A metric's value in the unit its column chose (perf scales per event, not
    /// per line), so that values compare down the column.
    fn in_column_unit(&mut self, v: &MetricValue, x: f64) -> (String, String) {
        let key = (v.block.clone(), v.metric.clone());
        if let Some(shown) = self.units.get(&key) {
            if let Some(value) = crate::cli::output::readable_as(x, &v.unit, shown) {
                return (value, shown.clone());
            }
        }
        let (value, unit) = crate::cli::output::readable(x, &v.unit);
        if x != 0.0 {
            self.units.insert(key, unit.clone());
        }
        (value, unit)
    }

    fn ndjson<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        serde_json::to_writer(&mut *self.w, value)?;
        self.w.write_all(b"\n")
    }

    /// One interval, as it ends, with its metrics.
    pub(crate) fn interval(&mut self, i: &Interval, metrics: &[MetricValue]) -> io::Result<()> {
        self.intervals_done = true;
        if self.metric_columns_wanted() {
            self.metric_columns(Some(i.time_s), metrics)?;
            return self.w.flush();
        }
        let counts = self.shown(&i.counts);
        // The records of the formats that carry them, with one timestamp for all.
        let lines = || -> Vec<Line> {
            let timestamp = self.timestamp(Some(i.time_s));
            counts
                .iter()
                .map(|c| Line {
                    record: "interval",
                    run: Some(i.run),
                    time_s: Some(i.time_s),
                    timestamp: timestamp.clone(),
                    count: c,
                    stddev_pct: None,
                })
                .collect()
        };
        match self.format {
            StatFormat::Ndjson => {
                for l in &lines() {
                    self.ndjson(l)?;
                }
            }
            StatFormat::Csv(_) => {
                let lines = lines();
                self.csv_rows(&lines)?
            }
            StatFormat::PerfCsv(sep) => {
                self.header_done = true;
                self.perf_rows(sep, Some(i.time_s), i.enabled_s, &counts, None, metrics)?
            }
            StatFormat::Table => {
                if !self.header_done {
                    // As perf stat -I: one header line, then the intervals.
                    interval_line(self.w, INTERVAL_HEADER)?;
                    self.header_done = true;
                }
                let time = format!("{:.3}", i.time_s);
                for c in counts.iter() {
                    let (value, note, unit) =
                        (value_text(c, self.big_num), note_text(c), shown(c).1);
                    interval_line(self.w, [&time, &c.block, &c.event, &value, unit, &note])?;
                }
            }
        }
        self.metrics("interval", Some(i.run), Some(i.time_s), metrics)?;
        self.w.flush()
    }

    /// The totals of every run with their metrics, their mean and spread (with -r),
    /// and the ending.
    pub(crate) fn summary(
        &mut self,
        runs: &[Run],
        metrics: &[Vec<MetricValue>],
        ending: &Ending,
    ) -> io::Result<()> {
        // perf stat -I prints the intervals only, in a table as in CSV.
        if self.intervals_done && matches!(self.format, StatFormat::PerfCsv(_) | StatFormat::Table)
        {
            return self.w.flush();
        }
        if self.metric_columns_wanted() {
            self.metric_columns(None, &mean_metrics(metrics))?;
            return self.w.flush();
        }
        let per_run: Vec<Vec<Count>> = runs.iter().map(|r| self.shown(&r.counts)).collect();
        let mean = mean_counts(&per_run);
        // perf's run_time: the time counted (enabled), not the time elapsed.
        let enabled_s = runs.iter().map(|r| r.enabled_s).sum::<f64>() / runs.len().max(1) as f64;
        match self.format {
            // perf stat -x -I prints intervals only; without -I, the counts (the
            // mean over -r runs) and the metrics, with no time column.
            StatFormat::PerfCsv(sep) => {
                let counts: Vec<Count> = mean.iter().map(|(c, _)| c.clone()).collect();
                let spread: Vec<Option<f64>> = mean.iter().map(|(_, sd)| *sd).collect();
                let variance = (runs.len() > 1).then_some(&spread[..]);
                // As the counts: the mean over -r runs.
                let mean_m = mean_metrics(metrics);
                self.perf_rows(sep, None, enabled_s, &counts, variance, &mean_m)?;
            }
            StatFormat::Ndjson => self.summary_ndjson(runs, &per_run, &mean, metrics, ending)?,
            StatFormat::Csv(_) => self.summary_csv(runs, &per_run, &mean, metrics)?,
            StatFormat::Table => {
                let report = SummaryTable {
                    mean: &mean,
                    big_num: self.big_num,
                    metrics: &mean_metrics(metrics),
                    elapsed: runs.iter().map(|r| r.elapsed_s).collect(),
                    enabled: runs.iter().map(|r| r.enabled_s).collect(),
                    ending,
                };
                crate::cli::output::renderer(crate::cli::output::Format::Table, self.width, false)
                    .render(&report, self.w)?;
            }
        }
        self.w.flush()
    }

    /// --metric-only in a table or perf's CSV: a column per metric.
    fn metric_columns_wanted(&self) -> bool {
        self.metric_only && matches!(self.format, StatFormat::Table | StatFormat::PerfCsv(_))
    }

    /// As perf stat --metric-only: one column per metric (per block with -A), a
    /// header line, then one line per interval (`time`) or the total. A table
    /// shows an estimate's coverage beside it and `-` for no value; perf's CSV
    /// (`-x`) is perf's ([`PerfCsv::metric_columns`]).
    fn metric_columns(&mut self, time: Option<f64>, values: &[MetricValue]) -> io::Result<()> {
        let name = |v: &MetricValue| match v.of_kind {
            true => v.metric.clone(),
            false => format!("{}:{}", v.block, v.metric),
        };
        let time_text = time.map(|t| format!("{t:.3}"));
        let mut head: Vec<String> = time.map(|_| "# TIME".to_string()).into_iter().collect();
        let mut row: Vec<String> = time_text.into_iter().collect();
        match self.format {
            StatFormat::PerfCsv(sep) => {
                let csv = self.perf_csv(sep);
                let rows = csv.metric_columns(!self.header_done, time, values);
                self.header_done = true;
                csv.write(self.w, &rows)
            }
            _ => {
                for v in values {
                    let h = escape(&format!("{} {}", name(v), v.unit)).into_owned();
                    let cell = match v.value {
                        // The digits the metrics table shows (`0.0027`, not `0.00`).
                        Some(x) if v.coverage < 1.0 => format!(
                            "{} ({}%)",
                            two_decimals(x),
                            crate::cli::output::percent(v.coverage)
                        ),
                        Some(x) => two_decimals(x),
                        None => "-".into(),
                    };
                    let width = h.len().max(cell.len()).max(10);
                    head.push(format!("{h:>width$}"));
                    row.push(format!("{cell:>width$}"));
                }
                if !self.header_done {
                    self.header_done = true;
                    writeln!(self.w, "{}", head.join("  "))?;
                }
                writeln!(self.w, "{}", row.join("  "))
            }
        }
    }

    /// A run's total of one count.
    fn total_line<'c>(&self, r: &Run, c: &'c Count) -> Line<'c> {
        Line {
            record: "total",
            run: Some(r.run),
            time_s: Some(r.elapsed_s),
            timestamp: self.timestamp(Some(r.elapsed_s)),
            count: c,
            stddev_pct: None,
        }
    }

    /// A count's mean over runs, with its spread.
    fn mean_line<'c>(&self, c: &'c Count, stddev_pct: Option<f64>) -> Line<'c> {
        Line {
            record: "mean",
            run: None,
            time_s: None,
            timestamp: self.timestamp(None),
            count: c,
            stddev_pct,
        }
    }

    /// Each run's totals and metrics, the mean over runs (with -r), the end record.
    fn summary_ndjson(
        &mut self,
        runs: &[Run],
        per_run: &[Vec<Count>],
        mean: &[(Count, Option<f64>)],
        metrics: &[Vec<MetricValue>],
        ending: &Ending,
    ) -> io::Result<()> {
        for (i, (r, counts)) in runs.iter().zip(per_run).enumerate() {
            for c in counts {
                let line = self.total_line(r, c);
                self.ndjson(&line)?;
            }
            if let Some(m) = metrics.get(i) {
                self.metrics("total", Some(r.run), Some(r.elapsed_s), m)?;
            }
        }
        for (c, sd) in mean.iter().filter(|_| runs.len() > 1) {
            let line = self.mean_line(c, *sd);
            self.ndjson(&line)?;
        }
        // The metrics of the mean, as the table shows them with -r.
        if runs.len() > 1 {
            self.metrics("mean", None, None, &mean_metrics(metrics))?;
        }
        #[derive(Serialize)]
        struct End<'a> {
            record: &'static str,
            runs: usize,
            elapsed_s: f64,
            /// How long counting was enabled (`--delay`, `--control`).
            enabled_s: f64,
            #[serde(flatten)]
            ending: &'a Ending,
        }
        self.ndjson(&End {
            record: "end",
            runs: runs.len(),
            elapsed_s: runs.iter().map(|r| r.elapsed_s).sum(),
            enabled_s: runs.iter().map(|r| r.enabled_s).sum(),
            ending,
        })
    }

    /// Each run's totals, the mean over runs (with -r), then each run's metrics.
    fn summary_csv(
        &mut self,
        runs: &[Run],
        per_run: &[Vec<Count>],
        mean: &[(Count, Option<f64>)],
        metrics: &[Vec<MetricValue>],
    ) -> io::Result<()> {
        let mut lines = Vec::new();
        for (r, counts) in runs.iter().zip(per_run) {
            lines.extend(counts.iter().map(|c| self.total_line(r, c)));
        }
        let means = mean.iter().filter(|_| runs.len() > 1);
        lines.extend(means.map(|(c, sd)| self.mean_line(c, *sd)));
        self.csv_rows(&lines)?;
        for (r, m) in runs.iter().zip(metrics) {
            self.csv_metrics("total", Some(r.run), Some(r.elapsed_s), m)?;
        }
        if runs.len() > 1 {
            self.csv_metrics("mean", None, None, &mean_metrics(metrics))?;
        }
        Ok(())
    }
}

struct SummaryTable<'a> {
    mean: &'a [(Count, Option<f64>)],
    /// Counts with thousands' separators (unless --no-big-num).
    big_num: bool,
    metrics: &'a [MetricValue],
    /// Each run's length, seconds.
    elapsed: Vec<f64>,
    /// How long each run counted (less than its length with --delay, --control).
    enabled: Vec<f64>,
    ending: &'a Ending,
}

impl SummaryTable<'_> {
    /// The first line: what was measured, for how long, and where perf events were
    /// counted (perf's "for 'system wide'").
    fn heading(&self) -> String {
        let e = self.ending;
        let what = match &e.command {
            Some(c) => format!("'{c}'"),
            None => "the period".to_string(),
        };
        let runs = match self.elapsed.len() {
            n if n > 1 => format!(" ({n} runs)"),
            _ => String::new(),
        };
        let perf = match (e.perf_scope, e.perf_cpus) {
            (Some("process"), _) => "; perf events of the process measured and its children".into(),
            (Some(_), Some(1)) => "; perf events system-wide, 1 CPU".into(),
            (Some(_), Some(n)) => format!("; perf events system-wide, {n} CPUs"),
            _ => String::new(),
        };
        let (mean, _) = spread_of(&self.elapsed);
        let (on, _) = spread_of(&self.enabled);
        let counted = match self.gated() {
            true => format!("{on:.3} s counted of "),
            false => String::new(),
        };
        format!("counts for {what}{runs}, {counted}{mean:.3} s{perf}:")
    }

    /// Whether counting was enabled for less than the runs lasted.
    fn gated(&self) -> bool {
        self.enabled != self.elapsed
    }

    /// After a command, as perf stat: the time elapsed (with its spread over -r
    /// runs) and, with --delay or --control, how long it was counted; then the
    /// command's user and system time (one run).
    fn times(&self, d: &mut Document) {
        let e = self.ending;
        if e.command.is_none() {
            return;
        }
        let (mean, sd) = spread_of(&self.elapsed);
        let spread = sd.map_or_else(String::new, |sd| format!(" ( +- {sd:.2}% )"));
        d.line(String::new());
        d.line(format!("{mean:>14.9} seconds time elapsed{spread}"));
        if self.gated() {
            let (on, _) = spread_of(&self.enabled);
            d.line(format!("{on:>14.9} seconds counted (enabled)"));
        }
        if let (Some(user), Some(sys), 1) = (e.user_s, e.sys_s, self.elapsed.len()) {
            d.line(String::new());
            d.line(format!("{user:>14.9} seconds user"));
            d.line(format!("{sys:>14.9} seconds sys"));
        }
    }
}

impl Report for SummaryTable<'_> {
    fn json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn document(&self) -> Document {
        let mut d = Document::default();
        d.line(self.heading());
        let spread = self.elapsed.len() > 1;
        let mut header = vec!["BLOCK", "EVENT", "VALUE", "UNIT", "COVERAGE"];
        if spread {
            header.push("+-");
        }
        header.push("NOTE");
        let mut t = Table::new(&header);
        for (c, sd) in self.mean {
            let (value, unit) = shown(c);
            let mut row = vec![
                Cell::text(if c.blocks > 1 {
                    format!("{} ({} blocks)", c.block, c.blocks)
                } else {
                    c.block.clone()
                }),
                Cell::text(&c.event),
                match value {
                    Shown::Count(v) if self.big_num => Cell::Int(v),
                    Shown::Count(v) => Cell::Plain(v),
                    Shown::Msec(ms) => Cell::Float(ms),
                    Shown::Missing(text) => Cell::text(text),
                },
                Cell::text(unit),
                Cell::text(coverage_text(c)),
            ];
            if spread {
                row.push(Cell::text(
                    sd.map(|s| format!("{s:.2}%")).unwrap_or_default(),
                ));
            }
            row.push(Cell::text(note_text(c)));
            t.row(row);
        }
        // --metric-only leaves no counts.
        if !self.mean.is_empty() {
            d.table(t);
        }
        if !self.metrics.is_empty() {
            d.table(crate::cli::report::metric_table(self.metrics));
        }
        // An invalid count says why in its note; this is about turns.
        if self.mean.iter().any(|(c, _)| c.coverage < 1.0 && c.valid) {
            d.line("coverage below 100%: more events than counters took turns, or a block that is stopped to be read (L3, crspace) was stopped for that share of the time; values are scaled estimates, and <not counted> never got a turn");
        }
        if let Some(sig) = &self.ending.interrupted_by {
            d.line(format!(
                "interrupted by {sig}: the counts cover the time until then"
            ));
        }
        if !self.ending.restored {
            d.line("the counters were left programmed (--no-restore)");
        }
        self.times(&mut d);
        d
    }
}

#[cfg(test)]
mod tests {
    /// The padding by slices lays a line out as the formatter's padding would.
    #[test]
    fn interval_lines_are_padded_as_the_formatter_pads() {
        let fields = [
            ["1.000", "tile", "MEMORY_READS", "1,234", "events", ""],
            super::INTERVAL_HEADER,
            [
                "12.5",
                "llt_miss12",
                "a µ name wider than thirty-four characters",
                "<not counted>",
                "",
                "why",
            ],
            ["", "", "", "", "", ""],
            [
                "0.1",
                "mss0",
                "ddr_read_bandwidth",
                "2.00",
                "GB/s",
                "estimate: counted 50%",
            ],
        ];
        for [time, block, name, value, unit, note] in fields {
            let mut got = Vec::new();
            super::interval_line(&mut got, [time, block, name, value, unit, note]).unwrap();
            let want = format!("{time:>10}  {block:<14} {name:<34} {value:>18} {unit:<8} {note}");
            assert_eq!(
                String::from_utf8(got).unwrap(),
                format!("{}\n", want.trim_end())
            );
        }
    }
}
