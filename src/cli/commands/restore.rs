//! `bfperf restore`: undo what a killed `stat` or exporter left programmed.

use clap::Args as ClapArgs;

use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::Failure;
use crate::front::setup::{lock_device, open_device};

#[derive(Debug, ClapArgs)]
#[command(
    long_about = "Put the device back as it was before a `stat` or exporter that was killed \
        (SIGKILL, OOM, power loss).\n\nBefore their first write, `stat` and the exporter record \
        the programming they change (events, enable, count_clock) in a journal beside the \
        device's lock (/run/bfperf for root), and remove it when they have restored the device. \
        A journal left behind means its writer died; `restore` writes the recorded programming \
        back and removes the journal. It takes the writer lock: a writer still running is named, \
        not disturbed.\n\nThe next `stat`, `top` or exporter restores a leftover journal by itself \
        before it starts. `program`, `start`, `stop` and `clear` refuse to run while one is pending \
        (it would undo their write at the next restore): run `restore` first, or give them \
        --discard-journal to keep the device as it is and forget the journal. A journal naming \
        a block or counter this device does not have is refused whole; nothing is written from it.",
    after_help = "Examples:\n  bfperf restore   (after `kill -9` of a stat or exporter)"
)]
pub(crate) struct Args {}

/// Restores a leftover journal, or says there is none.
pub(super) fn exec(global: &Global, _a: Args, out: &mut Out) -> Result<(), Failure> {
    let device = open_device(global)?;
    let _lock = lock_device(global, &device)?;
    let text = match crate::measure::owner::journal::restore_leftover(&device)? {
        Some(r) => format!("{}\n", r.describe()),
        None => format!(
            "nothing to restore: no journal for {} (every writer restored the device, or none ran)\n",
            device.canonical_location()
        ),
    };
    out.raw(&text)
}
