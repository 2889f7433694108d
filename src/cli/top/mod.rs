//! `bfperf top`: a live, full-screen view of the device. The numbers come from the
//! stat machinery (the exporter's live core: lock, journal, multiplexing with coverage,
//! restore), or, without the right to write, from a passive [`Watch`] of what is
//! already programmed. The rooms, as bottom and gitui have them: [`source`] reads
//! the numbers, [`app`] holds the state and its updates (keys, refreshes), [`view`]
//! draws it, [`screen`] owns the terminal and runs the loop; this module wires them
//! and puts the terminal and the device back on every way out.

mod app;
mod cores;
mod keys;
mod panels;
mod screen;
mod source;
mod view;

use app::{panel_states, titled_panels};
pub(super) use app::{App, MetricRow, PanelState, Tab};
use screen::{event_loop, with_terminal};
use source::{Restore, Sources};

use std::time::Duration;

use crate::collector::{self, Counting};
use crate::device::values::monotonic_ns;
use crate::error::Result;
use crate::front::args::Global;
use crate::front::setup::{load_metrics, metric_params, open_device};
use crate::measure::compose::{compose, Perf, Rules};
use crate::metrics::{self};
use crate::ops::watch::Watch;

/// How many refreshes of history a sparkline keeps.
const HISTORY: usize = 120;
/// How often multiplexed counters take turns between refreshes.
const TICK: Duration = Duration::from_millis(100);

/// What `bfperf top` was asked for.
#[derive(Debug, Clone)]
pub(super) struct TopOptions {
    /// Refresh every TIME (`+`/`-` change it while running)
    pub interval: std::time::Duration,
    /// More metrics or groups to show (as stat -M), in a panel of their own
    pub metrics: Vec<String>,
    /// More events to count (as stat -e, perf events included), shown in the raw view
    pub events: Vec<String>,
    /// Write nothing: show the registers and whatever is already programmed
    pub read_only: bool,
}

/// Runs `bfperf top` until q, Ctrl-C, SIGTERM or SIGHUP.
pub(super) fn run(global: &Global, args: TopOptions) -> Result<()> {
    let device = open_device(global)?;
    let gen = device.generation();
    let set = load_metrics(global, &[gen])?;
    let titled = titled_panels(gen, &set, &args.metrics)?;
    let all: Vec<String> = titled.iter().flat_map(|(_, n)| n.clone()).collect();
    // perf events (-e cycles, and those metrics name) are counted beside the blocks;
    // metrics that need them are evaluated here, the others as the exporter does.
    // What this device cannot count is left out, as the exporter leaves it.
    let pmus = crate::perf::Pmus::at(&global.sysfs_root);
    let rules = Rules {
        perf: Perf::Count(&pmus),
        skip: true,
        whole: true,
    };
    let mut composed = compose(&device, &set, (&args.events, &all), rules)?;
    let (cpu_metrics, block_metrics): (Vec<String>, Vec<String>) =
        std::mem::take(&mut composed.metrics)
            .into_iter()
            .partition(|n| set.get(n).is_some_and(metrics::uses_perf));
    composed.metrics = block_metrics;
    let perf = std::mem::take(&mut composed.work.perf);
    let config = Counting {
        // Only -e's block events program counters of top's own choosing.
        events: crate::perf::split(&pmus, &args.events)?.1,
        metrics: composed.metrics.clone(),
        params: metric_params(global)?,
        journal: global.sim.is_none(),
        metric_gauges: false,
        strict: false,
        user_share: None,
    };
    let checked = collector::Checked::of(&device, composed);
    let (_lock, mut source, owner) =
        source::source(global, &device, (&config, checked), &set, args.read_only)?;
    let owned = source.blocks();
    let restore = Restore(&mut source);
    // The blocks the measurement owns are read through it (it restarts their windows).
    let skip: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mut watch = Watch::open(&device, &skip)?;
    let mut app = App::new(
        [
            device.location(),
            gen.label().to_string(),
            collector::event_list_format(&device).to_string(),
            owner,
        ],
        args.interval.max(Duration::from_millis(100)),
        panel_states(&titled, &set),
    );
    app.color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let cpus = crate::perf::online_cpus(&global.sysfs_root);
    let mut cores = cores::Cores::start(&perf, &cpus, cpu_metrics, monotonic_ns());
    let mut sources = Sources {
        device: restore.0,
        watch: &mut watch,
        cores: cores.as_mut(),
        set: &set,
    };
    let result = with_terminal(|term| event_loop(term, &mut app, &mut sources));
    drop(restore);
    result
}
