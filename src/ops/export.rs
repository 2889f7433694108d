//! The fleet exporter's core: it owns the counters for its whole life (programmed at
//! start, re-asserted when someone else re-programs them, restored at the end), keeps
//! 64-bit running totals that never go backwards (across 32-bit wraps and window
//! resets), and writes the exposition directly in the OpenMetrics text format or
//! Prometheus' text format 0.0.4 (no registry is rebuilt per scrape).

use std::collections::HashMap;

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
        self.exposition(up, scrape_s, TextFormat::OpenMetrics)
    }

    /// The exposition in `format`, written directly (families in a fixed order,
    /// series in the order of the blocks and their items: the same every scrape).
    pub fn exposition(&self, up: bool, scrape_s: f64, format: TextFormat) -> String {
        let mut t = Text::new(format);
        t.gauge("up", "1 when the last sweep read every value");
        t.sample("up", "", &[], if up { 1.0 } else { 0.0 });
        t.gauge("scrape_duration_seconds", "Seconds the last sweep took");
        t.sample("scrape_duration_seconds", "", &[], scrape_s);
        t.gauge(
            "device_info",
            "The device: generation, location and event_list format",
        );
        let location = self.device.location();
        t.sample(
            "device_info",
            "",
            &[
                ("generation", self.device.generation().label()),
                ("device", &location),
                ("event_list_format", event_list_format(self.device)),
            ],
            1.0,
        );
        t.gauge("build_info", "bfperf's version");
        t.sample(
            "build_info",
            "",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        t.counter(
            "reprogrammed",
            "Counters found re-programmed by another program and programmed again",
        );
        t.sample("reprogrammed", "_total", &[], self.reprogrammed as f64);
        let totals = self.sampler.totals();
        let plans = &self.sampler.plans;
        let families: [(&str, &str, Family); 7] = [
            (
                "events",
                "Events counted by a counter bfperf programmed (running total)",
                Family::Events,
            ),
            (
                "cycles",
                "Clock cycles counted by a count_clock counter (running total)",
                Family::Cycles,
            ),
            (
                "register_bytes",
                "A statistics register counting bytes (pcie)",
                Family::Registers("bytes"),
            ),
            (
                "register_packets",
                "A statistics register counting packets (pcie)",
                Family::Registers("packets"),
            ),
            (
                "register",
                "A statistics register counting events (ecc)",
                Family::Registers("count"),
            ),
            (
                "register_value",
                "A control register's value (error injection, switches)",
                Family::Controls,
            ),
            (
                "level",
                "A measured level, such as a clock monitor's count (clock_measure)",
                Family::Levels,
            ),
        ];
        for (name, help, family) in families {
            let mut any = false;
            for (p, accs) in plans.iter().zip(&totals) {
                for (i, (item, acc)) in p.items.iter().zip(accs).enumerate() {
                    // A multiplexed event before its first turn has no value yet.
                    if acc.active_ns == 0 && !acc.level {
                        continue;
                    }
                    let Some(value) = family.value(p, item, acc) else {
                        continue;
                    };
                    if !any {
                        if family.is_counter() {
                            t.counter(name, help);
                        } else {
                            t.gauge(name, help);
                        }
                        any = true;
                    }
                    let counter = counter_of(p, i);
                    let mut labels = vec![
                        ("block", p.block.name.as_str()),
                        ("kind", p.block.kind.as_str()),
                    ];
                    match item {
                        Item::Register { name } => labels.push(("register", name)),
                        Item::Cycles => labels.push(("counter", &counter)),
                        Item::Event { name, .. } => {
                            labels.push(("counter", &counter));
                            labels.push(("event", name));
                        }
                    }
                    let suffix = if family.is_counter() { "_total" } else { "" };
                    t.sample(name, suffix, &labels, value);
                }
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for v in &self.values {
            if seen.contains(&v.metric.as_str()) {
                continue;
            }
            seen.push(&v.metric);
            let name = format!("metric_{}", v.metric);
            t.gauge(&name, &v.description);
            for w in self.values.iter().filter(|w| w.metric == v.metric) {
                if let Some(x) = w.value {
                    t.sample(&name, "", &[("block", &w.block), ("unit", &w.unit)], x);
                }
            }
        }
        t.finish()
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

/// The two exposition formats Prometheus reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// OpenMetrics 1.0: counters' TYPE names the family, `# EOF` ends it.
    OpenMetrics,
    /// Prometheus' text format 0.0.4: counters' TYPE names the `_total` series.
    Text004,
}

/// Which series of a plan item a family holds, and its value.
#[derive(Debug, Clone, Copy)]
enum Family {
    Events,
    Cycles,
    /// Count registers of a unit (bytes, packets, count).
    Registers(&'static str),
    Controls,
    Levels,
}

impl Family {
    fn is_counter(self) -> bool {
        matches!(self, Family::Events | Family::Cycles | Family::Registers(_))
    }

    fn value(self, p: &BlockPlan, item: &Item, acc: &Acc) -> Option<f64> {
        let role = |name: &str| p.block.def().role(name);
        match (self, item) {
            (Family::Events, Item::Event { .. }) | (Family::Cycles, Item::Cycles) => {
                Some(acc.estimate as f64)
            }
            (Family::Registers(unit), Item::Register { name })
                if role(name) == Role::Count && crate::kinds::register_unit(name) == unit =>
            {
                Some(acc.total as f64)
            }
            (Family::Controls, Item::Register { name }) if role(name) == Role::Control => {
                Some(acc.total as f64)
            }
            (Family::Levels, Item::Register { name }) if role(name) == Role::Level => {
                Some(acc.total as f64)
            }
            _ => None,
        }
    }
}

/// An exposition being written: families and samples, names prefixed `bfperf_`,
/// label values and HELP escaped as the formats require.
struct Text {
    out: String,
    format: TextFormat,
}

impl Text {
    fn new(format: TextFormat) -> Text {
        Text {
            out: String::with_capacity(16 * 1024),
            format,
        }
    }

    fn head(&mut self, name: &str, help: &str, kind: &str, suffix: &str) {
        use std::fmt::Write;
        let _ = write!(
            self.out,
            "# HELP bfperf_{name}{suffix} {}\n# TYPE bfperf_{name}{suffix} {kind}\n",
            help_text(help)
        );
    }

    fn gauge(&mut self, name: &str, help: &str) {
        self.head(name, help, "gauge", "");
    }

    fn counter(&mut self, name: &str, help: &str) {
        let suffix = match self.format {
            TextFormat::OpenMetrics => "",
            TextFormat::Text004 => "_total",
        };
        self.head(name, help, "counter", suffix);
    }

    fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], value: f64) {
        use std::fmt::Write;
        let _ = write!(self.out, "bfperf_{name}{suffix}");
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"");
                for c in v.chars() {
                    match c {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        if value.fract() == 0.0 && value.abs() < 9e15 {
            let _ = writeln!(self.out, " {}", value as i64);
        } else {
            let _ = writeln!(self.out, " {value}");
        }
    }

    fn finish(mut self) -> String {
        if self.format == TextFormat::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}
