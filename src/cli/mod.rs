//! The command line: parses arguments, runs the command (one module per command in
//! `commands`), and hands its typed report to the output layer.

mod args;
mod commands;
pub mod complete;
pub mod exit;
#[cfg(feature = "exporter")]
mod exporter;
pub mod manual;
pub mod output;
mod plot;
pub mod report;
mod setup;
mod top;

pub use args::{FormatOpts, Global, Shell};
pub use commands::{Cli, Command};
pub use exit::ExitCode;
pub use output::{group, group_f};

use std::io::{self, Write};

use clap::Parser;

use exit::Failure;
use output::{Format, Report};

/// Where reports go: a writer, the terminal's width, whether it is a terminal.
pub struct Out<'a> {
    pub w: &'a mut dyn Write,
    pub width: Option<u16>,
    pub terminal: bool,
}

impl Out<'_> {
    /// Renders a report and flushes it. A failure carries what the command wrote to
    /// the device, so that it can still be said on stderr.
    fn emit(&mut self, format: Format, report: &dyn Report) -> std::result::Result<(), Failure> {
        output::renderer(format, self.width, self.terminal)
            .render(report, self.w)
            .and_then(|_| self.w.flush())
            .map_err(|source| Failure::Output {
                source,
                writes: report.writes_made(),
            })
    }

    fn raw(&mut self, text: &str) -> std::result::Result<(), Failure> {
        self.w
            .write_all(text.as_bytes())
            .and_then(|_| self.w.flush())
            .map_err(|source| Failure::Output {
                source,
                writes: Vec::new(),
            })
    }
}

/// Parses the process's arguments and runs the command. Returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout (exit 0), usage errors to stderr (exit 2);
            // a closed stream is ignored.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::Usage
            } else {
                ExitCode::Success
            } as i32;
        }
    };
    // Buffered: a report goes out in a few large writes, flushed when complete
    // (and `stat` flushes each interval).
    let stdout = io::stdout();
    let mut lock = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut out = Out {
        w: &mut lock,
        width: output::terminal_width(),
        terminal: std::io::IsTerminal::is_terminal(&stdout),
    };
    match run(cli, &mut out) {
        Ok(code) => code,
        Err(f) => exit::report(f) as i32,
    }
}

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub fn run(cli: Cli, out: &mut Out) -> std::result::Result<i32, Failure> {
    commands::exec(cli, out)
}
