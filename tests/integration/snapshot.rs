//! Snapshots and their differences.

use crate::support::*;
use bfperf::kinds::Role;
use bfperf::ops::diff::{diff, Flag, IntervalSource};
use bfperf::ops::snapshot::{Snapshot, SnapshotBlock, SnapshotCounter, SnapshotRegister};
use bfperf::{BlockKind, Mechanism};
use predicates::prelude::*;
use std::fs;

fn load(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn snapshot_of_the_pcie_registers_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(&a)
        .assert()
        .success()
        .stderr(predicate::str::contains("wrote 24 values of 2 blocks"));
    let v = load(&a);
    assert_eq!(v["schema"], "bfperf-snapshot");
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["generation"], "BlueField-2");
    assert!(v["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(v["monotonic_ns"].as_u64().unwrap() > 0);
    assert!(!v["hostname"].as_str().unwrap().is_empty());
    assert_eq!(
        v["device"],
        device_dir(&fixture("bf2")).display().to_string()
    );
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0]["block"], "pcie0");
    assert_eq!(blocks[0]["kind"], "pcie");
    assert_eq!(blocks[0]["enabled"], serde_json::Value::Null);
    let regs = blocks[0]["registers"].as_array().unwrap();
    assert_eq!(regs.len(), 12);
    assert_eq!(regs[0]["register"], "IN_P_PKT_CNT");
    let file = fs::read_to_string(device_dir(&fixture("bf2")).join("pcie0/IN_P_PKT_CNT")).unwrap();
    // 6 GB/s in, 70 % posted, 256-byte packets, over 2 pcie blocks: 8,203,125/s,
    // from an hour before the fixture's boot to 2 s after it.
    assert_eq!(file, "0x6e12d743a\n");
    assert_eq!(regs[0]["value"], 8_203_125u64 * 3602);
    assert_eq!(regs[0]["width_bits"], 64);
}

#[test]
fn snapshot_all_of_bf3_has_crspace_widths_and_state() {
    let out = stdout_of(on_fixture("bf3").args(["snapshot", "all"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let llt1 = v["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["block"] == "llt1")
        .unwrap();
    assert_eq!(llt1["enabled"], true);
    assert_eq!(llt1["mechanism"], "all-at-once");
    assert_eq!(llt1["counters"][0]["counts_clock"], true);
    // 2 s of the LLC clock (PLL T1, 2 GHz in the simulator).
    assert_eq!(llt1["counters"][0]["value"], 4_000_000_000u64);
    assert_eq!(llt1["counters"][0]["width_bits"], 32);
    assert_eq!(llt1["counters"][1]["event_name"], "HNF0_CYCLES");
    let cm = v["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["block"] == "clock_measure")
        .unwrap();
    assert_eq!(cm["registers"][0]["width_bits"], 32);
    // No pcie blocks on this layout: the default selection says so.
    on_fixture("bf3")
        .arg("snapshot")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no pcie blocks"));
}

fn snap(mono_s: f64, blocks: Vec<SnapshotBlock>) -> Snapshot {
    Snapshot {
        schema: "bfperf-snapshot".into(),
        schema_version: 2,
        timestamp: "2026-11-21T18:00:00Z".into(),
        timestamp_unix_ns: 1_795_284_000_000_000_000 + (mono_s * 1e9) as u64,
        monotonic_ns: 1_000_000_000_000 + (mono_s * 1e9) as u64,
        read_window_ns: 1000,
        hostname: "dpu".into(),
        device: "/sys/class/hwmon/hwmon3".into(),
        generation: "BlueField-3".into(),
        blocks,
    }
}

fn block(
    name: &str,
    kind: &str,
    counters: Vec<(u32, &str, u64, u32)>,
    registers: Vec<(&str, u64)>,
) -> SnapshotBlock {
    SnapshotBlock {
        block: name.into(),
        kind: BlockKind::parse(kind).unwrap_or(BlockKind::Unknown),
        mechanism: if registers.is_empty() {
            Mechanism::AllAtOnce
        } else {
            Mechanism::Registers
        },
        enabled: None,
        counters: counters
            .into_iter()
            .map(|(i, ev, value, width)| SnapshotCounter {
                counter: i,
                event: Some(i),
                event_name: Some(ev.into()),
                counts_clock: false,
                value,
                width_bits: width,
            })
            .collect(),
        registers: registers
            .into_iter()
            .map(|(n, value)| SnapshotRegister {
                register: n.into(),
                role: Role::Count,
                value,
                width_bits: 64,
            })
            .collect(),
        unreadable: Vec::new(),
    }
}

fn pcie(values: [u64; 12]) -> SnapshotBlock {
    let names = [
        "IN_P_PKT_CNT",
        "IN_NP_PKT_CNT",
        "IN_C_PKT_CNT",
        "OUT_P_PKT_CNT",
        "OUT_NP_PKT_CNT",
        "OUT_C_PKT_CNT",
        "IN_P_BYTE_CNT",
        "IN_NP_BYTE_CNT",
        "IN_C_BYTE_CNT",
        "OUT_P_BYTE_CNT",
        "OUT_NP_BYTE_CNT",
        "OUT_C_BYTE_CNT",
    ];
    block(
        "pcie0",
        "pcie",
        vec![],
        names.iter().copied().zip(values).collect(),
    )
}

#[test]
fn diff_handles_wraps_resets_event_changes_and_pcie() {
    let old = snap(
        0.0,
        vec![
            block(
                "llt0",
                "llt",
                vec![
                    (0, "HNF0_CYCLES", 4_000_000_000, 32),
                    (1, "GDC_BANK0_HIT", 100, 32),
                ],
                vec![],
            ),
            block(
                "tile2",
                "tile",
                vec![(3, "HNF_REQUESTS", 5_000, 64)],
                vec![],
            ),
            pcie([100, 0, 0, 0, 0, 0, 1_000, 2_000, 3_000, 4_000, 0, 0]),
            block("gone0", "tile", vec![], vec![]),
        ],
    );
    let mut new_llt = block(
        "llt0",
        "llt",
        vec![
            (0, "HNF0_CYCLES", 705_032_704, 32),
            (1, "GDC_BANK0_HIT", 300, 32),
        ],
        vec![],
    );
    new_llt.counters[1].event = Some(0x58);
    new_llt.counters[1].event_name = Some("GDC_BANK0_MISS".into());
    let new = snap(
        2.0,
        vec![
            new_llt,
            block(
                "tile2",
                "tile",
                vec![(3, "HNF_REQUESTS", 1_000, 64)],
                vec![],
            ),
            pcie([
                300,
                0,
                0,
                0,
                0,
                0,
                2_000_001_000,
                2_000,
                3_000,
                4_000,
                0,
                50,
            ]),
            block("new0", "tile", vec![], vec![]),
        ],
    );
    let d = diff(&old, &new);
    assert_eq!(d.interval_s, 2.0);
    assert_eq!(d.interval_source, IntervalSource::Monotonic);
    let v = |b: &str, i: &str| {
        d.values
            .iter()
            .find(|v| {
                v.block == b
                    && (v.register.as_deref() == Some(i)
                        || v.counter.map(|c| format!("counter{c}")).as_deref() == Some(i))
            })
            .unwrap()
            .clone()
    };
    let wrapped = v("llt0", "counter0");
    assert_eq!(wrapped.flag, Some(Flag::Wrapped));
    assert_eq!(
        wrapped.delta,
        Some(705_032_704 + (1u64 << 32) - 4_000_000_000)
    );
    assert_eq!(
        wrapped.rate_per_s,
        Some((705_032_704.0 + 4_294_967_296.0 - 4e9) / 2.0)
    );
    let changed = v("llt0", "counter1");
    assert_eq!(changed.flag, Some(Flag::EventChanged));
    assert_eq!(changed.delta, None);
    let reset = v("tile2", "counter3");
    assert_eq!((reset.flag, reset.delta), (Some(Flag::Reset), Some(1_000)));
    let out_c = v("pcie0", "OUT_C_BYTE_CNT");
    assert_eq!((out_c.delta, out_c.flag), (Some(50), None));
    let in_p = v("pcie0", "IN_P_BYTE_CNT");
    assert_eq!(in_p.rate_per_s, Some(1e9));
    assert_eq!(d.only_in_old, ["gone0"]);
    assert_eq!(d.only_in_new, ["new0"]);
    let p = &d.pcie[0];
    assert_eq!(p.in_bytes_per_s, 1e9);
    assert_eq!(p.in_gbit_per_s, 8.0);
    assert_eq!(p.out_bytes_per_s, 25.0);
    assert_eq!(p.in_packets_per_s, 100.0);
    assert_eq!(p.in_bytes_per_s_by_type.posted, 1e9);
    assert_eq!(p.out_bytes_per_s_by_type.completion, 25.0);
    // A register that went down was reset: delta from 0.
    let mut reset_new = new.clone();
    reset_new.blocks[2].registers[0].value = 40;
    let d2 = diff(&old, &reset_new);
    let r = d2
        .values
        .iter()
        .find(|v| v.register.as_deref() == Some("IN_P_PKT_CNT"))
        .unwrap();
    assert_eq!((r.flag, r.delta), (Some(Flag::Reset), Some(40)));
    // Another host or boot: the wall clock gives the interval.
    let mut other = new.clone();
    other.hostname = "other".into();
    assert_eq!(
        diff(&old, &other).interval_source,
        IntervalSource::WallClock
    );
}

#[test]
fn diff_command_prints_the_pcie_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let old = snap(0.0, vec![pcie([0; 12])]);
    let new = snap(
        4.0,
        vec![pcie([400, 40, 4, 0, 0, 0, 4_000_000_000, 0, 0, 400, 0, 0])],
    );
    fs::write(&a, serde_json::to_string(&old).unwrap()).unwrap();
    fs::write(&b, serde_json::to_string(&new).unwrap()).unwrap();
    let out = stdout_of(bfperf().arg("diff").arg(&a).arg(&b));
    assert!(out.starts_with("interval: 4.000 s (monotonic)\n"), "{out}");
    assert!(out.contains("PCIe pcie0:\n  inbound   1,000,000,000.00 B/s (8.000 Gb/s), 111.00 packets/s\n  outbound  100.00 B/s (0.000 Gb/s), 0.00 packets/s\n"), "{out}");
    let line = out.lines().find(|l| l.contains("IN_P_BYTE_CNT")).unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        [
            "pcie0",
            "IN_P_BYTE_CNT",
            "0",
            "4,000,000,000",
            "4,000,000,000",
            "1,000,000,000.00"
        ]
    );
    let v: serde_json::Value = serde_json::from_str(&stdout_of(
        bfperf().arg("diff").arg(&a).arg(&b).arg("--json"),
    ))
    .unwrap();
    assert_eq!(v["pcie"][0]["in_bytes_per_s"], 1e9);
    assert_eq!(v["values"][6]["delta"], 4_000_000_000u64);
    // Not a snapshot: a clear error.
    fs::write(&b, "{}").unwrap();
    bfperf()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a bfperf snapshot"));
}

#[test]
fn snapshot_output_is_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("snap.json");
    fs::write(&target, "old content").unwrap();
    // The device fails mid-way (a block's state, not one value, cannot be read): the
    // old file stays, no temp file is left.
    let c = Copy::of("bf2");
    fs::write(c.device().join("l3cachehalf1/enable"), "garbage\n").unwrap();
    c.cmd()
        .args(["snapshot", "all", "-o"])
        .arg(&target)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "unexpected content in l3cachehalf1/enable",
        ));
    assert_eq!(fs::read_to_string(&target).unwrap(), "old content");
    // A directory is refused before anything is written: nothing left behind.
    let blocked = dir.path().join("blocked");
    fs::create_dir(&blocked).unwrap();
    fs::write(blocked.join("keep"), "x").unwrap();
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(&blocked)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("it is a directory"));
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["blocked", "snap.json"]);
    // A good run replaces the file whole.
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(&target)
        .assert()
        .success();
    assert_eq!(load(&target)["blocks"].as_array().unwrap().len(), 2);
}

#[test]
fn snapshots_of_the_mounted_simulator_show_traffic() {
    let Some(m) = Mount::start("2", "new") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    m.run(&["program", "tile2", "3", "HNF_REQUESTS"]);
    m.cmd()
        .args(["snapshot", "pcie", "tile2", "-o"])
        .arg(&a)
        .assert()
        .success();
    std::thread::sleep(std::time::Duration::from_millis(100));
    m.cmd()
        .args(["snapshot", "pcie", "tile2", "-o"])
        .arg(&b)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_str(&stdout_of(
        bfperf().arg("diff").arg(&a).arg(&b).arg("--json"),
    ))
    .unwrap();
    assert_eq!(v["interval_source"], "monotonic");
    assert!(v["pcie"][0]["in_bytes_per_s"].as_f64().unwrap() > 1e8);
    let hnf = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["block"] == "tile2" && x["counter"] == 3)
        .unwrap();
    assert!(hnf["rate_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(hnf["flag"], serde_json::Value::Null);
}

/// Two snapshots of the bf2 fixture, as JSON values, to alter.
fn two_snapshots() -> (tempfile::TempDir, serde_json::Value, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let a = stdout_of(on_fixture("bf2").args(["snapshot", "all"]));
    let b = stdout_of(on_fixture("bf2").args(["snapshot", "all"]));
    (
        dir,
        serde_json::from_str(&a).unwrap(),
        serde_json::from_str(&b).unwrap(),
    )
}

fn diff_of(
    dir: &std::path::Path,
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> assert_cmd::assert::Assert {
    let (pa, pb) = (dir.join("a.json"), dir.join("b.json"));
    fs::write(&pa, a.to_string()).unwrap();
    fs::write(&pb, b.to_string()).unwrap();
    bfperf().arg("diff").arg(&pa).arg(&pb).assert()
}

#[test]
fn diff_refuses_snapshots_in_reverse_order() {
    let (dir, a, b) = two_snapshots();
    diff_of(dir.path(), &b, &a)
        .code(1)
        .stderr(predicate::str::contains("was taken before the first"))
        .stderr(predicate::str::contains("swap"));
}

#[test]
fn diff_warns_about_different_origins_and_refuses_them_when_strict() {
    let (dir, a, mut b) = two_snapshots();
    b["hostname"] = "other-dpu".into();
    b["generation"] = "BlueField-3".into();
    diff_of(dir.path(), &a, &b)
        .success()
        .stderr(predicate::str::contains(
            "bfperf: warning: the snapshots come from different hosts",
        ))
        .stderr(predicate::str::contains(
            "different generations: BlueField-2 and BlueField-3",
        ));
    let (pa, pb) = (dir.path().join("a.json"), dir.path().join("b.json"));
    bfperf()
        .args(["diff", "--strict"])
        .arg(&pa)
        .arg(&pb)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("(--strict)"));
}

#[test]
fn diff_refuses_values_wider_than_their_counter_and_missing_fields() {
    let (dir, a, mut b) = two_snapshots();
    let llt = b["blocks"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|x| x["block"] == "tile2")
        .unwrap();
    llt["counters"][0]["width_bits"] = 32.into();
    llt["counters"][0]["value"] = (1u64 << 40).into();
    diff_of(dir.path(), &a, &b)
        .code(1)
        .stderr(predicate::str::contains(
            "b.json: tile2 counter0 holds 1099511627776, wider than its 32 bits",
        ));
    let (_, a, mut b) = two_snapshots();
    b["blocks"][0].as_object_mut().unwrap().remove("kind");
    diff_of(dir.path(), &a, &b)
        .code(1)
        .stderr(predicate::str::contains("b.json"))
        .stderr(predicate::str::contains("missing field `kind`"));
}

#[test]
fn diff_reads_version_1_snapshots() {
    let (dir, mut a, b) = two_snapshots();
    a["schema_version"] = 1.into();
    for block in a["blocks"].as_array_mut().unwrap() {
        let o = block.as_object_mut().unwrap();
        let name = o.remove("block").unwrap();
        o.insert("name".into(), name);
        for c in o["counters"].as_array_mut().unwrap() {
            let c = c.as_object_mut().unwrap();
            let i = c.remove("counter").unwrap();
            c.insert("index".into(), i);
        }
        for r in o["registers"].as_array_mut().unwrap() {
            let r = r.as_object_mut().unwrap();
            let n = r.remove("register").unwrap();
            r.insert("name".into(), n);
        }
    }
    let out = diff_of(dir.path(), &a, &b).success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("IN_P_PKT_CNT"), "{text}");
}

#[test]
fn diff_formats_csv() {
    let (dir, a, b) = two_snapshots();
    diff_of(dir.path(), &a, &b).success();
    let out = stdout_of(
        bfperf()
            .args(["diff", "--csv"])
            .arg(dir.path().join("a.json"))
            .arg(dir.path().join("b.json")),
    );
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "block,counter,register,event,event_name,old,new,delta,rate_per_s,flag"
    );
    assert!(out.contains("\npcie0,,IN_P_PKT_CNT,,,"), "{out}");
}

#[test]
fn levels_are_shown_not_differenced() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    on_fixture("bf3")
        .args(["snapshot", "clock_measure", "-o"])
        .arg(&a)
        .assert()
        .success();
    on_fixture("bf3")
        .args(["snapshot", "clock_measure", "-o"])
        .arg(&b)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!(v["blocks"][0]["registers"][0]["role"], "level");
    let d: serde_json::Value = serde_json::from_str(&stdout_of(
        bfperf().arg("diff").arg(&a).arg(&b).arg("--json"),
    ))
    .unwrap();
    let first = &d["values"][0];
    assert_eq!(first["register"], "FMON_CLK_LAST_COUNT_PLL_D1_INST0");
    assert_eq!(first["flag"], "level");
    assert_eq!(first["delta"], serde_json::Value::Null);
    assert_eq!(first["new"], 6400);
}

/// One value that cannot be read (`-5` in a counter) is left out and said, in
/// `read`, `snapshot` and `diff`; every other value is still read.
#[test]
fn one_unreadable_value_is_said_not_fatal() {
    let c = Copy::of("bf2");
    std::fs::write(c.device().join("tile2/counter1"), "-5\n").unwrap();
    let text = c.run(&["read", "tile2"]);
    assert!(
        text.contains("tile2/counter1: not read, left out: unexpected content"),
        "{text}"
    );
    assert!(text.contains("HNF_REQUESTS"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&c.run(&["read", "tile2", "--json"])).unwrap();
    let block = &json["blocks"][0];
    assert_eq!(block["unreadable"][0]["file"], "tile2/counter1");
    assert!(block["counters"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["counter"] != 1));
    let dir = tempfile::tempdir().unwrap();
    let snapshot = |value: &str, name: &str| {
        std::fs::write(c.device().join("tile2/counter1"), value).unwrap();
        let path = dir.path().join(name);
        c.cmd()
            .args(["snapshot", "all", "-o"])
            .arg(&path)
            .assert()
            .success();
        path
    };
    let older = snapshot("0x10\n", "older.json");
    let newer = snapshot("-5\n", "newer.json");
    c.cmd()
        .arg("diff")
        .arg(&older)
        .arg(&newer)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "tile2/counter1 was not read in the newer snapshot",
        ));
}

/// Two processes on the in-process simulator see one device: its free-running
/// registers count from the machine's boot, so a diff of snapshots taken by two
/// commands gives the simulator's rates (as README's example does).
#[test]
fn snapshots_from_two_processes_give_the_simulators_rates() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (path, pause) in [(&a, true), (&b, false)] {
        bfperf()
            .args(["--sim", "bf2", "snapshot", "-o"])
            .arg(path)
            .assert()
            .success();
        if pause {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
    let out = stdout_of(bfperf().arg("diff").arg(&a).arg(&b).arg("--json"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (sim, _) =
        bfperf::sim::Sim::with_manual_clock(bfperf::Generation::Bf2, bfperf::sim::Kernel::V6_16);
    let pcie = &v["pcie"][0];
    assert_eq!(pcie["block"], "pcie0", "{out}");
    let truth: f64 = ["IN_P_BYTE_CNT", "IN_NP_BYTE_CNT", "IN_C_BYTE_CNT"]
        .iter()
        .map(|r| sim.register_rate("pcie0", r).unwrap() as f64)
        .sum();
    // Right within 1 %, or marked: a busy machine that stretched a snapshot's reads
    // says how far its rates may be off, and they are right to that.
    let got = pcie["in_bytes_per_s"].as_f64().unwrap();
    let within = v["rate_uncertainty"].as_f64().unwrap();
    if within > 0.005 {
        let said = v["warnings"].as_array().unwrap().iter();
        assert!(
            said.filter_map(|w| w.as_str())
                .any(|w| w.contains("known to ±")),
            "{out}"
        );
        assert!(
            ((got - truth) / truth).abs() <= within,
            "pcie0 inbound {got} against {truth}, said to be within {within}"
        );
    } else {
        assert_rate(got, truth, "pcie0 inbound bytes/s");
    }
}

/// A value that could not be read is a CSV row with no value and the problem (read,
/// snapshot), and said on stderr by diff, whose PCIe summary it leaves out rather
/// than summing what is left.
#[test]
fn an_unread_value_is_a_csv_row_and_never_a_silent_gap() {
    let faults = "tile2/counter1@1=EIO,pcie0/IN_P_PKT_CNT@1=EIO";
    for command in [
        &["read", "tile2", "pcie0"][..],
        &["snapshot", "tile2", "pcie0"],
    ] {
        let out = stdout_of(
            bfperf()
                .args(["--sim", "bf2", "--sim-faults", faults])
                .args(command)
                .arg("--csv"),
        );
        let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(rows[0].last(), Some(&"problem"), "{out}");
        let width = rows[0].len();
        assert!(rows.iter().all(|r| r.len() == width), "{out}");
        let unread: Vec<&Vec<&str>> = rows.iter().filter(|r| r[width - 2].is_empty()).collect();
        assert_eq!(unread.len(), 2, "{command:?}: {out}");
        assert_eq!(unread[0][..3], ["tile2", "1", ""], "{out}");
        assert_eq!(unread[1][..3], ["pcie0", "", "IN_P_PKT_CNT"], "{out}");
        for r in unread {
            assert!(
                r[width - 1].contains("Input/output error"),
                "{command:?}: {r:?}"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    bfperf()
        .args(["--sim", "bf2", "--sim-faults", "pcie0/IN_P_PKT_CNT@1=EIO"])
        .args(["snapshot", "-o"])
        .arg(&a)
        .assert()
        .success();
    bfperf()
        .args(["--sim", "bf2", "snapshot", "-o"])
        .arg(&b)
        .assert()
        .success();
    let out = bfperf()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .arg("--csv")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("pcie0/IN_P_PKT_CNT was not read in the older snapshot"),
        "{err}"
    );
    assert!(err.contains("pcie0: no PCIe summary"), "{err}");
    let json = stdout_of(bfperf().arg("diff").arg(&a).arg(&b).arg("--json"));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let summaries = v["pcie"].as_array().unwrap();
    assert!(summaries.iter().all(|p| p["block"] != "pcie0"), "{json}");
    assert!(
        !summaries.is_empty(),
        "the other block's summary stays: {json}"
    );
}
