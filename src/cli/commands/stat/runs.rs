//! What each of `stat`'s runs measures until (the command, a duration, a process),
//! and how the runs end: the exit status, flushed output, the child's times.

use super::plan::Planned;
use super::Args;
use crate::cli::child::{
    end_child, pidfd, signal_name, wait_child, ChildUntil, PidUntil, Signals, Slot, Timed, Wakeup,
};
use crate::cli::report::Ending;
use crate::error::{Error, Result};
use crate::front::exit::{diag, Failure};
use crate::measure::{self, For, Forever, StatRequest, Until};
use std::cell::RefCell;
use std::io::Write;
use std::process::Command as Process;
use std::rc::Rc;
use std::time::Duration;

/// What each run measures until: the command (started here, with its perf counters
/// attached for --per-process), a duration, or an interruption.
pub(super) struct Runs {
    pub(super) command: Vec<String>,
    pub(super) duration: Option<Duration>,
    pub(super) per_process: Option<Vec<crate::perf::PerfEvent>>,
    /// Whether counting is on when the command starts (no -D): its perf counters
    /// are enabled by its `exec`, else by the gate.
    pub(super) from_exec: bool,
    /// -p: the running process measured.
    pub(super) pid: Option<i32>,
    pub(super) perf: Vec<crate::perf::PerfEvent>,
    pub(super) slot: Slot,
    pub(super) status: Rc<RefCell<Option<i32>>>,
    pub(super) wakeup: Rc<Wakeup>,
    /// Whether --timeout ended a command.
    pub(super) timed_out: Rc<std::cell::Cell<bool>>,
}

impl Runs {
    pub(super) fn new(a: &Args, req: &StatRequest, sig: &Signals) -> Runs {
        Runs {
            command: a.command.clone(),
            // With a command, this is --timeout's (clap refuses --duration there).
            duration: a.duration.or(a.timeout.map(Duration::from_millis)),
            per_process: (a.per_process && !req.perf.is_empty()).then(|| req.perf.clone()),
            from_exec: a.delay.unwrap_or(0) == 0,
            pid: a.pid,
            perf: req.perf.clone(),
            slot: Rc::new(RefCell::new(None)),
            status: Rc::new(RefCell::new(None)),
            wakeup: sig.wakeup.clone(),
            timed_out: Rc::new(std::cell::Cell::new(false)),
        }
    }

    pub(super) fn until(&self) -> Result<Box<dyn Until>> {
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
            Some(events) => crate::perf::spawn_counted(&mut process, events, self.from_exec)
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
            limit: self.duration,
            timed_out: self.timed_out.clone(),
        }))
    }
}

/// The report written whole and flushed, or the output's failure.
pub(super) fn flushed(
    written: std::io::Result<()>,
    out: &mut impl Write,
) -> std::result::Result<(), Failure> {
    written
        .and_then(|_| out.flush())
        .map_err(|source| Failure::Output {
            source,
            writes: Vec::new(),
        })
}

/// stat's exit status: 128 + the signal that ended it, else the command's; 0 for
/// a command --timeout ended with its SIGTERM, as perf's.
pub(super) fn exit_code(signal: usize, ending: &Ending) -> i32 {
    match signal {
        0 if ending.ended_by_timeout => 0,
        0 => ending.exit_status.unwrap_or(0),
        s => 128 + s as i32,
    }
}

/// The command's status when the output failed while it ran: the status wins over
/// the output's failure, said on stderr (quietly for a reader that went away). None
/// when no command ran to its end.
pub(super) fn status_despite(e: &std::io::Error, ending: &Ending, signal: usize) -> Option<i32> {
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
pub(super) enum Concluded {
    Measured(measure::StatOutcome, Box<Ending>),
    Exit(i32),
}

/// Ends the command if the measurement was interrupted (or waits for it if the
/// device failed), then says how the measurement ended.
pub(super) fn conclude(
    a: &Args,
    runs: &Runs,
    signal: usize,
    result: Result<measure::StatOutcome>,
    planned: &Planned,
) -> Result<Concluded> {
    let (said, req) = (&planned.said, &planned.req);
    // --interval-count: the counting ends, the command runs on (as perf's).
    let counted_enough = a.interval_count.is_some() && runs.timed_out.get();
    match (&result, signal) {
        // The device failed, not the command: it is never the victim.
        (Err(_), 0) => wait_child(&runs.slot, &runs.status),
        (Ok(_), 0) if counted_enough => wait_child(&runs.slot, &runs.status),
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
    // --timeout ended the command, and its SIGTERM is what ended it (a command
    // that catches it ends as it chooses, and that is its status).
    let ended_by_timeout = runs.timed_out.get()
        && !counted_enough
        && status == Some(128 + libc::SIGTERM)
        && signal == 0;
    if ended_by_timeout {
        diag(&format!(
            "'{}' ended with SIGTERM at --timeout {} ms",
            a.command.join(" "),
            a.timeout.unwrap_or_default()
        ));
    }
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
        ended_by_timeout,
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
pub(super) fn with_child_times(ending: Ending) -> Ending {
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
