//! Metrics: every built-in evaluated on the simulator against values computed here
//! from the simulator's own rates and clocks; the per-second and per-cycle
//! bandwidths agree; user files add metrics and reuse built-ins; bad files are
//! explained and never hide the built-ins.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use bfperf::measure::{self, For, StatRequest, Until};
use bfperf::metrics::{self, MetricSet, MetricValue};
use bfperf::sim::{Kernel, ManualClock, Sim};
use bfperf::{Device, Generation, Sysfs};
use predicates::prelude::*;

struct Run {
    sim: Arc<Sim>,
    values: Vec<MetricValue>,
    secs: f64,
}

impl Run {
    /// The simulator's rate of an event (whichever counter counts it).
    fn rate(&self, block: &str, event: u32) -> f64 {
        self.sim.event_rate(block, event).unwrap() as f64
    }

    fn value(&self, metric: &str, block: &str) -> f64 {
        self.values
            .iter()
            .find(|v| v.metric == metric && v.block == block)
            .unwrap_or_else(|| panic!("no {metric} for {block} in {:?}", self.values))
            .value
            .unwrap_or_else(|| panic!("{metric} {block} has no value"))
    }
}

fn register_rate(sim: &Sim, clock: &ManualClock, rel: &str) -> f64 {
    let read =
        || u64::from_str_radix(sim.read(rel).unwrap().trim().trim_start_matches("0x"), 16).unwrap();
    let a = read();
    clock.advance_secs(1);
    (read() - a) as f64
}

fn measure(
    gen: Generation,
    wanted: &str,
    secs: u64,
    params: HashMap<String, f64>,
) -> (Run, Arc<ManualClock>) {
    let (sim, clock) = Sim::with_manual_clock(gen, Kernel::V6_16);
    let sim = Arc::new(sim);
    let device = Device::open(Box::new(sim.clone())).unwrap();
    let set = MetricSet::load(&[gen], &[]);
    assert!(set.broken.is_empty(), "{:?}", set.broken);
    let chosen = set.select(&[wanted.to_string()]).unwrap();
    let req = StatRequest::for_specs(metrics::specs_for(&chosen));
    let mut until =
        move |_| -> bfperf::Result<Box<dyn Until>> { Ok(Box::new(For(Duration::from_secs(secs)))) };
    let out = measure::measure(
        &device,
        &req,
        &Manual(clock.clone()),
        &AtomicBool::new(false),
        &mut until,
        &mut |_| Ok(()),
    )
    .unwrap();
    let run = &out.runs[0];
    let mut inputs = measure::metric_inputs(&run.counts, run.elapsed_s);
    inputs.params = params;
    let values = metrics::evaluate(&set, &chosen, &inputs, true);
    (
        Run {
            sim,
            values,
            secs: run.elapsed_s,
        },
        clock,
    )
}

/// The metrics `wanted` of the simulator's model (kernel 6.16), counted for two
/// seconds on its manual clock: exact, as the tests here check them.
pub(crate) fn exact(gen: Generation, wanted: &str) -> Vec<MetricValue> {
    measure(gen, wanted, 2, HashMap::new()).0.values
}

fn close(got: f64, want: f64, what: &str) {
    let err = ((got - want) / want).abs();
    assert!(err < 1e-6, "{what}: got {got}, want {want}");
}

#[test]
fn l3_hit_and_miss_rates_per_half() {
    let (r, _) = measure(
        Generation::Bf2,
        "l3_hit_ratio,l3_miss_ratio",
        5,
        HashMap::new(),
    );
    for half in ["l3cachehalf0", "l3cachehalf1"] {
        let (h0, h1, m0, m1) = (
            r.rate(half, 0x17),
            r.rate(half, 0x18),
            r.rate(half, 0x19),
            r.rate(half, 0x1a),
        );
        close(
            r.value("l3_hit_ratio", half),
            100.0 * (h0 + h1) / (h0 + h1 + m0 + m1),
            half,
        );
        close(
            r.value("l3_miss_ratio", half),
            100.0 * (m0 + m1) / (h0 + h1 + m0 + m1),
            half,
        );
    }
    let (r, _) = measure(
        Generation::Bf2,
        "l3_evictions_per_second",
        4,
        HashMap::new(),
    );
    let table = bfperf::catalog::builtin(bfperf::BlockKind::L3cache, Generation::Bf2);
    let number = |name: &str| table.iter().find(|d| d.name == name).unwrap().number;
    let e = r.rate("l3cachehalf1", number("EVICTIONS_BANK0"))
        + r.rate("l3cachehalf1", number("EVICTIONS_BANK1"));
    close(
        r.value("l3_evictions_per_second", "l3cachehalf1"),
        e,
        "evictions",
    );
}

#[test]
fn bf2_memory_bandwidth_from_the_tiles() {
    let (r, _) = measure(Generation::Bf2, "memory", 3, HashMap::new());
    let mut total = 0.0;
    for t in ["tile0", "tile1", "tile2", "tile3"] {
        let read = r.rate(t, 0x4c) * 64.0;
        let write = r.rate(t, 0x4d) * 64.0;
        close(r.value("memory_read_bandwidth", t), read * 1e-9, t);
        close(r.value("memory_write_bandwidth", t), write * 1e-9, t);
        total += read + write;
    }
    close(
        r.value("memory_bandwidth", "tile"),
        total * 1e-9,
        "sum over tiles",
    );
}

#[test]
fn pcie_bandwidth_packets_and_utilisation() {
    let link = metrics::pcie_link_bytes_per_s("gen4x16").unwrap();
    assert!((link - 31.5e9).abs() < 0.1e9, "{link}");
    let params = HashMap::from([("pcie_link_bytes_per_s".to_string(), link)]);
    let (r, clock) = measure(Generation::Bf2, "pcie", 2, params);
    let rate = |reg: &str| register_rate(&r.sim, &clock, &format!("pcie1/{reg}"));
    let bytes: f64 = ["IN_P_BYTE_CNT", "IN_NP_BYTE_CNT", "IN_C_BYTE_CNT"]
        .iter()
        .map(|x| rate(x))
        .sum();
    let pkts: f64 = ["IN_P_PKT_CNT", "IN_NP_PKT_CNT", "IN_C_PKT_CNT"]
        .iter()
        .map(|x| rate(x))
        .sum();
    close(r.value("pcie_in_bandwidth", "pcie1"), bytes * 1e-9, "GB/s");
    close(r.value("pcie_in_packets", "pcie1"), pkts, "packets/s");
    close(
        r.value("pcie_in_bytes_per_packet", "pcie1"),
        bytes / pkts,
        "bytes per packet",
    );
    close(
        r.value("pcie_in_utilisation", "pcie1"),
        100.0 * bytes / link,
        "utilisation",
    );
    assert_eq!(r.secs, 2.0);
}

#[test]
fn bf3_ddr_llc_and_clocks_per_second_and_per_cycle() {
    let (r, _) = measure(Generation::Bf3, "ddr,llc,clocks", 3, HashMap::new());
    let mut read = 0.0;
    for m in ["mss0", "mss1"] {
        let tx = r.rate(m, 0x1) * 64.0;
        close(r.value("ddr_read_bandwidth", m), tx * 1e-9, m);
        close(
            r.value("ddr_write_bandwidth", m),
            r.rate(m, 0x6) * 64.0 * 1e-9,
            m,
        );
        read += tx;
    }
    close(
        r.value("ddr_read_bandwidth", "mss"),
        read * 1e-9,
        "DDR read, both",
    );
    let llts: Vec<String> = (0..8).map(|i| format!("llt{i}")).collect();
    let llc_read: f64 = llts
        .iter()
        .map(|b| (r.rate(b, 0x54) + r.rate(b, 0x7b)) * 64.0)
        .sum();
    close(
        r.value("llc_read_bandwidth", "llt"),
        llc_read * 1e-9,
        "LLC read",
    );
    let misses: f64 = (0..8).map(|i| r.rate(&format!("llt_miss{i}"), 0x0)).sum();
    close(
        r.value("llc_read_miss_ratio", "llt"),
        100.0 * misses * 64.0 / llc_read,
        "miss ratio",
    );
    // Per block, each llt with its own miss machine (llt3 with llt_miss3), not with
    // the sum of all eight.
    for i in 0..8 {
        let (llt, miss) = (format!("llt{i}"), format!("llt_miss{i}"));
        close(
            r.value("llc_read_miss_ratio", &llt),
            100.0 * r.rate(&miss, 0x0) / (r.rate(&llt, 0x54) + r.rate(&llt, 0x7b)),
            &llt,
        );
        close(
            r.value("llc_write_miss_ratio", &llt),
            100.0 * r.rate(&miss, 0x1) / (r.rate(&llt, 0x55) + r.rate(&llt, 0x7c)),
            &llt,
        );
    }
    close(
        r.value("clock_t1_frequency", "clock_measure"),
        r.sim.clock_hz("llt0").unwrap() as f64 / 1e6,
        "T1",
    );
    close(
        r.value("clock_n1_frequency", "clock_measure"),
        r.sim.clock_hz("mss0").unwrap() as f64 / 1e6,
        "N1",
    );

    // Both methods on the same counts of one window.
    let (c, _) = measure(
        Generation::Bf3,
        "ddr,llc,ddr_cycles,llc_cycles",
        3,
        HashMap::new(),
    );
    for (per_cycle, per_second, block) in [
        ("ddr_read_bandwidth_per_cycle", "ddr_read_bandwidth", "mss"),
        (
            "ddr_write_bandwidth_per_cycle",
            "ddr_write_bandwidth",
            "mss1",
        ),
        ("llc_read_bandwidth_per_cycle", "llc_read_bandwidth", "llt"),
        (
            "llc_write_bandwidth_per_cycle",
            "llc_write_bandwidth",
            "llt3",
        ),
    ] {
        let a = c.value(per_cycle, block);
        let b = c.value(per_second, block);
        assert!(
            ((a - b) / b).abs() < 0.01,
            "{per_cycle} {a} vs {per_second} {b}"
        );
    }
}

#[test]
fn metrics_lists_formulas_and_what_they_need() {
    let out = stdout_of(on_fixture("bf2").args(["metrics", "hit", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = &v["metrics"][0];
    assert_eq!(m["metric"], "l3_hit_ratio");
    assert_eq!(m["kind"], "l3cache");
    assert_eq!(m["unit"], "%");
    assert_eq!(
        m["events"][0],
        "l3cache/HITS_BANK0,HITS_BANK1,MISSES_BANK0,MISSES_BANK1/"
    );
    assert_eq!(m["counters_per_block"], 4);
    let all = stdout_of(bfperf().args(["metrics", "--all", "--csv"]));
    assert!(all
        .lines()
        .any(|l| l.starts_with("ddr_read_bandwidth,ddr,mss,GB/s,")));
    assert!(all
        .lines()
        .any(|l| l.starts_with("memory_bandwidth,memory,tile,GB/s,")));
}

#[test]
fn user_metrics_add_reuse_and_bad_files_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("mine.json");
    std::fs::write(
        &good,
        r#"[{"MetricName": "memory_read_share", "MetricExpr": "memory_read_bandwidth / memory_bandwidth",
            "MetricGroup": "mine", "BriefDescription": "reads as a share of the traffic",
            "ScaleUnit": "100%", "Unit": "tile", "Compat": "BlueField-2"},
           {"MetricName": "broken_kind", "MetricExpr": "X", "Unit": "nosuch", "Compat": "BlueField-2"},
           {"MetricName": "broken_event", "MetricExpr": "MEMORY_RAEDS / duration_time", "Unit": "tile", "Compat": "BlueField-2"},
           {"MetricName": "broken_syntax", "MetricExpr": "MEMORY_READS / (", "Unit": "tile", "Compat": "BlueField-2"},
           {"MetricName": "loop_a", "MetricExpr": "loop_b + 1", "Unit": "tile", "Compat": "BlueField-2"},
           {"MetricName": "loop_b", "MetricExpr": "loop_a + 1", "Unit": "tile", "Compat": "BlueField-2"},
           {"MetricName": "selfish", "MetricExpr": "selfish + 1", "Unit": "tile", "Compat": "BlueField-2"}]"#,
    )
    .unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let run = |args: &[&str]| {
        let mut c = on_fixture("bf2");
        c.arg("--metrics")
            .arg(&good)
            .arg("--metrics")
            .arg(&bad)
            .args(args);
        c.assert()
    };
    // The broken file is warned about; built-ins and the good metrics stay.
    let out = run(&["metrics", "--csv"])
        .success()
        .stderr(predicate::str::contains(
            "bad.json: not a JSON array of metrics",
        ));
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("\nmemory_read_share,mine,tile,%,"), "{text}");
    assert!(text.contains("\nl3_hit_ratio,"), "{text}");
    for (name, says) in [
        ("broken_kind", "unknown kind 'nosuch'"),
        (
            "broken_event",
            "'MEMORY_RAEDS' is no event of tile nor a metric nor a perf event; did you mean MEMORY_READS?",
        ),
        ("broken_syntax", "does not parse"),
        (
            "loop_a",
            "refers to itself through loop_a → loop_b → loop_a",
        ),
        ("selfish", "refers to itself"),
    ] {
        run(&["stat", "-o", "-", "-M", name, "--duration", "1s"])
            .code(1)
            .stderr(predicate::str::contains(format!(
                "metric '{name}' ({})",
                good.display()
            )))
            .stderr(predicate::str::contains(says));
    }
    // The user metric reuses built-ins and is computed.
    let set = MetricSet::load(&[Generation::Bf2], std::slice::from_ref(&good));
    let chosen = set.select(&["memory_read_share".to_string()]).unwrap();
    assert_eq!(
        chosen
            .iter()
            .map(|m| m.def.name.as_str())
            .collect::<Vec<_>>(),
        [
            "memory_read_bandwidth",
            "memory_write_bandwidth",
            "memory_bandwidth",
            "memory_read_share"
        ]
    );
    let mut inputs = metrics::Inputs {
        duration_s: 2.0,
        ..Default::default()
    };
    inputs.add("tile0", bfperf::BlockKind::Tile, "MEMORY_READS", 300.0, 1.0);
    inputs.add(
        "tile0",
        bfperf::BlockKind::Tile,
        "MEMORY_WRITES",
        100.0,
        1.0,
    );
    let v = metrics::evaluate(&set, &chosen, &inputs, false);
    assert_eq!(v.last().unwrap().value, Some(75.0));
    // Division by zero gives no value, never inf or NaN.
    inputs.add("tile0", bfperf::BlockKind::Tile, "MEMORY_READS", 0.0, 1.0);
    inputs.add("tile0", bfperf::BlockKind::Tile, "MEMORY_WRITES", 0.0, 1.0);
    assert_eq!(
        metrics::evaluate(&set, &chosen, &inputs, false)
            .last()
            .unwrap()
            .value,
        None
    );
}

#[test]
fn stat_prints_metrics_and_diff_computes_them() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let out = m.run(&[
        "stat",
        "-o",
        "-",
        "-M",
        "l3_hit_ratio",
        "-A",
        "--duration",
        "1s",
        "--format",
        "json",
    ]);
    let lines = ndjson(&out);
    let rates: Vec<&serde_json::Value> = lines.iter().filter(|l| l["record"] == "metric").collect();
    let halves: Vec<&str> = rates.iter().map(|l| l["block"].as_str().unwrap()).collect();
    assert_eq!(halves, ["l3cachehalf0", "l3cachehalf1", "l3cache"], "{out}");
    // Each has a value, or is marked (a busy machine delayed a window's bounds).
    assert!(
        rates.iter().all(|r| r["unit"] == "%"
            && r["value"]
                .as_f64()
                .map_or_else(|| busy_marked(&r["reason"]), |v| v > 0.0)),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    m.cmd().args(["snapshot", "-o"]).arg(&a).assert().success();
    std::thread::sleep(Duration::from_millis(300));
    m.cmd().args(["snapshot", "-o"]).arg(&b).assert().success();
    let d: serde_json::Value = serde_json::from_str(&stdout_of(
        bfperf().arg("diff").arg(&a).arg(&b).arg("--json"),
    ))
    .unwrap();
    let metric = |name: &str, block: &str| {
        d["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["metric"] == name && x["block"] == block)
            .unwrap_or_else(|| panic!("{name} {block} in {d}"))["value"]
            .as_f64()
            .unwrap()
    };
    let gb = metric("pcie_in_bandwidth", "pcie0");
    let summary = d["pcie"][0]["in_bytes_per_s"].as_f64().unwrap();
    assert!(
        ((gb * 1e9 - summary) / summary).abs() < 1e-9,
        "{gb} vs {summary}"
    );
}

/// A formula that sets another kind's counts against its own has per-block values
/// only when the file says how blocks pair; otherwise each block's value is absent
/// with the reason, and the kind's value stays.
#[test]
fn a_metric_mixing_kinds_without_a_pairing_is_for_the_kind_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.json");
    // `stat -A` of the metric, defined with `pairing` added to its fields.
    let run = |pairing: &str| {
        std::fs::write(
            &file,
            format!(
                r#"[{{"MetricName": "my_miss_ratio", "MetricExpr": "llt_miss@GDC_MISS_MACHINE_RD_REQ@ / GDC_BANK0_RD_REQ", "Unit": "llt"{pairing}}}]"#
            ),
        )
        .unwrap();
        let mut cmd = bfperf();
        cmd.arg("--metrics").arg(&file).args([
            "--sim",
            "bf3",
            "stat",
            "-o",
            "-",
            "-A",
            "-M",
            "my_miss_ratio",
            "--duration",
            "300ms",
            "-j",
        ]);
        cmd
    };
    let out = stdout_of(&mut run(""));
    let records: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["record"] == "metric")
        .collect();
    let of = |block: &str| records.iter().find(|r| r["block"] == block).unwrap();
    let llt = of("llt");
    assert!(
        llt["value"].is_number() || busy_marked(&llt["reason"]),
        "{out}"
    );
    for i in 0..8 {
        let r = of(&format!("llt{i}"));
        assert!(r["value"].is_null(), "{r}");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("defined for the kind as a whole"),
            "{r}"
        );
    }
    // The same with "PairBlocks": "index": each block has its value, or is marked
    // because a busy machine left its first window's bounds unknown.
    let out = stdout_of(&mut run(r#", "PairBlocks": "index""#));
    for r in ndjson(&out).iter().filter(|r| r["record"] == "metric") {
        assert!(r["value"].is_number() || busy_marked(&r["reason"]), "{r}");
    }
    // An unknown pairing is refused with what is known.
    run(r#", "PairBlocks": "name""#)
        .assert()
        .failure()
        .stderr(predicate::str::contains("PairBlocks 'name' is not known"));
}

/// A metric file is anyone's to write (`--metrics`, `~/.config/bfperf/metrics/`):
/// run as nobody, with its memory capped, formulas nested, chained or long past
/// what bfperf reads are refused at once with the reason, and the file's other
/// metric is computed.
#[test]
fn hostile_formulas_are_refused_at_once_and_the_rest_of_their_file_stays() {
    use std::os::unix::fs::PermissionsExt;
    if not_root("switching users") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open = |p: &std::path::Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(dir.path(), 0o777);
    let bin = dir.path().join("bfperf");
    crate::support::copy_program(assert_cmd::cargo::cargo_bin!("bfperf"), &bin);
    let flits = "SKYLIB_DDN_TX_FLITS";
    let metric = |name: &str, expr: String| {
        serde_json::json!({"MetricName": name, "MetricExpr": expr, "Unit": "mss",
            "ScaleUnit": "1e-9GB/s", "Compat": "BlueField-3"})
    };
    let file = dir.path().join("hostile.json");
    let metrics = serde_json::json!([
        metric(
            "deep",
            format!("{}{flits}{}", "(".repeat(65), ")".repeat(65))
        ),
        metric("unary", format!("{}{flits}", "- ".repeat(200))),
        metric("long", format!("{flits}{}", " + 1".repeat(300_000))),
        metric(
            "fine",
            format!("min({flits}, {flits}) * 64 / duration_time")
        ),
    ]);
    std::fs::write(&file, metrics.to_string()).unwrap();
    open(&file, 0o644);
    let run = |name: &str| {
        let t = std::time::Instant::now();
        let out = std::process::Command::new("timeout")
            .args(["20", "prlimit", "--as=1073741824", "setpriv"])
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(&bin)
            .args(["--sim", "bf3", "--metrics"])
            .arg(&file)
            .args([
                "stat",
                "-o",
                "-",
                "-x",
                ",",
                "-M",
                name,
                "--duration",
                "100ms",
            ])
            .env("BFPERF_STATE_DIR", dir.path().join("state"))
            .env("BFPERF_LOCK_FILE", dir.path().join("lock"))
            .output()
            .unwrap();
        (out, t.elapsed())
    };
    for (name, says) in [
        ("deep", "nests deeper than 64 parentheses"),
        ("unary", "more than 128 operators"),
        ("long", "bfperf reads formulas of at most 4096"),
    ] {
        let (out, took) = run(name);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(&format!("metric '{name}'")) && err.contains(says),
            "{name}: {err}"
        );
        assert!(took < Duration::from_secs(10), "{name}: {took:?}");
    }
    // min(x, x) is x: the same value as the built-in of the same formula, counted
    // in the same window.
    let (out, _) = run("fine,ddr_read_bandwidth");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |name: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.contains(&format!(" {name} ")))
            .unwrap();
        line.split(',').nth(5).unwrap().parse().unwrap()
    };
    assert!(value("fine") > 0.0, "{text}");
    assert_eq!(value("fine"), value("ddr_read_bandwidth"), "{text}");
}
