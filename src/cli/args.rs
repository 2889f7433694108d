//! The option groups the command's subcommands share (the global options, which the
//! exporter's program takes too, are `front::args`').

use clap::{Args, ValueEnum};

use crate::cli::output::Format;

/// The output format switch of every command that prints data.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(super) struct FormatOpts {
    /// Output format
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with_all = ["json", "csv"])]
    pub format: Option<Format>,
    /// Print JSON (same as --format json)
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV (same as --format csv)
    #[arg(long)]
    pub csv: bool,
}

impl FormatOpts {
    /// The chosen format, or `default` when none was given.
    pub(super) fn or(self, default: Format) -> Format {
        match (self.format, self.json, self.csv) {
            (Some(f), _, _) => f,
            (None, true, _) => Format::Json,
            (None, _, true) => Format::Csv,
            _ => default,
        }
    }
}

#[derive(Debug, Args, Clone, Copy, Default)]
pub(super) struct WriteOpts {
    /// Print each write (file and exact bytes) instead of doing it
    #[arg(long)]
    pub dry_run: bool,
    /// When a measurement was killed and left a journal of the device's earlier
    /// programming, forget it and write anyway (by default such a write is refused
    /// until `bfperf restore` has put the device back)
    #[arg(long)]
    pub discard_journal: bool,
    #[command(flatten)]
    pub format: FormatOpts,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}
