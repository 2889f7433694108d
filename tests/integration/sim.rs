//! The simulator's rules, on the in-process model with a manual clock.

use bfperf::error::errno;
use bfperf::sim::{Kernel, ManualClock, Sim, SimOptions};
use bfperf::{Generation, Sysfs};
use std::sync::Arc;

fn sim(gen: Generation, flavor: Kernel) -> (Sim, Arc<ManualClock>) {
    Sim::with_manual_clock(gen, flavor)
}

fn errno_of(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    r.expect_err("the driver should refuse this")
        .raw_os_error()
        .unwrap()
}

fn value(s: &Sim, rel: &str) -> u64 {
    let t = s.read(rel).unwrap();
    assert!(t.starts_with("0x") && t.ends_with('\n'), "{rel}: {t:?}");
    u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).unwrap()
}

const ALL: [Kernel; 3] = [Kernel::V6_7, Kernel::V6_16, Kernel::Oot];

#[test]
fn programming_resets_and_starts_a_normal_counter() {
    for flavor in ALL {
        let (s, clock) = sim(Generation::Bf2, flavor);
        assert_eq!(s.read("tile2/event3").unwrap(), "0x0: DISABLE\n");
        assert_eq!(s.read("tile2/counter3").unwrap(), "0x0\n");
        s.write("tile2/event3", b"0x45").unwrap();
        assert_eq!(s.read("tile2/event3").unwrap(), "0x45: HNF_REQUESTS\n");
        clock.advance_secs(1);
        let one = value(&s, "tile2/counter3");
        // The default traffic: (8 + 4) GB/s / 64 B of requests over 4 tiles.
        assert_eq!(one, 46_875_000);
        clock.advance_secs(1);
        assert_eq!(value(&s, "tile2/counter3"), 2 * one);
        // Writing 0 restarts from 0, same event.
        s.write("tile2/counter3", b"0").unwrap();
        assert_eq!(s.read("tile2/counter3").unwrap(), "0x0\n");
        clock.advance_secs(1);
        assert_eq!(value(&s, "tile2/counter3"), one);
        // Re-programming resets.
        s.write("tile2/event3", b"0x45").unwrap();
        assert_eq!(value(&s, "tile2/counter3"), 0);
        // Non-zero writes to counters are refused.
        assert_eq!(errno_of(s.write("tile2/counter3", b"5")), errno::EINVAL);
    }
}

#[test]
fn event_names_with_a_newline_fail_on_old_kernels_only() {
    let (old, _) = sim(Generation::Bf2, Kernel::V6_7);
    assert_eq!(
        errno_of(old.write("tile2/event3", b"HNF_REQUESTS\n")),
        errno::EINVAL
    );
    old.write("tile2/event3", b"HNF_REQUESTS").unwrap();
    assert_eq!(old.read("tile2/event3").unwrap(), "0x45: HNF_REQUESTS\n");
    // The out-of-tree driver compares the raw buffer, as old kernels do.
    let (oot, _) = sim(Generation::Bf2, Kernel::Oot);
    assert_eq!(
        errno_of(oot.write("tile2/event3", b"HNF_REQUESTS\n")),
        errno::EINVAL
    );
    for flavor in [Kernel::V6_16, Kernel::V6_19] {
        let (s, _) = sim(Generation::Bf2, flavor);
        s.write("tile2/event3", b"HNF_REQUESTS\n").unwrap();
        assert_eq!(s.read("tile2/event3").unwrap(), "0x45: HNF_REQUESTS\n");
        assert_eq!(
            errno_of(s.write("tile2/event3", b"hnf_requests")),
            errno::EINVAL
        );
    }
}

#[test]
fn numbers_parse_per_flavor() {
    let (old, _) = sim(Generation::Bf2, Kernel::V6_7);
    old.write("tile2/event0", b"69\n").unwrap();
    assert_eq!(old.read("tile2/event0").unwrap(), "0x45: HNF_REQUESTS\n");
    old.write("tile2/event0", b"0105").unwrap();
    assert_eq!(old.read("tile2/event0").unwrap(), "0x45: HNF_REQUESTS\n");
    let (oot, _) = sim(Generation::Bf2, Kernel::Oot);
    oot.write("tile2/event0", b"45").unwrap();
    assert_eq!(oot.read("tile2/event0").unwrap(), "0x45: HNF_REQUESTS\n");
    oot.write("tile2/event0", b"0x4c").unwrap();
    assert_eq!(oot.read("tile2/event0").unwrap(), "0x4c: MEMORY_READS\n");
    for flavor in ALL {
        let (s, _) = sim(Generation::Bf2, flavor);
        assert_eq!(errno_of(s.write("tile2/event0", b"-1")), errno::EINVAL);
        assert_eq!(
            errno_of(s.write("tile2/event0", b"0x45\n\n")),
            errno::EINVAL
        );
        assert_eq!(
            errno_of(s.write("tile2/event0", b"0x1ffffffff")),
            errno::ERANGE
        );
    }
}

#[test]
fn stopping_with_0xff_old_accepts_new_refuses() {
    let (old, clock) = sim(Generation::Bf2, Kernel::V6_7);
    old.write("tile2/event1", b"0x45").unwrap();
    clock.advance_secs(1);
    old.write("tile2/event1", b"0xff").unwrap();
    // No name for 0xff: reading the event fails; the counter no longer counts.
    assert_eq!(errno_of(old.read("tile2/event1")), errno::EINVAL);
    assert_eq!(old.read("tile2/counter1").unwrap(), "0x0\n");
    clock.advance_secs(1);
    assert_eq!(old.read("tile2/counter1").unwrap(), "0x0\n");

    let (new, _) = sim(Generation::Bf2, Kernel::V6_16);
    assert_eq!(errno_of(new.write("tile2/event1", b"0xff")), errno::EINVAL);
    assert_eq!(errno_of(new.write("gic0/event0", b"0xff")), errno::EINVAL);
    new.write("tile2/event1", b"0x0").unwrap();
    assert_eq!(new.read("tile2/event1").unwrap(), "0x0: DISABLE\n");
    // The out-of-tree driver takes any number, like old kernels.
    let (oot, _) = sim(Generation::Bf2, Kernel::Oot);
    // "ff" starts with a letter: the driver takes it for a name.
    assert_eq!(errno_of(oot.write("gic0/event0", b"ff")), errno::EINVAL);
    oot.write("gic0/event0", b"0xff").unwrap();
    assert_eq!(oot.read("gic0/event0").unwrap(), "0xff: (null)\n");
}

#[test]
fn l3_counters_run_together_and_reset_only_through_enable() {
    for (gen, half) in [
        (Generation::Bf1, "l3cache1half0"),
        (Generation::Bf2, "l3cachehalf1"),
    ] {
        let (s, clock) = sim(gen, Kernel::V6_16);
        let f = |n: &str| format!("{half}/{n}");
        for (i, ev) in ["0x17", "0x19", "0x18", "0x1a", "0x1"].iter().enumerate() {
            s.write(&f(&format!("event{i}")), ev.as_bytes()).unwrap();
        }
        assert_eq!(s.read(&f("enable")).unwrap(), "0\n");
        clock.advance_secs(1);
        assert_eq!(
            s.read(&f("counter4")).unwrap(),
            "0x0\n",
            "not counting before enable"
        );
        s.write(&f("enable"), b"1").unwrap();
        assert_eq!(s.read(&f("enable")).unwrap(), "1\n");
        clock.advance_secs(1);
        let c4 = value(&s, &f("counter4"));
        assert!(c4 > 0);
        // Programming any event stops all five; values are kept.
        s.write(&f("event0"), b"0x2").unwrap();
        assert_eq!(s.read(&f("enable")).unwrap(), "0\n");
        clock.advance_secs(1);
        assert_eq!(value(&s, &f("counter4")), c4);
        // Every write to an L3 counter is refused, zero included.
        assert_eq!(errno_of(s.write(&f("counter4"), b"0")), errno::EINVAL);
        assert_eq!(errno_of(s.write(&f("enable"), b"2")), errno::EINVAL);
        // enable=1 resets all of them to 0 and starts them.
        s.write(&f("enable"), b"1").unwrap();
        assert_eq!(s.read(&f("counter4")).unwrap(), "0x0\n");
        clock.advance_secs(1);
        assert_eq!(value(&s, &f("counter4")), c4);
        s.write(&f("enable"), b"0").unwrap();
        clock.advance_secs(1);
        assert_eq!(value(&s, &f("counter4")), c4);
    }
}

#[test]
fn crspace_counters_are_32_bit_and_count_clock_on_new_kernels() {
    let (s, clock) = sim(Generation::Bf3, Kernel::V6_16);
    assert_eq!(s.read("llt0/count_clock").unwrap(), "0\n");
    s.write("llt0/event2", b"0x57").unwrap();
    assert_eq!(s.read("llt0/event2").unwrap(), "0x57: GDC_BANK0_HIT\n");
    assert_eq!(
        s.read("llt0/enable").unwrap(),
        "0\n",
        "programming starts nothing"
    );
    s.write("llt0/count_clock", b"0x1").unwrap();
    s.write("llt0/enable", b"1").unwrap();
    clock.advance_secs(5);
    // Cycles at the frequency clock_measure reports for the LLC's PLL (T1):
    // MHz = last count / window × 156.25; 5 s of them wrap a 32-bit counter.
    let last = value(&s, "clock_measure/FMON_CLK_LAST_COUNT_PLL_T1");
    let window = value(&s, "clock_measure/REFERENCE_WINDOW_WIDTH_PLL_T1");
    let hz = last * 156_250_000 / window;
    assert_eq!(hz, 2_000_000_000);
    assert_eq!(value(&s, "llt0/counter0"), (5 * hz) % (1 << 32));
    let hit = value(&s, "llt0/counter2");
    assert!(hit > 0 && hit < 1 << 32);
    // Writing 0 to a crspace counter clears it.
    s.write("llt0/counter0", b"0").unwrap();
    assert_eq!(s.read("llt0/counter0").unwrap(), "0x0\n");
    // enable=0 stops, enable=1 clears and starts.
    s.write("llt0/enable", b"0").unwrap();
    let frozen = value(&s, "llt0/counter2");
    clock.advance_secs(1);
    assert_eq!(value(&s, "llt0/counter2"), frozen);
    s.write("llt0/enable", b"1").unwrap();
    assert_eq!(s.read("llt0/counter2").unwrap(), "0x0\n");
    // Old kernels have no count_clock file.
    let (old, _) = sim(Generation::Bf3, Kernel::V6_7);
    assert_eq!(errno_of(old.read("llt0/count_clock")), errno::ENOENT);
    assert!(!old
        .list("llt0")
        .unwrap()
        .iter()
        .any(|e| e.name == "count_clock"));
}

#[test]
fn registers_run_free_and_reset_only_with_zero() {
    for flavor in ALL {
        let (s, clock) = sim(Generation::Bf2, flavor);
        let a = value(&s, "pcie0/IN_P_BYTE_CNT");
        clock.advance_secs(1);
        let b = value(&s, "pcie0/IN_P_BYTE_CNT");
        assert!(b > a);
        assert_eq!(
            errno_of(s.write("pcie0/IN_P_BYTE_CNT", b"7")),
            errno::EINVAL
        );
        s.write("pcie0/IN_P_BYTE_CNT", b"0").unwrap();
        assert_eq!(s.read("pcie0/IN_P_BYTE_CNT").unwrap(), "0x0\n");
        clock.advance_secs(1);
        assert_eq!(value(&s, "pcie0/IN_P_BYTE_CNT"), b - a);
        // ecc accepts non-zero writes.
        s.write("ecc/SERR_INJ", b"0x3").unwrap();
        assert_eq!(s.read("ecc/SERR_INJ").unwrap(), "0x3\n");
    }
    let (s, _) = sim(Generation::Bf3, Kernel::V6_16);
    assert_eq!(
        errno_of(s.write("clock_measure/FMON_CLK_LAST_COUNT_PLL_G1", b"0")),
        errno::EINVAL
    );
}

#[test]
fn event_lists_are_truncated_like_the_driver() {
    for flavor in ALL {
        let (s, _) = sim(Generation::Bf3, flavor);
        for block in ["llt0", "mss1"] {
            let list = s.read(&format!("{block}/event_list")).unwrap();
            assert!(
                list.len() < 4096 && list.len() > 4096 - 100,
                "{block}: {}",
                list.len()
            );
            // Without the `0x`, the out-of-tree lines are shorter: llt's whole list
            // (4,040 bytes) fits, mss keeps a few more bins.
            let whole = flavor == Kernel::Oot && block == "llt0";
            assert_eq!(list.contains("HISTOGRAM_BIN9"), whole, "{block} {flavor:?}");
            if flavor != Kernel::Oot {
                assert!(!list.contains("HISTOGRAM"));
            }
            assert!(list.ends_with('\n'));
        }
        let list = s.read("llt_miss0/event_list").unwrap();
        let first = list.lines().next().unwrap();
        match flavor {
            Kernel::Oot => assert_eq!(first, "0: GDC_MISS_MACHINE_RD_REQ"),
            _ => assert_eq!(first, "0x0: GDC_MISS_MACHINE_RD_REQ"),
        }
        // The driver's names with trailing spaces, and its duplicate number until
        // v6.16.
        assert!(list.contains("e: GDC_MISS_MACHINE_G_FIFO_FF_EXEC0_1 \n"));
        assert_eq!(
            s.read("llt0/event_list")
                .unwrap()
                .matches("67: GDC_BANK0_G_RSE_PIPE_CACHE_DATA")
                .count(),
            if flavor == Kernel::V6_16 { 1 } else { 2 }
        );
    }
}

#[test]
fn layouts_and_files() {
    let (s, _) = sim(Generation::Bf2, Kernel::V6_16);
    assert_eq!(s.read("name").unwrap(), "bfperf\n");
    let top: Vec<String> = s.list("").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(top.len(), 19 + 5);
    let tile: Vec<String> = s
        .list("tile0")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        tile,
        [
            "counter0",
            "counter1",
            "counter2",
            "counter3",
            "event0",
            "event1",
            "event2",
            "event3",
            "event_list"
        ]
    );
    assert_eq!(errno_of(s.write("tile0/event_list", b"x")), errno::EACCES);
    assert_eq!(errno_of(s.read("tile0/counter4")), errno::ENOENT);
    assert_eq!(
        s.read_link("device").unwrap(),
        "../../../devices/platform/MLNXBFD1:00"
    );
    let (s1, _) = sim(Generation::Bf1, Kernel::V6_7);
    assert_eq!(s1.read("device/modalias").unwrap(), "acpi:MLNXBFD0:\n");
}

#[test]
fn every_command_works_on_the_in_process_simulator() {
    use bfperf::ops::{control, program, read};
    let (s, clock) = Sim::with_manual_clock(Generation::Bf2, Kernel::V6_16);
    let device = bfperf::Device::open(Box::new(Arc::new(s))).unwrap();
    assert_eq!(device.generation(), Generation::Bf2);
    assert_eq!(device.blocks().len(), 19);
    let a = program::parse_assignments(&["3".into(), "hnf_requests".into()], false).unwrap();
    let out = program::program(&device, "tile2", &a, &Default::default()).unwrap();
    assert_eq!(
        out.counters[0].readback.as_deref(),
        Some("0x45: HNF_REQUESTS")
    );
    clock.advance_secs(1);
    let tile2 = device.block("tile2").unwrap();
    let r = read::read_blocks(&device, &[tile2]).unwrap();
    assert_eq!(r.blocks[0].counters[3].value, 46_875_000);
    assert_eq!(
        r.blocks[0].counters[3].event_name.as_deref(),
        Some("HNF_REQUESTS")
    );
    let stop = control::plan_stop(&device, "tile2", Some("3")).unwrap();
    let done = control::apply(&device, stop).unwrap();
    assert_eq!(done.written, ["0x0"]);
    assert_eq!(done.final_values.unwrap().counters[0].value, 46_875_000);
}

#[test]
fn larger_pages_hold_the_whole_lists() {
    for page in [16 * 1024, 64 * 1024] {
        let options = SimOptions {
            page_size: Some(page),
            ..SimOptions::default()
        };
        let s = Sim::with_options(
            Generation::Bf3,
            Kernel::V6_14,
            Arc::new(ManualClock::new(0)),
            &options,
        );
        assert_eq!(s.page_size(), page);
        for block in ["llt0", "mss1"] {
            let list = s.read(&format!("{block}/event_list")).unwrap();
            assert!(
                list.len() > 4096 && list.len() < page,
                "{block}: {}",
                list.len()
            );
            assert!(
                list.ends_with("HISTOGRAM_HISTOGRAM_BIN9\n"),
                "{block} at {page}"
            );
        }
    }
}

/// The simulated BlueField-2 (newest kernel row) has the blocks NVIDIA's
/// documentation lists, no more, with the counters and registers it gives
/// (tests/inventory/bf2.txt, written from NVIDIA's pages, not from the model).
#[test]
fn the_simulated_bluefield_2_has_the_blocks_nvidia_lists() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inventory/bf2.txt");
    let inventory = std::fs::read_to_string(&path).unwrap();
    let listed: Vec<(String, Option<u64>, Option<Vec<String>>)> = inventory
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let after = |key: &str| words.iter().position(|w| *w == key).map(|i| words[i + 1]);
            (
                words[0].to_string(),
                after("counters").map(|n| n.parse().unwrap()),
                after("registers").map(|r| r.split(',').map(str::to_string).collect()),
            )
        })
        .collect();
    let out = crate::support::stdout_of(
        crate::support::bfperf().args(["--sim", "bf2", "blocks", "--json"]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let modelled: Vec<&serde_json::Value> = v["blocks"].as_array().unwrap().iter().collect();
    let names: Vec<&str> = modelled
        .iter()
        .map(|b| b["block"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = listed.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, want, "the simulator's blocks against NVIDIA's list");
    for ((name, counters, registers), b) in listed.iter().zip(&modelled) {
        if let Some(n) = counters {
            assert_eq!(b["counters"].as_u64(), Some(*n), "{name}'s counters");
        }
        if let Some(regs) = registers {
            let got: Vec<&str> = b["registers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(got, *regs, "{name}'s registers");
        }
    }
}

/// The simulated BlueField-3 has the kinds of block NVIDIA names for it, and no
/// other but those written down as the model's own, in the numbers NVIDIA's driver
/// allows (tests/inventory/bf3.txt, written from NVIDIA's patches, not from the
/// model).
#[test]
fn the_simulated_bluefield_3_has_the_kinds_nvidia_names() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inventory/bf3.txt");
    let inventory = std::fs::read_to_string(&path).unwrap();
    let out = crate::support::stdout_of(
        crate::support::bfperf().args(["--sim", "bf3", "blocks", "--json"]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Each kind's block numbers (a block without a number is 0).
    let mut modelled: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    for b in v["blocks"].as_array().unwrap() {
        let (name, kind) = (b["block"].as_str().unwrap(), b["kind"].as_str().unwrap());
        let n = name[kind.len()..].parse().unwrap_or(0);
        modelled.entry(kind.to_string()).or_default().push(n);
    }
    let mut listed = Vec::new();
    for line in inventory
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        let kind = words[1];
        listed.push(kind.to_string());
        let ours = modelled.get(kind).cloned().unwrap_or_default();
        if words[0] == "model" {
            continue;
        }
        assert!(
            !ours.is_empty(),
            "NVIDIA names {kind}; the simulator has none"
        );
        match words.get(2..) {
            Some(["max", n]) => {
                let n: usize = n.parse().unwrap();
                assert!(
                    ours.len() <= n && ours.iter().all(|&i| (i as usize) < n),
                    "{kind}: {ours:?}, at most {n}"
                );
            }
            Some(["with", other]) => assert_eq!(ours, modelled[*other], "{kind} beside {other}"),
            Some(["per", other, n]) => {
                let n: u32 = n.parse().unwrap();
                let want: Vec<u32> = modelled[*other]
                    .iter()
                    .flat_map(|m| (0..n).map(move |i| m * n + i))
                    .collect();
                assert_eq!(ours, want, "{kind}: {n} per {other}");
            }
            Some([]) => {}
            other => panic!("{}: cannot read {other:?}", path.display()),
        }
    }
    let unlisted: Vec<&String> = modelled.keys().filter(|k| !listed.contains(k)).collect();
    assert!(
        unlisted.is_empty(),
        "kinds neither NVIDIA's nor written down as the model's: {unlisted:?}"
    );
}
