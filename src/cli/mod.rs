//! The command line: parses arguments, runs the command (one module per command in
//! `commands`), and hands its typed report to the output layer.

mod args;
pub(crate) mod child;
mod commands;
pub(crate) mod complete;
#[cfg(test)]
mod manual;
pub(crate) mod output;
mod plot;
pub(crate) mod report;
mod top;

pub(crate) use commands::Cli;

use crate::front::exit::{self, ExitCode};

use std::io::{self, Write};

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
pub(crate) fn main() -> i32 {
    if let Some(code) = version_alone() {
        return code;
    }
    let words: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The global options, described once: where the command word is and the parse.
    let root = commands::root();
    let at = commands::command_word(&root, words.get(1..).unwrap_or_default());
    if let Some(args) = commands::exporter::forwarded(words.get(1..).unwrap_or_default(), at) {
        return commands::exporter::forward(args);
    }
    let cli = match Cli::parse_words(&words, root, at) {
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
    // (and `stat` flushes each interval). 32 KiB: glibc's free of a chunk of 64 KiB
    // or more first consolidates every small chunk freed before it, about 0.1 M
    // instructions at the exit of a command that printed a table.
    let stdout = io::stdout();
    let mut lock = io::BufWriter::with_capacity(32 * 1024, stdout.lock());
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

/// `bfperf --version` (or `-V`) and nothing else: clap's answer, `bfperf 0.1.0`,
/// without building the command line's description to parse one flag. Scripts and
/// package checks run it often; it then costs the process start and one write.
fn version_alone() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    let flag = args.next()?;
    if args.next().is_some() || (flag != "--version" && flag != "-V") {
        return None;
    }
    let text = concat!("bfperf ", env!("CARGO_PKG_VERSION"), "\n");
    // As clap: a closed pipe is a quiet success, other write errors are ignored too.
    let _ = io::stdout().lock().write_all(text.as_bytes());
    Some(ExitCode::Success as i32)
}

/// The command's entry point, run before anything else (the binary has no Rust
/// runtime setup of its own): the standard streams and SIGPIPE made safe
/// ([`crate::front::start`]), and a closed standard output is an error: the report
/// would have nowhere to go. Returns the exit code.
pub fn entry() -> i32 {
    let closed = crate::front::start();
    if closed.contains(&libc::STDOUT_FILENO) {
        exit::diag("error: standard output is closed, so the report has nowhere to go; redirect it (> FILE, > /dev/null) or give -o FILE where the command takes it");
        return ExitCode::Error as i32;
    }
    main()
}

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub(crate) fn run(cli: Cli, out: &mut Out) -> std::result::Result<i32, Failure> {
    commands::exec(cli, out)
}
