//! `bfperf exporter`: runs `bfperf-exporter`, the exporter's own program, with the
//! same arguments (as cargo runs its external subcommands), so that scripts and
//! units written for `bfperf exporter` keep working.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::front::exit::{diag, ExitCode};

/// The program the subcommand runs.
const PROGRAM: &str = "bfperf-exporter";

/// Everything after `exporter` goes to `bfperf-exporter` as it is (its --help says
/// what it takes); the global options before it go too.
#[derive(Debug, ClapArgs)]
#[command(disable_help_flag = true, disable_version_flag = true)]
pub(crate) struct Args {
    /// bfperf-exporter's arguments
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// The arguments for `bfperf-exporter` when this command line runs the `exporter`
/// subcommand (its word at `at`, as [`super::command_word`] finds it): every word
/// but that one. The words are compared as bytes, so a path that is not UTF-8 is
/// passed on as it is.
pub(crate) fn forwarded(words: &[OsString], at: Option<usize>) -> Option<Vec<OsString>> {
    let i = at?;
    if words[i] != "exporter" {
        return None;
    }
    let mut rest = words.to_vec();
    rest.remove(i);
    Some(rest)
}

/// Runs `bfperf-exporter` in this process's place: the one installed beside this
/// program, else the first on `PATH`. Returns only when it could not be run.
pub(crate) fn forward(args: Vec<OsString>) -> i32 {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(PROGRAM)))
        .filter(|p| p.is_file());
    let program = beside.unwrap_or_else(|| PathBuf::from(PROGRAM));
    let err = std::process::Command::new(&program)
        .arg0(PROGRAM)
        .args(args)
        .exec();
    diag(&format!(
        "error: cannot run {}: {err}; `bfperf exporter` runs the exporter's own program, \
         installed beside bfperf (package bfperf) or on PATH",
        program.display()
    ));
    ExitCode::Error as i32
}

/// Reached only if clap took a word for the `exporter` subcommand that
/// [`forwarded`] did not: said, rather than run the exporter with other words than
/// given.
pub(super) fn exec(_a: Args) -> Result<(), crate::front::exit::Failure> {
    Err(crate::error::Error::BadOption {
        problem: format!(
            "bfperf cannot tell which words of this command line are for {PROGRAM}; \
             run {PROGRAM} with them directly"
        ),
    }
    .into())
}
