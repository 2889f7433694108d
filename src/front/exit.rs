//! Exit codes, the log, and how a run of either program ends: the error message,
//! the quiet broken pipe.

use std::io::{self, Write};

use crate::error::Error;
use crate::front::escape::{escape, json_quoted};

/// The process's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum ExitCode {
    /// Done; also when standard output was closed early (`| head`).
    Success = 0,
    /// An error: the device, the input, the driver or the output; the message says which.
    Error = 1,
    /// The command line could not be parsed.
    Usage = 2,
}

/// Why a run failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The work failed; nothing more to print than the error.
    Error(Error),
    /// The report could not be written to its output; `writes` lists what was written
    /// to the device anyway.
    Output {
        source: io::Error,
        writes: Vec<String>,
    },
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Error(e)
    }
}

/// A line on standard error, escaped; a closed stderr is ignored, never a panic.
/// Once a long-running command chose a log format ([`set_log`]), as a log line of
/// it, at level info (warn for a line that starts `warning: `, error for one that
/// starts `error: `).
pub(crate) fn diag(line: &str) {
    if LOG.get().is_some() {
        if let Some(rest) = line.strip_prefix("warning: ") {
            return log(Level::Warn, rest);
        }
        if let Some(rest) = line.strip_prefix("error: ") {
            return log(Level::Error, rest);
        }
    }
    log(Level::Info, line)
}

/// How serious a log line is, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// How log lines are written, as Prometheus' exporters write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// `time=… level=info msg="…"`.
    Logfmt,
    /// `{"time":"…","level":"info","msg":"…"}`.
    Json,
}

/// The log's format and least level, once chosen.
static LOG: std::sync::OnceLock<(LogFormat, Level, bool)> = std::sync::OnceLock::new();

/// Writes the log from now on in `format`, leaving out lines below `level`; each
/// line with its time, unless standard error is journald's (which adds it).
pub(crate) fn set_log(format: LogFormat, level: Level) {
    let _ = LOG.set((format, level, !stderr_is_journal()));
}

/// Whether standard error is the stream journald gave this process
/// (`JOURNAL_STREAM`, its device and inode numbers, names it).
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let stream = stream.to_string_lossy().into_owned();
    let Some((dev, ino)) = stream.split_once(':') else {
        return false;
    };
    // SAFETY: fd 2 is only looked at; the File is forgotten, not closed.
    let f = std::mem::ManuallyDrop::new(unsafe {
        <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(2)
    });
    f.metadata()
        .is_ok_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}

/// A line of the log at `level`: plain (`bfperf: …`) until a format is chosen.
pub(crate) fn log(level: Level, line: &str) {
    let Some(&(format, least, timed)) = LOG.get() else {
        let _ = writeln!(io::stderr().lock(), "bfperf: {}", escape(line));
        return;
    };
    if level < least {
        return;
    }
    let name = match level {
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    };
    let time = timed.then(|| crate::ops::snapshot::rfc3339_to(std::time::SystemTime::now(), 3));
    let out = match format {
        LogFormat::Json => {
            let msg = json_quoted(line);
            match time {
                Some(t) => format!(r#"{{"time":"{t}","level":"{name}","msg":{msg}}}"#),
                None => format!(r#"{{"level":"{name}","msg":{msg}}}"#),
            }
        }
        LogFormat::Logfmt => {
            let msg = json_quoted(line);
            match time {
                Some(t) => format!("time={t} level={name} msg={msg}"),
                None => format!("level={name} msg={msg}"),
            }
        }
    };
    let _ = writeln!(io::stderr().lock(), "{out}");
}

/// Reports a failure on stderr and returns the exit code. A broken pipe is a quiet
/// success (the reader had enough), as in other Unix tools.
pub(crate) fn report(failure: Failure) -> ExitCode {
    match failure {
        Failure::Error(e) => {
            diag(&format!("error: {e}"));
            ExitCode::Error
        }
        Failure::Output { source, writes } => {
            for w in &writes {
                diag(w);
            }
            if source.kind() == io::ErrorKind::BrokenPipe {
                return ExitCode::Success;
            }
            diag(&format!("error: cannot write the output: {source}"));
            ExitCode::Error
        }
    }
}
