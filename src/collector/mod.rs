//! The exporter's core, its collector: it owns the counters for its whole life
//! (programmed at start, re-asserted when someone else re-programs them, restored at
//! the end), keeps 64-bit running totals that never go backwards (across 32-bit wraps
//! and window resets), and fills the exposition's families at each scrape, which
//! [`crate::exposition`] writes in the OpenMetrics text format or Prometheus' text
//! format 0.0.4 (no registry is rebuilt per scrape). What it counts ([`Counting`]) is
//! checked once, through the composer stat and top use, into a [`Checked`] its start
//! takes. The program around it is `bfperf-exporter`; `top` runs it live too.

mod clients;
mod failing;
mod families;
mod reload;

pub use crate::exposition::{render, Family, Labels, TextFormat};
use failing::Failing;

use std::collections::HashMap;

use crate::block::{BlockKind, Mechanism};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kinds::Role;
use crate::measure::compose::{compose, Composed, Perf, Rules};
use crate::measure::defaults::{default_set, DEFAULT};
use crate::measure::owner::journal;
use crate::measure::plan::BlockPlan;
use crate::measure::sampler::{Acc, Foreign, Sampler};
use crate::measure::session::{self, Saved};
use crate::measure::{counts, metric_values, prepare, Count, StatRequest};
use crate::metrics::{self, MetricSet, MetricValue};
use crate::spec::Item;

/// What the exporter counts (the counting half of its config file; the serving half
/// is the program's): `stat -e` specs and `stat -M` metric names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counting {
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
pub struct Collector<'d> {
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
    /// Each of its own items' family and labels (by plan, by item), made with the
    /// plans and shared by every scrape.
    series: Vec<Vec<Option<(families::Raw, Labels)>>>,
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
    /// When the request the next exposition answers arrived (the sampler's clock,
    /// ns); None for a push or a textfile.
    asked: Option<u64>,
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

/// A configuration checked against the device: what [`Collector::start_after`]
/// takes, so that nothing is checked twice.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// Every spec to program: registers, events, what the metrics need.
    pub specs: Vec<String>,
    /// The metrics to evaluate (with `metric_gauges`).
    pub metrics: Vec<String>,
    /// Entries this device cannot count, and why (skipped unless `strict`).
    pub skipped: Vec<String>,
}

impl Checked {
    /// What the exporter counts of `composed`: its specs after every register of
    /// the device.
    pub(crate) fn of(device: &Device, composed: Composed) -> Checked {
        let mut specs = register_specs(device);
        specs.extend(composed.work.specs);
        Checked {
            specs,
            metrics: composed.metrics,
            skipped: composed.skipped,
        }
    }
}

/// Checks a configuration against the device (through the composer stat and top
/// use): the specs its events and metrics need, and the metric names. An entry the
/// device cannot count, or one that needs perf events, is skipped and named in
/// `skipped`, or refused with `strict`. Writes nothing.
pub fn check(device: &Device, config: &Counting, set: &MetricSet) -> Result<Checked> {
    let (defaults, _) = default_set(device.generation());
    let events: Vec<String> = config
        .events
        .iter()
        .flat_map(|e| match e.trim() == DEFAULT {
            true => defaults.clone(),
            false => vec![e.clone()],
        })
        .collect();
    let rules = Rules {
        perf: Perf::Refuse("the exporter"),
        skip: !config.strict,
        whole: true,
    };
    let composed = compose(device, set, (&events, &config.metrics), rules)?;
    Ok(Checked::of(device, composed))
}

impl<'d> Collector<'d> {
    /// Validates, records the device's configuration, programs and starts;
    /// `clock` gives the time in ns (the window opens as the counters start).
    pub fn start(
        device: &'d Device,
        config: &Counting,
        set: MetricSet,
        clock: impl Fn() -> u64 + Send + Sync + 'd,
    ) -> Result<Collector<'d>> {
        let checked = check(device, config, &set)?;
        Collector::start_after(device, config, checked, set, clock, None)
    }

    /// As [`Collector::start`], with `config` already [`check`]ed against `device`
    /// (checked once, before anything is written); and on a device that went away
    /// and came back (at its place or another `hwmonN`) while this exporter owned
    /// it, `earlier` is what
    /// the device held before the exporter first programmed it and the journal
    /// that records it ([`Collector::forsake`]). The journal is never removed in
    /// between: it is replaced (atomically) only when this start adds blocks, so a
    /// kill at any instant leaves `bfperf restore` the device's prior state, never
    /// the exporter's own programming.
    pub fn start_after(
        device: &'d Device,
        config: &Counting,
        checked: Checked,
        set: MetricSet,
        clock: impl Fn() -> u64 + Send + Sync + 'd,
        earlier: Option<Inheritance>,
    ) -> Result<Collector<'d>> {
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
        let mut e = Collector {
            device,
            own: sampler.plans.clone(),
            series: families::series_of(&sampler.plans),
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
            asked: None,
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
    /// block and item): what a reload carries over ([`Collector::carry`]).
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

    /// Says when the request the next exposition answers arrived (the sampler's
    /// clock, ns): the exposition's `bfperf_scrape_lag_seconds` is counted from it.
    pub fn asked_at(&mut self, ns: Option<u64>) {
        self.asked = ns;
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
    /// counts, its span estimated from the item's next window, so that `rate()`
    /// over it stays right.
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
    /// journal that records it, for [`Collector::start_after`].
    pub fn forsake(self) -> Inheritance {
        Inheritance {
            saved: self.recorded(),
            journal: self.journal,
        }
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
