//! `stat --format csv`: one header row, stable columns, a record a count or metric.

use std::io;

use super::{Line, StatFormat, StatWriter};
use crate::measure::repeat::mean_metrics;
use crate::measure::{Count, Run};
use crate::metrics::MetricValue;

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

/// Rows separated by `sep` into `w`, the header written by the caller.
fn writer<W: io::Write>(sep: u8, w: W) -> ::csv::Writer<W> {
    ::csv::WriterBuilder::new()
        .delimiter(sep)
        .has_headers(false)
        .from_writer(w)
}

fn to_io(e: ::csv::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl StatWriter<'_> {
    pub(super) fn csv_rows(&mut self, rows: &[Line]) -> io::Result<()> {
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
        let mut out = writer(sep, &mut **w);
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
                opt(l.time_s.map(crate::cli::output::three_decimals)),
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

    /// Metric values as CSV rows: the metric in `event`, its value in `value`.
    pub(super) fn csv_metrics(
        &mut self,
        of: &'static str,
        run: Option<u32>,
        time_s: Option<f64>,
        values: &[MetricValue],
    ) -> io::Result<()> {
        let StatFormat::Csv(sep) = self.format else {
            return Ok(());
        };
        let mut out = writer(sep, &mut *self.w);
        let time = time_s
            .map(crate::cli::output::three_decimals)
            .unwrap_or_default();
        for v in values {
            out.write_record([
                "metric".to_string(),
                run.map(|r| r.to_string()).unwrap_or_default(),
                time.clone(),
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

    /// Each run's totals, the mean over runs (with -r), then each run's metrics.
    pub(super) fn summary_csv(
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
