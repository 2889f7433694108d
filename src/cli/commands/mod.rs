//! One module per command, each holding its arguments, its help with examples, and
//! `exec` (the shape of cargo's `src/bin/cargo/commands/`). This module lists them and
//! dispatches; commands that write the device share one sequence (`writer`).

use clap::{Parser, Subcommand};

use crate::cli::args::Global;
use crate::cli::exit::ExitCode;
use crate::cli::exit::Failure;
use crate::cli::Out;

mod blocks;
mod clear;
mod completions;
mod diff;
mod events;
mod exporter;
mod info;
mod list;
mod metrics;
mod plot;
mod program;
mod read;
mod restore;
mod sim;
mod snapshot;
mod start;
pub(super) mod stat;
mod stop;
mod top;
mod writer;

#[derive(Debug, Parser)]
#[command(
    name = "bfperf",
    version,
    about = "Measure and export the hardware performance counters of NVIDIA BlueField DPUs",
    long_about = "Measure and export the hardware performance counters of NVIDIA BlueField DPUs.\n\n\
        bfperf finds the mlxbf-pmc driver's hwmon device, names the events of its blocks, \
        programs, reads and snapshots counters, measures them perf-style (`stat`: counts, \
        rates and metrics during a command or a period, multiplexed when they do not fit), \
        and exports them to Prometheus (`exporter`). Every writing command checks its input \
        before the first write, and `stat` and the exporter put the device back as they \
        found it.",
    after_help = "Examples:\n  bfperf info\n  bfperf stat -M ddr,llc --duration 10s\n  bfperf stat -e 'tile/MEMORY_READS,MEMORY_WRITES/' -I 1000 -- ./workload\n  bfperf exporter\n  bfperf program tile2 3 HNF_REQUESTS && bfperf read tile2\n  bfperf --sim bf3 stat -M ddr --duration 2s   (no DPU needed)"
)]
/// The whole command line.
pub(crate) struct Cli {
    /// The options every command takes.
    #[command(flatten)]
    pub global: Global,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands, in the order `bfperf --help` lists them. Each one's help is the doc
/// comment of its `Args`.
#[derive(Debug, Subcommand)]
#[allow(missing_docs)]
pub(crate) enum Command {
    Info(info::Args),
    Blocks(blocks::Args),
    List(list::Args),
    Events(events::Args),
    Program(program::Args),
    Start(start::Args),
    Stop(stop::Args),
    Clear(clear::Args),
    Read(read::Args),
    Snapshot(snapshot::Args),
    Diff(diff::Args),
    Stat(stat::Args),
    Exporter(exporter::Args),
    Top(top::Args),
    Plot(plot::Args),
    Restore(restore::Args),
    Metrics(metrics::Args),
    Completions(completions::Args),
    #[command(subcommand)]
    Sim(sim::SimCommand),
    #[command(name = "__complete", hide = true)]
    Complete(completions::CompleteArgs),
}

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub(super) fn exec(cli: Cli, out: &mut Out) -> Result<i32, Failure> {
    let g = &cli.global;
    match cli.command {
        Command::Stat(a) => return stat::exec(g, a, out),
        Command::Info(a) => info::exec(g, a, out),
        Command::Blocks(a) => blocks::exec(g, a, out),
        Command::List(a) => list::exec(g, a, out),
        Command::Events(a) => events::exec(g, a, out),
        Command::Program(a) => program::exec(g, a, out),
        Command::Start(a) => start::exec(g, a, out),
        Command::Stop(a) => stop::exec(g, a, out),
        Command::Clear(a) => clear::exec(g, a, out),
        Command::Read(a) => read::exec(g, a, out),
        Command::Snapshot(a) => snapshot::exec(g, a, out),
        Command::Diff(a) => diff::exec(g, a, out),
        Command::Exporter(a) => exporter::exec(g, a),
        Command::Top(a) => top::exec(g, a),
        Command::Plot(a) => plot::exec(a),
        Command::Restore(a) => restore::exec(g, a, out),
        Command::Metrics(a) => metrics::exec(g, a, out),
        Command::Completions(a) => completions::exec(a, out),
        Command::Sim(cmd) => sim::exec(g, cmd).map_err(Failure::from),
        Command::Complete(a) => completions::exec_complete(a, out),
    }
    .map(|()| ExitCode::Success as i32)
}
