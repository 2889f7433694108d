//! `bfperf stat`: its arguments, and running it: the command to measure, signals,
//! the writer lock, and the output stream.

mod plan;
mod runs;

use plan::{output_of, stat_format};
use runs::{conclude, exit_code, flushed, status_despite, Concluded, Runs};

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::child::signals;
use crate::cli::report::{StatFormat, StatWriter};
use crate::cli::Out;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::front::args::{parse_duration, Global};
use crate::front::exit::{diag, Failure};
use crate::front::setup::{lock_device, open_device, open_device_for_specs, owner_client, said};
use crate::measure::control::{Control, ControlSpec, Delay};
use crate::measure::gate::{Always, Gate};
use crate::measure::{self, RealPacer, StatRequest};

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
    /// Stop after MSECS milliseconds (at least 10), ending COMMAND with SIGTERM, and
    /// print the counts (as perf stat --timeout; exit status 0 when that ended it)
    #[arg(long = "timeout", value_name = "MSECS", value_parser = timeout_ms, conflicts_with_all = ["duration", "interval", "interval_count"])]
    timeout: Option<u64>,
    /// Print counts every MS milliseconds
    #[arg(short = 'I', long = "interval-print", value_name = "MS", value_parser = interval_ms)]
    interval: Option<u64>,
    /// Repeat the measurement N times and show the mean and its spread
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// One row per block instead of sums per kind
    #[arg(short = 'A', long = "no-aggr")]
    no_aggr: bool,
    /// Stop after N intervals of -I (as perf stat --interval-count; a COMMAND
    /// runs on to its end, and bfperf exits with its status)
    #[arg(long = "interval-count", value_name = "N", requires = "interval", conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
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
    /// Count perf events (cycles, task-clock...) on every CPU, also while a command
    /// runs (as perf stat -a); the DPU's blocks are system-wide always
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Count perf events (cycles, task-clock...) for COMMAND and the processes it
    /// starts only, from its exec: the default with a command (as perf stat), unless
    /// -a, -C or -A; the DPU's blocks are counted as always
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

/// `--timeout MSECS`: milliseconds, at least 10, as perf takes them.
fn timeout_ms(text: &str) -> std::result::Result<u64, String> {
    match text.parse::<u64>() {
        Ok(ms) if ms >= 10 => Ok(ms),
        Ok(ms) => Err(format!(
            "--timeout must be at least 10 milliseconds (as perf stat's), not {ms}"
        )),
        Err(_) => Err(format!(
            "--timeout takes a whole number of milliseconds (as perf stat --timeout), not '{text}'"
        )),
    }
}

/// `-I MS`: milliseconds, at least 10, as perf takes them.
fn interval_ms(text: &str) -> std::result::Result<u64, String> {
    let ms: u64 = text.parse().map_err(|_| {
        format!("-I takes a whole number of milliseconds (as perf stat -I), not '{text}'")
    })?;
    if ms < 10 {
        return Err(format!(
            "the shortest interval is 10 ms (as perf stat's); '{text}' is {ms} ms: give -I 10 or more"
        ));
    }
    Ok(ms)
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
    Option<crate::measure::owner::protocol::Shared<'d>>,
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
        .in_order_of(&a.events)
        .repeated(a.repeat > 1)
        .big_num(!a.no_big_num)
}

/// The device with the blocks the specs choose (all of it when they need more), and
/// the plan on it. A plan refused on some blocks is made again on the whole device,
/// whose refusal can say which other blocks have the event ("did you mean"). What
/// opening the device skipped is said first, then the plan's warnings.
fn planned_device(global: &Global, a: &mut Args) -> Result<(Device, plan::Planned)> {
    let narrowed = match a.metric.is_empty() {
        true => open_device_for_specs(global, &a.events)?,
        false => None,
    };
    if let Some(device) = narrowed {
        if let Ok(planned) = plan::plan(global, &device, a) {
            let device = said(device)?;
            planned.say();
            return Ok((device, planned));
        }
    }
    let device = open_device(global)?;
    let planned = plan::plan(global, &device, a)?;
    planned.say();
    Ok((device, planned))
}

/// Real time; or, for the in-process simulator under `BFPERF_SIM_CLOCK=virtual`, its
/// clock, moved on as the measurement waits. A command or a process runs in real
/// time, which a virtual clock cannot follow: refused. Called before the device is
/// opened, which then takes the virtual clock.
fn pacer_of(global: &Global, a: &Args) -> Result<Box<dyn measure::Pacer>> {
    if global.sim.is_none() || !crate::sim::virtual_time_asked() {
        return Ok(Box::new(RealPacer));
    }
    if !a.command.is_empty() || a.pid.is_some() {
        return Err(Error::BadOption {
            problem: "BFPERF_SIM_CLOCK=virtual times a period (--duration), not a command or \
                      a process, which run in real time; unset it to count them"
                .into(),
        });
    }
    Ok(Box::new(measure::VirtualPacer(
        crate::sim::take_virtual_clock(),
    )))
}

pub(crate) fn exec(global: &Global, mut a: Args, out: &mut Out) -> ExitOr {
    let (stdout, stdout_is) = (&mut *out.w, (out.terminal, out.width));
    let format = stat_format(&a)?;
    let pacer = pacer_of(global, &a)?;
    let (device, planned) = planned_device(global, &mut a)?;
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
    // The remainder after the last whole interval has its line, however short,
    // as perf prints it; only the last can be under half an interval (a late tick
    // lengthens the interval after it). An empty one is no line.
    let mut on_interval = |i: &measure::Interval| {
        let printed = match output_error {
            None if i.span_s <= 0.0 => Ok(()),
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
    let stop = &sig.stop;
    let result = measure::request::measure_via(
        &device,
        shared,
        req,
        pacer.as_ref(),
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
