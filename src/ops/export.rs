//! The fleet exporter's core: it owns the counters for its whole life (programmed at
//! start, re-asserted when someone else re-programs them, restored at the end), keeps
//! 64-bit running totals that never go backwards (across 32-bit wraps and window
//! resets), and renders everything in the OpenMetrics text format (prometheus-client)
//! or Prometheus' text format 0.0.4.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::journal;
use super::metrics::{self, MetricSet, MetricValue};
use super::stat::plan::BlockPlan;
use super::stat::sampler::{Acc, Sampler};
use super::stat::session::{self, Saved};
use super::stat::spec::Item;
use super::stat::{counts, metric_inputs, prepare, Count, StatRequest, Timing};
use crate::block::{BlockKind, Mechanism};
use crate::device::Device;
use crate::error::Result;
use crate::kinds::Role;

/// What the exporter counts: `stat -e` specs and `stat -M` metric names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportConfig {
    pub events: Vec<String>,
    pub metrics: Vec<String>,
    pub params: HashMap<String, f64>,
    /// Keep the device's journal (restore a leftover one at start, record the
    /// prior programming before the first write).
    pub journal: bool,
}

type Labels = Vec<(String, String)>;
/// A family of gauges with labels.
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The exporter's state on one device.
pub struct Exporter<'d> {
    device: &'d Device,
    sampler: Sampler<'d>,
    saved: Vec<Saved>,
    set: MetricSet,
    metric_names: Vec<String>,
    params: HashMap<String, f64>,
    last_ns: u64,
    last_counts: Vec<Count>,
    last_accs: Vec<Vec<Acc>>,
    values: Vec<MetricValue>,
    reprogrammed: u64,
    /// Things to log once: re-programmed counters by block.
    pub events: Vec<String>,
    journal: Option<journal::Journal>,
}

/// The specs of every register of every pcie, ecc and clock_measure block.
fn register_specs(device: &Device) -> Vec<String> {
    [BlockKind::Pcie, BlockKind::Ecc, BlockKind::ClockMeasure]
        .into_iter()
        .filter(|k| {
            device
                .blocks()
                .iter()
                .any(|b| b.kind == *k && !b.registers.is_empty())
        })
        .map(|k| format!("{}/*/", k.as_str()))
        .collect()
}

/// Checks a configuration against the device: the specs its events and metrics
/// need, and the metric names. Writes nothing.
pub fn check(
    device: &Device,
    config: &ExportConfig,
    set: &MetricSet,
) -> Result<(Vec<String>, Vec<String>)> {
    let chosen = set.select(&config.metrics)?;
    let names: Vec<String> = chosen.iter().map(|m| m.def.name.clone()).collect();
    let mut specs = register_specs(device);
    specs.extend(config.events.iter().cloned());
    specs.extend(metrics::specs_for(&chosen));
    prepare(device, &request(specs.clone()))?;
    Ok((specs, names))
}

fn request(specs: Vec<String>) -> StatRequest {
    StatRequest {
        specs,
        timing: Timing::default(),
        repeat: 1,
        restore: true,
        multiplex: true,
        journal: false,
    }
}

impl<'d> Exporter<'d> {
    /// Validates, records the device's configuration, programs and starts.
    pub fn start(
        device: &'d Device,
        config: &ExportConfig,
        set: MetricSet,
        now: u64,
    ) -> Result<Exporter<'d>> {
        let (specs, metric_names) = check(device, config, &set)?;
        let (plans, _) = prepare(device, &request(specs))?;
        // A writer that died left its programming: put the device back first, so
        // that what is recorded below is the real prior state.
        let mut events = Vec::new();
        if config.journal {
            if let Some(r) = journal::restore_leftover(device)? {
                events.push(r.describe());
            }
        }
        let saved = session::save(device, &plans)?;
        let journal = match config.journal {
            true => Some(journal::write(device, &saved)?),
            false => None,
        };
        let masks: HashMap<String, u32> = saved
            .iter()
            .filter_map(|s| Some((s.block.clone(), s.count_clock?)))
            .collect();
        let started = Sampler::open(device, plans, &masks).and_then(|mut s| {
            s.start(now)?;
            Ok(s)
        });
        let sampler = match started {
            Ok(s) => s,
            Err(e) => {
                if session::restore(device, &saved).is_ok() {
                    if let Some(j) = journal {
                        let _ = j.remove();
                    }
                }
                return Err(e);
            }
        };
        let mut e = Exporter {
            device,
            sampler,
            saved,
            set,
            metric_names,
            params: config.params.clone(),
            last_ns: now,
            last_counts: Vec::new(),
            last_accs: Vec::new(),
            values: Vec::new(),
            reprogrammed: 0,
            events,
            journal,
        };
        // The first scrape's metrics cover the time since the start.
        e.last_accs = e.sampler.totals();
        e.last_counts = e.counts(&e.last_accs);
        Ok(e)
    }

    /// Running counts: multiplexed events as their running estimates (scaled the
    /// way `stat` scales), events that never had a turn as not counted.
    fn counts(&self, accs: &[Vec<Acc>]) -> Vec<Count> {
        let mut out = counts(&self.sampler.plans, accs, 0);
        for (c, acc) in out.iter_mut().zip(accs.iter().flatten()) {
            c.counted = acc.active_ns > 0 || acc.level;
            c.value = c.counted.then_some(acc.estimate);
        }
        out
    }

    /// One sweep at `now`: reads every value; the sampler programs again what
    /// another program changed, and the exporter counts and logs it. The exporter
    /// sweeps at least every second, so that windows never wrap, whatever the
    /// scrape interval.
    pub fn sweep(&mut self, now: u64) -> Result<()> {
        self.sampler.tick(now)?;
        for d in self.sampler.take_log() {
            self.reprogrammed += d.items.len() as u64;
            self.events.push(format!(
                "{} of {}: {}; programming it again",
                d.items.join(", "),
                d.block,
                d.why.describe()
            ));
        }
        Ok(())
    }

    /// Sweeps, then computes the metrics over the time since the previous scrape.
    pub fn scrape(&mut self, now: u64) -> Result<()> {
        self.sweep(now)?;
        let totals = self.sampler.totals();
        let counts = self.counts(&totals);
        let span_s = now.saturating_sub(self.last_ns) as f64 / 1e9;
        if span_s > 0.0 {
            // Counts over the span; levels as they are now.
            // Invalid when another program touched it since the last scrape.
            let delta: Vec<Count> = counts
                .iter()
                .zip(&self.last_counts)
                .zip(totals.iter().flatten().zip(self.last_accs.iter().flatten()))
                .map(|((c, p), (acc, before))| {
                    let touched = acc.foreign > before.foreign;
                    Count {
                        // Not counted at the last scrape: its estimate started at 0.
                        value: if acc.level {
                            c.value
                        } else {
                            c.value.map(|a| a.saturating_sub(p.value.unwrap_or(0)))
                        },
                        valid: !touched,
                        invalid: touched.then(|| acc.why.map(|w| w.describe())).flatten(),
                        ..c.clone()
                    }
                })
                .collect();
            let mut inputs = metric_inputs(&delta, span_s);
            inputs.params = self.params.clone();
            let chosen: Vec<&metrics::Metric> = self
                .metric_names
                .iter()
                .filter_map(|n| self.set.get(n))
                .collect();
            self.values = metrics::evaluate(&self.set, &chosen, &inputs, true);
        }
        self.last_counts = counts;
        self.last_accs = totals;
        self.last_ns = now;
        Ok(())
    }

    /// The exposition in the OpenMetrics text format.
    pub fn openmetrics(&self, up: bool, scrape_s: f64) -> String {
        let mut reg = Registry::with_prefix("bfperf");
        let gauge = |help: &str, name: &str, reg: &mut Registry, labels: Labels, v: f64| {
            let fam = Gauges::default();
            fam.get_or_create(&labels).set(v);
            reg.register(name, help, fam);
        };
        let plain = |help: &str, name: &str, reg: &mut Registry, v: f64| {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(v);
            reg.register(name, help, g);
        };
        plain(
            "1 when the last sweep read every value",
            "up",
            &mut reg,
            if up { 1.0 } else { 0.0 },
        );
        plain(
            "Seconds the last sweep took",
            "scrape_duration_seconds",
            &mut reg,
            scrape_s,
        );
        gauge(
            "The device: generation, location and event_list format",
            "device_info",
            &mut reg,
            vec![
                ("generation".into(), self.device.generation().label().into()),
                ("device".into(), self.device.location()),
                (
                    "event_list_format".into(),
                    event_list_format(self.device).into(),
                ),
            ],
            1.0,
        );
        gauge(
            "bfperf's version",
            "build_info",
            &mut reg,
            vec![("version".into(), env!("CARGO_PKG_VERSION").into())],
            1.0,
        );
        let reprogrammed = Counter::<u64>::default();
        reprogrammed.inc_by(self.reprogrammed);
        reg.register(
            "reprogrammed",
            "Counters found re-programmed by another program and programmed again",
            reprogrammed,
        );

        let events = Family::<Labels, Counter>::default();
        let cycles = Family::<Labels, Counter>::default();
        let by_unit: HashMap<&str, Family<Labels, Counter>> = [
            ("bytes", Family::default()),
            ("packets", Family::default()),
            ("count", Family::default()),
        ]
        .into();
        let controls = Gauges::default();
        let levels = Gauges::default();
        for (p, accs) in self.sampler.plans.iter().zip(self.sampler.totals()) {
            self.families(p, &accs, &events, &cycles, &by_unit, &controls, &levels);
        }
        reg.register(
            "events",
            "Events counted by a counter bfperf programmed (running total)",
            events,
        );
        reg.register(
            "cycles",
            "Clock cycles counted by a count_clock counter (running total)",
            cycles,
        );
        let mut by_unit = by_unit;
        for (unit, name, help) in [
            (
                "bytes",
                "register_bytes",
                "A statistics register counting bytes (pcie)",
            ),
            (
                "packets",
                "register_packets",
                "A statistics register counting packets (pcie)",
            ),
            (
                "count",
                "register",
                "A statistics register counting events (ecc)",
            ),
        ] {
            if let Some(f) = by_unit.remove(unit) {
                reg.register(name, help, f);
            }
        }
        reg.register(
            "register_value",
            "A control register's value (error injection, switches)",
            controls,
        );
        reg.register(
            "level",
            "A measured level, such as a clock monitor's count (clock_measure)",
            levels,
        );
        let mut per_metric: Vec<(&MetricValue, Gauges)> = Vec::new();
        for v in &self.values {
            if !per_metric.iter().any(|(m, _)| m.metric == v.metric) {
                per_metric.push((v, Family::default()));
            }
            let Some(x) = v.value else { continue };
            if let Some((_, fam)) = per_metric.iter().find(|(m, _)| m.metric == v.metric) {
                fam.get_or_create(&vec![
                    ("block".into(), v.block.clone()),
                    ("unit".into(), v.unit.clone()),
                ])
                .set(x);
            }
        }
        for (v, fam) in per_metric {
            reg.register(
                format!("metric_{}", v.metric),
                help_text(&v.description),
                fam,
            );
        }
        let mut out = String::new();
        let _ = encode(&mut out, &reg);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn families(
        &self,
        p: &BlockPlan,
        accs: &[Acc],
        events: &Family<Labels, Counter>,
        cycles: &Family<Labels, Counter>,
        by_unit: &HashMap<&str, Family<Labels, Counter>>,
        controls: &Gauges,
        levels: &Gauges,
    ) {
        let b = p.block;
        let base = || {
            vec![
                ("block".to_string(), b.name.clone()),
                ("kind".to_string(), b.kind.as_str().to_string()),
            ]
        };
        for (i, (item, acc)) in p.items.iter().zip(accs).enumerate() {
            // A multiplexed event before its first turn has no value yet.
            if acc.active_ns == 0 && !acc.level {
                continue;
            }
            let mut labels = base();
            match item {
                Item::Register { name } => {
                    labels.push(("register".into(), name.clone()));
                    match b.def().role(name) {
                        Role::Count => {
                            if let Some(f) = by_unit.get(crate::kinds::register_unit(name)) {
                                f.get_or_create(&labels).inc_by(acc.total);
                            }
                        }
                        Role::Control => {
                            controls.get_or_create(&labels).set(acc.total as f64);
                        }
                        Role::Level => {
                            levels.get_or_create(&labels).set(acc.total as f64);
                        }
                    }
                }
                Item::Cycles => {
                    labels.push(("counter".into(), counter_of(p, i)));
                    cycles.get_or_create(&labels).inc_by(acc.estimate);
                }
                Item::Event { name, .. } => {
                    labels.push(("counter".into(), counter_of(p, i)));
                    labels.push(("event".into(), name.clone()));
                    events.get_or_create(&labels).inc_by(acc.estimate);
                }
            }
        }
    }

    /// Puts the device back as it was, and drops the journal.
    pub fn stop(self) -> Result<()> {
        session::restore(self.device, &self.saved)?;
        match self.journal {
            Some(j) => j.remove(),
            None => Ok(()),
        }
    }
}

/// HELP text as the exposition formats require: backslashes and newlines escaped,
/// other control characters left out (the encoder writes HELP as it is given).
fn help_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn counter_of(p: &BlockPlan, item: usize) -> String {
    if p.multiplexed() {
        return "multiplexed".into();
    }
    p.groups
        .first()
        .and_then(|g| g.iter().find(|s| s.item == item))
        .map_or_else(String::new, |s| s.counter.to_string())
}

/// `0x45: NAME` (upstream) or `45: NAME` (NVIDIA's out-of-tree driver).
fn event_list_format(device: &Device) -> &'static str {
    for b in device
        .blocks()
        .iter()
        .filter(|b| b.has_event_list && b.mechanism != Mechanism::Registers)
    {
        if let Ok(text) = device.fs().read(&crate::sysfs::layout::event_list(&b.name)) {
            return match text.lines().next() {
                Some(l) if l.starts_with("0x") => "upstream",
                Some(_) => "out-of-tree",
                None => "empty",
            };
        }
    }
    "none"
}

/// Prometheus' text format 0.0.4 from OpenMetrics text: counters are named with
/// their `_total` in HELP and TYPE, and `# UNIT` and `# EOF` are left out.
pub fn text_004(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# EOF") || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}
