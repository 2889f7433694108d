//! `bfperf stop`: stop all-at-once blocks, or un-program counters.

use clap::Args as ClapArgs;

use crate::cli::args::WriteOpts;
use crate::cli::commands::writer::write_blocks;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::ops::control;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf stop l3cachehalf0\n  bfperf stop tile2 3\n  bfperf stop 'llt*'"
)]
pub(crate) struct Args {
    /// The block, or blocks: a kind, a glob or a comma list
    block: String,
    /// Only this counter (per-counter blocks)
    #[arg(allow_negative_numbers = true)]
    counter: Option<String>,
    #[command(flatten)]
    write: WriteOpts,
}

/// Stops every block chosen.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    write_blocks(global, out, &a.block, a.write, |device, b| {
        control::plan_stop(device, b, a.counter.as_deref())
    })
}
