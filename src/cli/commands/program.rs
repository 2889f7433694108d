//! `bfperf program`: put events on counters.

use clap::Args as ClapArgs;

use crate::cli::args::WriteOpts;
use crate::cli::commands::writer::write_blocks;
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::ops::program;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf program tile2 3 HNF_REQUESTS\n  bfperf program 'tile*' 0=MEMORY_READS 1=MEMORY_WRITES\n  bfperf program l3cachehalf0 0=HITS_BANK0 1=MISSES_BANK0 --start\n  bfperf program llt0 0=GDC_BANK0_RD_REQ --dry-run"
)]
pub(crate) struct Args {
    /// The block, or blocks: a kind (tile), a glob ('tile*') or a comma list
    block: String,
    /// COUNTER EVENT, or COUNTER=EVENT pairs; EVENT by name, 0x45 or 69
    #[arg(
        required = true,
        value_name = "ASSIGNMENT",
        allow_negative_numbers = true
    )]
    assignments: Vec<String>,
    /// Write an event number that is not in the block's table
    #[arg(long)]
    force: bool,
    /// Start an all-at-once block (l3cache, BF3 crspace) after programming: one enable write
    #[arg(long)]
    start: bool,
    /// Count clock cycles on these counters (BF3 crspace count_clock)
    #[arg(long)]
    count_clock: bool,
    #[command(flatten)]
    write: WriteOpts,
}

/// Validates the assignments, then programs every block chosen.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    let parsed = program::parse_assignments(&a.assignments, a.count_clock)?;
    let opts = program::ProgramOptions {
        force: a.force,
        start: a.start,
        count_clock: a.count_clock,
    };
    write_blocks(global, out, &a.block, a.write, |device, b| {
        program::plan_program(device, b, &parsed, &opts)
    })
}
