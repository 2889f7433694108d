//! `stat` output, streamed: each interval as it ends, then the totals. Tables for
//! people; NDJSON (one JSON object per line, so an interrupted run is still valid);
//! CSV (or `-x SEP`) with one header row and stable columns.

use std::io::{self, Write};

use serde::Serialize;

use crate::cli::output::two_decimals;
use crate::front::escape::escape;
use crate::measure::order::{PerCount, SpecOrder};
use crate::measure::repeat::{mean_counts, mean_metrics};
use crate::measure::{aggregate_into, Count, Interval, Run};
use crate::metrics::MetricValue;

mod csv;
mod ndjson;
mod perf_csv;
mod table;

use perf_csv::PerfCsv;
use table::{
    interval_line, name_columns, note_text, push_interval_line_named, shown, value_text_into,
    SummaryTable, INTERVAL_HEADER,
};

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
    /// An interval table's lines, made together and written at once (kept for the
    /// next interval's).
    lines: String,
    /// An -I line's time and value, made in this room at every interval.
    time_text: String,
    value_text: String,
    /// `-x`'s lines, kept from interval to interval.
    perf_lines: Option<perf_csv::Lines>,
    /// Where each count of an interval goes in `order`, found at the first interval.
    places: PerCount<usize>,
    /// The block and event columns of each line of an interval table, laid out at
    /// the first interval: every interval shows the same counts.
    names: PerCount<String>,
    /// The room of the last interval's counts as shown, for the next's.
    shown: Vec<Count>,
}

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
            lines: String::new(),
            time_text: String::new(),
            value_text: String::new(),
            perf_lines: None,
            places: PerCount::default(),
            names: PerCount::default(),
            shown: Vec::new(),
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
    fn shown(&mut self, counts: &[Count]) -> Vec<Count> {
        let mut shown = Vec::new();
        self.shown_into(&mut shown, counts);
        shown
    }

    /// [`StatWriter::shown`] into `out`, keeping its room.
    fn shown_into(&mut self, out: &mut Vec<Count>, counts: &[Count]) {
        if self.metric_only {
            out.clear();
            return;
        }
        match self.aggregate {
            // The sums in the places of the last interval's.
            true => aggregate_into(out, counts),
            false => {
                out.clear();
                out.extend_from_slice(counts);
            }
        }
        self.order.sort_remembering(out, &mut self.places);
    }

    /// perf's `-x` writer of this output.
    fn perf_csv(&self) -> PerfCsv {
        PerfCsv {
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
        let csv = self.perf_csv();
        let wall_ns = (wall_s * 1e9).round() as u64;
        let lines = self
            .perf_lines
            .get_or_insert_with(|| perf_csv::Lines::new(sep));
        csv.lines(lines, time, wall_ns, counts, variance, metrics)?;
        lines.out(self.w)
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
                let time = time_s
                    .map(crate::cli::output::three_decimals)
                    .unwrap_or_default();
                for v in values {
                    let (value, unit) = match v.value {
                        Some(x) => self.in_column_unit(v, x),
                        None => {
                            let key = (v.block.clone(), v.metric.clone());
                            let unit = self.units.get(&key).unwrap_or(&v.unit);
                            ("-".into(), unit.clone())
                        }
                    };
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

    /// One interval, as it ends, with its metrics.
    pub(crate) fn interval(&mut self, i: &Interval, metrics: &[MetricValue]) -> io::Result<()> {
        self.intervals_done = true;
        if self.metric_columns_wanted() {
            self.metric_columns(Some(i.time_s), metrics)?;
            return self.w.flush();
        }
        let mut counts = std::mem::take(&mut self.shown);
        self.shown_into(&mut counts, &i.counts);
        let written = self.interval_counts(i, &counts, metrics);
        self.shown = counts;
        written
    }

    /// [`StatWriter::interval`]'s counts as shown, and its metrics.
    fn interval_counts(
        &mut self,
        i: &Interval,
        counts: &[Count],
        metrics: &[MetricValue],
    ) -> io::Result<()> {
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
                self.perf_rows(sep, Some(i.time_s), i.enabled_s, counts, None, metrics)?
            }
            StatFormat::Table => {
                if !self.header_done {
                    // As perf stat -I: one header line, then the intervals.
                    interval_line(self.w, INTERVAL_HEADER)?;
                    self.header_done = true;
                }
                // The time and each value made in kept room.
                let (time, value) = (&mut self.time_text, &mut self.value_text);
                time.clear();
                crate::cli::output::three_decimals_into(time, i.time_s);
                self.lines.clear();
                for (n, c) in counts.iter().enumerate() {
                    value.clear();
                    value_text_into(value, c, self.big_num);
                    let (note, unit) = (note_text(c), shown(c).1);
                    let names = name_columns(&mut self.names, n, c);
                    push_interval_line_named(&mut self.lines, [time, names, value, unit, &note]);
                }
                self.w.write_all(self.lines.as_bytes())?;
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
        let mut per_run: Vec<Vec<Count>> = Vec::with_capacity(runs.len());
        for r in runs {
            per_run.push(self.shown(&r.counts));
        }
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
        let time_text = time.map(crate::cli::output::three_decimals);
        let mut head: Vec<String> = time.map(|_| "# TIME".to_string()).into_iter().collect();
        let mut row: Vec<String> = time_text.into_iter().collect();
        match self.format {
            StatFormat::PerfCsv(sep) => {
                let csv = self.perf_csv();
                let rows = csv.metric_columns(!self.header_done, time, values);
                self.header_done = true;
                let lines = self
                    .perf_lines
                    .get_or_insert_with(|| perf_csv::Lines::new(sep));
                lines.rows(&rows)?;
                lines.out(self.w)
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
}
