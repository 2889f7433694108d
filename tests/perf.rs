//! perf_event events beside the blocks: perf's generic names and sysfs PMUs, counted
//! in the same window as the hwmon counters. Hardware events may be missing here (a
//! virtual machine): exact checks use software events, and a hardware event must show
//! `<not supported>` without failing the run.

mod common;

use bfperf::sim::{Kernel, Sim};
use bfperf::Generation;
use common::*;

fn cpus() -> f64 {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online
        .trim()
        .split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => b.parse::<f64>().unwrap() - a.parse::<f64>().unwrap() + 1.0,
            None => 1.0,
        })
        .sum()
}

#[test]
fn cpu_clock_and_a_tile_count_share_one_window() {
    let out = bfperf()
        .args(["--sim", "bf2", "stat", "--json", "--duration", "600ms"])
        .args([
            "-e",
            "cpu-clock",
            "-e",
            "tile/MEMORY_READS/",
            "-e",
            "cycles",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = ndjson(&String::from_utf8(out.stdout).unwrap());
    let total = |event: &str| {
        records
            .iter()
            .find(|r| r["record"] == "total" && r["event"] == event)
            .unwrap_or_else(|| panic!("no {event}: {records:?}"))
            .clone()
    };
    let clock = total("cpu-clock");
    let secs = clock["time_s"].as_f64().unwrap();
    // System-wide, cpu-clock is every online CPU's time over the window.
    let ns = clock["value"].as_f64().unwrap();
    let want = cpus() * secs * 1e9;
    assert!(
        ((ns - want) / want).abs() < 0.05,
        "cpu-clock {ns} vs {want}"
    );
    assert_eq!(clock["kind"], "perf");
    // The tiles over the same window, from the simulator's rates.
    let (sim, _) = Sim::with_manual_clock(Generation::Bf2, Kernel::V6_16);
    let rate: f64 = ["tile0", "tile1", "tile2", "tile3"]
        .iter()
        .map(|b| sim.event_rate(b, 0x4c).unwrap() as f64)
        .sum();
    let reads = total("MEMORY_READS")["value"].as_f64().unwrap();
    assert!(
        ((reads / secs - rate) / rate).abs() < 0.03,
        "{reads} in {secs} s vs {rate}/s"
    );
    // cycles: counted where the CPU has counters, else not supported; the run goes on.
    let cycles = total("cycles");
    match cycles["value"].as_u64() {
        Some(v) => assert!(v > 0),
        None => assert!(
            cycles["invalid"]
                .as_str()
                .unwrap()
                .contains("not supported"),
            "{cycles}"
        ),
    }
}

#[test]
fn an_unsupported_event_prints_not_supported_and_a_bad_one_writes_nothing() {
    // A PMU tree of our own: its type is no PMU of this kernel, so the kernel refuses it.
    let root = tempfile::tempdir().unwrap();
    let pmu = root.path().join("bus/event_source/devices/fakepmu");
    std::fs::create_dir_all(pmu.join("format")).unwrap();
    std::fs::create_dir_all(pmu.join("events")).unwrap();
    std::fs::write(pmu.join("type"), "4000\n").unwrap();
    std::fs::write(pmu.join("format/event"), "config:0-7,32-35\n").unwrap();
    std::fs::write(pmu.join("format/umask"), "config:8-15\n").unwrap();
    std::fs::write(pmu.join("events/l2_refill"), "event=0x1ab,umask=0x3\n").unwrap();
    // The encoding perf would produce: 0x1ab's low 8 bits at 0-7, its next 4 at 32-35.
    let pmus = bfperf::ops::perf::discover(root.path());
    let c = pmus[0].resolve("l2_refill").unwrap();
    assert_eq!(c.0[0], 0xab | (0x3 << 8) | (0x1 << 32));
    assert_eq!(pmus[0].resolve("event=0x12").unwrap().0[0], 0x12);
    // Through stat: the run goes on, the event is <not supported>.
    let copy = Copy::of("bf2");
    std::fs::create_dir_all(copy.root().join("bus/event_source")).unwrap();
    copy_tree(
        &root.path().join("bus/event_source"),
        &copy.root().join("bus/event_source"),
    );
    let out = copy
        .cmd()
        .args(["stat", "-e", "fakepmu/l2_refill/", "--duration", "100ms"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("<not supported>"));
    // An event the PMU lacks is refused before anything is written to the device.
    let before = copy.contents();
    copy.cmd()
        .args([
            "stat",
            "-e",
            "fakepmu/l2_refil/",
            "-e",
            "tile/MEMORY_READS/",
        ])
        .args(["--duration", "100ms"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("did you mean l2_refill"));
    assert_eq!(before, copy.contents());
}
