//! `bfperf read`: counters and registers, now.

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::output::Format;
use crate::cli::report::ReadReport;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::front::setup::open_device_for;
use crate::ops::{read, snapshot};

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf read tile2\n  bfperf read pcie --json\n  bfperf read all"
)]
pub(crate) struct Args {
    #[arg(value_name = "SELECTOR")]
    selectors: Vec<String>,
    #[command(flatten)]
    format: FormatOpts,
}

/// Reads the chosen blocks once.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    let device = open_device_for(global, &a.selectors)?;
    let blocks = device.select(&a.selectors)?;
    let r = read::read_blocks(&device, &blocks)?;
    let report = ReadReport {
        device: device.location(),
        timestamp: snapshot::rfc3339(r.wall),
        blocks: r.blocks,
    };
    out.emit(a.format.or(Format::Table), &report)
}
