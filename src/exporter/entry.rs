//! `bfperf-exporter`'s entry point: the command line parsed, the log set up as it
//! asks, the exporter run, and how it ended said in the log.

use clap::Parser;

use crate::exporter::args::Cli;
use crate::front::exit::{self, ExitCode, Level, LogFormat};

/// The program's entry point, run before anything else (the binary has no Rust
/// runtime setup of its own; see [`crate::front::start`]). Returns the exit code.
pub fn entry() -> i32 {
    crate::front::start();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version go to stdout (exit 0); a usage error is a line of the
        // log, in the format it was asked for (exit 2).
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::Success as i32;
        }
        Err(e) => {
            exit::set_log(log_format_asked(), Level::Info);
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            let said = first.strip_prefix("error: ").unwrap_or(first);
            exit::log(
                Level::Error,
                &format!("{said} (bfperf-exporter --help says what it takes)"),
            );
            return ExitCode::Usage as i32;
        }
    };
    exit::set_log(cli.options.log_format, cli.options.log_level);
    match super::run(&cli.global, cli.options) {
        Ok(()) => ExitCode::Success as i32,
        Err(e) => exit::report(e.into()) as i32,
    }
}

/// The `--log.format` of a command line that did not parse (logfmt when not given
/// or not one it knows): what its usage error is written in.
fn log_format_asked() -> LogFormat {
    use clap::ValueEnum;
    // Lossily: a word that is not UTF-8 is a usage error to report, not a panic.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let value = args
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.strip_prefix("--log.format") {
            Some("") => args.get(i + 1).cloned(),
            Some(v) => v.strip_prefix('=').map(str::to_string),
            None => None,
        });
    value
        .and_then(|v| LogFormat::from_str(&v, true).ok())
        .unwrap_or(LogFormat::Logfmt)
}
