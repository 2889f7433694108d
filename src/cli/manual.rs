//! The man pages: clap's synopsis, description and options (the global ones on every
//! page), then the sections a reader looks for, kept here as data: EXIT STATUS,
//! ENVIRONMENT, FILES and SEE ALSO on every page, per command its rules (the spec
//! grammar, multiplexing and restore on bfperf-stat(1)), and its EXAMPLES, taken from
//! the command's `--help` so that both show the same.
//! `docs/man/` holds them generated (`BFPERF_BLESS=1 cargo test --lib generated_`).

use clap::CommandFactory;

use crate::cli::commands::Cli;

/// Sections of one page beyond clap's: (page, section title, paragraphs).
const SECTIONS: &[(&str, &str, &[&str])] = &[
    (
        "bfperf-stat",
        "EVENT SPECIFICATIONS",
        &[
            "-e takes BLOCKS/EVENT[,EVENT...]/ as perf does. BLOCKS is a block (tile2), a kind (tile, every tile block), a glob (tile[0-3], l3cache*) or a comma list of them. EVENT is a name from `bfperf events BLOCK` (any case), a number (0x45), `cycles` on a block with count_clock (BlueField-3 crspace blocks, kernel 6.14 or later), a statistics register's name (pcie, ecc), or a glob of names.",
            "-M takes metric names or groups from `bfperf metrics` (comma list, repeatable); the events they need are counted, shared ones once.",
            "Everything is checked before the first write: an unknown block or event is refused with suggestions, and the device is not touched.",
        ],
    ),
    (
        "bfperf-stat",
        "MULTIPLEXING",
        &[
            "When a block's events do not fit its counters, they take turns every 100 ms, as perf multiplexes. Each count is scaled to the whole window and its COVERAGE (the share of the window it was counted) is printed beside it; an event that never had a turn prints <not counted> (null in JSON and CSV) and the metrics that need it are left out. --no-multiplex refuses instead. Metric sets are scheduled together where they fit, so a ratio's inputs are counted at the same time.",
        ],
    ),
    (
        "bfperf-stat",
        "OTHER PROGRAMS AND RESTORE",
        &[
            "stat holds the device's writer lock while it runs. Each tick it checks that its counters are as it programmed them; one another program re-programmed, reset, stopped or cleared is programmed again, and the interval it spoiled is marked invalid with the reason.",
            "At the end (also on SIGINT, SIGTERM and SIGHUP) it restores the programming it found, unless --no-restore. Before its first write it records that programming in a journal; if stat is killed (SIGKILL, OOM, power loss), `bfperf restore` or the next stat or exporter puts it back.",
        ],
    ),
    (
        "bfperf-exporter",
        "CONFIGURATION",
        &[
            "The config (TOML, default /etc/bfperf/exporter.toml; without it, the default set) names the counters to program: events = [\"default\", \"BLOCKS/EVENT/\"...] as stat -e takes them, where \"default\" is the generation's default set; metrics = [...] programs what those metrics need; metric_gauges = true also exports their values as gauges; strict = true refuses entries the device lacks instead of skipping them with a warning; pcie_link = \"gen4x16\". Statistics registers and PLL frequencies are always exported. SIGHUP reloads it.",
            "Series follow Prometheus' naming: raw counters (bfperf_events_total, bfperf_cycles_total, bfperf_register_bytes_total, ...) labelled by block and kind, PLL frequencies in hertz. Rates and metrics are computed by Prometheus with the recording rules of `bfperf metrics --format prometheus-rules` (installed in /usr/share/bfperf/prometheus/).",
        ],
    ),
];

/// Synopses clap's usage line says too little for: (page, lines).
const SYNOPSES: &[(&str, &[&str])] = &[
    (
        "bfperf-stat",
        &[
            "bfperf stat [OPTIONS] -e SPEC [-e SPEC]... [-- COMMAND [ARG]...]",
            "bfperf stat [OPTIONS] -M METRICS [--duration TIME | -- COMMAND [ARG]...]",
        ],
    ),
    (
        "bfperf-exporter",
        &[
            "bfperf-exporter [--config FILE] [--listen ADDR:PORT] [--web.config.file FILE]",
            "bfperf-exporter [--config FILE] --textfile FILE [--interval TIME]",
            "bfperf exporter [ARGS]...   (runs bfperf-exporter with ARGS)",
        ],
    ),
    (
        "bfperf-metrics",
        &[
            "bfperf metrics [OPTIONS] [PATTERN]",
            "bfperf metrics [--all] --format prometheus-rules [-M METRICS] [--window RANGE]",
        ],
    ),
];

const EXIT_STATUS: &[&str] = &[
    "0: success, also when standard output was closed early (bfperf read | head -1). `stat -- COMMAND` exits with COMMAND's status, or 1 where COMMAND succeeded but the measurement failed.",
    "1: an error: device not found, input refused (nothing was written), the driver refused a write, an output could not be written. The message names the file and what to do.",
    "2: the command line could not be parsed.",
];

const ENVIRONMENT: &[&str] = &[
    "BFPERF_SYSFS_ROOT: the sysfs root (--sysfs-root).",
    "BFPERF_LOCK_FILE: the writer lock file (--lock-file).",
    "BFPERF_STATE_DIR: the directory of locks and journals, instead of /run/bfperf.",
    "XDG_RUNTIME_DIR: where a user other than root keeps its state (bfperf under it).",
];

const FILES: &[&str] = &[
    "/sys/class/hwmon/hwmon*/: the mlxbf-pmc device (its name file reads bfperf).",
    "/etc/bfperf/exporter.toml: the exporter's configuration (what to export; listen and web_config_file: where and how to serve; socket_group: who may ask it to count).",
    "/etc/default/bfperf-exporter: flags for the packaged exporter unit (BFPERF_EXPORTER_ARGS).",
    "/etc/bfperf/metrics/*.json, ~/.config/bfperf/metrics/*.json: metric definitions of your own (perf's metric JSON).",
    "/run/bfperf/KEY.lock, /run/bfperf/KEY.journal: each device's writer lock and the programming a running writer will restore (root only; another user's under $XDG_RUNTIME_DIR/bfperf).",
    "/usr/share/bfperf/prometheus/bfperf.rules.yml, /usr/share/bfperf/grafana/bfperf.json: recording rules and a Grafana dashboard for the exporter's series.",
];

/// Every man page: (file name, roff text).
pub(super) fn pages() -> Vec<(String, String)> {
    let mut root = Cli::command();
    root.build();
    let subs: Vec<clap::Command> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect();
    let names: Vec<String> = subs
        .iter()
        .map(|s| format!("bfperf-{}", s.get_name()))
        .collect();
    let mut pages = vec![page("bfperf", root.clone(), &names)];
    for (sub, name) in subs.into_iter().zip(&names) {
        let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
        let mut others: Vec<String> = vec!["bfperf".into()];
        others.extend(names.iter().filter(|n| *n != name).cloned());
        let spaced: &'static str = Box::leak(name.replacen('-', " ", 1).into_boxed_str());
        // `bfperf exporter` runs the program of that name: its page is the program's.
        let cmd = match sub.get_name() {
            "exporter" => crate::exporter::args::Cli::command().bin_name(leaked),
            _ => sub.name(leaked).bin_name(spaced),
        };
        pages.push(page(name, cmd, &others));
    }
    pages
}

fn page(name: &str, cmd: clap::Command, see_also: &[String]) -> (String, String) {
    let mut man_cmd = cmd.clone();
    // The title carries the version alone (not the exporter's revision and build
    // date, which its --version adds): a page does not change with every commit.
    let man = match cmd.get_version() {
        Some(_) => clap_mangen::Man::new(cmd.version(env!("CARGO_PKG_VERSION"))),
        None => clap_mangen::Man::new(cmd),
    };
    let mut buf = Vec::new();
    let _ = man.render_title(&mut buf);
    let _ = man.render_name_section(&mut buf);
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    let usage = cmd_usage(&mut man_cmd);
    let synopsis: Vec<&str> = SYNOPSES
        .iter()
        .find(|(p, _)| *p == name)
        .map_or_else(|| vec![usage.as_str()], |(_, lines)| lines.to_vec());
    literal(&mut text, "SYNOPSIS", &synopsis);
    let mut buf = Vec::new();
    let _ = man.render_description_section(&mut buf);
    let _ = man.render_options_section(&mut buf);
    let _ = man.render_subcommands_section(&mut buf);
    text.push_str(&String::from_utf8_lossy(&buf));
    for (_, title, paragraphs) in SECTIONS.iter().filter(|(p, _, _)| *p == name) {
        section(&mut text, title, paragraphs);
    }
    let examples = examples(&man_cmd);
    if !examples.is_empty() {
        let lines: Vec<&str> = examples.iter().map(String::as_str).collect();
        literal(&mut text, "EXAMPLES", &lines);
    }
    section(&mut text, "EXIT STATUS", EXIT_STATUS);
    section(&mut text, "ENVIRONMENT", ENVIRONMENT);
    section(&mut text, "FILES", FILES);
    let refs: Vec<String> = see_also.iter().map(|n| format!("{n}(1)")).collect();
    let mut also = refs.join(", ");
    also.push_str(", perf-stat(1), prometheus(1)");
    section(&mut text, "SEE ALSO", &[&also]);
    text.push_str(&format!(".SH VERSION\nv{}\n", env!("CARGO_PKG_VERSION")));
    (format!("{name}.1"), text)
}

/// The examples of a command's help (its `after_help`, after "Examples:"): one list
/// for `--help` and the man page.
fn examples(cmd: &clap::Command) -> Vec<String> {
    let Some(help) = cmd.get_after_help() else {
        return Vec::new();
    };
    help.to_string()
        .lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .skip(1)
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A section of paragraphs, escaped for roff.
fn section(out: &mut String, title: &str, paragraphs: &[&str]) {
    out.push_str(&format!(".SH \"{title}\"\n"));
    for p in paragraphs {
        out.push_str(".PP\n");
        out.push_str(&escape(p));
        out.push('\n');
    }
}

/// A section of lines kept as they are (commands).
fn literal(out: &mut String, title: &str, lines: &[&str]) {
    out.push_str(&format!(".SH \"{title}\"\n.nf\n"));
    for l in lines {
        out.push_str(&escape(l));
        out.push('\n');
    }
    out.push_str(".fi\n");
}

/// clap's usage line: `bfperf stat [OPTIONS] [COMMAND]...`.
fn cmd_usage(cmd: &mut clap::Command) -> String {
    let usage = cmd.render_usage().to_string();
    usage.trim_start_matches("Usage: ").trim().to_string()
}

fn escape(text: &str) -> String {
    let body = text.replace('\\', "\\e").replace('-', "\\-");
    match body.starts_with(['.', '\'']) {
        true => format!("\\&{body}"),
        false => body,
    }
}

/// Compares a generated file with the checked-in one, or writes it with
/// `BFPERF_BLESS` set (`BFPERF_BLESS=1 cargo test --lib generated_`).
#[cfg(test)]
pub(crate) fn check_generated(path: &std::path::Path, made: &str) {
    if std::env::var_os("BFPERF_BLESS").is_some() {
        std::fs::write(path, made).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{} is missing ({e}): run `BFPERF_BLESS=1 cargo test --lib generated_`",
            path.display()
        )
    });
    assert!(
        checked_in == made,
        "{} is stale: run `BFPERF_BLESS=1 cargo test --lib generated_`",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/man/ matches the clap definitions, every page with its sections.
    #[test]
    fn generated_man_pages_are_current() {
        let pages = pages();
        assert!(pages.iter().any(|(n, _)| n == "bfperf-program.1"));
        for (name, text) in &pages {
            for want in [
                "SYNOPSIS",
                "EXIT STATUS",
                "ENVIRONMENT",
                "FILES",
                "SEE ALSO",
                "sysfs\\-root",
            ] {
                assert!(text.contains(want), "{name} has no {want}");
            }
        }
        let stat = &pages.iter().find(|(n, _)| n == "bfperf-stat.1").unwrap().1;
        for want in [
            "EVENT SPECIFICATIONS",
            "MULTIPLEXING",
            "RESTORE",
            "EXAMPLES",
        ] {
            assert!(stat.contains(want), "bfperf-stat.1 has no {want}");
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man");
        for (name, text) in pages {
            check_generated(&dir.join(&name), &text);
        }
    }
}
