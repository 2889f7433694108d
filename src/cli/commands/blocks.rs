//! `bfperf blocks`: every block and how it counts.

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::output::Format;
use crate::cli::report::{BlockRow, BlocksReport};
use crate::cli::Out;
use crate::device::Device;
use crate::error::Result;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::front::setup::open_device;

#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  bfperf blocks\n  bfperf blocks --csv")]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatOpts,
}

/// Prints the blocks.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> std::result::Result<(), Failure> {
    out.emit(a.format.or(Format::Table), &blocks(&open_device(global)?)?)
}

fn blocks(device: &Device) -> Result<BlocksReport> {
    let mut rows = Vec::new();
    for b in device.blocks() {
        let enabled = if b.has_enable {
            Some(
                crate::device::values::read_number(
                    device.fs(),
                    &crate::sysfs::layout::enable(&b.name),
                )? != 0,
            )
        } else {
            None
        };
        rows.push(BlockRow {
            block: b.name.clone(),
            kind: b.kind,
            mechanism: b.mechanism,
            counters: b.counters.len(),
            registers: b.registers.clone(),
            enabled,
            events: device.catalog(b)?.events.len(),
        });
    }
    Ok(BlocksReport {
        device: device.location(),
        generation: device.generation(),
        blocks: rows,
    })
}
