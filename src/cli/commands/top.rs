//! `bfperf top`: the live view (drawn by `cli::top`).

use clap::Args as ClapArgs;

use crate::cli::top::{self, TopOptions};
use crate::front::args::{parse_duration, Global};
use crate::front::exit::Failure;

#[derive(Debug, ClapArgs)]
#[command(
    long_about = "Watch the device live, full screen, refreshed in place: the headline \
        metrics of this generation (PCIe in/out, memory or DDR and LLC bandwidth, L3 hit \
        ratio, PLL frequencies) with their history, every block's activity sorted to show \
        imbalance, and every counter and register's rate.\n\nIt programs what its panels \
        need like `stat` (the writer lock, multiplexing with coverage shown, the journal) and \
        restores the device when it ends (q, Ctrl-C, SIGTERM, SIGHUP, or a crash). Without \
        the right to write (or with --read-only) it writes nothing and shows the registers and \
        whatever is already programmed.\n\nKeys: q quit, p pause, Tab/arrows switch view, \
        s sort, / filter blocks, +/- refresh interval, ? help.",
    after_help = "Examples:\n  bfperf top\n  bfperf top -i 500ms -M l3\n  bfperf top -e 'tile/HNF_REQUESTS/'\n  bfperf top -e cycles,instructions -M cpu   (the Arm cores beside the blocks)\n  bfperf top --read-only   (writes nothing; what a user without root gets)\n  bfperf --sim bf3 top   (no DPU needed)"
)]
pub(crate) struct Args {
    /// Refresh every TIME (`+`/`-` change it while running)
    #[arg(long, short = 'i', value_name = "TIME", default_value = "1s", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// More metrics or groups to show (as stat -M), in a panel of their own
    #[arg(short = 'M', long = "metric", value_name = "NAME|GROUP")]
    metrics: Vec<String>,
    /// More events to count (as stat -e; perf events such as cycles too, counted
    /// system-wide even with --read-only), shown in the raw view
    #[arg(short = 'e', long = "event", value_name = "SPEC")]
    events: Vec<String>,
    /// Write nothing: show the registers and whatever is already programmed
    #[arg(long)]
    read_only: bool,
}

impl From<Args> for TopOptions {
    fn from(a: Args) -> TopOptions {
        TopOptions {
            interval: a.interval,
            metrics: a.metrics,
            events: a.events,
            read_only: a.read_only,
        }
    }
}

/// Runs the view until it is quit.
pub(super) fn exec(global: &Global, a: Args) -> Result<(), Failure> {
    Ok(top::run(global, a.into())?)
}
