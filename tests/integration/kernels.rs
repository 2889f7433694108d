//! bfperf on every kernel that shipped the driver, against the simulator of that
//! kernel: programming by name and number, stopping, clearing, reading and listing
//! events, with the values the simulated hardware counts.

use std::sync::Arc;

use crate::support::*;
use bfperf::ops::{control, program, read};
use bfperf::sim::{Kernel, ManualClock, Sim};
use bfperf::{Device, Generation};
use predicates::prelude::*;

struct Rig {
    sim: Arc<Sim>,
    clock: Arc<ManualClock>,
    device: Device,
}

fn rig(gen: Generation, kernel: Kernel) -> Rig {
    let (sim, clock) = Sim::with_manual_clock(gen, kernel);
    let sim = Arc::new(sim);
    let device = Device::open(Box::new(sim.clone())).unwrap();
    Rig { sim, clock, device }
}

impl Rig {
    fn program(&self, block: &str, counter: &str, event: &str) -> program::ProgramOutcome {
        let a = program::parse_assignments(&[counter.into(), event.into()], false).unwrap();
        program::program(&self.device, block, &a, &Default::default()).unwrap_or_else(|e| {
            panic!(
                "{:?}: program {block} {counter} {event}: {e}",
                self.sim.kernel()
            )
        })
    }

    fn counter(&self, block: &str, index: u32) -> read::CounterReading {
        let b = self.device.block(block).unwrap();
        let r = read::read_blocks(&self.device, &[b]).unwrap();
        r.blocks[0]
            .counters
            .iter()
            .find(|c| c.counter == index)
            .unwrap()
            .clone()
    }

    fn raw(&self, rel: &str) -> String {
        use bfperf::Sysfs;
        self.sim.read(rel).unwrap_or_else(|e| format!("error: {e}"))
    }
}

fn bf2_kernels() -> Vec<Kernel> {
    Kernel::all().collect()
}

fn bf3_kernels() -> Vec<Kernel> {
    Kernel::all().filter(|k| k.def().bf3).collect()
}

#[test]
fn programming_by_name_and_number_counts_at_the_hardware_rate() {
    for kernel in bf2_kernels() {
        let r = rig(Generation::Bf2, kernel);
        for (counter, typed) in [("1", "HNF_REQUESTS"), ("2", "0x45"), ("3", "69")] {
            let o = r.program("tile2", counter, typed);
            assert_eq!(o.counters[0].event, Some(0x45), "{kernel:?} {typed}");
            assert_eq!(
                r.raw(&format!("tile2/event{counter}")),
                "0x45: HNF_REQUESTS\n"
            );
        }
        r.clock.advance_secs(2);
        for i in 1..=3u32 {
            let rate = r.sim.event_rate("tile2", 0x45).unwrap();
            let c = r.counter("tile2", i);
            assert_eq!(c.value, 2 * rate, "{kernel:?} counter {i}");
            assert_eq!(c.event_name.as_deref(), Some("HNF_REQUESTS"));
        }
    }
}

#[test]
fn stopping_uses_disable_where_the_kernel_has_it_and_0xff_elsewhere() {
    for kernel in bf2_kernels() {
        let def = kernel.def();
        let r = rig(Generation::Bf2, kernel);
        r.program("tile2", "0", "HNF_REQUESTS");
        r.clock.advance_secs(1);
        let plan = control::plan_stop(&r.device, "tile2", Some("0")).unwrap();
        let done = control::apply(&r.device, plan).unwrap();
        let before = done.final_values.unwrap().counters[0].value;
        assert_eq!(before, r.sim.event_rate("tile2", 0x45).unwrap());
        let written = &done.written[0];
        let c = r.counter("tile2", 0);
        if def.disable_entries {
            assert_eq!(written, "0x0", "{kernel:?}");
            assert_eq!(c.event_name.as_deref(), Some("DISABLE"));
        } else {
            assert_eq!(written, "0xff", "{kernel:?}");
            assert_eq!(c.event_name, None, "{kernel:?}: {}", r.raw("tile2/event0"));
        }
        r.clock.advance_secs(1);
        assert_eq!(
            r.counter("tile2", 0).value,
            0,
            "{kernel:?}: a stopped counter"
        );
        // SMGEN has no DISABLE: 0xff, which kernels that validate numbers refuse.
        r.program("gic0", "0", "TBU_MISS");
        let plan = control::plan_stop(&r.device, "gic0", Some("0")).unwrap();
        match control::apply(&r.device, plan) {
            Ok(done) => {
                assert!(!def.validates_numbers, "{kernel:?}");
                assert_eq!(done.written, ["0xff"]);
            }
            Err(e) => {
                assert!(def.validates_numbers, "{kernel:?}: {e}");
                assert!(
                    e.to_string().contains("cannot be stopped on this kernel"),
                    "{e}"
                );
                assert_eq!(r.raw("gic0/event0"), "0xe: TBU_MISS\n");
            }
        }
    }
}

#[test]
fn clearing_restarts_a_counter_from_zero() {
    for kernel in bf2_kernels() {
        let r = rig(Generation::Bf2, kernel);
        r.program("tile1", "2", "MEMORY_READS");
        r.clock.advance_secs(3);
        let plan = control::plan_clear(&r.device, "tile1", Some("2"), false).unwrap();
        control::apply(&r.device, plan).unwrap();
        assert_eq!(r.counter("tile1", 2).value, 0, "{kernel:?}");
        r.clock.advance_secs(1);
        let rate = r.sim.event_rate("tile1", 0x4c).unwrap();
        assert_eq!(r.counter("tile1", 2).value, rate, "{kernel:?}");
    }
}

#[test]
fn event_lists_read_on_every_kernel() {
    for kernel in bf2_kernels() {
        let r = rig(Generation::Bf2, kernel);
        let tile = r.device.catalog(r.device.block("tile2").unwrap()).unwrap();
        assert_eq!(
            tile.by_name("HNF_REQUESTS").unwrap().number,
            0x45,
            "{kernel:?}"
        );
        assert_eq!(
            tile.by_name("DISABLE").is_some(),
            kernel.def().disable_entries,
            "{kernel:?}"
        );
    }
    for kernel in bf3_kernels() {
        let r = rig(Generation::Bf3, kernel);
        let llt = r.device.catalog(r.device.block("llt0").unwrap()).unwrap();
        // Truncated at a page by the driver, completed from the table.
        assert_eq!(
            llt.events.last().unwrap().name,
            "HISTOGRAM_HISTOGRAM_BIN9",
            "{kernel:?}"
        );
        assert_eq!(llt.by_name("GDC_BANK0_RD_REQ").unwrap().number, 0x54);
        let miss = r
            .device
            .catalog(r.device.block("llt_miss0").unwrap())
            .unwrap();
        // Names with trailing spaces on the device resolve without them.
        assert_eq!(
            miss.resolve("GDC_MISS_MACHINE_G_FIFO_FF_EXEC0_1")
                .unwrap()
                .number,
            0xe
        );
    }
}

#[test]
fn a_name_listed_twice_is_explained_and_the_hardware_number_given() {
    for kernel in bf3_kernels() {
        let r = rig(Generation::Bf3, kernel);
        let o = r.program("llt0", "1", "GDC_BANK0_G_RSE_PIPE_CACHE_DATA1");
        let fixed =
            (kernel >= Kernel::V6_16 || kernel == Kernel::V6_12Stable) && kernel != Kernel::Oot;
        if fixed {
            assert_eq!(o.counters[0].event, Some(0x68), "{kernel:?}");
            assert!(o.warnings.is_empty(), "{kernel:?}: {:?}", o.warnings);
        } else {
            assert_eq!(o.counters[0].event, Some(0x67), "{kernel:?}");
            assert_eq!(o.warnings.len(), 1, "{kernel:?}");
            assert!(o.warnings[0].contains("program 0x68"), "{}", o.warnings[0]);
        }
    }
    // Before the December 2022 fix, hnfnet names 0x35 and 0x36 the same.
    let r = rig(Generation::Bf2, Kernel::V5_10);
    let o = r.program("tilenet0", "0", "NDN_DIAG_S_OUT_OF_CRED");
    assert_eq!(o.counters[0].event, Some(0x35));
    assert!(
        o.warnings[0].contains("0x35 and 0x36") && o.warnings[0].contains("program 0x36"),
        "{:?}",
        o.warnings
    );
    let r = rig(Generation::Bf2, Kernel::V6_7);
    assert!(r
        .program("tilenet0", "0", "NDN_DIAG_S_OUT_OF_CRED")
        .warnings
        .is_empty());
}

#[test]
fn crspace_blocks_count_cycles_where_the_kernel_has_count_clock() {
    for kernel in bf3_kernels() {
        let def = kernel.def();
        let r = rig(Generation::Bf3, kernel);
        let a = program::parse_assignments(&["0".into()], true).unwrap();
        let opts = program::ProgramOptions {
            count_clock: true,
            start: true,
            ..Default::default()
        };
        match program::program(&r.device, "mss1", &a, &opts) {
            Ok(_) => {
                assert!(def.count_clock, "{kernel:?}");
                r.clock.advance_secs(1);
                // mss runs on PLL N1: the frequency clock_measure reports.
                let last = r.raw("clock_measure/FMON_CLK_LAST_COUNT_PLL_N1");
                let window = r.raw("clock_measure/REFERENCE_WINDOW_WIDTH_PLL_N1");
                let parse =
                    |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap();
                let hz = parse(&last) * 156_250_000 / parse(&window);
                assert_eq!(hz, r.sim.clock_hz("mss1").unwrap());
                assert_eq!(r.counter("mss1", 0).value, hz % (1 << 32), "{kernel:?}");
            }
            Err(e) => {
                assert!(!def.count_clock, "{kernel:?}: {e}");
                assert!(e.to_string().contains("no count_clock file"), "{e}");
            }
        }
    }
}

#[test]
fn the_2025_blocks_appear_on_6_16_with_their_events() {
    for kernel in bf3_kernels() {
        let r = rig(Generation::Bf3, kernel);
        let has = r.device.block("gga0").is_ok();
        assert_eq!(has, kernel.def().blocks_2025, "{kernel:?}");
        if has {
            let gga = r.device.block("gga0").unwrap();
            assert_eq!(gga.kind, bfperf::BlockKind::Gga);
            let c = r.device.catalog(gga).unwrap();
            assert_eq!(
                c.by_number(0x78).unwrap().name,
                "GGA_PERF_DESC_ENGINE0_IN_DATA_STRB"
            );
            r.program("emi1", "0", "MCH_RD_IN_MCH_REQ_IN_STRB");
            assert_eq!(r.raw("emi1/event0"), "0xa: MCH_RD_IN_MCH_REQ_IN_STRB\n");
        }
    }
}

#[test]
fn enable_is_a_boolean_from_6_16() {
    use bfperf::Sysfs;
    for kernel in bf3_kernels() {
        let r = rig(Generation::Bf3, kernel);
        r.sim.write("llt0/enable", b"0x1").unwrap();
        let expected = if kernel.def().enable_bool {
            "0\n"
        } else {
            "1\n"
        };
        assert_eq!(r.raw("llt0/enable"), expected, "{kernel:?}");
        assert_eq!(
            r.sim.write("llt0/enable", b"2").is_err(),
            kernel.def().enable_bool,
            "{kernel:?}"
        );
    }
}

#[test]
fn the_sim_command_takes_kernel_versions_and_aliases() {
    let dir = tempfile::tempdir().unwrap();
    for (k, ok) in [
        ("6.16", true),
        ("6.17.2", true),
        ("old", true),
        ("oot", true),
        ("4.19", false),
        ("7", false),
    ] {
        let out = bfperf()
            .args(["sim", "export", "--gen", "2", "--kernel", k])
            .arg(dir.path().join(k))
            .output()
            .unwrap();
        assert_eq!(out.status.success(), ok, "{k}: {out:?}");
    }
    bfperf()
        .args(["sim", "export", "--gen", "3", "--kernel", "5.10"])
        .arg(dir.path().join("bf3-510"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no BlueField-3 support"));
    bfperf()
        .args(["sim", "export", "--gen", "3", "--counters", "llt=16"])
        .arg(dir.path().join("llt16"))
        .assert()
        .success();
    let out = stdout_of(
        bfperf()
            .arg("--sysfs-root")
            .arg(dir.path().join("llt16"))
            .args(["blocks", "--csv"]),
    );
    assert!(out.contains("\nllt0,llt,all-at-once,16,"), "{out}");
}

#[test]
fn on_a_mounted_6_16_bf3_and_6_14_duplicate() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(&m.run(&["info", "--json"])).unwrap();
    let kinds = &v["kinds"];
    assert_eq!(
        (
            kinds["llt"].as_u64(),
            kinds["llt_miss"].as_u64(),
            kinds["mss"].as_u64()
        ),
        (Some(8), Some(8), Some(2))
    );
    for k in ["clock_measure", "gga", "apt", "emi", "prnf", "msn"] {
        assert!(kinds[k].as_u64().unwrap_or(0) >= 1, "{k}: {v}");
    }
    let out = m.run(&["events", "gga0"]);
    assert!(
        rows(&out)
            .iter()
            .any(|r| r[..2] == ["0x78", "GGA_PERF_DESC_ENGINE0_IN_DATA_STRB"]),
        "{out}"
    );
    drop(m);
    let Some(m) = Mount::start("3", "6.14") else {
        return;
    };
    m.cmd()
        .args(["program", "llt0", "1", "GDC_BANK0_G_RSE_PIPE_CACHE_DATA1"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "bfperf: warning: this kernel's table lists GDC_BANK0_G_RSE_PIPE_CACHE_DATA1 at 0x67",
        ))
        .stderr(predicate::str::contains("program 0x68"));
    assert_eq!(
        m.read("llt0/event1"),
        "0x67: GDC_BANK0_G_RSE_PIPE_CACHE_DATA0\n"
    );
}

#[test]
fn clearing_ecc_touches_only_its_count_registers() {
    let out = stdout_of(on_fixture("bf2").args(["clear", "ecc", "--dry-run", "--csv"]));
    let paths: Vec<&str> = out
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "ecc/ECC_SINGLE_ERROR_CNT",
            "ecc/ECC_DOUBLE_ERROR_CNT",
            "ecc/ECC_SINGLE_ERROR_0",
            "ecc/ECC_DOUBLE_ERROR_0",
            "ecc/DRAM_ECC_COUNT",
            "ecc/DRAM_ECC_ERROR",
        ]
    );
    let c = Copy::of("bf2");
    let before = c.contents();
    c.cmd()
        .args(["clear", "ecc", "SERR_INJ"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("control register"))
        .stderr(predicate::str::contains("--force"));
    assert_eq!(before, c.contents());
    c.run(&["clear", "ecc", "SERR_INJ", "--force"]);
    assert_eq!(c.read("ecc/SERR_INJ"), "0");
}

/// Debian 12's 6.1 as the real driver showed it under QEMU: DISABLE entries, numbers
/// read as signed, no tilenet blocks; and the versions that pick its row.
#[test]
fn debian_12s_6_1_stable_row() {
    use bfperf::Sysfs;
    let r = rig(Generation::Bf2, Kernel::V6_1Stable);
    assert!(r.device.block("tilenet0").is_err());
    assert!(r.device.block("tile0").is_ok());
    assert_eq!(r.raw("tile0/event0"), "0x0: DISABLE\n");
    // -1 is taken: cut to the L3 event field, 0x3f, a number with no name (EINVAL).
    r.sim.write("l3cachehalf0/event0", b"-1").unwrap();
    assert_eq!(
        r.raw("l3cachehalf0/event0"),
        "error: Invalid argument (os error 22)"
    );
    // An ecc register takes all ones (read back 32 bits wide, as the driver reads it).
    r.sim.write("ecc/DRAM_ECC_COUNT", b"-1").unwrap();
    assert_eq!(r.raw("ecc/DRAM_ECC_COUNT"), "0xffffffff\n");
    let r = rig(Generation::Bf2, Kernel::V5_10);
    assert!(r.sim.write("ecc/DRAM_ECC_COUNT", b"-1").is_err());
    for (version, row) in [
        ("6.1.192", Kernel::V6_1Stable),
        ("6.1.200", Kernel::V6_1Stable),
        ("debian12", Kernel::V6_1Stable),
        ("6.1", Kernel::V5_10),
        ("6.1.50", Kernel::V5_10),
        ("6.3", Kernel::V5_10),
    ] {
        assert_eq!(Kernel::parse(version), Some(row), "{version}");
    }
}
