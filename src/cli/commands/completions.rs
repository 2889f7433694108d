//! `bfperf completions`: the shell completion scripts, and the hidden
//! `__complete` entry point they call for candidates.

use clap::Args as ClapArgs;

use crate::cli::args::Shell;
use crate::cli::complete;
use crate::cli::Out;
use crate::front::exit::Failure;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf completions bash > /etc/bash_completion.d/bfperf\n  bfperf completions zsh > \"${fpath[1]}/_bfperf\"\n  bfperf completions fish > ~/.config/fish/completions/bfperf.fish"
)]
pub(crate) struct Args {
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the script.
pub(super) fn exec(a: Args, out: &mut Out) -> Result<(), Failure> {
    out.raw(&complete::script(a.shell))
}

#[derive(Debug, ClapArgs)]
pub(crate) struct CompleteArgs {
    /// Index of the word being completed
    #[arg(long)]
    index: usize,
    /// Print `candidate<TAB>description` lines (zsh, fish)
    #[arg(long)]
    descriptions: bool,
    /// The command line's words, the program name first
    #[arg(last = true, allow_hyphen_values = true)]
    words: Vec<String>,
}

/// Prints the candidates, one per line.
pub(super) fn exec_complete(a: CompleteArgs, out: &mut Out) -> Result<(), Failure> {
    let mut text = String::new();
    let mut root = <crate::cli::commands::Cli as clap::CommandFactory>::command();
    // `bfperf exporter` takes what bfperf-exporter takes.
    #[cfg(feature = "exporter")]
    {
        use clap::CommandFactory;
        root = root.mut_subcommand("exporter", |_| {
            crate::exporter::args::Cli::command().name("exporter")
        });
    }
    // Every command's arguments, which are otherwise built only for the one parsed.
    root.build();
    // A line of bfperf-exporter is completed as the same line of `bfperf exporter`.
    let (mut words, mut index) = (a.words, a.index);
    if words
        .first()
        .is_some_and(|w| w.rsplit('/').next() == Some("bfperf-exporter"))
    {
        words.splice(0..1, ["bfperf".to_string(), "exporter".to_string()]);
        index += 1;
    }
    for c in complete::described(&root, &words, index) {
        text.push_str(&c.line(a.descriptions));
        text.push('\n');
    }
    out.raw(&text)
}
