//! `bfperf list`: events, registers, the kernel's perf events and PMUs, metrics and
//! groups, as perf list.

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::output::Format;
use crate::cli::report::ListReport;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::{diag, Failure};
use crate::front::setup::{device_here, load_metrics, open_device};

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

/// Prints what matches: the device's, or every generation's where there is none.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    let pmus = crate::perf::discover(&global.sysfs_root);
    let (listing, every_generation) = match device_here(global)? {
        Some(device) => {
            let set = load_metrics(global, &[device.generation()])?;
            let listing = crate::ops::list::list(&device, &pmus, &set, &a.patterns, a.details)?;
            (listing, false)
        }
        None => {
            diag("no BlueField here: listing every generation's events and metrics (on a DPU, its own)");
            (every_generation_listing(global, &pmus, &a)?, true)
        }
    };
    if listing.events.is_empty() && listing.metrics.is_empty() {
        diag(&format!("nothing matches {}", a.patterns.join(" or ")));
    }
    out.emit(
        a.format.or(Format::Table),
        &ListReport {
            listing,
            patterns: a.patterns,
            every_generation,
        },
    )
}

/// Every generation's listing, from the simulated devices' tables (the driver's).
fn every_generation_listing(
    global: &Global,
    pmus: &[crate::perf::Pmu],
    a: &Args,
) -> crate::error::Result<crate::ops::list::Listing> {
    let names = ["bf1", "bf2", "bf3"];
    let mut devices = Vec::new();
    for name in names {
        let sim = Global {
            sim: Some(name.to_string()),
            ..global.clone()
        };
        devices.push(open_device(&sim)?);
    }
    let gens: Vec<_> = devices.iter().map(|d| d.generation()).collect();
    let set = load_metrics(global, &gens)?;
    let named: Vec<(&str, &crate::device::Device)> = names.into_iter().zip(&devices).collect();
    crate::ops::list::list_generations(&named, pmus, &set, &a.patterns, a.details)
}
