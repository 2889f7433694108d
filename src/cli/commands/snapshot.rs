//! `bfperf snapshot`: selected values at one instant, for `diff`.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::output::{self, Format, Report};
use crate::cli::report::SnapshotReport;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::{diag, Failure};
use crate::front::setup::open_device;
use crate::ops::snapshot;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf snapshot -o before.json && sleep 10 && bfperf snapshot -o after.json\n  bfperf diff before.json after.json\n  bfperf snapshot all -o >(gzip > all.json.gz)"
)]
pub(crate) struct Args {
    /// Blocks, kinds, or `all` (default: every pcie block)
    #[arg(value_name = "SELECTOR")]
    selectors: Vec<String>,
    /// Write to this file instead of standard output (`-` is standard output): a regular file is replaced atomically, a device, FIFO or socket written in place
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Accepted for compatibility: a symbolic link given as FILE is always followed
    #[arg(long, requires = "output", hide = true)]
    follow: bool,
    /// Output format (default json, the format `diff` reads)
    #[command(flatten)]
    format: FormatOpts,
}

/// Takes the snapshot and writes it.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    let device = open_device(global)?;
    let report = SnapshotReport(snapshot::take(&device, &a.selectors)?);
    let format = a.format.or(Format::Json);
    match a.output.as_deref() {
        Some(path) if path != Path::new("-") => {
            write_file(path, format, &report)?;
            let values: usize = report
                .0
                .blocks
                .iter()
                .map(|b| b.counters.len() + b.registers.len())
                .sum();
            diag(&format!(
                "wrote {} values of {} blocks to {}",
                values,
                report.0.blocks.len(),
                path.display()
            ));
            Ok(())
        }
        _ => out.emit(format, &report),
    }
}

/// Renders a report into a file, by the output file rule (`ops::outfile`).
fn write_file(
    path: &Path,
    format: Format,
    report: &dyn Report,
) -> std::result::Result<(), Failure> {
    let renderer = output::renderer(format, None, false);
    crate::outfile::replace(path, &mut |w| renderer.render(report, w))?;
    Ok(())
}
