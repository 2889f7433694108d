//! The Arm cores beside the blocks in `top`: perf events (`-e cycles,instructions`, and
//! those the metrics name) counted system-wide, read at every refresh, shown as rates
//! in the raw view, and given to the metrics that need them. Nothing of the device is
//! written for them, so they count in read-only mode too.

use crate::block::BlockKind;
use crate::measure::{perf_since, Count};
use crate::metrics::{self, Inputs, MetricSet, MetricValue, PERF_SCOPE};
use crate::ops::watch::Rate;
use crate::perf::{Counters, PerfEvent};

/// The perf counters of a `top` session and the metrics evaluated with them.
pub(super) struct Cores {
    counters: Counters,
    /// The cumulative counts at the last refresh, and when.
    last: (Vec<Count>, u64),
    /// Each event's rate over the last interval.
    rates: Vec<Rate>,
    /// The metrics that need perf events (the exporter counts their block events).
    metrics: Vec<String>,
}

impl Cores {
    /// Opens and starts `events` on `cpus` now; None when there is none.
    pub(super) fn start(
        events: &[PerfEvent],
        cpus: &[usize],
        metrics: Vec<String>,
        now: u64,
    ) -> Option<Cores> {
        if events.is_empty() {
            return None;
        }
        let mut counters = Counters::open(events, cpus);
        counters.start();
        let first = counters.read().iter().map(Count::of_perf).collect();
        Some(Cores {
            counters,
            last: (first, now),
            rates: Vec::new(),
            metrics,
        })
    }

    /// Reads every event: their rates since the last refresh, for the raw view.
    pub(super) fn sample(&mut self, now: u64) -> &[Rate] {
        let counts: Vec<Count> = self.counters.read().iter().map(Count::of_perf).collect();
        let span_s = now.saturating_sub(self.last.1) as f64 / 1e9;
        self.rates = perf_since(&counts, &self.last.0)
            .into_iter()
            .map(|c| Rate {
                block: c.block.to_string(),
                kind: BlockKind::Perf,
                name: c.event.to_string(),
                counter: None,
                unit: c.unit,
                per_s: c.value.filter(|_| span_s > 0.0).map(|v| v as f64 / span_s),
                // Refused by the kernel: the raw view says <not supported>.
                idle: !c.supported,
                level: false,
                reprogrammed: false,
            })
            .collect();
        self.last = (counts, now);
        &self.rates
    }

    /// The metrics that need perf events, over inputs of the blocks (`blocks`: counts
    /// over `duration_s`) and the last interval's perf rates over the same span.
    pub(super) fn values(&self, set: &MetricSet, mut blocks: Inputs) -> Vec<MetricValue> {
        let chosen: Vec<&metrics::Metric> =
            self.metrics.iter().filter_map(|n| set.get(n)).collect();
        if chosen.is_empty() {
            return Vec::new();
        }
        let span = blocks.duration_s;
        for r in &self.rates {
            match r.per_s {
                Some(v) => blocks.add(PERF_SCOPE, BlockKind::Perf, &r.name, v * span, 1.0),
                None => blocks.missing(
                    PERF_SCOPE,
                    BlockKind::Perf,
                    &r.name,
                    format!(
                        "{} is not counted here (see bfperf stat -e {})",
                        r.name, r.name
                    ),
                ),
            }
        }
        metrics::evaluate(set, &chosen, &blocks, true)
    }
}
