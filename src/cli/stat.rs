//! Running `bfperf stat`: the command to measure, signals, the writer lock, and the
//! output stream.

use std::cell::RefCell;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command as Process};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::args::StatArgs;
use super::exit::{diag, Failure};
use super::output::Format;
use super::report::{Ending, StatFormat, StatWriter};
use super::{load_metrics, lock_device, metric_params, open_device, Global};
use crate::error::{Error, Result};
use crate::ops::metrics;
use crate::ops::stat::{self, For, Forever, RealPacer, StatRequest, Timing, Until};

/// The measured command, shared between the runs and the end.
type Slot = Rc<RefCell<Option<Child>>>;

struct ChildUntil {
    slot: Slot,
    status: Rc<RefCell<Option<i32>>>,
}

impl Until for ChildUntil {
    fn done(&mut self, _: Duration) -> bool {
        let mut slot = self.slot.borrow_mut();
        let Some(child) = slot.as_mut() else {
            return true;
        };
        match child.try_wait() {
            Ok(Some(st)) => {
                *self.status.borrow_mut() = Some(code_of(st));
                *slot = None;
                true
            }
            Ok(None) => false,
            Err(_) => true,
        }
    }
}

fn code_of(st: std::process::ExitStatus) -> i32 {
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// Whether `program` can be run: a path to a file, or a name found in PATH.
fn runnable(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

fn signal_name(sig: usize) -> String {
    match sig as i32 {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

/// Stops a command still running after the measurement was interrupted.
fn end_child(slot: &Slot, status: &Rc<RefCell<Option<i32>>>, sig: i32) {
    let Some(mut child) = slot.borrow_mut().take() else {
        return;
    };
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    for _ in 0..250 {
        if let Ok(Some(st)) = child.try_wait() {
            *status.borrow_mut() = Some(code_of(st));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    if let Ok(st) = child.wait() {
        *status.borrow_mut() = Some(code_of(st));
    }
}

fn stat_format(a: &StatArgs) -> Result<StatFormat> {
    if let Some(sep) = &a.separator {
        let b = sep.as_bytes();
        if b.len() != 1 || b[0] == b'"' || b[0] == b'\n' {
            return Err(Error::BadAssignment {
                problem: format!("-x takes one character (such as , ; or a tab), not '{sep}'"),
            });
        }
        return Ok(StatFormat::Csv(b[0]));
    }
    Ok(match a.format.or(Format::Table) {
        Format::Table => StatFormat::Table,
        Format::Json => StatFormat::Ndjson,
        Format::Csv => StatFormat::Csv(b','),
    })
}

/// Runs `bfperf stat`; returns the exit code (the command's, or 128 + the signal
/// that interrupted the measurement).
pub fn run(
    global: &Global,
    a: StatArgs,
    stdout: &mut dyn Write,
    width: Option<u16>,
) -> std::result::Result<i32, Failure> {
    let format = stat_format(&a)?;
    let device = open_device(global)?;
    let set = if a.metric.is_empty() {
        metrics::MetricSet::default()
    } else {
        load_metrics(global, &[device.generation()])?
    };
    let chosen = set.select(&a.metric)?;
    let params = metric_params(global)?;
    let mut specs = a.events.clone();
    specs.extend(metrics::specs_for(&chosen));
    let evaluate = |counts: &[stat::Count], span_s: f64| {
        let mut inputs = stat::metric_inputs(counts, span_s);
        inputs.params = params.clone();
        metrics::evaluate(&set, &chosen, &inputs, a.no_aggr)
    };
    let req = StatRequest {
        specs,
        timing: Timing {
            interval: a.interval.map(Duration::from_millis),
            ..Timing::default()
        },
        repeat: a.repeat,
        restore: !a.no_restore,
        multiplex: !a.no_multiplex,
    };
    // Everything is checked before the first write.
    let (_, said) = stat::prepare(&device, &req)?;
    for w in &said {
        diag(&format!("warning: {w}"));
    }
    if let Some(program) = a.command.first() {
        if !runnable(program) {
            return Err(Error::BadAssignment {
                problem: format!(
                    "cannot run '{program}': no such file, nor a program of that name in PATH"
                ),
            }
            .into());
        }
    }
    let _lock = lock_device(global, &device)?;
    // Buffered: each interval is flushed whole, one write.
    let mut file;
    let mut out = std::io::BufWriter::new(match &a.output {
        Some(path) => {
            file = std::fs::File::create(path).map_err(|e| Error::File {
                what: "cannot create the output file",
                path: path.clone(),
                source: e,
            })?;
            &mut file as &mut dyn Write
        }
        None => stdout,
    });

    let stop = Arc::new(AtomicBool::new(false));
    let which = Arc::new(AtomicUsize::new(0));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let _ = signal_hook::flag::register_usize(sig, which.clone(), sig as usize);
        let _ = signal_hook::flag::register(sig, stop.clone());
    }

    let slot: Slot = Rc::new(RefCell::new(None));
    let status: Rc<RefCell<Option<i32>>> = Rc::new(RefCell::new(None));
    let command = a.command.clone();
    let duration = a.duration;
    let (slot2, status2) = (slot.clone(), status.clone());
    let mut until = move |_run: u32| -> Result<Box<dyn Until>> {
        if let Some((program, args)) = command.split_first() {
            let child = Process::new(program)
                .args(args)
                .spawn()
                .map_err(|e| Error::File {
                    what: "cannot run",
                    path: program.into(),
                    source: e,
                })?;
            *slot2.borrow_mut() = Some(child);
            return Ok(Box::new(ChildUntil {
                slot: slot2.clone(),
                status: status2.clone(),
            }));
        }
        Ok(match duration {
            Some(d) => Box::new(For(d)),
            None => Box::new(Forever),
        })
    };
    let mut writer = StatWriter::new(&mut out, format, !a.no_aggr, width);
    let mut output_error: Option<std::io::Error> = None;
    let stop_on_output = stop.clone();
    let result = stat::measure(&device, &req, &RealPacer, &stop, &mut until, &mut |i| {
        if output_error.is_none() {
            if let Err(e) = writer.interval(i, &evaluate(&i.counts, i.span_s)) {
                // Nobody reads on (`| head`) or the disk is full: end the
                // measurement now, restore, and say so.
                output_error = Some(e);
                stop_on_output.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    });
    let sig = which.load(Ordering::SeqCst);
    end_child(
        &slot,
        &status,
        if sig == 0 { libc::SIGTERM } else { sig as i32 },
    );
    let outcome = result?;
    // Those said before the measurement are not said twice.
    for w in outcome.warnings.iter().filter(|w| !said.contains(w)) {
        diag(&format!("warning: {w}"));
    }
    let ending = Ending {
        command: (!a.command.is_empty()).then(|| a.command.join(" ")),
        exit_status: *status.borrow(),
        interrupted_by: (sig != 0).then(|| signal_name(sig)),
        restored: !a.no_restore,
        warnings: outcome.warnings.clone(),
    };
    let written = match output_error {
        Some(e) => Err(e),
        None => {
            let values: Vec<_> = outcome
                .runs
                .iter()
                .map(|r| evaluate(&r.counts, r.elapsed_s))
                .collect();
            writer.summary(&outcome.runs, &values, &ending)
        }
    };
    written.map_err(|source| Failure::Output {
        source,
        writes: Vec::new(),
    })?;
    Ok(if sig != 0 {
        128 + sig as i32
    } else {
        ending.exit_status.unwrap_or(0)
    })
}
