//! The exposition's families: each series' name, HELP, kind, labels and value,
//! from the exporter's counts and metrics (the text and OpenMetrics encoders are
//! `text.rs`; the rules and PromQL names `prom.rs`).

use super::*;

impl Collector<'_> {
    /// The exposition in the OpenMetrics text format.
    pub fn openmetrics(&self, up: bool, scrape_s: f64) -> String {
        self.exposition(up, scrape_s, TextFormat::OpenMetrics)
    }

    /// The exposition in `format`, written directly: families sorted by name,
    /// series by their labels (blocks in natural order), the same every scrape.
    pub fn exposition(&self, up: bool, scrape_s: f64, format: TextFormat) -> String {
        render(&self.families(up, scrape_s), format)
    }

    /// Every family of the exposition and its samples, as a scrape sees them (and
    /// remote write sends them): `up` and the last sweep's seconds with the rest.
    pub fn families(&self, up: bool, scrape_s: f64) -> Vec<Family> {
        let mut fams: Vec<Family> = Vec::with_capacity(16);
        let location = self.device.location();
        let one =
            |name: &'static str, help: &'static str, counter, labels: LabelList, v: f64| Family {
                name: format!("bfperf_{name}"),
                help: help.into(),
                counter,
                samples: vec![(labels.into(), v)],
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
        // How late the values are against the time Prometheus stamps them with
        // (the request's): the lag to the sweep's first read, and its reads' span.
        let (first, last) = self.sampler.last_pass();
        let lag = self.asked.map_or(0, |a| first.saturating_sub(a));
        fams.push(one(
            "scrape_lag_seconds",
            "Seconds from the scrape's request to the sweep's first read (0 for a push or a textfile): how much later than their timestamp the values were read",
            false,
            vec![],
            lag as f64 / 1e9,
        ));
        fams.push(one(
            "scrape_read_seconds",
            "Seconds from the sweep's first read to its last: a rate over a window W is off by at most the change of lag plus this between its ends, over W",
            false,
            vec![],
            last.saturating_sub(first) as f64 / 1e9,
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
                // A multiplexed event before its first turn has no value yet; one
                // whose count a reload carried has that count (its series goes on
                // through the first sweep after the reload, never left out).
                if acc.active_ns == 0 && !acc.level && self.carried(pi, i) == 0 {
                    continue;
                }
                let Some(Some((family, labels))) = self.series.get(pi).and_then(|s| s.get(i))
                else {
                    // A PLL's count or window: its frequency is the series.
                    if let Item::Register { name } = item {
                        if let Some((pll, is_count)) = def.frequencies.and_then(|f| f.pll_of(name))
                        {
                            let to = if is_count { &mut counts } else { &mut windows };
                            to.insert(pll, acc.total);
                        }
                    }
                    continue;
                };
                let value = match item {
                    Item::Register { .. } => acc.total,
                    _ => self.running(pi, i, acc),
                };
                fams[first + *family as usize]
                    .samples
                    .push((labels.clone(), value as f64));
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
    pub(super) fn running(&self, pi: usize, i: usize, acc: &Acc) -> u64 {
        self.carried(pi, i).saturating_add(acc.estimate)
    }

    /// What a reload carried of item `i` of its own plan `pi` (0: nothing).
    fn carried(&self, pi: usize, i: usize) -> u64 {
        self.carried
            .get(pi)
            .and_then(|c| c.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// The parameters metric formulas use (the PCIe link's capacity).
    fn parameter_family(&self, fams: &mut Vec<Family>) {
        let mut samples: Vec<(Labels, f64)> = self
            .params
            .iter()
            .map(|(k, v)| (vec![("name", k.clone())].into(), *v))
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
            let (base, factor) = crate::exposition::prom::base_name(m);
            let name = format!("bfperf_metric_{base}");
            let x = match v.value {
                Some(x) => x / m.scale * factor,
                None => continue,
            };
            let labels: LabelList =
                vec![("block", v.block.clone()), ("kind", v.kind.as_str().into())];
            let sample = (labels.into(), x);
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
}

/// A series' labels as they are built, before they are shared.
type LabelList = Vec<(&'static str, String)>;

/// Each item's family and labels, for each of the plans (None: a PLL's count or
/// window, whose series is its frequency): made once per plan, shared by every
/// scrape.
pub(super) fn series_of(plans: &[BlockPlan]) -> Vec<Vec<Option<(Raw, Labels)>>> {
    plans
        .iter()
        .map(|p| (0..p.items.len()).map(|i| item_series(p, i)).collect())
        .collect()
}

fn item_series(p: &BlockPlan, i: usize) -> Option<(Raw, Labels)> {
    let def = p.block.def();
    let mut l: LabelList = Vec::with_capacity(4);
    l.push(("block", p.block.name.clone()));
    l.push(("kind", p.block.kind.as_str().into()));
    let family = match &p.items[i] {
        Item::Event { name, .. } => {
            l.push(("counter", counter_of(p, i)));
            l.push(("event", name.clone()));
            Raw::Events
        }
        Item::Cycles => {
            l.push(("counter", counter_of(p, i)));
            Raw::Cycles
        }
        Item::Register { name } => {
            if def.frequencies.and_then(|f| f.pll_of(name)).is_some() {
                return None;
            }
            l.push(("register", name.trim_end().to_string()));
            match def.role(name) {
                Role::Count => match crate::kinds::register_unit(name) {
                    "bytes" => Raw::Bytes,
                    "packets" => Raw::Packets,
                    _ => Raw::RegisterEvents,
                },
                Role::Control => Raw::Controls,
                Role::Level => Raw::Levels,
            }
        }
    };
    Some((family, l.into()))
}

fn counter_of(p: &BlockPlan, item: usize) -> String {
    match p.counter_of(item) {
        Some(c) => c.to_string(),
        None if p.multiplexed() => "multiplexed".into(),
        None => String::new(),
    }
}

/// The families of raw values, in the order of [`RAW_FAMILIES`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Raw {
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
        out.push((labels.into(), hz));
    }
    out
}
