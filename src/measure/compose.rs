//! `-e` and `-M` turned into a measurement's work, one way for `stat`, `top` and the
//! exporter ([`compose`]): the blocks' specs, the perf events counted beside them
//! (each resolved now, before anything is written), and what the chosen metrics
//! need. The front ends differ only in their [`Rules`]: the exporter refuses perf
//! events and skips, entry by entry, what the device cannot count (unless strict);
//! top skips; stat refuses.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::metrics::{self, Metric, MetricSet};
use crate::perf::{PerfEvent, Pmus};

use super::StatRequest;

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
    fn from_events(pmus: &Pmus, events: &[String]) -> Result<Work> {
        let (perf, specs) = crate::perf::split(pmus, events)?;
        Ok(Work { specs, perf })
    }

    /// Adds `other`'s specs, and its perf events not already counted.
    fn join(&mut self, other: Work) {
        self.specs.extend(other.specs);
        for p in other.perf {
            if !self.perf.contains(&p) {
                self.perf.push(p);
            }
        }
    }

    /// Adds what `metrics` need: their block events as specs, and their perf events
    /// (one the kernel cannot count is the metric's error, naming its file).
    fn add_metrics(&mut self, pmus: &Pmus, metrics: &[&Metric]) -> Result<()> {
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
    fn shadow_metrics(&self, metrics: &[String]) -> Vec<String> {
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

/// perf's shadow metrics that `events` bring beside `metrics` (see
/// [`Work::shadow_metrics`]).
pub(crate) fn shadows(pmus: &Pmus, events: &[String], metrics: &[String]) -> Result<Vec<String>> {
    Ok(Work::from_events(pmus, events)?.shadow_metrics(metrics))
}

/// The default set as this device can count it: the generation's event specs (those
/// the device lacks left out) and its metrics.
pub(crate) fn default_set(device: &Device) -> (Vec<String>, Vec<String>) {
    let (events, metrics) = super::defaults::default_set(device.generation());
    let events = events
        .into_iter()
        .filter(|e| super::prepare(device, &StatRequest::for_specs(vec![e.clone()])).is_ok())
        .collect();
    (events, metrics)
}

/// What a front end does with a perf event (of the Arm cores) among its entries.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Perf<'a> {
    /// Count it beside the blocks, on these PMUs (stat, top).
    Count(&'a Pmus),
    /// Refuse it: the named program counts the device only (the exporter).
    Refuse(&'static str),
}

/// How `-e` and `-M` entries are composed: what becomes of perf events, and of an
/// entry the device cannot count (skipped and named, or refused).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules<'a> {
    pub perf: Perf<'a>,
    /// Skip an entry this device cannot count (each entry is then checked on its
    /// own), instead of refusing the whole.
    pub skip: bool,
    /// Check the whole as one measurement places it; false when the caller places
    /// it at once itself (stat, with its own `--no-multiplex`): the specs are then
    /// resolved once less.
    pub whole: bool,
}

/// `-e` and `-M` composed against a device: the work, the metrics chosen (by name,
/// in order, each once) and the entries skipped, with why.
#[derive(Debug, Clone, Default)]
pub(crate) struct Composed {
    pub work: Work,
    pub metrics: Vec<String>,
    pub skipped: Vec<String>,
}

/// The one composer of stat, top and the exporter: `events` (`-e` specs) and
/// `metrics` (`-M` names or groups of `set`) turned into work for `device`, every
/// spec checked against it (all at once, or entry by entry when `rules.skip`).
/// Writes nothing.
pub(crate) fn compose(
    device: &Device,
    set: &MetricSet,
    (events, metrics): (&[String], &[String]),
    rules: Rules,
) -> Result<Composed> {
    let mut out = Composed::default();
    // Entry by entry when one may be skipped; else as one, which a refusal names.
    let batches = |list: &[String]| -> Vec<Vec<String>> {
        match rules.skip {
            true => list.iter().map(|e| vec![e.clone()]).collect(),
            false => vec![list.to_vec()],
        }
    };
    for batch in batches(events) {
        // A spec that does not parse, or a perf event this machine lacks, is
        // refused even where entries are skipped: it is the user's mistake.
        let work = match rules.perf {
            Perf::Count(pmus) => Ok(Work::from_events(pmus, &batch)?),
            Perf::Refuse(who) => refuse_perf(&batch, who),
        };
        let work = work.and_then(|w| checked(device, w, rules));
        if let Some(w) = kept(&mut out.skipped, rules, ("events", &batch), work)? {
            out.work.join(w);
        }
    }
    for batch in batches(metrics) {
        let got = metrics_of(set, &batch, rules)
            .and_then(|(names, w)| Ok((names, checked(device, w, rules)?)));
        if let Some((names, w)) = kept(&mut out.skipped, rules, ("metrics", &batch), got)? {
            out.metrics.extend(names);
            out.work.join(w);
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.metrics.retain(|m| seen.insert(m.clone()));
    // The whole, as one measurement places it. Nothing at all is the caller's to
    // refuse: the exporter adds the device's registers, stat counts perf events.
    if rules.whole && !out.work.specs.is_empty() {
        super::prepare(device, &StatRequest::for_specs(out.work.specs.clone()))?;
    }
    Ok(out)
}

/// An entry's outcome: kept, or (when entries are skipped) named in `skipped`.
fn kept<T>(
    skipped: &mut Vec<String>,
    rules: Rules,
    (what, batch): (&str, &[String]),
    got: Result<T>,
) -> Result<Option<T>> {
    match got {
        Ok(t) => Ok(Some(t)),
        Err(e) if rules.skip => {
            skipped.push(format!("{what} entry '{}': {e}", batch.join(",")));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `work` checked against the device on its own, when entries are skipped one by
/// one (else the whole is checked once, at the end).
fn checked(device: &Device, work: Work, rules: Rules) -> Result<Work> {
    if rules.skip && !work.specs.is_empty() {
        super::prepare(device, &StatRequest::for_specs(work.specs.clone()))?;
    }
    Ok(work)
}

/// `-e` entries of a program that counts the device only: a perf event among them
/// is refused, naming `who`.
fn refuse_perf(events: &[String], who: &str) -> Result<Work> {
    // `cycles` is the Arm cores' perf event in stat's grammar, never a block's.
    if let Ok((perf, _)) = crate::perf::split(&Pmus::default(), events) {
        if let Some(p) = perf.first() {
            let problem = format!(
                "{} is a perf event of the Arm cores, which {who} does not count (stat and top do); a block's count_clock counter is KIND/cycles/",
                p.name
            );
            return Err(Error::BadSpec {
                spec: events.join(","),
                problem,
            });
        }
    }
    Ok(Work {
        specs: events.to_vec(),
        perf: Vec::new(),
    })
}

/// `-M` entries: the metrics they name, and what those need (their block events
/// as specs, their perf events counted or refused).
fn metrics_of(set: &MetricSet, names: &[String], rules: Rules) -> Result<(Vec<String>, Work)> {
    let chosen = set.select(names)?;
    let mut work = Work::default();
    match rules.perf {
        Perf::Count(pmus) => work.add_metrics(pmus, &chosen)?,
        Perf::Refuse(who) => {
            if let Some(m) = chosen.iter().find(|m| metrics::uses_perf(m)) {
                return Err(Error::BadMetric {
                    metric: m.def.name.clone(),
                    source_file: m.source.clone(),
                    problem: format!(
                        "it needs perf events ({}), which {who} does not count; `bfperf stat -M {}` does",
                        metrics::perf_events_for(&[m]).join(", "),
                        m.def.name
                    ),
                });
            }
            work.specs = metrics::specs_for(&chosen);
        }
    }
    Ok((chosen.iter().map(|m| m.def.name.clone()).collect(), work))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Generation;
    use std::sync::Arc;

    fn bf3() -> (Device, MetricSet) {
        let clock = Arc::new(crate::sim::SystemClock::new());
        let sim = crate::sim::Sim::new(Generation::Bf3, crate::sim::Kernel::V6_16, clock);
        let device = Device::open(Box::new(Arc::new(sim))).unwrap();
        (device, MetricSet::load(&[Generation::Bf3], &[]))
    }

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn stat_top_and_the_exporter_compose_the_same_work_from_the_same_entries() {
        let (device, set) = bf3();
        let (events, metrics) = (
            words(&["llt/GDC_BANK0_RD_REQ/"]),
            words(&["ddr_read_bandwidth"]),
        );
        let refuse = Rules {
            perf: Perf::Refuse("the exporter"),
            skip: true,
            whole: true,
        };
        let none = Pmus::default();
        let count = Rules {
            perf: Perf::Count(&none),
            skip: false,
            whole: true,
        };
        let a = compose(&device, &set, (&events, &metrics), refuse).unwrap();
        let b = compose(&device, &set, (&events, &metrics), count).unwrap();
        assert_eq!(a.work.specs, b.work.specs);
        assert_eq!(a.metrics, ["ddr_read_bandwidth"]);
        assert_eq!(a.metrics, b.metrics);
        assert!(a.skipped.is_empty() && a.work.perf.is_empty() && b.work.perf.is_empty());
    }

    #[test]
    fn what_the_device_cannot_count_is_skipped_by_name_or_refused_whole() {
        let (device, set) = bf3();
        let events = words(&["llt/GDC_BANK0_RD_REQ/", "tile/MEMORY_READS/", "cycles"]);
        let skip = Rules {
            perf: Perf::Refuse("the exporter"),
            skip: true,
            whole: true,
        };
        let c = compose(&device, &set, (&events, &[]), skip).unwrap();
        assert_eq!(c.work.specs, ["llt/GDC_BANK0_RD_REQ/"]);
        assert_eq!(c.skipped.len(), 2, "{:?}", c.skipped);
        assert!(c.skipped[0].starts_with("events entry 'tile/MEMORY_READS/': "));
        assert!(c.skipped[1].contains(
            "cycles is a perf event of the Arm cores, which the exporter does not count"
        ));
        let strict = Rules {
            skip: false,
            ..skip
        };
        assert!(compose(&device, &set, (&events, &[]), strict).is_err());
        // Counted, cycles is a perf event beside the blocks; the tiles are refused.
        let none = Pmus::default();
        let count = Rules {
            perf: Perf::Count(&none),
            skip: false,
            whole: true,
        };
        let err = compose(&device, &set, (&events, &[]), count).unwrap_err();
        assert!(err.to_string().contains("tile"), "{err}");
    }
}
