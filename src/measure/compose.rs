//! `-e` and `-M` turned into a measurement's work, one way for `stat` and `top`: the
//! blocks' specs, the perf events counted beside them (each resolved now, before
//! anything is written), and what the chosen metrics need. (The exporter's config,
//! which skips entry by entry and counts no perf events, is checked by
//! `export::check` from the same default sets.)

use crate::device::Device;
use crate::error::{Error, Result};
use crate::metrics::{self, Metric};
use crate::perf::{PerfEvent, Pmu};

/// perf's shadow metrics (metrics/cpu.json) and the events each is shown beside.
const SHADOWS: [(&str, &[&str]); 2] = [
    ("ipc", &["cycles", "instructions"]),
    ("cpus_utilized", &["task-clock"]),
];

/// What a measurement counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Work {
    /// The blocks' specs: the `-e` specs that are not perf events, and the block
    /// events the metrics need.
    pub specs: Vec<String>,
    /// The perf events counted beside the blocks.
    pub perf: Vec<PerfEvent>,
}

impl Work {
    /// Splits `-e` specs into perf events (perf's generic names, `PMU/.../` of a PMU
    /// the kernel lists) and the blocks' specs.
    pub(crate) fn from_events(pmus: &[Pmu], events: &[String]) -> Result<Work> {
        let (perf, specs) = crate::perf::split(pmus, events)?;
        Ok(Work { specs, perf })
    }

    /// Adds what `metrics` need: their block events as specs, and their perf events
    /// (one the kernel cannot count is the metric's error, naming its file).
    pub(crate) fn add_metrics(&mut self, pmus: &[Pmu], metrics: &[&Metric]) -> Result<()> {
        self.specs.extend(metrics::specs_for(metrics));
        for m in metrics {
            for e in metrics::perf_events_for(&[m]) {
                let event = crate::perf::required(pmus, &e).map_err(|err| Error::BadMetric {
                    metric: m.def.name.clone(),
                    source_file: m.source.clone(),
                    problem: err.to_string(),
                })?;
                if !self.perf.contains(&event) {
                    self.perf.push(event);
                }
            }
        }
        Ok(())
    }

    /// perf's shadow metrics that go with these events ("insn per cycle" beside
    /// cycles and instructions, "CPUs utilized" beside task-clock): those whose
    /// events are all counted and that `metrics` (names or groups) do not already
    /// bring.
    pub(crate) fn shadow_metrics(&self, metrics: &[String]) -> Vec<String> {
        let has = |n: &&str| self.perf.iter().any(|e| e.name == *n);
        let asked: Vec<&str> = metrics
            .iter()
            .flat_map(|m| m.split(','))
            .map(str::trim)
            .collect();
        SHADOWS
            .iter()
            .filter(|(metric, events)| {
                events.iter().all(has) && !asked.iter().any(|a| a == metric || *a == "cpu")
            })
            .map(|(metric, _)| metric.to_string())
            .collect()
    }
}

/// The default set as this device can count it: the generation's event specs (those
/// the device lacks left out) and its metrics.
pub(crate) fn default_set(device: &Device) -> (Vec<String>, Vec<String>) {
    let (events, metrics) = super::defaults::default_set(device.generation());
    let events = events
        .into_iter()
        .filter(|e| super::prepare(device, &super::StatRequest::for_specs(vec![e.clone()])).is_ok())
        .collect();
    (events, metrics)
}
