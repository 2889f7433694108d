//! The command line: parses arguments, runs the command (one module per command in
//! `commands`), and hands its typed report to the output layer.

mod args;
pub(crate) mod child;
mod commands;
pub(crate) mod complete;
pub(crate) mod exit;
#[cfg(feature = "exporter")]
mod exporter;
#[cfg(test)]
mod manual;
pub(crate) mod output;
mod plot;
pub(crate) mod report;
mod setup;
mod top;

pub(crate) use commands::Cli;
pub(crate) use exit::ExitCode;

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
pub(crate) fn main() -> i32 {
    if let Some(code) = version_alone() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout (exit 0), usage errors to stderr (exit 2);
            // a closed stream is ignored. The exporter's usage errors are lines of
            // its log, in the format it was asked for.
            if let (true, Some(format)) = (e.use_stderr(), exporter_log_format()) {
                exit::set_log(format, exit::Level::Info);
                let text = e.render().to_string();
                let first = text.lines().next().unwrap_or_default();
                let said = first.strip_prefix("error: ").unwrap_or(first);
                exit::log(
                    exit::Level::Error,
                    &format!("{said} (bfperf exporter --help says what it takes)"),
                );
                return ExitCode::Usage as i32;
            }
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

/// The log format of an `exporter` command line (its `--log.format`, logfmt when
/// not given or not one it knows), None for any other command: what a usage error
/// is written in.
fn exporter_log_format() -> Option<exit::LogFormat> {
    use clap::ValueEnum;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let at = args.iter().position(|a| a == "exporter")?;
    let rest = &args[at + 1..];
    let value = rest
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.strip_prefix("--log.format") {
            Some("") => rest.get(i + 1).cloned(),
            Some(v) => v.strip_prefix('=').map(str::to_string),
            None => None,
        });
    let known = value.and_then(|v| exit::LogFormat::from_str(&v, true).ok());
    Some(known.unwrap_or(exit::LogFormat::Logfmt))
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
/// runtime setup of its own): standard streams that were closed are pointed at
/// /dev/null, so that no file bfperf opens later (a lock, a journal, a device file)
/// takes their number and receives the report, SIGPIPE is ignored (a closed pipe is
/// an error to handle, as in any Rust program), and a closed standard output is an
/// error: the report would have nowhere to go. Returns the exit code.
pub fn entry() -> i32 {
    let stdout_closed = guard_standard_streams().contains(&libc::STDOUT_FILENO);
    // SAFETY: ignoring a signal before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    if stdout_closed {
        exit::diag("error: standard output is closed, so the report has nowhere to go; redirect it (> FILE, > /dev/null) or give -o FILE where the command takes it");
        return ExitCode::Error as i32;
    }
    main()
}

/// Points standard input, output and error at /dev/null where they are closed.
/// Returns the numbers that were closed.
fn guard_standard_streams() -> Vec<i32> {
    let mut closed = Vec::new();
    for fd in [libc::STDIN_FILENO, libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        closed.push(fd);
        // SAFETY: opens /dev/null (a NUL-terminated literal); the lowest free
        // number is `fd` (those below it are open by now), so the open takes it.
        // Not close-on-exec: it stands for the stream a command run by `stat`
        // inherits.
        let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if null >= 0 && null != fd {
            // SAFETY: moves our own descriptor onto the closed number.
            unsafe {
                libc::dup2(null, fd);
                libc::close(null);
            }
        }
    }
    closed
}

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub(crate) fn run(cli: Cli, out: &mut Out) -> std::result::Result<i32, Failure> {
    commands::exec(cli, out)
}
