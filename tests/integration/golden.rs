//! The exporter's whole contract, pinned as node_exporter's `e2e-output.txt` pins
//! its own: the exposition of each simulated generation (its default set, on a
//! manual clock one second after the start) in both text formats, compared byte for
//! byte with `tests/golden/`. A change to a name, label, HELP, order or value shows
//! as a diff; `BFPERF_BLESS=1 cargo test golden` writes the files anew.

use std::path::Path;

use crate::support::{counting, rig, Rig};
use bfperf::collector::{self, Collector};
use bfperf::metrics::MetricSet;
use bfperf::Generation;

fn exposition(gen: Generation, format: collector::TextFormat) -> String {
    let Rig { clock, device, .. } = rig(gen);
    let config = counting("default");
    let set = MetricSet::load(&[gen], &[]);
    let mut e = Collector::start(&device, &config, set, || 0).unwrap();
    clock.advance_secs(1);
    e.scrape(1_000_000_000).unwrap();
    let text = e.exposition(true, 0.0, format);
    e.stop().unwrap();
    text
}

/// `got` against the golden file at `path`: None when they are the same (or, with
/// `bless`, once `got` is written there), else where they first differ.
fn against_golden(path: &Path, got: &str, bless: bool) -> Option<String> {
    if bless {
        std::fs::write(path, got).unwrap();
        return None;
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    (got != want).then(|| {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        format!(
            "{}: first difference at line {}:\n  got:  {}\n  want: {}",
            path.display(),
            line + 1,
            got.lines().nth(line).unwrap_or("(end)"),
            want.lines().nth(line).unwrap_or("(end)")
        )
    })
}

#[test]
fn the_exposition_of_each_generation_is_the_golden_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("BFPERF_BLESS").is_some();
    let mut stale = Vec::new();
    for (gen, name) in [
        (Generation::Bf1, "bf1"),
        (Generation::Bf2, "bf2"),
        (Generation::Bf3, "bf3"),
    ] {
        for (format, ext) in [
            (collector::TextFormat::Text004, "prom"),
            (collector::TextFormat::OpenMetrics, "om.txt"),
        ] {
            let got = exposition(gen, format);
            let path = dir.join(format!("exposition-{name}.{ext}"));
            stale.extend(against_golden(&path, &got, bless));
        }
    }
    assert!(
        stale.is_empty(),
        "the exposition changed (BFPERF_BLESS=1 cargo test golden writes it anew if meant):\n{}",
        stale.join("\n")
    );
}

/// `bfperf stat`'s output in every format, pinned as the exposition is: a fixed set of
/// runs on the in-process simulator's virtual clock (`BFPERF_SIM_CLOCK=virtual`: the
/// clock moves only as the measurement waits, so every count is the simulator's
/// exact rate times the span, and nothing depends on the machine's load), compared
/// byte for byte with `tests/golden/stat/NAME.txt`. Only wall-clock timestamps (CSV
/// and NDJSON's `timestamp`) are replaced by `<timestamp>`. The measurement's engine
/// may be rewritten beneath these: its output may not change unless blessed
/// (`BFPERF_BLESS=1 cargo test golden`).
const STAT_CASES: &[(&str, &str)] = &[
    ("bf3-ddr-llc", "--sim bf3 stat -M ddr,llc --duration 2s"),
    (
        "bf3-ddr-llc-x",
        "--sim bf3 stat -M ddr,llc --duration 2s -x,",
    ),
    (
        "bf3-ddr-llc-json",
        "--sim bf3 stat -M ddr,llc --duration 2s --json",
    ),
    (
        "bf3-ddr-llc-csv",
        "--sim bf3 stat -M ddr,llc --duration 2s --format csv",
    ),
    (
        "bf3-ddr-metric-only",
        "--sim bf3 stat -M ddr --metric-only --duration 1s",
    ),
    (
        "bf3-ddr-metric-only-x",
        "--sim bf3 stat -M ddr --metric-only --duration 1s -x,",
    ),
    (
        "bf3-llt-A",
        "--sim bf3 stat -e llt0,llt1/GDC_BANK0_RD_REQ,cycles/ -A --duration 1s",
    ),
    (
        "bf2-tiles-A",
        "--sim bf2 stat -e tile/MEMORY_READS,MEMORY_WRITES/ -A --duration 1s",
    ),
    (
        "bf2-tiles-A-x",
        "--sim bf2 stat -e tile/MEMORY_READS,MEMORY_WRITES/ -A --duration 1s -x,",
    ),
    (
        "bf2-tiles-I",
        "--sim bf2 stat -e tile/MEMORY_READS,MEMORY_WRITES/ -I 500 --duration 1500ms",
    ),
    (
        "bf2-tiles-I-x",
        "--sim bf2 stat -e tile/MEMORY_READS,MEMORY_WRITES/ -I 500 --duration 1500ms -x,",
    ),
    (
        "bf2-tiles-I-json",
        "--sim bf2 stat -e tile/MEMORY_READS,MEMORY_WRITES/ -I 500 --duration 1500ms --json",
    ),
    (
        "bf2-tiles-I-csv",
        "--sim bf2 stat -e tile/MEMORY_READS,MEMORY_WRITES/ -I 500 --duration 1500ms --format csv",
    ),
    (
        "bf2-tiles-I-metrics",
        "--sim bf2 stat -M memory -I 500 --duration 1s",
    ),
    (
        "bf2-r3",
        "--sim bf2 stat -r 3 -e tile0/MEMORY_READS/ -e pcie0/IN_P_BYTE_CNT/ --duration 1s",
    ),
    (
        "bf2-r3-x",
        "--sim bf2 stat -r 3 -e tile0/MEMORY_READS/ -e pcie0/IN_P_BYTE_CNT/ --duration 1s -x,",
    ),
    (
        "bf2-l3-A-multiplexed",
        "--sim bf2 stat -M l3 -A --duration 1s",
    ),
    (
        "bf2-l3-A-multiplexed-x",
        "--sim bf2 stat -M l3 -A --duration 1s -x,",
    ),
    (
        "bf2-group",
        "--sim bf2 stat -e {tile0/MEMORY_READS,MEMORY_WRITES/} -e pcie/*_BYTE_CNT/ --duration 1s",
    ),
    (
        "bf1-tiles",
        "--sim bf1 stat -e tile/MEMORY_READS/ --duration 1s",
    ),
];

/// What `bfperf ARGS` printed, on the virtual clock: both streams, timestamps
/// replaced.
fn stat_output(args: &str) -> String {
    let out = assert_cmd::Command::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .args(args.split(' '))
        .env("BFPERF_SIM_CLOCK", "virtual")
        .env("COLUMNS", "120")
        .env_remove("BFPERF_SIM")
        .env_remove("BFPERF_SYSFS_ROOT")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let mut text = format!(
        "$ bfperf {args}\n# exit {}\n# stdout\n{}# stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // RFC 3339 wall-clock times: 2026-12-07T21:57:18.787789290Z
    while let Some(at) = find_timestamp(&text) {
        let end = text[at..]
            .find('Z')
            .map(|z| at + z + 1)
            .unwrap_or(text.len());
        text.replace_range(at..end, "<timestamp>");
    }
    text
}

/// Where the first `YYYY-MM-DDTHH:` in `text` begins.
fn find_timestamp(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(14)).find(|&i| {
        let d = |j: usize| b[i + j].is_ascii_digit();
        d(0) && d(1)
            && d(2)
            && d(3)
            && b[i + 4] == b'-'
            && d(5)
            && d(6)
            && b[i + 7] == b'-'
            && d(8)
            && d(9)
            && b[i + 10] == b'T'
            && d(11)
            && d(12)
            && b[i + 13] == b':'
    })
}

#[test]
fn stat_prints_the_golden_output_in_every_format() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/stat");
    let bless = std::env::var_os("BFPERF_BLESS").is_some();
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut stale = Vec::new();
    for (name, args) in STAT_CASES {
        let got = stat_output(args);
        assert!(got.contains("# exit 0\n"), "{got}");
        stale.extend(against_golden(
            &dir.join(format!("{name}.txt")),
            &got,
            bless,
        ));
    }
    assert!(
        stale.is_empty(),
        "stat's output changed (BFPERF_BLESS=1 cargo test golden writes it anew if meant):\n{}",
        stale.join("\n")
    );
}

/// Virtual time cannot follow a command, which runs in real time: such a `stat` is
/// refused, not printed as a count over no time; other commands keep real time.
#[test]
fn virtual_time_refuses_a_command_and_leaves_other_commands_real() {
    let bfperf = || {
        let mut c = assert_cmd::Command::new(assert_cmd::cargo::cargo_bin!("bfperf"));
        c.env("BFPERF_SIM_CLOCK", "virtual")
            .env_remove("BFPERF_SIM");
        c
    };
    bfperf()
        .args(["--sim", "bf3", "stat", "-M", "ddr", "--", "true"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("not a command or a process"));
    // A snapshot's registers count on real time: two apart differ.
    let read = || {
        let out = bfperf()
            .args(["--sim", "bf2", "read", "pcie0", "--json"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = read();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read() == first {
        assert!(
            std::time::Instant::now() < deadline,
            "pcie0 never moved: {first}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
