//! `bfperf stat`: its arguments, and running it: the command to measure, signals,
//! the writer lock, and the output stream.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args as ClapArgs;

use crate::cli::args::{parse_duration, FormatOpts, Global};
use crate::cli::child::{
    end_child, not_runnable, pidfd, running, signal_name, signals, wait_child, ChildUntil,
    PidUntil, Signals, Slot, Timed, Wakeup,
};
use crate::cli::exit::{diag, Failure};
use crate::cli::output::Format;
use crate::cli::report::{Ending, StatFormat, StatWriter};
use crate::cli::setup::{load_metrics, lock_device, metric_params, open_device, owner_client};
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::measure::compose::Work;
use crate::measure::control::{Control, ControlSpec, Delay};
use crate::measure::gate::{Always, Gate};
use crate::measure::{self, For, Forever, RealPacer, StatRequest, Timing, Until};
use crate::metrics;

/// Count events during a command or a period: `stat -e 'tile/MEMORY_READS/' -- CMD`
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf stat -M l3 --duration 5s\n  bfperf stat -e 'tile/MEMORY_READS/' -e 'l3cache/HITS_BANK0,MISSES_BANK0/' -- make -j8\n  bfperf stat -e 'tile/HNF_REQUESTS/,tile/MEMORY_READS/' -I 1000 -- ./workload\n  bfperf stat -e '{llt/GDC_BANK0_RD_REQ,GDC_BANK1_RD_REQ/}' --duration 10s\n  bfperf stat -M ddr -I 1000 -x, -o ddr.csv --duration 1m\n  bfperf stat -M pcie --pcie-link gen4x16 -A --json --duration 10s\n  bfperf stat -- ./workload   (no -e or -M: the generation's default set)"
)]
pub(crate) struct Args {
    /// BLOCKS/EVENT[,EVENT...]/ : blocks by name, kind, glob or list; events by name,
    /// number, `cycles`, register name or glob; several per -e, comma-separated, and
    /// `{...}` groups, always counted together (repeatable). Without -e and -M: the
    /// generation's default set and its metrics
    #[arg(short = 'e', long = "event", value_name = "SPEC")]
    events: Vec<String>,
    /// Metrics or metric groups to compute (comma list; repeatable): their events are
    /// counted, shared ones once; see `bfperf metrics`
    #[arg(short = 'M', long = "metric", value_name = "NAME|GROUP")]
    metric: Vec<String>,
    /// Count for this long (5s, 500ms, 2m); default: until COMMAND ends, or Ctrl-C
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "command")]
    duration: Option<std::time::Duration>,
    /// Print counts every MS milliseconds
    #[arg(short = 'I', long = "interval-print", value_name = "MS", value_parser = clap::value_parser!(u64).range(10..))]
    interval: Option<u64>,
    /// Repeat the measurement N times and show the mean and its spread
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// One row per block instead of sums per kind
    #[arg(short = 'A', long = "no-aggr")]
    no_aggr: bool,
    /// Stop after N intervals of -I (as perf stat --interval-count)
    #[arg(long = "interval-count", value_name = "N", requires = "interval", conflicts_with_all = ["duration", "command"], value_parser = clap::value_parser!(u64).range(1..))]
    interval_count: Option<u64>,
    /// Print the metrics only, not the counts (as perf stat --metric-only)
    #[arg(long = "metric-only")]
    metric_only: bool,
    /// Print counts without thousands' separators (as perf stat --no-big-num)
    #[arg(long = "no-big-num")]
    no_big_num: bool,
    /// Count perf events on these CPUs only (as perf stat -C: 0,2-3); the DPU's
    /// blocks are counted as always
    #[arg(
        short = 'C',
        long = "cpu",
        value_name = "CPUS",
        conflicts_with = "per_process"
    )]
    cpu: Option<String>,
    /// NDJSON, one record per line (as perf stat -j; same as --json)
    #[arg(short = 'j', long = "json-lines")]
    json_lines: bool,
    /// Accepted for perf's habit: the DPU's counters and perf events are counted
    /// system-wide already
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Count perf events (cycles, task-clock...) for COMMAND and the processes it
    /// starts only, from its exec, instead of system-wide; the DPU's blocks are
    /// counted as always
    #[arg(
        long = "per-process",
        requires = "command",
        conflicts_with = "all_cpus"
    )]
    per_process: bool,
    /// Count perf events of this running process (its threads, and what they start)
    /// until it ends, --duration passes or Ctrl-C (as perf stat -p); the DPU's blocks
    /// are counted as always
    #[arg(
        short = 'p',
        long = "pid",
        value_name = "PID",
        conflicts_with_all = ["command", "per_process", "cpu"],
        value_parser = clap::value_parser!(i32).range(1..)
    )]
    pid: Option<i32>,
    #[command(flatten)]
    format: FormatOpts,
    /// CSV with this field separator (one character), as perf stat -x
    #[arg(short = 'x', long = "field-separator", value_name = "SEP")]
    separator: Option<String>,
    /// Write the counts to FILE instead of standard error (`-o -`: standard output)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Append to -o's FILE instead of replacing it (as perf stat --append)
    #[arg(long, requires = "output")]
    append: bool,
    /// Start counting MSECS after COMMAND starts (as perf stat -D); -1: start with
    /// counting disabled until --control enables it
    #[arg(
        short = 'D',
        long = "delay",
        value_name = "MSECS",
        allow_hyphen_values = true
    )]
    delay: Option<i64>,
    /// Let the workload enable and disable counting, perf's protocol:
    /// fifo:CTL-FIFO[,ACK-FIFO] or fd:CTL-FD[,ACK-FD]; the words `enable`, `disable`
    /// and `ping`, each answered `ack` on ACK. Counts, rates and metrics then cover
    /// the enabled time only
    #[arg(long = "control", value_name = "SPEC")]
    control: Option<String>,
    /// Leave the counters programmed as the measurement left them
    #[arg(long)]
    no_restore: bool,
    /// Refuse more events than a block has counters instead of taking turns
    #[arg(long)]
    no_multiplex: bool,
    /// The command to measure and its arguments (everything from the first argument
    /// that is not an option; `--` before it as ever)
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn stat_format(a: &Args) -> Result<StatFormat> {
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
enum Dest {
    Stderr,
    Stdout,
    File(crate::outfile::Sink),
}

fn output_of(a: &Args) -> Result<Dest> {
    Ok(match a.output.as_deref() {
        None => Dest::Stderr,
        Some(p) if p == Path::new("-") => Dest::Stdout,
        Some(path) if a.append => Dest::File(crate::outfile::open_append(path)?),
        Some(path) => Dest::File(crate::outfile::open(path)?),
    })
}

impl Dest {
    /// A file is put in place (the others were written as they went).
    fn finish(self) -> Result<()> {
        match self {
            Dest::File(s) => s.finish(),
            _ => Ok(()),
        }
    }

    fn writer<'a>(
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
    fn terminal(&self, stdout: (bool, Option<u16>)) -> (bool, Option<u16>) {
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
struct Planned {
    req: StatRequest,
    set: metrics::MetricSet,
    metrics: Vec<String>,
    params: std::collections::HashMap<String, f64>,
    /// Warnings said before the measurement (not said again after it).
    said: Vec<String>,
}

impl Planned {
    /// The chosen metrics' values over counts of `span_s` seconds.
    fn values(
        &self,
        chosen: &[&metrics::Metric],
        counts: &[measure::Count],
        span_s: f64,
        per_block: bool,
    ) -> Vec<metrics::MetricValue> {
        measure::metric_values(&self.set, chosen, counts, span_s, &self.params, per_block)
    }
}

/// Turns -e, -M (or the default set) into the measurement's request, checked
/// against the device before anything is written.
fn plan(global: &Global, device: &crate::device::Device, a: &mut Args) -> Result<Planned> {
    if a.all_cpus {
        diag("-a: the DPU's counters and perf events are system-wide already; nothing changes");
    }
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
    let pmus = crate::perf::discover(&global.sysfs_root);
    let mut work = Work::from_events(&pmus, &a.events)?;
    // As perf stat shows "insn per cycle" and "CPUs utilized" beside their events.
    let shadows = work.shadow_metrics(&a.metric);
    a.metric.extend(shadows);
    let set = if a.metric.is_empty() {
        metrics::MetricSet::default()
    } else {
        load_metrics(global, &[device.generation()])?
    };
    let metrics: Vec<String> = {
        let chosen = set.select(&a.metric)?;
        work.add_metrics(&pmus, &chosen)?;
        chosen.iter().map(|m| m.def.name.clone()).collect()
    };
    if a.metric_only && metrics.is_empty() {
        return Err(Error::BadOption {
            problem: "--metric-only: these events make no metric to print; name metrics with -M (bfperf metrics lists them)".into(),
        });
    }
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
        perf_cpus: perf_cpus(global, a.cpu.as_deref())?,
        perf_per_cpu: a.no_aggr && !a.per_process && a.pid.is_none(),
    };
    if let Some(pid) = a.pid {
        running(pid)?;
    }
    if a.per_process && req.perf.is_empty() {
        diag("--per-process: no perf events to count (cycles, task-clock...); the blocks are counted as always");
    }
    let (_, said) = measure::prepare(device, &req)?;
    for w in &said {
        diag(&format!("warning: {w}"));
    }
    if let Some(problem) = a.command.first().and_then(|p| not_runnable(p)) {
        return Err(Error::BadOption { problem });
    }
    Ok(Planned {
        req,
        set,
        metrics,
        params: metric_params(global)?,
        said,
    })
}

/// The CPUs perf events are counted on: `-C`'s list, each of them online, or every
/// CPU online.
fn perf_cpus(global: &Global, list: Option<&str>) -> Result<Vec<usize>> {
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

/// What each run measures until: the command (started here, with its perf counters
/// attached for --per-process), a duration, or an interruption.
struct Runs {
    command: Vec<String>,
    duration: Option<Duration>,
    per_process: Option<Vec<crate::perf::PerfEvent>>,
    /// -p: the running process measured.
    pid: Option<i32>,
    perf: Vec<crate::perf::PerfEvent>,
    slot: Slot,
    status: Rc<RefCell<Option<i32>>>,
    wakeup: Rc<Wakeup>,
}

impl Runs {
    fn new(a: &Args, req: &StatRequest, sig: &Signals) -> Runs {
        Runs {
            command: a.command.clone(),
            duration: a.duration,
            per_process: (a.per_process && !req.perf.is_empty()).then(|| req.perf.clone()),
            pid: a.pid,
            perf: req.perf.clone(),
            slot: Rc::new(RefCell::new(None)),
            status: Rc::new(RefCell::new(None)),
            wakeup: sig.wakeup.clone(),
        }
    }

    fn until(&self) -> Result<Box<dyn Until>> {
        if let Some(pid) = self.pid {
            return Ok(Box::new(PidUntil {
                pid,
                pidfd: pidfd(pid as u32),
                inner: self.duration.map(For),
                wakeup: self.wakeup.clone(),
                perf: (!self.perf.is_empty()).then(|| {
                    crate::perf::Counters::open_for(&self.perf, crate::perf::Target::Running(pid))
                }),
            }));
        }
        let Some((program, args)) = self.command.split_first() else {
            let inner: Box<dyn Until> = match self.duration {
                Some(d) => Box::new(For(d)),
                None => Box::new(Forever),
            };
            return Ok(Box::new(Timed {
                inner,
                wakeup: self.wakeup.clone(),
            }));
        };
        let mut process = Process::new(program);
        process.args(args);
        let cannot_run = |e| Error::File {
            what: "cannot run",
            path: program.into(),
            source: e,
        };
        // --per-process: the counters are attached before the command runs.
        let (child, perf) = match &self.per_process {
            Some(events) => crate::perf::spawn_counted(&mut process, events)
                .map(|(c, p)| (c, Some(p)))
                .map_err(cannot_run)?,
            None => (process.spawn().map_err(cannot_run)?, None),
        };
        let pidfd = pidfd(child.id());
        *self.slot.borrow_mut() = Some(child);
        Ok(Box::new(ChildUntil {
            slot: self.slot.clone(),
            status: self.status.clone(),
            pidfd,
            wakeup: self.wakeup.clone(),
            perf,
        }))
    }
}

/// The writer lock, or — when a long-running bfperf (the exporter) owns the device
/// and listens beside the lock — a measurement it counts for this one. Only the
/// device's blocks need either; perf events alone need neither.
fn writer_or_client<'d>(
    global: &Global,
    device: &'d crate::device::Device,
    req: &StatRequest,
) -> Result<(
    Option<crate::lock::WriterLock>,
    Option<crate::measure::share::Shared<'d>>,
)> {
    if req.specs.is_empty() {
        return Ok((None, None));
    }
    if let Some((shared, socket)) = owner_client(global, device, &req.specs)? {
        diag(&format!(
            "the device is owned by the exporter listening on {}: it counts these events beside its own",
            socket.display()
        ));
        return Ok((None, Some(shared)));
    }
    Ok((lock_device(global, device)?, None))
}

/// stat's exit code, or why it failed.
type ExitOr = std::result::Result<i32, Failure>;

/// Runs `bfperf stat`; returns the exit code (the command's, or 128 + the signal
/// that interrupted the measurement).
/// The gate of -D and --control, opened and checked before anything is written
/// (counting enabled throughout without them).
fn control_of(a: &Args) -> Result<Box<dyn Gate>> {
    if a.delay.is_none() && a.control.is_none() {
        return Ok(Box::new(Always));
    }
    let delay = Delay::from_msecs(a.delay.unwrap_or(0))?;
    if a.repeat > 1 {
        return Err(Error::BadOption {
            problem: "-D/--delay and --control count one run; not with -r".into(),
        });
    }
    if delay == Delay::UntilEnabled && a.control.is_none() {
        return Err(Error::BadOption {
            problem: "-D -1 starts with counting disabled: give --control to enable it".into(),
        });
    }
    let spec = a.control.as_deref().map(ControlSpec::parse).transpose()?;
    Ok(Box::new(Control::open(delay, spec.as_ref())?))
}

/// The stream of records, as the flags ask.
fn writer_of<'w>(
    out: &'w mut dyn Write,
    format: StatFormat,
    a: &Args,
    width: Option<u16>,
    to_terminal: bool,
) -> StatWriter<'w> {
    StatWriter::new(out, format, !a.no_aggr, width)
        .escaping(to_terminal)
        .metric_only(a.metric_only)
        .repeated(a.repeat > 1)
        .big_num(!a.no_big_num)
}

pub(crate) fn exec(global: &Global, mut a: Args, out: &mut Out) -> ExitOr {
    let (stdout, stdout_is) = (&mut *out.w, (out.terminal, out.width));
    let format = stat_format(&a)?;
    let device = open_device(global)?;
    let planned = plan(global, &device, &mut a)?;
    let chosen = planned.set.select(&planned.metrics)?;
    let mut gate = control_of(&a)?;
    let evaluate =
        |counts: &[measure::Count], span_s: f64| planned.values(&chosen, counts, span_s, a.no_aggr);
    let (_lock, shared) = writer_or_client(global, &device, &planned.req)?;
    let mut dest = output_of(&a)?;
    let (to_terminal, width) = dest.terminal(stdout_is);
    let mut stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(dest.writer(stdout, &mut stderr));
    let (sig, req) = (signals()?, &planned.req);
    let runs = Runs::new(&a, req, &sig);
    let mut until = |_run: u32| runs.until();
    let mut writer = writer_of(&mut out, format, &a, width, to_terminal);
    let mut output_error: Option<std::io::Error> = None;
    let measuring_a_command = !a.command.is_empty();
    // A last remainder under half an interval is no line (as perf); totals hold it.
    let sliver_s = a.interval.map_or(0.0, |ms| ms as f64 / 2000.0);
    let mut on_interval = |i: &measure::Interval| {
        let printed = match output_error {
            None if i.span_s < sliver_s => Ok(()),
            None => writer.interval(i, &evaluate(&i.counts, i.enabled_s)),
            Some(_) => Ok(()),
        };
        // Nobody reads on (`| head`) or the disk is full: stop printing. A command
        // is never the victim: it runs to its end, the device stays owned until
        // then; a period ends now.
        if let Err(e) = printed {
            output_error = Some(e);
            if !measuring_a_command {
                sig.stop.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    };
    let (stop, pacer) = (&sig.stop, &RealPacer);
    let result = measure::measure_via(
        &device,
        shared,
        req,
        pacer,
        stop,
        gate.as_mut(),
        &mut until,
        &mut on_interval,
    );
    gate.notes().iter().for_each(|n| diag(n));
    let signal = sig.which.load(Ordering::SeqCst);
    let (outcome, ending) = match conclude(&a, &runs, signal, result, &planned) {
        Ok(Concluded::Measured(o, e)) => (o, *e),
        Ok(Concluded::Exit(code)) => return Ok(code),
        Err(e) => return Err(e.into()),
    };
    if let Some(code) = output_error
        .as_ref()
        .and_then(|e| status_despite(e, &ending, signal))
    {
        return Ok(code);
    }
    let written = output_error.map_or_else(
        || {
            let runs = &outcome.runs;
            let values: Vec<_> = runs
                .iter()
                .map(|r| evaluate(&r.counts, r.enabled_s))
                .collect();
            writer.summary(runs, &values, &ending)
        },
        Err,
    );
    flushed(written, &mut out)?;
    drop(out);
    dest.finish()?;
    Ok(exit_code(signal, &ending))
}

/// The report written whole and flushed, or the output's failure.
fn flushed(written: std::io::Result<()>, out: &mut impl Write) -> std::result::Result<(), Failure> {
    written
        .and_then(|_| out.flush())
        .map_err(|source| Failure::Output {
            source,
            writes: Vec::new(),
        })
}

/// stat's exit status: 128 + the signal that ended it, else the command's.
fn exit_code(signal: usize, ending: &Ending) -> i32 {
    match signal {
        0 => ending.exit_status.unwrap_or(0),
        s => 128 + s as i32,
    }
}

/// The command's status when the output failed while it ran: the status wins over
/// the output's failure, said on stderr (quietly for a reader that went away). None
/// when no command ran to its end.
fn status_despite(e: &std::io::Error, ending: &Ending, signal: usize) -> Option<i32> {
    let status = ending.exit_status.filter(|_| signal == 0)?;
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        diag(&format!(
            "error: the output could not be written ({e}); '{}' ran to its end and the device was restored",
            ending.command.as_deref().unwrap_or_default()
        ));
    }
    Some(status)
}

/// How a measurement ended: measured (with how it ended), or the device failed
/// while the command ran to its end (bfperf exits with the command's status).
enum Concluded {
    Measured(measure::StatOutcome, Box<Ending>),
    Exit(i32),
}

/// Ends the command if the measurement was interrupted (or waits for it if the
/// device failed), then says how the measurement ended.
fn conclude(
    a: &Args,
    runs: &Runs,
    signal: usize,
    result: Result<measure::StatOutcome>,
    planned: &Planned,
) -> Result<Concluded> {
    let (said, req) = (&planned.said, &planned.req);
    match (&result, signal) {
        // The device failed, not the command: it is never the victim.
        (Err(_), 0) => wait_child(&runs.slot, &runs.status),
        _ => end_child(
            &runs.slot,
            &runs.status,
            if signal == 0 {
                libc::SIGTERM
            } else {
                signal as i32
            },
        ),
    }
    let status = *runs.status.borrow();
    let outcome = match (result, status) {
        (Ok(o), _) => o,
        (Err(e), Some(code)) => {
            diag(&format!(
                "error: {e}; the measurement ended there, '{}' ran to its end",
                a.command.join(" ")
            ));
            // The command's failure, or the measurement's: never a success.
            return Ok(Concluded::Exit(if code == 0 { 1 } else { code }));
        }
        (Err(e), None) => return Err(e),
    };
    // Those said before the measurement are not said twice.
    for w in outcome.warnings.iter().filter(|w| !said.contains(w)) {
        diag(&format!("warning: {w}"));
    }
    let ending = Ending {
        command: (!a.command.is_empty()).then(|| a.command.join(" ")),
        exit_status: status,
        interrupted_by: (signal != 0).then(|| signal_name(signal)),
        restored: !a.no_restore,
        warnings: outcome.warnings.clone(),
        perf_scope: match (req.perf.is_empty(), req.per_process) {
            (true, _) => None,
            (false, true) => Some("process"),
            (false, false) => Some("system-wide"),
        },
        perf_cpus: (!req.perf.is_empty() && !req.per_process).then_some(req.perf_cpus.len()),
        user_s: None,
        sys_s: None,
    };
    let ending = match a.command.is_empty() {
        true => ending,
        false => with_child_times(ending),
    };
    Ok(Concluded::Measured(outcome, Box::new(ending)))
}

/// The CPU time of the commands measured (and of the children they waited for),
/// from the kernel's account of this process's waited-for children.
fn with_child_times(ending: Ending) -> Ending {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return ending;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ending {
        user_s: Some(seconds(usage.ru_utime)),
        sys_s: Some(seconds(usage.ru_stime)),
        ..ending
    }
}
