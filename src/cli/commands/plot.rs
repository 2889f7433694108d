//! `bfperf plot`: charts of `stat` runs (drawn by `cli::plot`).

use clap::Args as ClapArgs;

use crate::cli::plot::{self, PlotOptions};
use crate::front::exit::Failure;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf stat -M ddr,llc -A -I 250 --json --duration 1m > run.ndjson\n  bfperf plot run.ndjson --per-block -o run.svg\n  bfperf plot before.ndjson after.ndjson -o compare.png"
)]
pub(crate) struct Args {
    /// `bfperf stat -I MS --json` outputs (NDJSON); several are drawn on the same charts
    #[arg(value_name = "RUN.ndjson", required = true)]
    runs: Vec<std::path::PathBuf>,
    /// The chart file: .svg or .png
    #[arg(short = 'o', long, value_name = "FILE")]
    output: std::path::PathBuf,
    /// One line per block (runs made with -A) instead of the kind's total
    #[arg(long)]
    per_block: bool,
}

impl From<Args> for PlotOptions {
    fn from(a: Args) -> PlotOptions {
        PlotOptions {
            runs: a.runs,
            output: a.output,
            per_block: a.per_block,
        }
    }
}

/// Draws the charts.
pub(super) fn exec(a: Args) -> Result<(), Failure> {
    Ok(plot::run(a.into())?)
}
