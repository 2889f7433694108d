//! `bfperf clear`: reset counters or statistics registers.

use clap::Args as ClapArgs;

use crate::cli::args::WriteOpts;
use crate::cli::commands::writer::write_blocks;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::ops::control;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf clear tile2\n  bfperf clear tile2 3\n  bfperf clear pcie0 IN_P_PKT_CNT"
)]
pub(crate) struct Args {
    /// The block, or blocks: a kind, a glob or a comma list
    block: String,
    /// A counter number or register name (default: all of the block's counters, or its count registers)
    #[arg(allow_negative_numbers = true)]
    target: Option<String>,
    /// Also write a control register named as TARGET (ecc error injection, DISABLE)
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    write: WriteOpts,
}

/// Clears every block chosen.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    write_blocks(global, out, &a.block, a.write, |device, b| {
        control::plan_clear(device, b, a.target.as_deref(), a.force)
    })
}
