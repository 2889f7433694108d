//! `bfperf list`: events, registers, the kernel's perf events and PMUs, metrics and
//! groups, as perf list.

use clap::Args as ClapArgs;

use crate::cli::args::{FormatOpts, Global};
use crate::cli::exit::{diag, Failure};
use crate::cli::output::Format;
use crate::cli::report::ListReport;
use crate::cli::setup::{load_metrics, open_device};
use crate::cli::Out;

/// List events, registers, perf events and PMUs, metrics and groups, as perf list
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf list\n  bfperf list memory\n  bfperf list 'GDC_*_RD_REQ' --details\n  bfperf list ddr --json\n  bfperf list perf   (the Arm cores' and the kernel's perf events, and the PMUs)"
)]
pub(crate) struct Args {
    /// Only what matches one of these (a glob or a substring, any case) in its
    /// name, description or group; a kind's name (tile, llt, perf) selects that kind
    patterns: Vec<String>,
    /// Metrics with their formulas and the events they need
    #[arg(long)]
    details: bool,
    #[command(flatten)]
    format: FormatOpts,
}

/// Prints what matches.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    let device = open_device(global)?;
    let set = load_metrics(global, &[device.generation()])?;
    let pmus = crate::perf::discover(&global.sysfs_root);
    let listing = crate::ops::list::list(&device, &pmus, &set, &a.patterns, a.details)?;
    if listing.events.is_empty() && listing.metrics.is_empty() {
        diag(&format!("nothing matches {}", a.patterns.join(" or ")));
    }
    out.emit(
        a.format.or(Format::Table),
        &ListReport {
            listing,
            patterns: a.patterns,
        },
    )
}
