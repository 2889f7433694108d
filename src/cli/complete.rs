//! Shell completion: a hidden `bfperf __complete` entry point gives the candidates for
//! one word of a command line, from the command tree (subcommands, flags) and the live
//! device (blocks, counters, events, registers, kinds), honouring `--sysfs-root` and
//! `--device` on that line. The scripts for bash, zsh and fish only call it.
//!
//! It scans the device once (its block directories) and reads at most one
//! `event_list`; on any error it offers nothing and prints nothing.

use std::path::PathBuf;

use crate::block::Mechanism;
use crate::cli::args::Shell;
use crate::device::Device;
use crate::front::args::Global;
use crate::kinds::Role;

/// One completion: the word, and a short description for shells that show one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub value: String,
    pub description: String,
}

impl Candidate {
    fn new(value: impl Into<String>, description: impl Into<String>) -> Candidate {
        // One line, no tabs, short: what a completion menu shows.
        let description: String = description
            .into()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut description = description.trim().to_string();
        if description.chars().count() > 60 {
            description = description.chars().take(57).collect::<String>() + "...";
        }
        Candidate {
            value: value.into(),
            description,
        }
    }

    /// The line the scripts read: `value`, or `value<TAB>description`.
    pub(crate) fn line(&self, descriptions: bool) -> String {
        if descriptions && !self.description.is_empty() {
            format!("{}\t{}", self.value, self.description)
        } else {
            self.value.clone()
        }
    }
}

fn plain(values: Vec<String>) -> Vec<Candidate> {
    values.into_iter().map(|v| Candidate::new(v, "")).collect()
}

/// What the words before the cursor say.
#[derive(Debug, Default)]
struct Line {
    global: Global,
    /// The subcommand path, e.g. ["program"] or ["sim", "mount"].
    command: Vec<String>,
    /// Positional words after the subcommand.
    positionals: Vec<String>,
    /// The word before the cursor when it is an option that takes a value.
    pending_option: Option<String>,
}

/// The commands under `cmd`, without clap's own `help` (added when the tree is built).
fn subcommand_names(cmd: &clap::Command) -> Vec<Candidate> {
    cmd.get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| {
            Candidate::new(
                c.get_name(),
                c.get_about().map(|a| a.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

fn find_subcommand<'a>(root: &'a clap::Command, path: &[String]) -> &'a clap::Command {
    let mut cmd = root;
    for name in path {
        match cmd.find_subcommand(name) {
            Some(c) => cmd = c,
            None => break,
        }
    }
    cmd
}

/// Options of a command (its own and the global ones) that take a value.
fn takes_value(cmd: &clap::Command, word: &str) -> bool {
    cmd.get_arguments().any(|a| {
        a.get_action().takes_values()
            && !a.is_positional()
            && (a.get_long().map(|l| format!("--{l}")).as_deref() == Some(word)
                || a.get_short().map(|s| format!("-{s}")).as_deref() == Some(word))
    })
}

fn parse_line(root: &clap::Command, words: &[String]) -> Line {
    let mut line = Line {
        global: Global {
            sysfs_root: std::env::var_os("BFPERF_SYSFS_ROOT")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/sys")),
            sim: std::env::var("BFPERF_SIM").ok().filter(|s| !s.is_empty()),
            ..Global::default()
        },
        ..Line::default()
    };
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let cmd = find_subcommand(root, &line.command);
        if let Some((name, value)) = w.split_once('=').filter(|(n, _)| n.starts_with("--")) {
            apply_global(&mut line.global, name, value);
        } else if w.starts_with('-')
            && w.len() > 1
            && !w[1..].starts_with(|c: char| c.is_ascii_digit())
        {
            if takes_value(cmd, w) || takes_value(root, w) {
                match words.get(i + 1) {
                    Some(v) => {
                        apply_global(&mut line.global, w, v);
                        i += 1;
                    }
                    None => line.pending_option = Some(w.clone()),
                }
            }
        } else if line.positionals.is_empty() && cmd.find_subcommand(w).is_some() {
            line.command.push(w.clone());
        } else {
            line.positionals.push(w.clone());
        }
        i += 1;
    }
    line
}

fn apply_global(global: &mut Global, name: &str, value: &str) {
    match name {
        "--sysfs-root" => global.sysfs_root = PathBuf::from(value),
        "--device" => global.device = Some(PathBuf::from(value)),
        // A simulated device is completed as it would be used.
        "--sim" => global.sim = Some(value.to_string()),
        _ => {}
    }
}

fn starts_with_ci(candidate: &str, prefix: &str) -> bool {
    candidate.len() >= prefix.len()
        && candidate.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// The candidates, with their descriptions, for `words[index]` of a command line of
/// `root` (`words[0]` is the program name; the word may be missing, as when the
/// cursor follows a space).
pub(crate) fn described(root: &clap::Command, words: &[String], index: usize) -> Vec<Candidate> {
    let index = index.min(words.len());
    let before: Vec<String> = words
        .get(1..index)
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let current = words.get(index).cloned().unwrap_or_default();
    // bash splits `0=HITS` at `=`: the value after a lone `=` is an event name.
    let after_equals = before.last().is_some_and(|w| w == "=");
    let before: Vec<String> = join_equals(&before);
    let line = parse_line(root, &before);
    if let Some(option) = &line.pending_option {
        let mut out = option_values(&line, option, &current);
        out.retain(|c| starts_with_ci(&c.value, &current));
        return out; // empty: a path, the shell's own file completion
    }
    let cmd = find_subcommand(root, &line.command);
    let mut out: Vec<Candidate> = if current.starts_with('-') {
        flags(cmd, root)
    } else if line.positionals.is_empty() && cmd.has_subcommands() {
        subcommand_names(cmd)
    } else {
        values(&line, &current, after_equals)
    };
    out.retain(|c| starts_with_ci(&c.value, &current));
    out.dedup_by(|a, b| a.value == b.value);
    out
}

/// Values of an option: `stat -e` specs (blocks and kinds, then after the `/` the
/// events of the first block chosen), `stat -M` metrics and groups.
fn option_values(line: &Line, option: &str, current: &str) -> Vec<Candidate> {
    if option == "--sim" {
        return ["bf1", "bf2", "bf3"]
            .into_iter()
            .map(|g| Candidate::new(g, "a simulated BlueField"))
            .collect();
    }
    let stat = line.command.first().is_some_and(|c| c == "stat");
    if !stat {
        return Vec::new();
    }
    let Some(device) = open(&line.global) else {
        return Vec::new();
    };
    match option {
        "-e" | "--event" => spec_values(&device, current),
        "-M" | "--metric" => {
            let set =
                crate::metrics::MetricSet::load(&[device.generation()], &line.global.metric_files);
            let mut out: Vec<Candidate> = set
                .metrics
                .iter()
                .map(|m| Candidate::new(m.def.name.clone(), m.def.description.clone()))
                .collect();
            let groups: std::collections::BTreeSet<&str> =
                set.metrics.iter().map(|m| m.def.group.as_str()).collect();
            out.extend(
                groups
                    .into_iter()
                    .map(|g| Candidate::new(g, "metric group")),
            );
            out
        }
        _ => Vec::new(),
    }
}

fn spec_values(device: &Device, current: &str) -> Vec<Candidate> {
    let Some((blocks, events)) = current.split_once('/') else {
        let mut out: Vec<Candidate> = device
            .kinds()
            .into_iter()
            .map(|k| Candidate::new(format!("{k}/"), format!("every {k} block")))
            .collect();
        out.extend(
            block_names(device, |_| true)
                .into_iter()
                .map(|c| Candidate::new(format!("{}/", c.value), c.description)),
        );
        return out;
    };
    let Some(block) = device
        .select(&[blocks.to_string()])
        .ok()
        .and_then(|b| b.first().copied())
    else {
        return Vec::new();
    };
    let done = events.rfind(',').map_or("", |i| &events[..=i]);
    let mut names: Vec<Candidate> = device
        .catalog(block)
        .map(|c| {
            c.events
                .iter()
                .map(|e| Candidate::new(e.name.clone(), e.description.unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if block.has_count_clock {
        names.push(Candidate::new("cycles", "clock cycles (count_clock)"));
    }
    names
        .into_iter()
        .map(|c| Candidate::new(format!("{blocks}/{done}{}", c.value), c.description))
        .collect()
}

/// Rejoins `N`, `=`, `EVENT` that bash split apart.
fn join_equals(words: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut glue = false;
    for w in words {
        if w == "=" {
            if let Some(last) = out.last_mut() {
                last.push('=');
                glue = true;
                continue;
            }
        }
        if glue {
            if let Some(last) = out.last_mut() {
                last.push_str(w);
            }
            glue = false;
        } else {
            out.push(w.clone());
        }
    }
    out
}

fn flags(cmd: &clap::Command, root: &clap::Command) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = cmd
        .get_arguments()
        .chain(root.get_arguments())
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .filter_map(|a| {
            a.get_long().map(|l| {
                Candidate::new(
                    format!("--{l}"),
                    a.get_help().map(|h| h.to_string()).unwrap_or_default(),
                )
            })
        })
        .collect();
    out.push(Candidate::new("--help", "Print help"));
    out.sort_by(|a, b| a.value.cmp(&b.value));
    out.dedup_by(|a, b| a.value == b.value);
    out
}

fn values(line: &Line, current: &str, after_equals: bool) -> Vec<Candidate> {
    let sub: Vec<&str> = line.command.iter().map(String::as_str).collect();
    match sub.as_slice() {
        ["completions"] if line.positionals.is_empty() => {
            plain(vec!["bash".into(), "zsh".into(), "fish".into()])
        }
        ["program"] | ["start"] | ["stop"] | ["clear"] | ["events"] | ["read"] | ["snapshot"] => {
            let Some(device) = open(&line.global) else {
                return Vec::new();
            };
            device_values(&device, sub[0], &line.positionals, current, after_equals)
        }
        _ => Vec::new(),
    }
}

fn open(global: &Global) -> Option<Device> {
    crate::front::setup::open_device(global).ok()
}

fn block_names(device: &Device, keep: impl Fn(&crate::block::Block) -> bool) -> Vec<Candidate> {
    device
        .blocks()
        .iter()
        .filter(|b| keep(b))
        .map(|b| {
            Candidate::new(
                b.name.clone(),
                format!("{} block, {}", b.kind.as_str(), b.mechanism.as_str()),
            )
        })
        .collect()
}

fn device_values(
    device: &Device,
    command: &str,
    positionals: &[String],
    current: &str,
    after_equals: bool,
) -> Vec<Candidate> {
    if positionals.is_empty() {
        return match command {
            "program" => block_names(device, |b| b.is_counter_block()),
            "start" => block_names(device, |b| b.mechanism == Mechanism::AllAtOnce),
            "stop" => block_names(device, |b| b.is_counter_block()),
            "clear" => block_names(device, |b| {
                b.def().clear_counters || b.registers.iter().any(|r| b.def().role(r) == Role::Count)
            }),
            "events" => block_names(device, |_| true),
            _ => selectors(device, command, positionals),
        };
    }
    if matches!(command, "read" | "snapshot") {
        return selectors(device, command, positionals);
    }
    let Ok(block) = device.block(&positionals[0]) else {
        return Vec::new();
    };
    let counters = || counters_of(block);
    let events = || events_of(device, block);
    match command {
        "program" => {
            if after_equals {
                return events();
            }
            if let Some((counter, _)) = current.split_once('=') {
                return events()
                    .into_iter()
                    .map(|e| Candidate::new(format!("{counter}={}", e.value), e.description))
                    .collect();
            }
            let pairs = positionals[1..].iter().any(|p| p.contains('='));
            match positionals.len() {
                1 => counters(),
                2 if !pairs => events(),
                _ if pairs => counters()
                    .into_iter()
                    .map(|c| Candidate::new(format!("{}=", c.value), c.description))
                    .collect(),
                _ => Vec::new(),
            }
        }
        "stop" if positionals.len() == 1 && block.mechanism == Mechanism::PerCounter => counters(),
        "clear" if positionals.len() == 1 => {
            if block.mechanism == Mechanism::Registers {
                plain(block.registers.clone())
            } else {
                counters()
            }
        }
        _ => Vec::new(),
    }
}

fn counters_of(block: &crate::block::Block) -> Vec<Candidate> {
    block
        .counters
        .iter()
        .map(|c| Candidate::new(c.to_string(), format!("counter {c} of {}", block.name)))
        .collect()
}

/// A block's events, with their numbers and descriptions.
fn events_of(device: &Device, block: &crate::block::Block) -> Vec<Candidate> {
    let Ok(catalog) = device.catalog(block) else {
        return Vec::new();
    };
    catalog
        .events
        .iter()
        .map(|e| {
            let d = format!("0x{:x} {}", e.number, e.description.unwrap_or_default());
            Candidate::new(e.name.clone(), d)
        })
        .collect()
}

fn selectors(device: &Device, command: &str, given: &[String]) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = device
        .kinds()
        .into_iter()
        .map(|k| Candidate::new(k, format!("every {k} block")))
        .collect();
    out.extend(block_names(device, |_| true));
    if command == "snapshot" || command == "read" {
        out.push(Candidate::new("all", "every block"));
    }
    out.retain(|c| !given.contains(&c.value));
    out
}

/// The completion script of a shell. Each script asks `bfperf __complete` for the
/// candidates; where there are none, the shell completes file names.
pub(crate) fn script(shell: Shell) -> String {
    match shell {
        Shell::Bash => BASH.to_string(),
        Shell::Zsh => ZSH.to_string(),
        Shell::Fish => FISH.to_string(),
    }
}

const BASH: &str = r#"# bash completion for bfperf and bfperf-exporter (generated by `bfperf completions bash`)
_bfperf() {
    local IFS=$'\n'
    # bfperf answers for bfperf-exporter too (the one beside it).
    COMPREPLY=($("${COMP_WORDS[0]%-exporter}" __complete --index "$COMP_CWORD" -- "${COMP_WORDS[@]}" 2>/dev/null))
}
complete -o default -F _bfperf bfperf bfperf-exporter
"#;

const ZSH: &str = r#"#compdef bfperf bfperf-exporter
# zsh completion for bfperf and bfperf-exporter (generated by `bfperf completions zsh`)
_bfperf() {
    local -a lines values shown
    local line
    # bfperf answers for bfperf-exporter too (the one beside it).
    lines=("${(@f)$("${words[1]%-exporter}" __complete --descriptions --index $((CURRENT - 1)) -- "${words[@]}" 2>/dev/null)}")
    if (( ${#lines} )) && [[ -n ${lines[1]} ]]; then
        for line in "${lines[@]}"; do
            values+=("${line%%$'\t'*}")
            if [[ $line == *$'\t'* ]]; then
                shown+=("${line%%$'\t'*}  -- ${line#*$'\t'}")
            else
                shown+=("$line")
            fi
        done
        # -U: bfperf already matched the word (in any case, so hnf_r finds HNF_REQUESTS).
        compadd -U -Q -l -d shown -- "${values[@]}"
    else
        _files
    fi
}
if [ "$funcstack[1]" = "_bfperf" ]; then
    _bfperf "$@"
else
    compdef _bfperf bfperf bfperf-exporter
fi
"#;

const FISH: &str = r#"# fish completion for bfperf and bfperf-exporter (generated by `bfperf completions fish`)
function __bfperf_complete
    set -l tokens (commandline -opc)
    set -l current (commandline -ct)
    # bfperf answers for bfperf-exporter too (the one beside it).
    set -l program (string replace -r -- '-exporter$' '' $tokens[1])
    $program __complete --descriptions --index (count $tokens) -- $tokens $current 2>/dev/null
end
complete -c bfperf -f -a '(__bfperf_complete)'
complete -c bfperf-exporter -f -a '(__bfperf_complete)'
complete -c bfperf -l sysfs-root -r -F
complete -c bfperf -l device -r -F
complete -c bfperf -s o -l output -r -F
complete -c bfperf-exporter -l sysfs-root -r -F
complete -c bfperf-exporter -l device -r -F
complete -c bfperf-exporter -l config -r -F
complete -c bfperf-exporter -l web.config.file -r -F
complete -c bfperf-exporter -l textfile -r -F
"#;
