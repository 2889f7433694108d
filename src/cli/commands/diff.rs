//! `bfperf diff`: what changed between two snapshots.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::block::Generation;
use crate::cli::args::FormatOpts;
use crate::cli::output::Format;
use crate::cli::report::DiffReport;
use crate::cli::{plot, Out};
use crate::front::args::Global;
use crate::front::exit::{diag, Failure};
use crate::front::setup::{load_metrics, metric_params};
use crate::ops::{diff, snapshot};

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf diff before.json after.json\n  bfperf diff before.json after.json --plot rates.svg\n  bfperf diff a.json b.json --strict --json"
)]
pub(crate) struct Args {
    /// The older snapshot
    old: PathBuf,
    /// The newer snapshot
    new: PathBuf,
    /// Refuse snapshots of different hosts, devices or generations (default: warn)
    #[arg(long)]
    strict: bool,
    /// Also draw each value's rate as a bar chart into FILE (.svg or .png)
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    format: FormatOpts,
}

/// Compares the snapshots; draws the chart if asked.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    let old = snapshot::load(&a.old)?;
    let new = snapshot::load(&a.new)?;
    let names = (a.old.display().to_string(), a.new.display().to_string());
    let said = diff::check(&old, &new, a.strict, (&names.0, &names.1))?;
    let d = diff::diff(&old, &new);
    // The origin's differences (said by check) and the values left unread.
    for w in said
        .iter()
        .chain(d.warnings.iter().filter(|w| !said.contains(w)))
    {
        diag(&format!("warning: {w}"));
    }
    if let Some(path) = &a.plot {
        plot::diff_bars(&d, path)?;
    }
    let set = load_metrics(global, &[Generation::from_label(&new.generation)])?;
    let values = diff::metrics(&d, &new, &set, metric_params(global)?);
    out.emit(
        a.format.or(Format::Table),
        &DiffReport {
            diff: d,
            metrics: values,
        },
    )
}
