//! One module per command, each holding its arguments, its help with examples, and
//! `exec` (the shape of cargo's `src/bin/cargo/commands/`). This module lists them and
//! dispatches; commands that write the device share one sequence (`writer`).

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::ExitCode;
use crate::front::exit::Failure;

mod blocks;
mod clear;
mod completions;
mod diff;
mod events;
pub(crate) mod exporter;
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
    // What clap sets for a required subcommand, which is added apart (`Cli`).
    subcommand_required = true,
    arg_required_else_help = true,
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
/// The command line without its commands: its name, help and global options.
struct Root {
    #[command(flatten)]
    global: Global,
}

/// The whole command line.
#[derive(Debug)]
pub(crate) struct Cli {
    /// The options every command takes.
    pub global: Global,
    /// The command.
    pub command: Command,
}

// The `_mut` forms take the values out of the matches; the others copy the
// matches first (as clap's derive does), once for the whole line.
impl FromArgMatches for Cli {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Cli::from_arg_matches_mut(&mut m.clone())
    }
    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        Ok(Cli {
            global: Global::from_arg_matches_mut(m)?,
            command: Command::from_arg_matches_mut(m)?,
        })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.update_from_arg_matches_mut(&mut m.clone())
    }
    fn update_from_arg_matches_mut(&mut self, m: &mut ArgMatches) -> Result<(), clap::Error> {
        self.global.update_from_arg_matches_mut(m)?;
        self.command.update_from_arg_matches_mut(m)
    }
}

impl CommandFactory for Cli {
    fn command() -> clap::Command {
        keeping_help(Root::command(), Command::augment_subcommands)
    }
    fn command_for_update() -> clap::Command {
        keeping_help(
            Root::command_for_update(),
            Command::augment_subcommands_for_update,
        )
    }
}

impl Parser for Cli {}

impl Cli {
    /// Parses `words` (the program's name first). When they name a command, it is
    /// parsed by a command line that lists that command alone: clap copies every
    /// global option into each command it lists before parsing, which cost a
    /// one-shot command more than half of its memory. Anything that does not parse
    /// so (help, a mistake, a word that is no command) is parsed again by the
    /// whole command line, whose answer, help and "did you mean" are the ones a
    /// user sees.
    ///
    /// `root` is [`root`]'s command line and `at` where its command word is
    /// ([`command_word`]), both already worked out by the caller.
    pub(crate) fn parse_words(
        words: &[std::ffi::OsString],
        root: clap::Command,
        at: Option<usize>,
    ) -> Result<Cli, clap::Error> {
        let named = at.and_then(|i| words[i + 1].to_str()).and_then(|word| {
            Command::augment_subcommands(clap::Command::new("bfperf"))
                .find_subcommand(word)
                .cloned()
        });
        if let Some(only) = named {
            let parsed = root
                .subcommand(only)
                .try_get_matches_from(words)
                .and_then(|mut m| Cli::from_arg_matches_mut(&mut m));
            if let Ok(cli) = parsed {
                return Ok(cli);
            }
        }
        Cli::command()
            .try_get_matches_from(words)
            .and_then(|mut m| Cli::from_arg_matches_mut(&mut m))
    }
}

/// The command line without its commands: its name, help and global options.
pub(crate) fn root() -> clap::Command {
    Root::command()
}

/// Where a command line's command is among `words` (the program's name left
/// out): the first word that is not an option or a global option's value. The
/// global options that take a value are known from clap's own description of
/// them in `root` ([`root`]); words are compared as bytes, so a value that is not
/// UTF-8 is skipped like any other. None before `--`, or when every word is an
/// option.
pub(crate) fn command_word(root: &clap::Command, words: &[std::ffi::OsString]) -> Option<usize> {
    let takes_value = |word: &[u8]| {
        root.get_arguments().any(|a| {
            let long = word.strip_prefix(b"--");
            let short = match word {
                [b'-', c] => Some(char::from(*c)),
                _ => None,
            };
            a.get_action().takes_values()
                && match long {
                    Some(l) => a.get_long().map(str::as_bytes) == Some(l),
                    None => short.is_some() && a.get_short() == short,
                }
        })
    };
    let mut i = 0;
    while i < words.len() {
        let word = words[i].as_encoded_bytes();
        if word == b"--" {
            return None;
        }
        if !word.starts_with(b"-") {
            return Some(i);
        }
        i += match !word.contains(&b'=') && takes_value(word) {
            true => 2,
            false => 1,
        };
    }
    None
}

/// The commands, in the order `bfperf --help` lists them, each with its one-line help.
/// Each command's arguments are built only when that command is parsed (`Lazy`): a
/// command line pays for its own command, not for all twenty.
#[derive(Debug, Subcommand)]
#[allow(missing_docs)]
pub(crate) enum Command {
    /// Show the device: where it is, its generation, its blocks by kind
    Info(Lazy<info::Args>),
    /// List the blocks: kind, mechanism, counters, enable state, events known
    Blocks(Lazy<blocks::Args>),
    /// List events, registers, perf events and PMUs, metrics and groups, as perf list
    List(Lazy<list::Args>),
    /// List the events of a block, or of the kinds of several (a kind, a glob, a list, all)
    Events(Lazy<events::Args>),
    /// Program counters: `program tile2 3 HNF_REQUESTS` or `program l3cachehalf0 0=HITS_BANK0 1=MISSES_BANK0 --start`
    Program(Lazy<program::Args>),
    /// Start the counters of an L3-cache or BF3 crspace block together (resets them to 0)
    Start(Lazy<start::Args>),
    /// Stop an all-at-once block, or un-program one or all counters of a block
    Stop(Lazy<stop::Args>),
    /// Reset counters or statistics registers to 0
    Clear(Lazy<clear::Args>),
    /// Read counters and registers: blocks, kinds (tile, pcie, l3cache...) or all
    Read(Lazy<read::Args>),
    /// Read selected values once into a JSON snapshot (default: the pcie blocks)
    Snapshot(Lazy<snapshot::Args>),
    /// Compare two snapshots: deltas, rates, wraps and resets, PCIe throughput
    Diff(Lazy<diff::Args>),
    /// Count events during a command or a period: `stat -e 'tile/MEMORY_READS/' -- CMD`
    Stat(Lazy<stat::Args>),
    /// Export the counters to Prometheus: runs bfperf-exporter (serve /metrics, write a textfile, push)
    Exporter(Lazy<exporter::Args>),
    /// Watch the device live: bandwidths, ratios and every block's activity, refreshed in place
    Top(Lazy<top::Args>),
    /// Draw a `stat -I --json` run (or several) as charts: SVG or PNG
    Plot(Lazy<plot::Args>),
    /// Put the device back as it was before a `stat` or exporter that was killed
    /// (SIGKILL, OOM, power loss), from the journal it left
    Restore(Lazy<restore::Args>),
    /// List the metrics available on this device: name, group, unit, formula, events
    Metrics(Lazy<metrics::Args>),
    /// Print a shell completion script
    Completions(Lazy<completions::Args>),
    /// A simulated BlueField device, for trying bfperf without a DPU
    #[command(subcommand)]
    Sim(Lazy<sim::SimCommand>),
    /// Completion candidates for the words of a command line (used by the scripts)
    #[command(name = "__complete", hide = true)]
    Complete(Lazy<completions::CompleteArgs>),
}

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub(super) fn exec(cli: Cli, out: &mut Out) -> Result<i32, Failure> {
    let g = &cli.global;
    match cli.command {
        Command::Stat(a) => return stat::exec(g, a.0, out),
        Command::Info(a) => info::exec(g, a.0, out),
        Command::Blocks(a) => blocks::exec(g, a.0, out),
        Command::List(a) => list::exec(g, a.0, out),
        Command::Events(a) => events::exec(g, a.0, out),
        Command::Program(a) => program::exec(g, a.0, out),
        Command::Start(a) => start::exec(g, a.0, out),
        Command::Stop(a) => stop::exec(g, a.0, out),
        Command::Clear(a) => clear::exec(g, a.0, out),
        Command::Read(a) => read::exec(g, a.0, out),
        Command::Snapshot(a) => snapshot::exec(g, a.0, out),
        Command::Diff(a) => diff::exec(g, a.0, out),
        Command::Exporter(a) => exporter::exec(a.0),
        Command::Top(a) => top::exec(g, a.0),
        Command::Plot(a) => plot::exec(a.0),
        Command::Restore(a) => restore::exec(g, a.0, out),
        Command::Metrics(a) => metrics::exec(g, a.0, out),
        Command::Completions(a) => completions::exec(a.0, out),
        Command::Sim(cmd) => sim::exec(g, cmd.0).map_err(Failure::from),
        Command::Complete(a) => completions::exec_complete(a.0, out),
    }
    .map(|()| ExitCode::Success as i32)
}

/// A command's arguments (or subcommands), added to its `clap::Command` only when
/// that command is parsed, shown or completed (clap's `Command::defer`).
#[derive(Debug)]
pub(crate) struct Lazy<T>(pub T);

impl<T: FromArgMatches> FromArgMatches for Lazy<T> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(m).map(Lazy)
    }
    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(m).map(Lazy)
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(m)
    }
    fn update_from_arg_matches_mut(&mut self, m: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(m)
    }
}

impl<T: Args> Args for Lazy<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keeping_help(cmd, T::augment_args))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keeping_help(cmd, T::augment_args_for_update))
    }
}

/// Adds a command's arguments with `augment`, keeping the command's own help (its
/// variant's doc comment, set when the command was declared) over the one a flattened
/// group of options brings: clap's derive sets the variant's help after the arguments.
fn keeping_help(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let mut cmd = augment(cmd);
    if let Some(a) = about {
        cmd = cmd.about(a);
    }
    if let Some(a) = long_about {
        cmd = cmd.long_about(a);
    }
    cmd
}

/// A command's subcommands (`sim`'s), added as [`Lazy`] adds arguments.
impl<T: Subcommand> Subcommand for Lazy<T> {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_subcommands)
    }
    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_subcommands_for_update)
    }
    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}
