//! Every command's `--json` output validates against its checked-in JSON Schema
//! (docs/schema/, kept current with the Rust types by a unit test: regenerate with
//! `BFPERF_BLESS=1 cargo test --lib generated_`).

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::*;

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
}

fn schema(name: &str) -> serde_json::Value {
    let path = docs().join("schema").join(format!("{name}.schema.json"));
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn validate(name: &str, output: &str) {
    let instance: serde_json::Value = serde_json::from_str(output)
        .unwrap_or_else(|e| panic!("{name} --json is not JSON ({e}): {output}"));
    let schema = schema(name);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name} --json: {errors:?}\n{output}");
}

#[test]
fn every_json_output_validates_against_its_schema() {
    for gen in ["bf1", "bf2", "bf3"] {
        validate("info", &stdout_of(on_fixture(gen).args(["info", "--json"])));
        validate(
            "blocks",
            &stdout_of(on_fixture(gen).args(["blocks", "--json"])),
        );
        validate("read", &stdout_of(on_fixture(gen).args(["read", "--json"])));
        validate(
            "list",
            &stdout_of(on_fixture(gen).args(["list", "--json", "--details"])),
        );
        validate(
            "snapshot",
            &stdout_of(on_fixture(gen).args(["snapshot", "all"])),
        );
    }
    validate(
        "events",
        &stdout_of(on_fixture("bf3").args(["events", "llt0", "--json"])),
    );
    validate(
        "events",
        &stdout_of(on_fixture("bf2").args(["events", "pcie0", "--format", "json"])),
    );
    let c = Copy::of("bf2");
    validate(
        "program",
        &c.run(&["program", "tile2", "3", "HNF_REQUESTS", "--json"]),
    );
    validate(
        "program",
        &c.run(&["program", "tile2", "3", "0105", "--json", "--dry-run"]),
    );
    validate("control", &c.run(&["stop", "tile2", "--json"]));
    validate("control", &c.run(&["start", "l3cachehalf0", "--json"]));
    validate(
        "control",
        &c.run(&["clear", "pcie0", "--json", "--dry-run"]),
    );
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&a)
        .assert()
        .success();
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&b)
        .assert()
        .success();
    let out = stdout_of(bfperf().arg("diff").arg(&a).arg(&b).arg("--json"));
    validate("diff", &out);
}

#[test]
fn the_same_key_names_a_block_everywhere() {
    let blocks: serde_json::Value =
        serde_json::from_str(&stdout_of(on_fixture("bf2").args(["blocks", "--json"]))).unwrap();
    let read: serde_json::Value = serde_json::from_str(&stdout_of(
        on_fixture("bf2").args(["read", "tile2", "--json"]),
    ))
    .unwrap();
    assert_eq!(blocks["blocks"][0]["block"], "ecc");
    assert_eq!(read["blocks"][0]["block"], "tile2");
    assert_eq!(read["blocks"][0]["counters"][3]["counter"], 3);
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The pages of docs/, README.md and CHANGELOG.md: (name, text).
fn pages() -> Vec<(String, String)> {
    let mut names: Vec<PathBuf> = fs::read_dir(docs())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    names.sort();
    names.push(repo().join("README.md"));
    names.push(repo().join("CHANGELOG.md"));
    names
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.strip_prefix(repo()).unwrap().display().to_string(), text)
        })
        .collect()
}

/// A page is a reference a reader finishes: at most 4,000 words (performance.md, a
/// table of costs, at most 2,500), opening with what it answers; none is a lab
/// notebook of rounds, whose history belongs to git log and CHANGELOG.md.
#[test]
fn every_page_is_a_reference_of_bounded_length() {
    let mut over = Vec::new();
    for (name, text) in pages() {
        let words = text.split_whitespace().count();
        let most = match name.as_str() {
            "docs/performance.md" => 2_500,
            _ => 4_000,
        };
        if words > most {
            over.push(format!("{name}: {words} words, at most {most}"));
        }
        let lower = text.to_lowercase();
        for notebook in [
            "this round",
            "round before",
            "rounds before",
            "previous release",
        ] {
            if lower.contains(notebook) {
                over.push(format!(
                    "{name} speaks of \"{notebook}\": history goes to git log"
                ));
            }
        }
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("# "),
            "{name} opens with its title: {first:?}"
        );
    }
    assert!(over.is_empty(), "{}", over.join("\n"));
}

/// CHANGELOG.md keeps "Keep a Changelog"'s shape: an Unreleased section first, then
/// releases `## [X.Y.Z] - YYYY-MM-DD`, newest first, the package's version among them.
#[test]
fn the_changelog_keeps_a_changelog() {
    let text = fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let sections: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    assert_eq!(sections.first(), Some(&"[Unreleased]"), "{sections:?}");
    let mut dates = Vec::new();
    for s in &sections[1..] {
        let (version, date) = s
            .strip_prefix('[')
            .and_then(|s| s.split_once("] - "))
            .unwrap_or_else(|| panic!("a release is `[X.Y.Z] - DATE`: {s}"));
        assert_eq!(version.split('.').count(), 3, "{s}");
        assert!(
            date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-',
            "{s}"
        );
        dates.push(date);
    }
    assert!(
        dates.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {dates:?}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        sections
            .iter()
            .any(|s| s.starts_with(&format!("[{version}]"))),
        "no section for {version}"
    );
    for l in text.lines().filter_map(|l| l.strip_prefix("### ")) {
        assert!(
            [
                "Added",
                "Changed",
                "Deprecated",
                "Removed",
                "Fixed",
                "Security"
            ]
            .contains(&l),
            "not one of Keep a Changelog's kinds of change: {l}"
        );
    }
}

/// The lines of each file under `src/`, by its path below `src/`.
fn source_lines() -> Vec<(String, usize)> {
    walkdir::WalkDir::new(repo().join("src"))
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| {
            let name = e.path().strip_prefix(repo().join("src")).unwrap();
            let lines = fs::read_to_string(e.path()).unwrap().lines().count();
            (name.display().to_string(), lines)
        })
        .collect()
}

/// The number before `what` in `text` (`24 % of`, `1,400`).
fn number_before(text: &str, what: &str) -> f64 {
    let at = text
        .find(what)
        .unwrap_or_else(|| panic!("architecture.md no longer says {what:?}"));
    let before = text[..at].trim_end();
    let digits: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .filter(|c| *c != ',')
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number before {what:?}"))
}

/// docs/architecture.md's figures are the tree's: each module's share of `src/`, the
/// files over 700 lines, the longest; and every source path it names exists.
#[test]
fn architecture_says_what_the_tree_is() {
    let text = fs::read_to_string(docs().join("architecture.md")).unwrap();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let files = source_lines();
    let total: usize = files.iter().map(|f| f.1).sum();
    for module in ["cli/", "exporter/"] {
        let lines: usize = files
            .iter()
            .filter(|f| f.0.starts_with(module))
            .map(|f| f.1)
            .sum();
        let share = 100.0 * lines as f64 / total as f64;
        let said = number_before(&text, "% of `src/`'s lines, `exporter/`");
        let said = match module {
            "cli/" => said,
            _ => number_before(&text, "%. Four files"),
        };
        assert!(
            (share - said).abs() <= 0.5,
            "`{module}` is {share:.1} % of src/'s {total} lines; architecture.md says {said} %"
        );
    }
    let mut long: Vec<&(String, usize)> = files.iter().filter(|f| f.1 > 700).collect();
    long.sort();
    let said_long = text
        .split("Four files are over 700 lines: ")
        .nth(1)
        .and_then(|r| r.split("; none").next())
        .expect("architecture.md lists the files over 700 lines");
    let named: Vec<&str> = said_long.split('`').skip(1).step_by(2).collect();
    let mut named_sorted = named.clone();
    named_sorted.sort();
    let actual: Vec<&str> = long.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(named_sorted, actual, "the files over 700 lines");
    assert_eq!(named.len(), 4, "\"Four files\": {named:?}");
    let most: usize = text
        .split("none is over ")
        .nth(1)
        .and_then(|r| r.split('.').next())
        .map(|n| n.replace(',', ""))
        .and_then(|n| n.parse().ok())
        .expect("architecture.md says how long the longest file is at most");
    let longest = files.iter().map(|f| f.1).max().unwrap();
    assert!(
        longest <= most,
        "a file of {longest} lines; architecture.md says none over {most}"
    );

    // Every path it names is a file or directory of the repository (`NAME`, `bfN`
    // stand for any).
    let mut known = Vec::new();
    for top in [
        "src",
        "tests",
        ".ci",
        "benches",
        "metrics",
        "contrib",
        "docs",
        "completions",
        "fixtures",
        "examples",
        "debian",
    ] {
        for e in walkdir::WalkDir::new(repo().join(top)).follow_links(false) {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(repo()).unwrap().display().to_string();
            known.push(if e.file_type().is_dir() {
                rel + "/"
            } else {
                rel
            });
        }
    }
    let mut missing = Vec::new();
    for token in text.split('`').skip(1).step_by(2) {
        let path = token.split("::").next().unwrap();
        let is_path = path.contains('/')
            && path
                .rsplit('/')
                .next()
                .is_some_and(|last| last.is_empty() || last.contains('.'))
            && !path.contains(char::is_whitespace)
            && !path.contains("NAME")
            && !path.contains("bfN")
            && !path.starts_with("/");
        if is_path
            && !known
                .iter()
                .any(|k| k == path || k.ends_with(&format!("/{path}")))
        {
            missing.push(path.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "architecture.md names paths that do not exist: {missing:?}"
    );
}

/// No test file is over 1,500 lines: a file that grows past it is split by behaviour,
/// as `tests/integration/exporter/` is, its helpers in `tests/integration/support/`.
#[test]
fn no_test_file_is_over_1500_lines() {
    let over: Vec<String> = walkdir::WalkDir::new(repo().join("tests/integration"))
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter_map(|e| {
            let lines = fs::read_to_string(e.path()).unwrap().lines().count();
            (lines > 1_500).then(|| format!("{}: {lines} lines", e.path().display()))
        })
        .collect();
    assert!(over.is_empty(), "{over:?}");
}
