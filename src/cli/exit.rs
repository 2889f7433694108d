//! Exit codes and how a run ends: the error message, the quiet broken pipe.

use std::io::{self, Write};

use crate::cli::output::escape;
use crate::error::Error;

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
pub(crate) fn diag(line: &str) {
    let _ = writeln!(io::stderr().lock(), "bfperf: {}", escape(line));
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
