//! The fleet exporter's core: it owns the counters for its whole life (programmed at
//! start, re-asserted when someone else re-programs them, restored at the end), keeps
//! 64-bit running totals that never go backwards (across 32-bit wraps and window
//! resets), and writes the exposition directly in the OpenMetrics text format or
//! Prometheus' text format 0.0.4 (no registry is rebuilt per scrape). `prom` names
//! metrics in base units and writes PromQL recording rules.

mod clients;
pub(crate) mod prom;
mod text;

use std::collections::HashMap;

use crate::block::{BlockKind, Mechanism};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kinds::Role;
use crate::measure::defaults::{default_set, DEFAULT};
use crate::measure::owner::journal;
use crate::measure::plan::BlockPlan;
use crate::measure::sampler::{Acc, Foreign, Sampler};
use crate::measure::session::{self, Saved};
use crate::measure::{counts, metric_values, prepare, Count, StatRequest};
use crate::metrics::{self, MetricSet, MetricValue};
use crate::spec::Item;
pub use text::{render, TextFormat};

/// What the exporter counts: `stat -e` specs and `stat -M` metric names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportConfig {
    /// `stat -e` specs, or `default` for the generation's default set.
    pub events: Vec<String>,
    /// `stat -M` metric names or groups whose counters are programmed.
    pub metrics: Vec<String>,
    /// Values formulas use (`pcie_link_bytes_per_s`).
    pub params: HashMap<String, f64>,
    /// Keep the device's journal (restore a leftover one at start, record the
    /// prior programming before the first write).
    pub journal: bool,
    /// Export the metrics' values as gauges too (over the time since the previous
    /// scrape); recording rules are the better way.
    pub metric_gauges: bool,
    /// Refuse an entry this device cannot count instead of skipping it.
    pub strict: bool,
    /// The share of a block's counters the exporter leaves free that one user
    /// other than root may hold with its measurements (None: [`USER_SHARE`]).
    pub user_share: Option<f64>,
}

/// The default share of a block's free counters one user other than root may hold.
pub const USER_SHARE: f64 = 0.5;

/// What a device that went away and came back held before the exporter first
/// programmed it, and the journal that records it.
pub struct Inheritance {
    saved: Vec<Saved>,
    journal: Option<journal::Journal>,
}

impl Inheritance {
    /// The prior state at the device's new place: what `earlier` recorded, and
    /// for the counters of `plans` it did not record, what the device holds now
    /// (put back first, so `earlier` wins where both name a counter). The journal
    /// is replaced only when that adds anything.
    fn merged(
        self,
        device: &Device,
        plans: &[BlockPlan],
    ) -> Result<(Vec<Saved>, Option<journal::Journal>)> {
        let now = session::save(device, plans)?;
        let mut saved: Vec<Saved> = now
            .into_iter()
            .filter(|n| {
                !self
                    .saved
                    .iter()
                    .any(|e| e.block == n.block && e.same_counters(n))
            })
            .collect();
        let added = !saved.is_empty();
        saved.extend(self.saved);
        let journal = match (self.journal, added) {
            (Some(_), true) => Some(journal::write(device, &saved)?),
            (j, _) => j,
        };
        Ok((saved, journal))
    }
}

/// Each counter series' running total (events and cycles), by block and item.
pub type Totals = HashMap<(String, Item), u64>;

/// The exporter's state on one device.
pub struct Exporter<'d> {
    device: &'d Device,
    sampler: Sampler<'d>,
    saved: Vec<Saved>,
    set: MetricSet,
    metric_names: Vec<String>,
    params: HashMap<String, f64>,
    last_ns: u64,
    last_accs: Vec<Vec<Acc>>,
    values: Vec<MetricValue>,
    /// Each item's count between the last two scrapes, and that span in seconds.
    interval: (Vec<Count>, f64),
    /// Export the metrics as gauges (`metric_gauges`).
    gauges: bool,
    reprogrammed: u64,
    /// Things to log once: re-programmed counters by block.
    pub events: Vec<String>,
    /// The device failing to be read: which blocks failed at the last sweep, since
    /// when, and what was logged of it (one line when it starts, one when it ends,
    /// a count at most once a minute between).
    failing: Failing,
    journal: Option<journal::Journal>,
    /// Its own plans: the sampler's hold counters lent to clients too (`clients`).
    own: Vec<BlockPlan<'d>>,
    /// Measurements counted for clients beside the exporter's own (`clients`).
    clients: Vec<clients::Client<'d>>,
    /// The share of a block's free counters one user other than root may hold.
    user_share: f64,
    /// What each of its own items (by plan, by item) had exported when a reload
    /// replaced the exporter before this one, added to its count, so that a series
    /// that continues across a reload never goes backwards (empty: nothing carried).
    carried: Vec<Vec<u64>>,
    /// Counters of its all-at-once blocks lent to clients.
    lent: Vec<clients::Lent>,
    next_client: u64,
    /// How the device prints its event lists, read at the start: a label that
    /// stays as it is while the device cannot be read.
    list_format: &'static str,
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

/// A configuration checked against the device.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// Every spec to program: registers, events, what the metrics need.
    pub specs: Vec<String>,
    /// The metrics to evaluate (with `metric_gauges`).
    pub metrics: Vec<String>,
    /// Entries this device cannot count, and why (skipped unless `strict`).
    pub skipped: Vec<String>,
}

/// Checks a configuration against the device: the specs its events and metrics
/// need, and the metric names. An entry the device cannot count is skipped and
/// named in `skipped`, or refused with `strict`. Writes nothing.
pub fn check(device: &Device, config: &ExportConfig, set: &MetricSet) -> Result<Checked> {
    let mut out = Checked {
        specs: register_specs(device),
        ..Checked::default()
    };
    let (defaults, _) = default_set(device.generation());
    let events: Vec<String> = config
        .events
        .iter()
        .flat_map(|e| match e.trim() == DEFAULT {
            true => defaults.clone(),
            false => vec![e.clone()],
        })
        .collect();
    let mut skip = |entry: String, e: crate::error::Error| -> Result<()> {
        match config.strict {
            true => Err(e),
            false => {
                out.skipped.push(format!("{entry}: {e}"));
                Ok(())
            }
        }
    };
    let mut specs = Vec::new();
    for e in events {
        // `cycles` is the Arm cores' perf event in stat's grammar, never a block's.
        if let Ok((perf, _)) = crate::perf::split(&[], std::slice::from_ref(&e)) {
            if let Some(p) = perf.first() {
                let problem = format!(
                    "{} is a perf event of the Arm cores, which the exporter does not count (stat and top do); a block's count_clock counter is KIND/cycles/",
                    p.name
                );
                skip(
                    format!("events entry '{e}'"),
                    crate::error::Error::BadSpec { spec: e, problem },
                )?;
                continue;
            }
        }
        match prepare(device, &StatRequest::for_specs(vec![e.clone()])) {
            Ok(_) => specs.push(e),
            Err(err) => skip(format!("events entry '{e}'"), err)?,
        }
    }
    for name in &config.metrics {
        match metric_needs(device, set, name) {
            Ok((names, needs)) => {
                out.metrics.extend(names);
                specs.extend(needs);
            }
            Err(err) => skip(format!("metrics entry '{name}'"), err)?,
        }
    }
    out.specs.extend(specs);
    let mut seen = std::collections::HashSet::new();
    out.metrics.retain(|m| seen.insert(m.clone()));
    prepare(device, &StatRequest::for_specs(out.specs.clone()))?;
    Ok(out)
}

/// A config's metrics entry (a metric or group): the metrics it names and the
/// specs they need, refused when the device cannot count them or they need perf
/// events (the exporter counts the device only).
fn metric_needs(
    device: &Device,
    set: &MetricSet,
    name: &str,
) -> Result<(Vec<String>, Vec<String>)> {
    let chosen = set.select(&[name.to_string()])?;
    if let Some(m) = chosen.iter().find(|m| metrics::uses_perf(m)) {
        return Err(crate::error::Error::BadMetric {
            metric: m.def.name.clone(),
            source_file: m.source.clone(),
            problem: format!(
                "it needs perf events ({}), which the exporter does not count; `bfperf stat -M {}` does",
                metrics::perf_events_for(&[m]).join(", "),
                m.def.name
            ),
        });
    }
    let specs = metrics::specs_for(&chosen);
    prepare(device, &StatRequest::for_specs(specs.clone()))?;
    Ok((chosen.iter().map(|m| m.def.name.clone()).collect(), specs))
}

impl<'d> Exporter<'d> {
    /// Validates, records the device's configuration, programs and starts;
    /// `clock` gives the time in ns (the window opens as the counters start).
    pub fn start(
        device: &'d Device,
        config: &ExportConfig,
        set: MetricSet,
        clock: impl Fn() -> u64 + Send + Sync + 'd,
    ) -> Result<Exporter<'d>> {
        Exporter::start_after(device, config, set, clock, None)
    }

    /// As [`Exporter::start`], on a device that went away and came back (at its
    /// place or another `hwmonN`) while this exporter owned it: `earlier` is what
    /// the device held before the exporter first programmed it and the journal
    /// that records it ([`Exporter::forsake`]). The journal is never removed in
    /// between: it is replaced (atomically) only when this start adds blocks, so a
    /// kill at any instant leaves `bfperf restore` the device's prior state, never
    /// the exporter's own programming.
    pub fn start_after(
        device: &'d Device,
        config: &ExportConfig,
        set: MetricSet,
        clock: impl Fn() -> u64 + Send + Sync + 'd,
        earlier: Option<Inheritance>,
    ) -> Result<Exporter<'d>> {
        let checked = check(device, config, &set)?;
        let metric_names = checked.metrics;
        let (plans, _) = prepare(device, &StatRequest::for_specs(checked.specs))?;
        let mut events = Vec::new();
        let (saved, journal) = match earlier {
            Some(earlier) => earlier.merged(device, &plans)?,
            None => {
                // A writer that died left its programming: put the device back
                // first, so that what is recorded below is the real prior state.
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
                (saved, journal)
            }
        };
        // The window opens when the counters start, not when the exporter did.
        let mut now = 0;
        let clock: crate::measure::sampler::Stamp<'d> = std::sync::Arc::new(clock);
        let masks = session::clock_masks(&saved);
        let started = Sampler::open(device, plans, &masks, clock.clone()).and_then(|mut s| {
            s.start(clock())?;
            // Baselines read again once everything is programmed and counting.
            now = clock();
            s.rebase(now)?;
            Ok(s)
        });
        let sampler = match started {
            Ok(s) => s,
            Err(e) => {
                // Nothing of this start stays on the device, nor a journal of it.
                return Err(match journal::put_back(device, &saved, journal) {
                    Ok(()) => e,
                    Err(r) => crate::error::with_context(e, &r.to_string()),
                });
            }
        };
        let mut e = Exporter {
            device,
            own: sampler.plans.clone(),
            sampler,
            saved,
            set,
            metric_names,
            params: config.params.clone(),
            last_ns: now,
            last_accs: Vec::new(),
            values: Vec::new(),
            interval: (Vec::new(), 0.0),
            gauges: config.metric_gauges,
            reprogrammed: 0,
            events,
            journal,
            clients: Vec::new(),
            failing: Failing::default(),
            carried: Vec::new(),
            user_share: config.user_share.unwrap_or(USER_SHARE),
            lent: Vec::new(),
            next_client: 0,
            list_format: event_list_format(device),
        };
        // The first scrape's metrics cover the time since the start.
        e.last_accs = e.own_totals();
        Ok(e)
    }

    /// One sweep at `now`: reads every value; the sampler programs again what
    /// another program changed, and the exporter counts and logs it. The exporter
    /// sweeps at least every second, so that windows never wrap, whatever the
    /// scrape interval.
    pub fn sweep(&mut self, now: u64) -> Result<()> {
        self.failing.sweep_starts();
        self.sampler.tick(now)?;
        self.log_detections();
        if let Some(line) = self.failing.sweep_ends(now) {
            self.events.push(line);
        }
        self.forget_returned()
    }

    /// Every counter series' running total as exported now (events and cycles, by
    /// block and item): what a reload carries over ([`Exporter::carry`]).
    pub fn running_totals(&self) -> Totals {
        let totals = self.own_totals();
        let mut out = HashMap::new();
        for (pi, (p, accs)) in self.own.iter().zip(&totals).enumerate() {
            for (i, (item, acc)) in p.items.iter().zip(accs).enumerate() {
                if matches!(item, Item::Event { .. } | Item::Cycles) {
                    let key = (p.block.name.clone(), item.clone());
                    out.insert(key, self.running(pi, i, acc));
                }
            }
        }
        out
    }

    /// Continues the series of `totals` (an exporter's before a reload) that this
    /// one exports too: their counts start from those totals, not from 0.
    pub fn carry(&mut self, totals: Totals) {
        self.carried = self
            .own
            .iter()
            .map(|p| {
                let of = |item: &Item| totals.get(&(p.block.name.clone(), item.clone()));
                p.items
                    .iter()
                    .map(|item| of(item).copied().unwrap_or(0))
                    .collect()
            })
            .collect();
    }

    /// Whether the last sweep read every block: false while the device fails (a
    /// driver unloaded, a firmware reset, a tree gone), when `bfperf_up` is 0 and
    /// the failing blocks' series are left out of the exposition.
    pub fn readable(&self) -> bool {
        self.failing.now.is_empty()
    }

    /// What its own items have counted so far, by block (not the counters lent).
    fn own_totals(&self) -> Vec<Vec<Acc>> {
        let mut totals = self.sampler.totals();
        for (accs, p) in totals.iter_mut().zip(&self.own) {
            accs.truncate(p.items.len());
        }
        totals
    }

    /// A check between sweeps (every 100 ms): another program's
    /// write is found within it, and the window it spoiled is left out of the
    /// counts, so that `rate()` over it stays right.
    pub fn probe(&mut self, now: u64) {
        self.sampler.probe(now);
        self.log_detections();
    }

    fn log_detections(&mut self) {
        for d in self.sampler.take_log() {
            // The device failing is logged when it starts and ends, not each sweep.
            if let Foreign::Fault { .. } = d.why {
                self.failing.failed(&d.block, d.why.describe());
                continue;
            }
            let then = match d.why.is_write() {
                true => {
                    self.reprogrammed += d.items.len() as u64;
                    "programming it again"
                }
                false => "sampling it again at the next sweep",
            };
            self.events.push(format!(
                "warning: {} of {}: {}; {then}",
                d.items.join(", "),
                d.block,
                d.why.describe()
            ));
        }
        let failures = self.sampler.take_put_back_failures();
        self.events.extend(failures);
    }

    /// Sweeps, then computes the metrics over the time since the previous scrape.
    pub fn scrape(&mut self, now: u64) -> Result<()> {
        self.sweep(now)?;
        let totals = self.own_totals();
        let span_s = now.saturating_sub(self.last_ns) as f64 / 1e9;
        if span_s > 0.0 {
            // Counts over the span as stat counts an interval: each at the rate it
            // counted at over its own bounds, with its coverage; levels as they are
            // now; invalid when another program touched it since the last scrape.
            let since = Acc::all_since(&totals, &self.last_accs);
            let delta = counts(&self.own, &since, now.saturating_sub(self.last_ns));
            let chosen: Vec<&metrics::Metric> = self
                .metric_names
                .iter()
                .filter_map(|n| self.set.get(n))
                .collect();
            self.values = metric_values(&self.set, &chosen, &delta, span_s, &self.params, true);
            self.interval = (delta, span_s);
        }
        self.last_accs = totals;
        self.last_ns = now;
        Ok(())
    }

    /// The exposition in the OpenMetrics text format.
    pub fn openmetrics(&self, up: bool, scrape_s: f64) -> String {
        self.exposition(up, scrape_s, TextFormat::OpenMetrics)
    }

    /// The exposition in `format`, written directly: families sorted by name,
    /// series by their labels (blocks in natural order), the same every scrape.
    pub fn exposition(&self, up: bool, scrape_s: f64, format: TextFormat) -> String {
        text::render(&self.families(up, scrape_s), format)
    }

    /// Every family of the exposition and its samples, as a scrape sees them (and
    /// remote write sends them): `up` and the last sweep's seconds with the rest.
    pub fn families(&self, up: bool, scrape_s: f64) -> Vec<Family> {
        let mut fams: Vec<Family> = Vec::with_capacity(16);
        let location = self.device.location();
        let one =
            |name: &'static str, help: &'static str, counter, labels: Labels, v: f64| Family {
                name: format!("bfperf_{name}"),
                help: help.into(),
                counter,
                samples: vec![(labels, v)],
            };
        fams.push(one(
            "up",
            "1 when the last sweep read every value",
            false,
            vec![],
            f64::from(u8::from(up && self.readable())),
        ));
        fams.push(one(
            "scrape_duration_seconds",
            "Seconds the last sweep took",
            false,
            vec![],
            scrape_s,
        ));
        fams.push(one(
            "device_info",
            "The device: generation, location and event_list format",
            false,
            vec![
                ("generation", self.device.generation().label().into()),
                ("device", location),
                ("event_list_format", self.list_format.into()),
            ],
            1.0,
        ));
        fams.push(one(
            "build_info",
            "bfperf's version",
            false,
            vec![("version", env!("CARGO_PKG_VERSION").into())],
            1.0,
        ));
        fams.push(one(
            "reprogrammed",
            "Counters found re-programmed by another program and programmed again",
            true,
            vec![],
            self.reprogrammed as f64,
        ));
        self.raw_families(&mut fams);
        self.parameter_family(&mut fams);
        if self.gauges {
            self.metric_families(&mut fams);
        }
        fams
    }

    /// The raw series: events, cycles, registers by unit and role, PLL frequencies.
    fn raw_families(&self, fams: &mut Vec<Family>) {
        let totals = self.own_totals();
        let plans = &self.own;
        let first = fams.len();
        fams.extend(RAW_FAMILIES.iter().map(|(name, help, counter)| Family {
            name: format!("bfperf_{name}"),
            help: (*help).into(),
            counter: *counter,
            samples: Vec::new(),
        }));
        // A block that failed at the last sweep has no current value: left out (so
        // Prometheus marks it stale), as node_exporter leaves a failed collector out.
        let readable =
            |(_, (p, _)): &(usize, (&BlockPlan, _))| !self.failing.now.contains(&p.block.name);
        for (pi, (p, accs)) in plans.iter().zip(&totals).enumerate().filter(readable) {
            let def = p.block.def();
            let mut counts: HashMap<&str, u64> = HashMap::new();
            let mut windows: HashMap<&str, u64> = HashMap::new();
            for (i, (item, acc)) in p.items.iter().zip(accs).enumerate() {
                // A multiplexed event before its first turn has no value yet.
                if acc.active_ns == 0 && !acc.level {
                    continue;
                }
                let block = || -> Labels {
                    vec![
                        ("block", p.block.name.clone()),
                        ("kind", p.block.kind.as_str().into()),
                    ]
                };
                let (family, mut labels, value) = match item {
                    Item::Event { name, .. } => {
                        let mut l = block();
                        l.push(("counter", counter_of(p, i)));
                        l.push(("event", name.clone()));
                        (Raw::Events, l, self.running(pi, i, acc))
                    }
                    Item::Cycles => {
                        let mut l = block();
                        l.push(("counter", counter_of(p, i)));
                        (Raw::Cycles, l, self.running(pi, i, acc))
                    }
                    Item::Register { name } => {
                        if let Some((pll, is_count)) = def.frequencies.and_then(|f| f.pll_of(name))
                        {
                            let to = if is_count { &mut counts } else { &mut windows };
                            to.insert(pll, acc.total);
                            continue;
                        }
                        let family = match def.role(name) {
                            Role::Count => match crate::kinds::register_unit(name) {
                                "bytes" => Raw::Bytes,
                                "packets" => Raw::Packets,
                                _ => Raw::RegisterEvents,
                            },
                            Role::Control => Raw::Controls,
                            Role::Level => Raw::Levels,
                        };
                        (family, block(), acc.total)
                    }
                };
                if let Item::Register { name } = item {
                    labels.push(("register", name.trim_end().to_string()));
                }
                fams[first + family as usize]
                    .samples
                    .push((labels, value as f64));
            }
            if let Some(f) = def.frequencies {
                fams[first + Raw::Hertz as usize]
                    .samples
                    .extend(pll_hertz(p, &f, &counts, &windows));
            }
        }
    }

    /// The running total of item `i` of its own plan `pi`: its estimate, from what
    /// a reload carried.
    fn running(&self, pi: usize, i: usize, acc: &Acc) -> u64 {
        let carried = self.carried.get(pi).and_then(|c| c.get(i)).copied();
        carried.unwrap_or(0).saturating_add(acc.estimate)
    }

    /// The parameters metric formulas use (the PCIe link's capacity).
    fn parameter_family(&self, fams: &mut Vec<Family>) {
        let mut samples: Vec<(Labels, f64)> = self
            .params
            .iter()
            .map(|(k, v)| (vec![("name", k.clone())], *v))
            .collect();
        samples.sort_by(|a, b| a.0.cmp(&b.0));
        fams.push(Family {
            name: "bfperf_parameter".into(),
            help: "A value given in the config that metric formulas use (pcie_link_bytes_per_s: the PCIe link's bytes per second)".into(),
            counter: false,
            samples,
        });
    }

    /// Metric gauges (only with `metric_gauges`): per block, in base units, over
    /// the time since the previous scrape.
    fn metric_families(&self, fams: &mut Vec<Family>) {
        for v in self.values.iter().filter(|v| !v.of_kind) {
            let Some(m) = self.set.get(&v.metric) else {
                continue;
            };
            let (base, factor) = crate::export::prom::base_name(m);
            let name = format!("bfperf_metric_{base}");
            let x = match v.value {
                Some(x) => x / m.scale * factor,
                None => continue,
            };
            let sample = (
                vec![("block", v.block.clone()), ("kind", v.kind.as_str().into())],
                x,
            );
            match fams.iter_mut().find(|f| f.name == name) {
                Some(f) => f.samples.push(sample),
                None => fams.push(Family {
                    name,
                    help: format!("{} (since the previous scrape)", v.description),
                    counter: false,
                    samples: vec![sample],
                }),
            }
        }
    }

    /// The metrics' values over the time between the last two scrapes, per block and
    /// per kind (`of_kind`).
    pub fn values(&self) -> &[MetricValue] {
        &self.values
    }

    /// Each item's count between the last two scrapes (estimates where
    /// multiplexed), and that span in seconds.
    pub fn interval_counts(&self) -> (&[Count], f64) {
        (&self.interval.0, self.interval.1)
    }

    /// The blocks it reads (and programs, when they count events).
    pub fn blocks(&self) -> Vec<&str> {
        self.own.iter().map(|p| p.block.name.as_str()).collect()
    }

    /// The metric set the values come from.
    pub fn metric_set(&self) -> &MetricSet {
        &self.set
    }

    /// The device went away and came back (a driver loaded again, at its place or
    /// another `hwmonN`): nothing is written to the place it was lost at, which
    /// may hold something else now. Returns what the device held before the
    /// exporter and its clients programmed it (in the journal's order) with the
    /// journal that records it, for [`Exporter::start_after`].
    pub fn forsake(self) -> Inheritance {
        Inheritance {
            saved: self.recorded(),
            journal: self.journal,
        }
    }

    /// Takes up `config` in place of this exporter's: a block whose plan stays the
    /// same keeps counting, untouched (neither put back nor programmed again, its
    /// series going on without a gap); the others are put back and programmed for
    /// `config`, their series that continue keeping their totals. The journal
    /// records, before anything new is programmed, the prior state of every block
    /// programmed then. On failure the device is put back as it was before the
    /// exporter and the error comes with the running totals, for the old
    /// configuration to start again from.
    #[allow(clippy::result_large_err)]
    pub fn reload(
        mut self,
        config: &ExportConfig,
        set: MetricSet,
    ) -> std::result::Result<Exporter<'d>, (Error, Totals)> {
        let totals = self.running_totals();
        let device = self.device;
        // Lent counters belong to clients, and a reload ends them first; with any
        // left, the whole device starts again.
        let prepared = check(device, config, &set).and_then(|c| {
            let (plans, _) = prepare(device, &StatRequest::for_specs(c.specs))?;
            Ok((c.metrics, plans))
        });
        let (metric_names, plans) = match prepared {
            Ok(p) if self.lent.is_empty() && self.clients.is_empty() => p,
            Ok(_) | Err(_) => {
                let e = prepared.err().unwrap_or_else(|| Error::BadConfig {
                    path: "(reload)".into(),
                    problem: "counters are still lent to clients".into(),
                });
                return Err((self.undo(e), totals));
            }
        };
        let kept: Vec<Option<usize>> = plans
            .iter()
            .map(|p| {
                self.own.iter().position(|o| {
                    o.block.name == p.block.name && o.items == p.items && o.groups == p.groups
                })
            })
            .collect();
        match self.take_up(config, &plans, &kept) {
            Ok(saved) => {
                Ok(self.continued(config, set, metric_names, plans, &kept, saved, &totals))
            }
            Err(e) => Err((self.undo(e), totals)),
        }
    }

    /// A reload that failed with `e`: the device put back as it was before the
    /// exporter (what could not be, said with `e`).
    fn undo(self, e: Error) -> Error {
        match self.stop() {
            Ok(()) => e,
            Err(r) => crate::error::with_context(e, &r.to_string()),
        }
    }

    /// The device's side of a reload: the blocks not `kept` put back, the prior
    /// state of the new ones recorded (in the journal too), and the sampler taking
    /// the kept blocks over and starting the others. Returns the prior state of
    /// every block programmed now.
    fn take_up(
        &mut self,
        config: &ExportConfig,
        plans: &[BlockPlan<'d>],
        kept: &[Option<usize>],
    ) -> Result<Vec<Saved>> {
        let device = self.device;
        let kept_blocks: Vec<&str> = kept
            .iter()
            .flatten()
            .map(|&j| self.own[j].block.name.as_str())
            .collect();
        let (stay, go): (Vec<Saved>, Vec<Saved>) = self
            .saved
            .iter()
            .cloned()
            .partition(|s| kept_blocks.contains(&s.block.as_str()));
        device.fs().still_here().map_err(|source| Error::File {
            what: "cannot program the device at",
            path: device.location().into(),
            source,
        })?;
        session::restore(device, &go)?;
        // What was put back is off the device's programming from here on.
        self.saved = stay.clone();
        let fresh: Vec<BlockPlan<'d>> = plans
            .iter()
            .zip(kept)
            .filter(|(_, k)| k.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        let mut saved = stay;
        saved.extend(session::save(device, &fresh)?);
        self.journal = match (self.journal.take(), config.journal) {
            (_, true) => Some(journal::write(device, &saved)?),
            (Some(j), false) => {
                j.remove()?;
                None
            }
            (None, false) => None,
        };
        self.saved = saved.clone();
        let masks = session::clock_masks(&saved);
        let empty = Sampler::open(device, Vec::new(), &masks, self.sampler.stamp())?;
        let old = std::mem::replace(&mut self.sampler, empty);
        let mut sampler = Sampler::open_keeping(device, plans.to_vec(), &masks, old, kept)?;
        let now = (sampler.stamp())();
        sampler.start_others(now, kept)?;
        self.sampler = sampler;
        Ok(saved)
    }

    /// The exporter after a reload's [`Exporter::take_up`]: the kept blocks'
    /// series go on with what they carried, the others carry `totals`.
    #[allow(clippy::too_many_arguments)]
    fn continued(
        mut self,
        config: &ExportConfig,
        set: MetricSet,
        metric_names: Vec<String>,
        plans: Vec<BlockPlan<'d>>,
        kept: &[Option<usize>],
        saved: Vec<Saved>,
        totals: &Totals,
    ) -> Exporter<'d> {
        let carried: Vec<Vec<u64>> = plans
            .iter()
            .zip(kept)
            .map(|(p, k)| match k {
                Some(j) => self
                    .carried
                    .get(*j)
                    .cloned()
                    .unwrap_or_else(|| vec![0; p.items.len()]),
                None => p
                    .items
                    .iter()
                    .map(|item| {
                        let key = (p.block.name.clone(), item.clone());
                        totals.get(&key).copied().unwrap_or(0)
                    })
                    .collect(),
            })
            .collect();
        self.own = plans;
        self.saved = saved;
        self.carried = carried;
        self.set = set;
        self.metric_names = metric_names;
        self.params = config.params.clone();
        self.gauges = config.metric_gauges;
        self.user_share = config.user_share.unwrap_or(USER_SHARE);
        self.values = Vec::new();
        self.interval = (Vec::new(), 0.0);
        self.last_ns = (self.sampler.stamp())();
        self.last_accs = self.own_totals();
        self
    }

    /// Puts the device back as it was, and drops the journal.
    pub fn stop(mut self) -> Result<()> {
        let clients = self.release_all();
        // Lent counters not yet put back (the block's last window failed): with
        // the exporter's own, their events first.
        let mut saved: Vec<Saved> = self.lent.iter().map(|l| l.saved.clone()).collect();
        saved.extend(self.saved.iter().cloned());
        let own = journal::put_back(self.device, &saved, self.journal);
        clients.and(own)
    }
}

fn counter_of(p: &BlockPlan, item: usize) -> String {
    match p.counter_of(item) {
        Some(c) => c.to_string(),
        None if p.multiplexed() => "multiplexed".into(),
        None => String::new(),
    }
}

/// `0x45: NAME` (upstream) or `45: NAME` (NVIDIA's out-of-tree driver).
pub(crate) fn event_list_format(device: &Device) -> &'static str {
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

/// A series' labels, in order.
pub type Labels = Vec<(&'static str, String)>;

/// A family of the exposition and its samples: `name` without a counter's
/// `_total`, which the encoders add.
#[derive(Debug, Clone)]
pub struct Family {
    /// The name without its counter's suffix (`bfperf_events`, `bfperf_up`,
    /// `process_open_fds`).
    pub name: String,
    /// Its HELP.
    pub help: String,
    /// A counter (its series end in `_total`), or a gauge.
    pub counter: bool,
    /// Each series' labels and value.
    pub samples: Vec<(Labels, f64)>,
}

/// The families of raw values, in the order of [`RAW_FAMILIES`].
#[derive(Debug, Clone, Copy)]
enum Raw {
    Events,
    Cycles,
    Bytes,
    Packets,
    RegisterEvents,
    Controls,
    Levels,
    Hertz,
}

/// Name, HELP and whether it is a counter, for each [`Raw`].
const RAW_FAMILIES: &[(&str, &str, bool)] = &[
    (
        "events",
        "Events counted by a counter bfperf programmed",
        true,
    ),
    (
        "cycles",
        "Clock cycles counted by a count_clock counter",
        true,
    ),
    (
        "register_bytes",
        "Bytes counted by a statistics register (pcie)",
        true,
    ),
    (
        "register_packets",
        "Packets counted by a statistics register (pcie)",
        true,
    ),
    (
        "register_events",
        "Events counted by a statistics register (ecc)",
        true,
    ),
    (
        "register_value",
        "A control register's value (error injection, switches)",
        false,
    ),
    ("level", "A measured level read from a register", false),
    (
        "pll_frequency_hertz",
        "A PLL's frequency, from its clock monitor (clock_measure)",
        false,
    ),
];

/// Each PLL's frequency of block `p`, from its count and window registers.
fn pll_hertz(
    p: &BlockPlan,
    f: &crate::kinds::Frequencies,
    counts: &HashMap<&str, u64>,
    windows: &HashMap<&str, u64>,
) -> Vec<(Labels, f64)> {
    let mut out = Vec::new();
    for (pll, count) in counts {
        let Some(hz) = windows.get(pll).and_then(|w| f.hertz(*count, *w)) else {
            continue;
        };
        let labels = vec![
            ("block", p.block.name.clone()),
            ("kind", p.block.kind.as_str().into()),
            ("pll", (*pll).to_string()),
        ];
        out.push((labels, hz));
    }
    out
}

/// The device failing to be read, across sweeps, for the log and for `up`.
#[derive(Debug, Default)]
struct Failing {
    /// Blocks that failed in the sweep under way.
    this: std::collections::BTreeSet<String>,
    /// Blocks that failed at the last sweep (empty: it read every block).
    now: std::collections::BTreeSet<String>,
    /// What the first failure said.
    why: String,
    /// Since when it fails, ns, and when its count was last logged.
    since: Option<u64>,
    logged: u64,
    /// Sweeps failed since it started, and since the last count logged.
    sweeps: u64,
    unlogged: u64,
}

/// The most often a failure that goes on is counted in the log, ns.
const FAILING_EVERY_NS: u64 = 60_000_000_000;

impl Failing {
    fn sweep_starts(&mut self) {
        self.this.clear();
    }

    fn failed(&mut self, block: &str, why: String) {
        if self.this.is_empty() {
            self.why = why;
        }
        self.this.insert(block.to_string());
    }

    /// The sweep is over: the line to log, if any (the failure starts, goes on for
    /// another minute, or ends).
    fn sweep_ends(&mut self, now: u64) -> Option<String> {
        self.now = std::mem::take(&mut self.this);
        let blocks = || {
            let names: Vec<&str> = self.now.iter().map(String::as_str).take(4).collect();
            let more = self.now.len().saturating_sub(names.len());
            match more {
                0 => names.join(", "),
                n => format!("{} and {n} more", names.join(", ")),
            }
        };
        match (self.since, self.now.is_empty()) {
            (None, true) => None,
            (None, false) => {
                self.since = Some(now);
                self.logged = now;
                (self.sweeps, self.unlogged) = (1, 0);
                Some(format!(
                    "warning: the device cannot be read ({}) at {}: bfperf_up is 0 and its series are left out until it reads again; sweeping on",
                    self.why,
                    blocks()
                ))
            }
            (Some(_), false) => {
                self.sweeps += 1;
                self.unlogged += 1;
                if now.saturating_sub(self.logged) < FAILING_EVERY_NS {
                    return None;
                }
                self.logged = now;
                let n = std::mem::take(&mut self.unlogged);
                Some(format!(
                    "warning: the device still cannot be read ({}): {n} more sweeps failed, at {}",
                    self.why,
                    blocks()
                ))
            }
            (Some(since), true) => {
                self.since = None;
                Some(format!(
                    "the device reads again, after {:.1} s and {} failed sweeps",
                    now.saturating_sub(since) as f64 / 1e9,
                    self.sweeps
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_device_is_logged_when_it_starts_once_a_minute_and_when_it_ends() {
        let mut f = Failing::default();
        let s = 1_000_000_000u64;
        let sweep = |f: &mut Failing, at: u64, failing: &[&str]| {
            f.sweep_starts();
            for b in failing {
                f.failed(b, "ENOTCONN".into());
            }
            f.sweep_ends(at * s)
        };
        assert_eq!(sweep(&mut f, 0, &[]), None);
        let first = sweep(&mut f, 1, &["llt0", "mss0"]).unwrap();
        assert!(
            first.contains("cannot be read (ENOTCONN) at llt0, mss0"),
            "{first}"
        );
        let quiet: Vec<_> = (2..61)
            .filter_map(|t| sweep(&mut f, t, &["llt0"]))
            .collect();
        assert!(quiet.is_empty(), "{quiet:?}");
        let count = sweep(&mut f, 61, &["llt0"]).unwrap();
        assert!(count.contains("60 more sweeps failed"), "{count}");
        let back = sweep(&mut f, 70, &[]).unwrap();
        assert!(back.contains("after 69.0 s and 61 failed sweeps"), "{back}");
        assert_eq!(sweep(&mut f, 71, &[]), None);
    }
}
