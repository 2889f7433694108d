//! `stat`'s flags made a plan: the output format and destination, the events and
//! metrics resolved on the device, the perf events and their CPUs.

use super::Args;
use crate::cli::child::{not_runnable, running};
use crate::cli::output::Format;
use crate::cli::report::StatFormat;
use crate::error::{Error, Result};
use crate::front::args::Global;
use crate::front::exit::diag;
use crate::front::setup::{load_metrics, metric_params};
use crate::measure::compose::{self, compose, Composed, Perf, Rules};
use crate::measure::{self, StatRequest, Timing};
use crate::metrics;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

pub(super) fn stat_format(a: &Args) -> Result<StatFormat> {
    if let Some(sep) = &a.separator {
        let b = sep.as_bytes();
        if b.len() != 1 || b[0] == b'"' || b[0] == b'\n' {
            return Err(Error::BadOption {
                problem: format!("-x takes one character (such as , ; or a tab), not '{sep}'"),
            });
        }
        return Ok(StatFormat::PerfCsv(b[0]));
    }
    if a.json_lines {
        return Ok(StatFormat::Ndjson);
    }
    Ok(match a.format.or(Format::Table) {
        Format::Table => StatFormat::Table,
        Format::Json => StatFormat::Ndjson,
        Format::Csv => StatFormat::Csv(b','),
    })
}

/// Where the counts go: standard error, as perf stat's (the measured command's
/// standard output stays its own); `-o -` standard output; `-o FILE` by the output
/// file rule: a regular file is replaced when the measurement ends (its counts so
/// far, if interrupted), a device, FIFO or socket written as it goes. Buffered by the
/// caller: each interval is flushed whole, one write.
pub(super) enum Dest {
    Stderr,
    Stdout,
    File(crate::outfile::Sink),
}

pub(super) fn output_of(a: &Args) -> Result<Dest> {
    Ok(match a.output.as_deref() {
        None => Dest::Stderr,
        Some(p) if p == Path::new("-") => Dest::Stdout,
        Some(path) if a.append => Dest::File(crate::outfile::open_append(path)?),
        Some(path) => Dest::File(crate::outfile::open(path)?),
    })
}

impl Dest {
    /// A file is put in place (the others were written as they went).
    pub(super) fn finish(self) -> Result<()> {
        match self {
            Dest::File(s) => s.finish(),
            _ => Ok(()),
        }
    }

    pub(super) fn writer<'a>(
        &'a mut self,
        stdout: &'a mut dyn Write,
        stderr: &'a mut std::io::Stderr,
    ) -> &'a mut dyn Write {
        match self {
            Dest::File(file) => file,
            Dest::Stdout => stdout,
            Dest::Stderr => stderr,
        }
    }

    /// Whether it is a terminal (control characters are escaped), and its width.
    pub(super) fn terminal(&self, stdout: (bool, Option<u16>)) -> (bool, Option<u16>) {
        match self {
            Dest::Stdout => stdout,
            Dest::Stderr => (
                std::io::IsTerminal::is_terminal(&std::io::stderr()),
                crate::cli::output::terminal_width_of(std::io::stderr()),
            ),
            Dest::File(_) => (false, stdout.1),
        }
    }
}

/// What `stat` will count, checked: the request, the metrics and their inputs.
pub(super) struct Planned {
    pub(super) req: StatRequest,
    pub(super) set: metrics::MetricSet,
    pub(super) metrics: Vec<String>,
    pub(super) params: std::collections::HashMap<String, f64>,
    /// Warnings said before the measurement (not said again after it).
    pub(super) said: Vec<String>,
    /// --per-process found no perf events to count.
    no_perf: bool,
}

impl Planned {
    /// Says what the user must know of the plan, once it stands (after what
    /// opening the device skipped): a plan refused is said by its error alone, and
    /// may be made again on the whole device.
    pub(super) fn say(&self) {
        if self.no_perf {
            diag("--per-process: no perf events to count (cycles, task-clock...); the blocks are counted as always");
        }
        for w in &self.said {
            diag(&format!("warning: {w}"));
        }
    }

    /// The chosen metrics' values over counts of `span_s` seconds.
    pub(super) fn values(
        &self,
        chosen: &[&metrics::Metric],
        counts: &[measure::Count],
        span_s: f64,
        per_block: bool,
    ) -> Vec<metrics::MetricValue> {
        measure::metric_values(&self.set, chosen, counts, span_s, &self.params, per_block)
    }
}

/// Where perf events count, as perf stat: with a command, that command (and what it
/// starts); -a, -C and -A count them system-wide. The DPU's blocks are uncore:
/// system-wide always. Returns whether --per-process was asked for.
fn perf_scope(a: &mut Args) -> bool {
    if a.all_cpus && a.command.is_empty() {
        diag("-a: the DPU's counters and perf events are system-wide already; nothing changes");
    }
    let asked = a.per_process;
    a.per_process |= !a.command.is_empty() && !a.all_cpus && a.cpu.is_none() && !a.no_aggr;
    asked
}

/// Turns -e, -M (or the default set) into the measurement's request, checked
/// against the device before anything is written.
pub(super) fn plan(
    global: &Global,
    device: &crate::device::Device,
    a: &mut Args,
) -> Result<Planned> {
    let asked_per_process = perf_scope(a);
    if let (Some(n), Some(ms)) = (a.interval_count, a.interval) {
        a.duration = Some(Duration::from_millis(ms * n));
    }
    if a.events.is_empty() && a.metric.is_empty() {
        // As perf stat does with no -e: the generation's default set (the exporter's),
        // where this device can count it.
        (a.events, a.metric) = measure::compose::default_set(device);
        diag("no -e or -M: counting this generation's default set (as the exporter does)");
    }
    // perf_event events (cycles, task-clock, PMU/EVENT/) are counted beside the
    // blocks; each is resolved here, before anything is written.
    let pmus = crate::perf::Pmus::at(&global.sysfs_root);
    // As perf stat shows "insn per cycle" and "CPUs utilized" beside their events.
    let shadows = compose::shadows(&pmus, &a.events, &a.metric)?;
    a.metric.extend(shadows);
    let set = if a.metric.is_empty() {
        metrics::MetricSet::default()
    } else {
        load_metrics(global, &[device.generation()])?
    };
    let rules = Rules {
        perf: Perf::Count(&pmus),
        skip: false,
        whole: false,
    };
    let Composed { work, metrics, .. } = compose(device, &set, (&a.events, &a.metric), rules)?;
    let said = placed(device, &work, a)?;
    if a.metric_only && metrics.is_empty() {
        return Err(Error::BadOption {
            problem: "--metric-only: these events make no metric to print; name metrics with -M (bfperf metrics lists them)".into(),
        });
    }
    // The CPUs are looked up only for perf events (a -C is checked all the same).
    let perf_cpus = match work.perf.is_empty() && a.cpu.is_none() {
        true => Vec::new(),
        false => perf_cpus(global, a.cpu.as_deref())?,
    };
    let req = StatRequest {
        specs: work.specs,
        timing: Timing {
            interval: a.interval.map(Duration::from_millis),
            ..Timing::default()
        },
        repeat: a.repeat,
        restore: !a.no_restore,
        multiplex: !a.no_multiplex,
        // An in-process simulator dies with the process: nothing to journal.
        journal: global.sim.is_none(),
        // -p: the run's Until opens them on the process, as for a command.
        per_process: a.per_process || a.pid.is_some(),
        perf: work.perf,
        perf_cpus,
        perf_per_cpu: a.no_aggr && !a.per_process && a.pid.is_none(),
    };
    let no_perf = asked_per_process && req.perf.is_empty();
    Ok(Planned {
        params: checked(global, a)?,
        req,
        set,
        metrics,
        said,
        no_perf,
    })
}

/// The last checks of a plan: the process or command measured, the metrics'
/// parameters (returned).
fn checked(global: &Global, a: &Args) -> Result<std::collections::HashMap<String, f64>> {
    if let Some(pid) = a.pid {
        running(pid)?;
    }
    if let Some(problem) = a.command.first().and_then(|p| not_runnable(p)) {
        return Err(Error::BadOption { problem });
    }
    metric_params(global)
}

/// The whole of `work`, placed as this measurement will place it (compose left it
/// to stat, which may not multiplex): what the user must know of it.
fn placed(device: &crate::device::Device, work: &compose::Work, a: &Args) -> Result<Vec<String>> {
    let mut whole = StatRequest::for_specs(work.specs.clone());
    (whole.multiplex, whole.perf) = (!a.no_multiplex, work.perf.clone());
    Ok(measure::prepare(device, &whole)?.1)
}

/// The CPUs perf events are counted on: `-C`'s list, each of them online, or every
/// CPU online.
pub(super) fn perf_cpus(global: &Global, list: Option<&str>) -> Result<Vec<usize>> {
    let online = crate::perf::online_cpus(&global.sysfs_root);
    let Some(list) = list else {
        return Ok(online);
    };
    let bad = |why: String| Error::BadOption {
        problem: format!("-C {list}: {why}"),
    };
    let cpus = crate::perf::parse_cpu_list(list)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| bad("give CPUs as perf does: 0,2-3".into()))?;
    let offline: Vec<String> = cpus
        .iter()
        .filter(|c| !online.contains(c))
        .map(usize::to_string)
        .collect();
    if !offline.is_empty() {
        return Err(bad(format!(
            "CPU {} not online here (online: {})",
            offline.join(", "),
            online
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )));
    }
    Ok(cpus)
}
