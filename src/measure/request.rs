//! A measurement asked for: what to count and how ([`StatRequest`]), the plans it
//! makes ([`prepare`]), and the runs carried out from the first write to the
//! device put back ([`measure`], [`measure_gated`]).

use super::*;

/// What to measure and how.
#[derive(Debug, Clone)]
pub struct StatRequest {
    /// The `-e` specs (metrics already turned into specs).
    pub specs: Vec<String>,
    /// How long, and how often to print.
    pub timing: Timing,
    /// Runs (`-r`); at least 1.
    pub repeat: u32,
    /// Put the device back as it was (unless `--no-restore`).
    pub restore: bool,
    /// Let more events than counters take turns (unless `--no-multiplex`).
    pub multiplex: bool,
    /// Record the prior programming in the device's journal before the first write
    /// (beside the writer lock); a leftover journal is restored
    /// first.
    pub journal: bool,
    /// perf_event events counted in the same window (system-wide, per CPU).
    pub perf: Vec<crate::perf::PerfEvent>,
    /// The CPUs system-wide perf events are counted on ([`crate::perf::online_cpus`]).
    pub perf_cpus: Vec<usize>,
    /// Each CPU's perf counts apart (perf stat -A), system-wide: counts named `CPU0`...
    pub perf_per_cpu: bool,
    /// Count the perf events for the measured command's process tree instead of
    /// system-wide: the [`Until`] of each run opens them ([`Until::take_perf`]).
    pub per_process: bool,
}

impl StatRequest {
    /// These specs with the defaults: one run, restored, multiplexed, no journal, no
    /// perf events (what checking a spec against a device needs).
    pub fn for_specs(specs: Vec<String>) -> StatRequest {
        StatRequest {
            specs,
            timing: Timing::default(),
            repeat: 1,
            restore: true,
            multiplex: true,
            journal: false,
            perf: Vec::new(),
            perf_cpus: Vec::new(),
            perf_per_cpu: false,
            per_process: false,
        }
    }
}

/// The result of a measurement.
#[derive(Debug)]
pub struct StatOutcome {
    /// Each run's counts.
    pub runs: Vec<Run>,
    /// What the user must know (duplicate event names, foreign writes).
    pub warnings: Vec<String>,
    /// Another program re-programmed counters during the measurement.
    pub foreign: bool,
}

/// Validates the specs against the device and places them; writes nothing.
pub fn prepare<'d>(
    device: &'d Device,
    req: &StatRequest,
) -> Result<(Vec<BlockPlan<'d>>, Vec<String>)> {
    if req.specs.is_empty() && !req.perf.is_empty() {
        // Only perf events: nothing of the device is touched.
        return Ok((Vec::new(), Vec::new()));
    }
    let resolved = crate::spec::resolve(device, &req.specs)?;
    let plans = plan::place(resolved.blocks, req.multiplex)?;
    Ok((plans, resolved.warnings))
}

/// The frequency of a PLL as `clock_measure` reports it, in Hz (MHz = last count /
/// reference window × 156.25).
pub(crate) fn pll_hz(device: &Device, pll: &str) -> Option<u64> {
    let block = device
        .blocks()
        .iter()
        .find(|b| b.kind == BlockKind::ClockMeasure)?;
    let read = |name: String| {
        crate::device::values::read_number(
            device.fs(),
            &crate::sysfs::layout::register(&block.name, &name),
        )
        .ok()
    };
    let last = read(format!("FMON_CLK_LAST_COUNT_{pll}"))?;
    let window = read(format!("REFERENCE_WINDOW_WIDTH_{pll}"))?;
    (window > 0).then(|| last * 156_250_000 / window)
}

/// The longest tick that keeps every all-at-once counter from wrapping within a
/// window: half the time its clock takes to fill its width (a counter counts at most
/// one event per cycle). Blocks whose clock is unknown keep `tick`.
pub(crate) fn safe_tick(device: &Device, plans: &[BlockPlan], tick: Duration) -> Duration {
    plans
        .iter()
        .filter(|p| {
            p.block.mechanism == crate::block::Mechanism::AllAtOnce && p.block.width_bits < 64
        })
        .filter_map(|p| {
            let hz = pll_hz(device, p.block.def().clock_pll?)?;
            let fill_s = (1u64 << p.block.width_bits) as f64 / hz.max(1) as f64;
            Some(Duration::from_secs_f64(fill_s / 2.0))
        })
        .fold(tick, Duration::min)
}

/// What the user must know of perf counters: the events refused, and a count of
/// user space only. Each said once.
fn perf_warnings(perf: &crate::perf::Counters, warnings: &mut Vec<String>) {
    let mut said: Vec<String> = perf
        .refusals()
        .into_iter()
        .map(|(event, why)| format!("{event}: {why}; it shows <not supported>"))
        .collect();
    if perf.user_only() {
        said.push("perf events count user space only: kernel.perf_event_paranoid forbids the kernel's share (set it to 1 or less, or run as root)".into());
    }
    for w in said {
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }
}

/// What the user is told of other programs' writes and device failures found while
/// measuring, each once, and of counters found re-programmed at the end.
fn detections_said(detections: &[sampler::Detection], foreign_at_end: usize) -> Vec<String> {
    let mut said: Vec<String> = Vec::new();
    for d in detections {
        let then = match d.why.is_write() {
            true => "its count is marked invalid, and bfperf programmed the block again (two tools programming the same counters reset each other)",
            false => "its count is marked invalid, and sampling went on",
        };
        let line = format!(
            "{} of {}: {}; {then}",
            d.items.join(", "),
            d.block,
            d.why.describe()
        );
        if !said.contains(&line) {
            said.push(line);
        }
    }
    if foreign_at_end > 0 {
        said.push(format!(
            "{foreign_at_end} counter(s) were found re-programmed by another program at the end of the measurement; their counts are marked invalid"
        ));
    }
    said
}

/// Runs a measurement: records the configuration, programs, samples each run until
/// `until(run)` says so (or `stop` is set), checks for foreign writes, and restores
/// the device whatever happened.
pub fn measure<'d>(
    device: &'d Device,
    req: &StatRequest,
    pacer: &'d dyn Pacer,
    stop: &AtomicBool,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
) -> Result<StatOutcome> {
    measure_gated(
        device,
        req,
        pacer,
        stop,
        &mut gate::Always,
        until,
        on_interval,
    )
}

/// [`measure`], counting only while `gate` enables it (perf's `--delay` and
/// `--control`): what is counted while disabled is left out, with its time.
pub fn measure_gated<'d>(
    device: &'d Device,
    req: &StatRequest,
    pacer: &'d dyn Pacer,
    stop: &AtomicBool,
    gate: &mut dyn Gate,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
) -> Result<StatOutcome> {
    let (plans, mut warnings) = prepare(device, req)?;
    let mut timing = req.timing;
    timing.tick = safe_tick(device, &plans, timing.tick);
    if plans.iter().any(|p| p.multiplexed()) {
        timing.tick = timing.tick.min(MULTIPLEX_TICK);
    }
    // Perf events alone touch nothing of the device (and hold no lock): no journal.
    let journal = req.journal && !plans.is_empty();
    if journal {
        if let Some(r) = crate::measure::owner::journal::restore_leftover(device)? {
            warnings.push(r.describe());
        }
    }
    // Dropped last, once the device is put back.
    let _held = session::Held::open(device, &plans);
    let saved = session::save(device, &plans)?;
    let journal = match journal && req.restore {
        true => Some(crate::measure::owner::journal::write(device, &saved)?),
        false => None,
    };
    let outcome = Measurement::start(device, plans, &saved, pacer).and_then(|m| {
        let ctx = RunCtx {
            req,
            timing,
            pacer,
            stop,
        };
        run_all(m, &ctx, gate, until, on_interval, warnings)
    });
    if !req.restore {
        return outcome;
    }
    let restored = crate::measure::owner::journal::put_back(device, &saved, journal);
    match (outcome, restored) {
        (Ok(o), Ok(())) => Ok(o),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(r)) => Err(crate::error::with_context(e, &r.to_string())),
    }
}

/// What every run of a measurement shares.
struct RunCtx<'a> {
    req: &'a StatRequest,
    timing: Timing,
    pacer: &'a dyn Pacer,
    stop: &'a AtomicBool,
}

/// Every run of a started measurement, then what the user must know.
fn run_all<'d>(
    mut m: Measurement<'d>,
    ctx: &RunCtx,
    gate: &mut dyn Gate,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
    mut warnings: Vec<String>,
) -> Result<StatOutcome> {
    let RunCtx {
        req,
        timing,
        pacer,
        stop,
    } = *ctx;
    if !req.per_process {
        let perf = crate::perf::Counters::open(&req.perf, &req.perf_cpus).per_cpu(req.perf_per_cpu);
        perf_warnings(&perf, &mut warnings);
        m = m.with_perf(perf);
    }
    let mut runs = Vec::new();
    for number in 1..=req.repeat.max(1) {
        // The window opens before the command starts.
        let start = m.begin(pacer)?;
        let mut u = until(number)?;
        if let Some(perf) = u.take_perf() {
            perf_warnings(&perf, &mut warnings);
            m.set_perf(perf);
        }
        let run = m.run(
            number,
            start,
            pacer,
            timing,
            u.as_mut(),
            stop,
            gate,
            on_interval,
        )?;
        runs.push(run);
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    m.stop_perf();
    let foreign = m.foreign()?;
    for run in &mut runs {
        m.mark_foreign(run, &foreign);
    }
    let said = detections_said(&m.detections(), foreign.len());
    let touched = !said.is_empty();
    warnings.extend(said);
    Ok(StatOutcome {
        runs,
        warnings,
        foreign: touched,
    })
}

/// [`measure`] on `device`, or by its owner (the exporter) when `shared` is given:
/// then nothing is programmed here, the owner rotates turns, checks for other
/// programs' writes and puts its counters back when the connection ends; perf
/// events are counted here as always.
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure_via<'d>(
    device: &'d Device,
    shared: Option<owner::protocol::Shared<'d>>,
    req: &StatRequest,
    pacer: &'d dyn Pacer,
    stop: &AtomicBool,
    gate: &mut dyn Gate,
    until: &mut dyn FnMut(u32) -> Result<Box<dyn Until + 'd>>,
    on_interval: &mut dyn FnMut(&Interval) -> Result<()>,
) -> Result<StatOutcome> {
    let Some(shared) = shared else {
        return measure_gated(device, req, pacer, stop, gate, until, on_interval);
    };
    let mut timing = req.timing;
    timing.probe = timing.tick;
    let m = Measurement {
        source: Source::Shared(shared),
        perf: None,
        counts: Vec::new(),
    };
    let ctx = RunCtx {
        req,
        timing,
        pacer,
        stop,
    };
    run_all(m, &ctx, gate, until, on_interval, Vec::new())
}
