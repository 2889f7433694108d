//! `-e` and `-M` turned into a measurement's work, one way for `stat` and `top`: the
//! blocks' specs, the perf events counted beside them (each resolved now, before
//! anything is written), and what the chosen metrics need. (The exporter's config,
//! which skips entry by entry and counts no perf events, is checked by
//! `export::check` from the same default sets.)

use crate::device::Device;
use crate::error::{Error, Result};
use crate::metrics::{self, Metric};
use crate::perf::{PerfEvent, Pmu};

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

    /// Whether perf's "insn per cycle" goes with it: cycles and instructions are both
    /// counted and no metric asked for by name already is it.
    pub(crate) fn wants_ipc(&self, metrics: &[String]) -> bool {
        let has = |n: &str| self.perf.iter().any(|e| e.name == n);
        has("cycles")
            && has("instructions")
            && !metrics
                .iter()
                .flat_map(|m| m.split(','))
                .any(|m| matches!(m.trim(), "ipc" | "cpu"))
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
