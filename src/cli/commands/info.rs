//! `bfperf info`: the device at a glance.

use std::collections::BTreeMap;

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::output::Format;
use crate::cli::report::InfoReport;
use crate::cli::Out;
use crate::device::Device;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::front::setup::open_device;

#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  bfperf info\n  bfperf --sim bf3 info --json")]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatOpts,
}

/// Prints the device's summary.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    out.emit(a.format.or(Format::Table), &info(&open_device(global)?))
}

fn info(device: &Device) -> InfoReport {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for b in device.blocks() {
        *kinds.entry(b.kind.as_str().to_string()).or_default() += 1;
    }
    InfoReport {
        device: device.location(),
        generation: device.generation(),
        blocks: device.blocks().len(),
        kinds,
    }
}
