//! `stat --format json`: NDJSON, a count or metric a line, and the `end` record.

use std::io;

use serde::Serialize;

use super::{Ending, Line, StatWriter};
use crate::measure::repeat::mean_metrics;
use crate::measure::{Count, Run};
use crate::metrics::MetricValue;

impl StatWriter<'_> {
    pub(super) fn ndjson<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        serde_json::to_writer(&mut *self.w, value)?;
        self.w.write_all(b"\n")
    }

    /// A run's total of one count.
    pub(super) fn total_line<'c>(&self, r: &Run, c: &'c Count) -> Line<'c> {
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
    pub(super) fn mean_line<'c>(&self, c: &'c Count, stddev_pct: Option<f64>) -> Line<'c> {
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
    pub(super) fn summary_ndjson(
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
}
