//! Shell completion: the engine's candidates, a real bash running the script, and the
//! checked-in scripts being current.

use crate::support::*;
use std::path::Path;
use std::process::Command as Process;

/// The candidates the binary's hidden `__complete` gives for `line[index]`, as the
/// shell scripts ask for them.
fn complete(line: &[&str], index: usize) -> Vec<String> {
    let index = index.to_string();
    stdout_of(
        bfperf()
            .args(["__complete", "--index", &index, "--"])
            .args(line),
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Completes the last word of `bfperf --sysfs-root fixtures/GEN WORDS...`.
fn complete_on(gen: &str, words: &[&str]) -> Vec<String> {
    let r = root(gen);
    let mut line = vec!["bfperf", "--sysfs-root", r.as_str()];
    line.extend_from_slice(words);
    complete(&line, line.len() - 1)
}

fn root(gen: &str) -> String {
    fixture(gen).display().to_string()
}

#[test]
fn subcommands_and_flags() {
    assert_eq!(
        complete(&["bfperf", "s"], 1),
        ["start", "stop", "snapshot", "stat", "sim"]
    );
    assert_eq!(complete(&["bfperf", "sim", ""], 2), ["mount", "export"]);
    assert_eq!(complete(&["bfperf", "read", "--c"], 2), ["--csv"]);
    assert_eq!(complete(&["bfperf", "program", "--dr"], 2), ["--dry-run"]);
    assert_eq!(
        complete(&["bfperf", "completions", ""], 2),
        ["bash", "zsh", "fish"]
    );
    // A path after --sysfs-root: the shell's file completion.
    assert!(complete(&["bfperf", "--sysfs-root", ""], 2).is_empty());
}

#[test]
fn block_names_by_command() {
    assert_eq!(
        complete_on("bf2", &["program", "t"]),
        [
            "tile0", "tile1", "tile2", "tile3", "tilenet0", "tilenet1", "tilenet2", "tilenet3",
            "trio0", "trio1", "triogen0", "triogen1"
        ]
    );
    // Registers blocks are not counter blocks.
    assert_eq!(complete_on("bf2", &["program", "p"]), Vec::<String>::new());
    assert_eq!(
        complete_on("bf2", &["start", ""]),
        ["l3cachehalf0", "l3cachehalf1"]
    );
    assert_eq!(
        complete_on("bf2", &["clear", "l"]),
        Vec::<String>::new(),
        "L3 counters cannot be cleared"
    );
    assert_eq!(
        complete_on("bf3", &["start", "llt_"]),
        (0..8).map(|i| format!("llt_miss{i}")).collect::<Vec<_>>()
    );
    // --device instead of a root.
    let dev = device_dir(&fixture("bf2")).display().to_string();
    assert_eq!(
        complete(&["bfperf", "events", "--device", &dev, "ec"], 4),
        ["ecc"]
    );
    assert_eq!(
        complete(&["bfperf", "--sysfs-root=".to_owned().as_str(), "x"], 2),
        Vec::<String>::new()
    );
}

#[test]
fn counters_events_and_registers_of_the_chosen_block() {
    assert_eq!(
        complete_on("bf2", &["program", "tile2", ""]),
        ["0", "1", "2", "3"]
    );
    assert_eq!(
        complete_on("bf2", &["program", "tile2", "3", "HNF_"]),
        ["HNF_REQUESTS", "HNF_REJECTS", "HNF_ACCEPTS"]
    );
    assert_eq!(
        complete_on("bf2", &["program", "tile2", "3", "hnf_req"]),
        ["HNF_REQUESTS"]
    );
    assert_eq!(complete_on("bf2", &["stop", "triogen0", ""]), ["0"]);
    assert_eq!(
        complete_on("bf2", &["clear", "pcie0", "OUT_N"]),
        ["OUT_NP_PKT_CNT", "OUT_NP_BYTE_CNT"]
    );
    assert_eq!(
        complete_on(
            "bf2",
            &["program", "l3cachehalf0", "0=HITS_BANK0", "1=MISSES_B"]
        ),
        ["1=MISSES_BANK0", "1=MISSES_BANK1"]
    );
    // bash splits at '=': the word after a lone '=' is an event name.
    assert_eq!(
        complete_on("bf2", &["program", "l3cachehalf0", "1", "=", "MISSES_B"]),
        ["MISSES_BANK0", "MISSES_BANK1"]
    );
}

#[test]
fn truncated_lists_still_complete() {
    let r3 = root("bf3");
    let bins = complete(
        &[
            "bfperf",
            "--sysfs-root",
            &r3,
            "program",
            "llt0",
            "2",
            "HISTOGRAM_HISTOGRAM_BIN",
        ],
        6,
    );
    assert_eq!(bins.len(), 10);
    assert_eq!(bins[9], "HISTOGRAM_HISTOGRAM_BIN9");
}

#[test]
fn selectors_for_read_and_snapshot() {
    assert_eq!(
        complete_on("bf2", &["read", "tile"]),
        [
            "tile", "tilenet", "tile0", "tile1", "tile2", "tile3", "tilenet0", "tilenet1",
            "tilenet2", "tilenet3"
        ]
    );
    assert_eq!(
        complete_on("bf2", &["snapshot", "pcie", "p"]),
        ["pcie0", "pcie1"]
    );
    assert_eq!(complete_on("bf2", &["snapshot", "a"]), ["all"]);
}

#[test]
fn no_device_no_candidates_no_noise() {
    let out = bfperf()
        .args([
            "__complete",
            "--index",
            "4",
            "--",
            "bfperf",
            "--sysfs-root",
            "/nonexistent",
            "program",
            "t",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}

#[test]
fn checked_in_scripts_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for (shell, file) in [
        ("bash", "bfperf.bash"),
        ("zsh", "_bfperf"),
        ("fish", "bfperf.fish"),
    ] {
        let made = stdout_of(bfperf().args(["completions", shell]));
        let checked_in = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(
            made, checked_in,
            "completions/{file} is stale: run `bfperf completions {shell} > completions/{file}`"
        );
    }
}

fn shell_completes(line: &[&str], cword: usize) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/bfperf.bash");
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let mut words: Vec<String> = vec![bin.display().to_string()];
    words.extend(line.iter().map(|s| s.to_string()));
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _bfperf; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        cword
    );
    let out = Process::new("bash")
        .arg("-c")
        .arg(&program)
        .env_remove("BFPERF_SYSFS_ROOT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn real_bash_completes_blocks_and_events() {
    let r = root("bf2");
    assert_eq!(
        shell_completes(&["--sysfs-root", &r, "program", "til"], 4),
        ["tile0", "tile1", "tile2", "tile3", "tilenet0", "tilenet1", "tilenet2", "tilenet3"]
    );
    assert_eq!(
        shell_completes(&["--sysfs-root", &r, "program", "tile2", "3", "HNF_REQ"], 6),
        ["HNF_REQUESTS"]
    );
    assert_eq!(
        shell_completes(&["--sysfs-root", &r, "read", "l3cachehalf"], 4),
        ["l3cachehalf0", "l3cachehalf1"]
    );
}

#[test]
fn zsh_and_fish_scripts_parse_where_those_shells_exist() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for (shell, args, file) in [
        ("zsh", vec!["-n"], "_bfperf"),
        ("fish", vec!["--no-execute"], "bfperf.fish"),
    ] {
        if Process::new(shell).arg("-c").arg("true").output().is_err() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: {shell} is not installed: its script is checked for currency only"
            );
            continue;
        }
        let out = Process::new(shell)
            .args(&args)
            .arg(dir.join(file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn real_fish_completes_where_fish_exists() {
    if Process::new("fish").arg("-c").arg("true").output().is_err() {
        return; // announced by zsh_and_fish_scripts_parse_where_those_shells_exist
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/bfperf.fish");
    let bin_dir = assert_cmd::cargo::cargo_bin!("bfperf")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r = root("bf2");
    let out = Process::new("fish")
        .arg("-c")
        .arg(format!(
            "source '{}'; complete -C 'bfperf --sysfs-root {r} program tile2 3 hnf_req'",
            script.display()
        ))
        .env("PATH", path)
        .env_remove("BFPERF_SYSFS_ROOT")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "HNF_REQUESTS\t0x45 Number of REQs that were processed in HNF\n"
    );
}

#[test]
fn real_zsh_offers_event_names_in_any_case_where_zsh_exists() {
    if Process::new("zsh").arg("-c").arg("true").output().is_err() {
        return; // announced by zsh_and_fish_scripts_parse_where_those_shells_exist
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/_bfperf");
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let r = root("bf2");
    // compadd is zsh's completion builtin; a stand-in prints what the script gives it.
    let program = format!(
        r#"compdef() {{ :; }}
compadd() {{ print -r -- "compadd $*"; }}
_files() {{ print -r -- _files; }}
source '{}'
words=('{}' --sysfs-root '{r}' program tile2 3 hnf_req)
CURRENT=7
_bfperf"#,
        script.display(),
        bin.display()
    );
    let out = Process::new("zsh")
        .args(["-f", "-c", &program])
        .env_remove("BFPERF_SYSFS_ROOT")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("compadd -U -Q -l -d shown -- HNF_REQUESTS\n"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn descriptions_for_zsh_and_fish_and_any_case_events() {
    let r = root("bf2");
    let out = stdout_of(bfperf().args([
        "__complete",
        "--descriptions",
        "--index",
        "6",
        "--",
        "bfperf",
        "--sysfs-root",
        r.as_str(),
        "program",
        "tile2",
        "3",
        "hnf_r",
    ]));
    assert_eq!(
        out,
        "HNF_REQUESTS\t0x45 Number of REQs that were processed in HNF\nHNF_REJECTS\t0x46 Reserved for internal use\n"
    );
    // zsh must not filter the candidates again by case-sensitive prefix.
    assert!(stdout_of(bfperf().args(["completions", "zsh"])).contains("compadd -U"));
    let blocks = stdout_of(bfperf().args([
        "__complete",
        "--descriptions",
        "--index",
        "4",
        "--",
        "bfperf",
        "--sysfs-root",
        r.as_str(),
        "start",
        "",
    ]));
    assert_eq!(
        blocks,
        "l3cachehalf0\tl3cache block, all-at-once\nl3cachehalf1\tl3cache block, all-at-once\n"
    );
}

#[test]
fn stat_specs_and_metrics_complete() {
    assert_eq!(
        complete_on("bf2", &["stat", "-e", "l3"]),
        ["l3cache/", "l3cachehalf0/", "l3cachehalf1/"]
    );
    assert_eq!(
        complete_on("bf2", &["stat", "-e", "tile/MEMORY_READS,MEMORY_W"]),
        ["tile/MEMORY_READS,MEMORY_WRITES"]
    );
    assert_eq!(
        complete_on("bf3", &["stat", "-e", "llt0/cyc"]),
        ["llt0/cycles"]
    );
    assert_eq!(
        complete_on("bf2", &["stat", "-M", "l3_h"]),
        ["l3_hit_ratio"]
    );
    // Other options still complete file names (the shell's own).
    assert!(complete_on("bf2", &["stat", "-o", ""]).is_empty());
}
