//! Where `top`'s numbers come from: its own measurement (it may write the device),
//! the exporter counting for it (a client), or a passive watch of what is already
//! programmed; and putting the device back on the way out.

use super::cores;
use crate::collector::{self, Collector, Counting};
use crate::device::values::monotonic_ns;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::front::args::Global;
use crate::front::setup::{lock_device, owner_client};
use crate::measure::owner::protocol::Shared;
use crate::measure::Count;
use crate::metrics::{self, MetricSet, MetricValue};
use crate::ops::watch::Watch;
use crate::sysfs::layout;

/// Where the numbers come from.
pub(crate) enum Source<'d> {
    /// Programmed and owned by this process.
    Live(Option<Box<Collector<'d>>>),
    /// Counted by the device's owner (the exporter) for this process.
    Client(Option<Box<Client<'d>>>),
    /// Read as they are.
    Passive(MetricSet, Vec<String>),
}

/// A measurement the exporter counts for top, and what its last interval gave.
pub(crate) struct Client<'d> {
    pub(crate) shared: Shared<'d>,
    pub(crate) set: MetricSet,
    pub(crate) names: Vec<String>,
    pub(crate) params: std::collections::HashMap<String, f64>,
    pub(crate) interval: (Vec<Count>, f64),
}

impl Client<'_> {
    pub(crate) fn values(&mut self) -> Vec<MetricValue> {
        // An owner that stopped answering leaves every value uncounted.
        self.interval = self.shared.interval().unwrap_or_default();
        let (counts, span_s) = (&self.interval.0, self.interval.1);
        if span_s <= 0.0 {
            return Vec::new();
        }
        let chosen: Vec<&metrics::Metric> =
            self.names.iter().filter_map(|n| self.set.get(n)).collect();
        crate::measure::metric_values(&self.set, &chosen, counts, span_s, &self.params, true)
    }
}

impl Source<'_> {
    pub(crate) fn values(&mut self, watch: &Watch, now: u64) -> Vec<MetricValue> {
        match self {
            Source::Live(Some(e)) => match e.scrape(now) {
                Ok(()) => e.values().to_vec(),
                Err(_) => Vec::new(),
            },
            Source::Client(Some(c)) => c.values(),
            Source::Live(None) | Source::Client(None) => Vec::new(),
            Source::Passive(set, names) => {
                let chosen: Vec<&metrics::Metric> =
                    names.iter().filter_map(|n| set.get(n)).collect();
                metrics::evaluate(set, &chosen, &watch.inputs(), true)
            }
        }
    }

    /// The blocks' counts over the last refresh and its seconds, when this
    /// process counts them (itself or through the owner).
    pub(crate) fn interval(&self) -> Option<(&[Count], f64)> {
        match self {
            Source::Live(Some(e)) => Some(e.interval_counts()),
            Source::Client(Some(c)) => Some((&c.interval.0, c.interval.1)),
            _ => None,
        }
    }

    /// The blocks counted for this process, which the passive watch leaves alone.
    pub(crate) fn blocks(&self) -> Vec<String> {
        match self {
            Source::Live(Some(e)) => e.blocks().into_iter().map(str::to_string).collect(),
            Source::Client(Some(c)) => c
                .shared
                .plans
                .iter()
                .map(|p| p.block.name.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn stop(&mut self) -> Result<()> {
        match self {
            Source::Live(e) => e.take().map_or(Ok(()), |e| e.stop()),
            // Dropping it ends the measurement: the owner puts its counters back.
            Source::Client(c) => {
                c.take();
                Ok(())
            }
            Source::Passive(..) => Ok(()),
        }
    }
}

/// Restores the device if the loop ends any other way than through `stop`.
pub(crate) struct Restore<'a, 'd>(pub(crate) &'a mut Source<'d>);

impl Drop for Restore<'_, '_> {
    fn drop(&mut self) {
        let _ = self.0.stop();
    }
}

/// Whether this process may program the device.
pub(crate) fn may_write(device: &Device) -> bool {
    let fs = device.fs();
    device
        .blocks()
        .iter()
        .find(|b| b.is_counter_block() && !b.is_empty())
        .is_some_and(|b| {
            let rel = match b.counters.first() {
                Some(c) => layout::event(&b.name, *c),
                None => layout::enable(&b.name),
            };
            fs.writable(&rel)
        })
}

/// Where top's numbers come from: the exporter when it owns the device (for anyone
/// its socket lets in), else this process's own programming (with the right to
/// write), else a passive watch of what is programmed.
pub(crate) fn source<'d>(
    global: &Global,
    device: &'d Device,
    (config, checked): (&Counting, collector::Checked),
    set: &MetricSet,
    read_only: bool,
) -> Result<(Option<crate::lock::WriterLock>, Source<'d>, String)> {
    let passive = || {
        let what = "read-only: nothing is written; showing what is programmed";
        (
            None,
            Source::Passive(set.clone(), config.metrics.clone()),
            what.to_string(),
        )
    };
    if read_only {
        return Ok(passive());
    }
    // Everything was checked (`checked`) before the first write.
    // The exporter counts, for anyone its socket lets in.
    if let Some(shared) = client(global, device, &checked, config, set)? {
        return Ok(shared);
    }
    if global.sim.is_some() || may_write(device) {
        return live(global, device, (config, checked), set);
    }
    if !config.events.is_empty() {
        return Err(Error::BadOption {
            problem: "-e programs counters, which needs the right to write the device (root); without it top shows what is already programmed".into(),
        });
    }
    Ok(passive())
}

/// The live source: the device locked and programmed (as the exporter does). Also
/// who owns the counters, for the header.
pub(crate) fn live<'d>(
    global: &Global,
    device: &'d Device,
    (config, checked): (&Counting, collector::Checked),
    set: &MetricSet,
) -> Result<(Option<crate::lock::WriterLock>, Source<'d>, String)> {
    let lock = lock_device(global, device)?;
    let owner = match global.sim.is_some() {
        true => "simulator (no lock)".to_string(),
        false => format!("held by this bfperf (pid {})", std::process::id()),
    };
    let e = Collector::start_after(device, config, checked, set.clone(), monotonic_ns, None)?;
    Ok((lock, Source::Live(Some(Box::new(e))), owner))
}

/// What `config` counts (as the exporter would: `checked`), counted by the exporter
/// that owns the device; None when no exporter listens beside the lock.
pub(crate) fn client<'d>(
    global: &Global,
    device: &'d Device,
    checked: &collector::Checked,
    config: &Counting,
    set: &MetricSet,
) -> Result<Option<(Option<crate::lock::WriterLock>, Source<'d>, String)>> {
    let Some((mut shared, socket)) = owner_client(global, device, &checked.specs)? else {
        return Ok(None);
    };
    // The first refresh counts from here.
    shared.rebase(&crate::measure::RealPacer)?;
    let client = Client {
        shared,
        set: set.clone(),
        names: checked.metrics.clone(),
        params: config.params.clone(),
        interval: (Vec::new(), 0.0),
    };
    let owner = format!("the exporter's; it counts for top ({})", socket.display());
    Ok(Some((None, Source::Client(Some(Box::new(client))), owner)))
}

/// Where a refresh's numbers come from: the device (live or passive), every value
/// file, and the perf counters.
pub(crate) struct Sources<'a, 'd> {
    pub(crate) device: &'a mut Source<'d>,
    pub(crate) watch: &'a mut Watch<'d>,
    pub(crate) cores: Option<&'a mut cores::Cores>,
    pub(crate) set: &'a MetricSet,
}
