//! `bfperf start`: start the counters of all-at-once blocks together.

use clap::Args as ClapArgs;

use crate::cli::args::WriteOpts;
use crate::cli::commands::writer::write_blocks;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::ops::control;

#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  bfperf start l3cachehalf0\n  bfperf start llt --dry-run")]
pub(crate) struct Args {
    /// The block, or blocks: a kind (l3cache), a glob or a comma list
    block: String,
    #[command(flatten)]
    write: WriteOpts,
}

/// Starts every block chosen.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    write_blocks(global, out, &a.block, a.write, control::plan_start)
}
