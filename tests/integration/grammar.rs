//! perf's habits: `bfperf list` across the device, and perf's `-e` grammar in
//! `stat`, checked against the simulator's rates (values, not exit codes).

use crate::support::*;
use bfperf::sim::{Kernel, Sim};
use bfperf::Generation;
use predicates::prelude::*;

/// The simulator's rate of an event summed over the blocks named, per second.
fn truth(gen: Generation, blocks: &[&str], event: u32) -> f64 {
    let (sim, _) = Sim::with_manual_clock(gen, Kernel::V6_16);
    blocks
        .iter()
        .map(|b| sim.event_rate(b, event).unwrap() as f64)
        .sum()
}

/// `stat --json` over 500 ms: each (block, event) count per second.
fn rates(args: &[&str]) -> Vec<(String, String, f64)> {
    let mut cmd = sim_stat("bf2");
    cmd.args(["--json", "--duration", "500ms"]).args(args);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["record"] == "interval" || r["record"] == "total")
        .map(|r| {
            let v = r["value"].as_f64().unwrap() / r["time_s"].as_f64().unwrap();
            (
                r["block"].as_str().unwrap().to_string(),
                r["event"].as_str().unwrap().to_string(),
                v,
            )
        })
        .collect()
}

const TILES: [&str; 4] = ["tile0", "tile1", "tile2", "tile3"];

#[test]
fn every_form_of_the_grammar_counts_what_the_simulator_counts() {
    let reads = truth(Generation::Bf2, &TILES, 0x4c);
    let writes = truth(Generation::Bf2, &TILES, 0x4d);
    let requests = truth(Generation::Bf2, &TILES, 0x45);
    let of = |rs: &[(String, String, f64)], event: &str| {
        rs.iter()
            .find(|r| r.1 == event)
            .map(|r| r.2)
            .unwrap_or_else(|| panic!("no {event} in {rs:?}"))
    };
    // Two specs in one -e.
    let r = rates(&["-e", "tile/MEMORY_READS/,tile/MEMORY_WRITES/"]);
    assert_rate(
        of(&r, "MEMORY_READS"),
        reads,
        "tile/MEMORY_READS/,tile/MEMORY_WRITES/",
    );
    assert_rate(of(&r, "MEMORY_WRITES"), writes, "the second spec");
    // An event by number.
    assert_rate(
        of(&rates(&["-e", "tile/event=0x4c/"]), "MEMORY_READS"),
        reads,
        "tile/event=0x4c/",
    );
    // A group.
    let r = rates(&["-e", "{tile/MEMORY_READS,HNF_REQUESTS/}"]);
    assert_rate(
        of(&r, "HNF_REQUESTS"),
        requests,
        "{tile/MEMORY_READS,HNF_REQUESTS/}",
    );
    // Bare names, on every block that has them.
    let r = rates(&["-e", "HNF_REQUESTS,MEMORY_WRITES"]);
    assert_rate(of(&r, "HNF_REQUESTS"), requests, "HNF_REQUESTS");
    assert_rate(of(&r, "MEMORY_WRITES"), writes, "MEMORY_WRITES");
    // A glob over blocks of two kinds (tile, tilenet): the tiles count it.
    assert_rate(
        of(&rates(&["-e", "tile*/MEMORY_READS/"]), "MEMORY_READS"),
        reads,
        "tile*/MEMORY_READS/",
    );
    // A list of blocks before the '/'.
    let two = truth(Generation::Bf2, &["tile0", "tile1"], 0x4c);
    assert_rate(
        of(&rates(&["-e", "tile0,tile1/MEMORY_READS/"]), "MEMORY_READS"),
        two,
        "tile0,tile1/MEMORY_READS/",
    );
}

#[test]
fn refused_forms_name_the_token_and_the_right_spelling() {
    sim_stat("bf2")
        .args(["-e", "tile/HITS_BANK0/", "--duration", "10ms"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("HITS_BANK0 is an event of l3cache")
                .and(predicate::str::contains("l3cache/HITS_BANK0/")),
        );
    sim_stat("bf2")
        .args(["-e", "MEMORY_REDS", "--duration", "10ms"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("MEMORY_REDS").and(predicate::str::contains("MEMORY_READS")),
        );
    // -a is a no-op said aloud; --interval-count stops after N intervals; -j is NDJSON.
    let out = sim_stat("bf2")
        .args([
            "-a",
            "-e",
            "HNF_REQUESTS",
            "-I",
            "100",
            "--interval-count",
            "3",
            "-j",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("system-wide"));
    let intervals = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"record\":\"interval\""))
        .count();
    assert_eq!(intervals, 3);
}

#[test]
fn list_searches_every_kind_and_counts_what_the_catalogs_hold() {
    // A pattern matches across kinds: READ in tile, trio, mss, l3cache...
    let out = stdout_of(bfperf().args(["--sim", "bf2", "list", "*READ*", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let kinds: std::collections::BTreeSet<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.len() >= 3, "{kinds:?}");
    // Without a pattern: one row per kind and event, as many as the kinds' catalogs
    // hold (DISABLE aside), each naming its blocks.
    let all: serde_json::Value = serde_json::from_str(&stdout_of(
        bfperf().args(["--sim", "bf3", "list", "--json"]),
    ))
    .unwrap();
    let events = all["events"].as_array().unwrap();
    let llt: Vec<&serde_json::Value> = events.iter().filter(|e| e["kind"] == "llt").collect();
    let catalog = stdout_of(bfperf().args(["--sim", "bf3", "events", "llt0", "--json"]));
    let c: serde_json::Value = serde_json::from_str(&catalog).unwrap();
    let in_catalog = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_name"] != "DISABLE")
        .count();
    assert_eq!(llt.len(), in_catalog);
    assert_eq!(llt[0]["blocks"].as_array().unwrap().len(), 8);
    // Metrics and groups too.
    assert!(all["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["metric"] == "ddr_read_bandwidth"));
    assert!(all["groups"]["llc"].as_array().is_some());
    let details = stdout_of(bfperf().args(["--sim", "bf3", "list", "ddr_read", "--details"]));
    assert!(
        details.contains("SKYLIB_DDN_TX_FLITS * 64 / duration_time"),
        "{details}"
    );
}

/// A line of perf stat -x output, read by position as perf's CSV readers do.
struct PerfLine {
    time: Option<f64>,
    value: String,
    event: String,
    run_time_ns: f64,
    metric_value: String,
    metric_unit: String,
}

fn perf_csv(text: &str, sep: char, interval: bool) -> Vec<PerfLine> {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(sep).collect();
            let (time, f) = match interval {
                true => (f[0].trim().parse().ok(), &f[1..]),
                false => (None, &f[..]),
            };
            assert_eq!(f.len(), 7, "{l}");
            PerfLine {
                time,
                value: f[0].to_string(),
                event: f[2].to_string(),
                run_time_ns: f[3].parse().unwrap_or(0.0),
                metric_value: f[5].to_string(),
                metric_unit: f[6].to_string(),
            }
        })
        .collect()
}

#[test]
fn dash_x_writes_perfs_columns() {
    let reads = truth(Generation::Bf2, &TILES, 0x4c);
    let out = stdout_of(sim_stat("bf2").args([
        "-x,",
        "-e",
        "tile/MEMORY_READS/",
        "-M",
        "memory",
        "-I",
        "200",
        "--interval-count",
        "2",
    ]));
    let lines = perf_csv(&out, ',', true);
    let counts: Vec<&PerfLine> = lines
        .iter()
        .filter(|l| l.event == "tile/MEMORY_READS/")
        .collect();
    assert_eq!(counts.len(), 2, "{out}");
    for c in &counts {
        assert!(c.time.is_some());
        // The run time of a sum adds its blocks', as perf's adds its CPUs'.
        let span_s = c.run_time_ns / TILES.len() as f64 / 1e9;
        let rate = c.value.parse::<f64>().unwrap() / span_s;
        assert_rate(rate, reads, "MEMORY_READS from perf's columns");
    }
    let metric = lines
        .iter()
        .find(|l| l.metric_unit == "GB/s memory_read_bandwidth tile")
        .unwrap_or_else(|| panic!("{out}"));
    assert_rate(
        metric.metric_value.parse().unwrap(),
        reads * 64.0 / 1e9,
        "memory_read_bandwidth",
    );
    // Without -I: no time column.
    let out =
        stdout_of(sim_stat("bf2").args(["-x;", "-e", "tile/MEMORY_READS/", "--duration", "300ms"]));
    let lines = perf_csv(&out, ';', false);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0].event, "tile/MEMORY_READS/");
}

#[test]
fn metric_only_prints_the_metrics_alone() {
    let out = stdout_of(sim_stat("bf3").args([
        "-M",
        "ddr",
        "--metric-only",
        "-j",
        "--duration",
        "300ms",
    ]));
    let records: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        records
            .iter()
            .all(|r| r["record"] == "metric" || r["record"] == "end"),
        "{out}"
    );
    let ddr = records
        .iter()
        .find(|r| r["metric"] == "ddr_read_bandwidth")
        .and_then(|r| r["value"].as_f64())
        .unwrap();
    // The simulator's DDN TX flits over both mss, 64 bytes each, in GB/s.
    let want = bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS");
    assert_rate(ddr, want, "ddr_read_bandwidth");
}

/// `stat --json -A` over 600 ms on tile0: each event's (count per second, coverage).
fn tile0_counts(specs: &[&str]) -> Vec<(String, f64, f64)> {
    let mut cmd = sim_stat("bf2");
    cmd.args(["--json", "-A", "--duration", "600ms"]);
    for s in specs {
        cmd.args(["-e", s]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ndjson(&String::from_utf8(out.stdout).unwrap())
        .into_iter()
        .filter(|r| r["record"] == "total")
        .map(|r| {
            (
                r["event"].as_str().unwrap().to_string(),
                r["value"].as_f64().unwrap() / r["time_s"].as_f64().unwrap(),
                r["coverage"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_group_is_counted_in_one_turn_and_refused_when_it_cannot_fit() {
    // Five events on tile0's four counters take turns. Plain chunking puts the first
    // four in one turn and RNF_REQUESTS alone; the group keeps VICTIM_WRITE and
    // RNF_REQUESTS together, so both are counted over the same time.
    let five = "tile0/HNF_REQUESTS,MEMORY_READS,MEMORY_WRITES,VICTIM_WRITE,RNF_REQUESTS/";
    let got = tile0_counts(&[five, "{tile0/VICTIM_WRITE,RNF_REQUESTS/}"]);
    let of = |name: &str| got.iter().find(|g| g.0 == name).unwrap().clone();
    let (victim, rnf) = (of("VICTIM_WRITE"), of("RNF_REQUESTS"));
    assert!(victim.2 < 1.0, "multiplexed: {got:?}");
    assert_eq!(victim.2, rnf.2, "one turn, one coverage: {got:?}");
    assert_rate(
        victim.1,
        truth(Generation::Bf2, &["tile0"], 0x4e),
        "VICTIM_WRITE",
    );
    assert_rate(
        rnf.1,
        truth(Generation::Bf2, &["tile0"], 0x4a),
        "RNF_REQUESTS",
    );
    // Without the group, plain chunking separates them.
    let plain = tile0_counts(&[five]);
    let cov = |name: &str| plain.iter().find(|g| g.0 == name).unwrap().2;
    assert_ne!(cov("VICTIM_WRITE"), cov("RNF_REQUESTS"), "{plain:?}");

    // A group larger than the block's counters is refused before anything is written.
    let c = Copy::of("bf2");
    let before = c.contents();
    c.cmd()
        .args(["stat", "-o", "-", "--duration", "10ms", "-e"])
        .arg("{tile0/HNF_REQUESTS,MEMORY_READS,MEMORY_WRITES,VICTIM_WRITE,RNF_REQUESTS/}")
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("needs 5 counters on tile0 and it has 4")
                .and(predicate::str::contains("drop the braces")),
        );
    assert_eq!(before, c.contents(), "a refused group wrote to the device");
    // Unbalanced braces name the problem.
    for (spec, problem) in [
        ("{tile/MEMORY_READS/", "never closed"),
        ("tile/MEMORY_READS/}", "closes no group"),
        ("{{tile/MEMORY_READS/}}", "do not nest"),
        ("{tile/MEMORY_READS/}:u", "modifiers"),
    ] {
        sim_stat("bf2")
            .args(["--duration", "10ms", "-e", spec])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(problem).and(predicate::str::contains(spec)));
    }
}

#[test]
fn bf3_events_carry_what_nvidia_says_they_measure_or_say_there_is_nothing() {
    let out = stdout_of(bfperf().args(["--sim", "bf3", "list", "GDC_*_REQ", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let desc = |name: &str| {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str().unwrap().contains(name))
            .unwrap_or_else(|| panic!("no {name}"))["description"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(desc("GDC_BANK0_RD_REQ").contains("Read requests"));
    assert!(desc("GDC_MISS_MACHINE_WR_REQ").contains("missed"));
    // An event no vendor text describes says so, in list and events alike.
    let events = stdout_of(bfperf().args(["--sim", "bf3", "events", "llt0", "HNF0_CYCLES"]));
    assert!(events.contains("no vendor description"), "{events}");
}

#[test]
fn list_takes_a_kind_as_a_kind_and_shows_perf_events_and_pmus() {
    let v: serde_json::Value = serde_json::from_str(&stdout_of(
        bfperf().args(["--sim", "bf3", "list", "perf", "--json"]),
    ))
    .unwrap();
    let events = v["events"].as_array().unwrap();
    // Only perf's events: not the gga events whose names contain PERF.
    assert!(events.iter().all(|e| e["kind"] == "perf"), "{v}");
    for spec in ["cycles", "instructions", "task-clock", "context-switches"] {
        assert!(events.iter().any(|e| e["spec"] == spec), "{spec}: {v}");
    }
    // The PMUs the kernel lists: `software` always.
    assert!(v["pmus"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "software" && p["type_"] == 1));
    // And the metrics computed on perf events.
    assert!(v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["metric"] == "ipc"));
}
