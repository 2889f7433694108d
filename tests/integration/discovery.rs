//! Finding the device, the block map, info, and discovery errors.

use crate::support::*;
use predicates::prelude::*;
use std::fs;

fn block_rows(gen: &str) -> Vec<Vec<String>> {
    let out = stdout_of(on_fixture(gen).arg("blocks"));
    rows(&out).into_iter().skip(1).collect()
}

#[test]
fn bf2_blocks_are_the_vendor_listing() {
    let r = block_rows("bf2");
    let names: Vec<&str> = r.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        [
            "ecc",
            "gic0",
            "l3cachehalf0",
            "l3cachehalf1",
            "pcie0",
            "pcie1",
            "smmu0",
            "tile0",
            "tile1",
            "tile2",
            "tile3",
            "tilenet0",
            "tilenet1",
            "tilenet2",
            "tilenet3",
            "trio0",
            "trio1",
            "triogen0",
            "triogen1"
        ]
    );
    let row = |n: &str| r.iter().find(|r| r[0] == n).unwrap().clone();
    assert_eq!(
        row("tile2"),
        ["tile2", "tile", "per-counter", "4", "-", "56"]
    );
    assert_eq!(
        row("tilenet0"),
        ["tilenet0", "tilenet", "per-counter", "4", "-", "52"]
    );
    assert_eq!(
        row("trio1"),
        ["trio1", "trio", "per-counter", "4", "-", "30"]
    );
    assert_eq!(
        row("triogen0"),
        ["triogen0", "triogen", "per-counter", "1", "-", "17"]
    );
    assert_eq!(
        row("l3cachehalf0"),
        ["l3cachehalf0", "l3cache", "all-at-once", "5", "yes", "44"]
    );
    assert_eq!(
        row("l3cachehalf1"),
        ["l3cachehalf1", "l3cache", "all-at-once", "5", "no", "44"]
    );
    assert_eq!(
        row("pcie0"),
        ["pcie0", "pcie", "registers", "12", "registers", "-", "12"]
    );
    assert_eq!(
        row("ecc"),
        ["ecc", "ecc", "registers", "10", "registers", "-", "10"]
    );
    assert_eq!(row("gic0"), ["gic0", "gic", "per-counter", "2", "-", "17"]);
}

#[test]
fn bf1_blocks() {
    let r = block_rows("bf1");
    let names: Vec<&str> = r.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names.len(), 26);
    assert!(names.contains(&"l3cache0half0") && names.contains(&"l3cache1half1"));
    let row = |n: &str| r.iter().find(|r| r[0] == n).unwrap().clone();
    assert_eq!(
        row("l3cache1half0"),
        ["l3cache1half0", "l3cache", "all-at-once", "5", "no", "44"]
    );
    assert_eq!(
        row("trio2"),
        ["trio2", "trio", "per-counter", "4", "-", "21"]
    );
    assert_eq!(row("mss1"), ["mss1", "mss", "per-counter", "4", "-", "5"]);
    assert_eq!(
        row("tile7"),
        ["tile7", "tile", "per-counter", "4", "-", "56"]
    );
}

#[test]
fn bf3_blocks_with_crspace_and_truncated_lists_completed() {
    let r = block_rows("bf3");
    let row = |n: &str| r.iter().find(|r| r[0] == n).unwrap().clone();
    assert_eq!(
        row("llt0"),
        ["llt0", "llt", "all-at-once", "8", "yes", "172"]
    );
    assert_eq!(
        row("llt_miss3"),
        ["llt_miss3", "llt_miss", "all-at-once", "8", "no", "76"]
    );
    assert_eq!(
        row("mss0"),
        ["mss0", "mss", "all-at-once", "8", "yes", "155"]
    );
    assert_eq!(
        row("clock_measure"),
        [
            "clock_measure",
            "clock_measure",
            "registers",
            "28",
            "registers",
            "-",
            "28"
        ]
    );
    // gic0, 8 llt, 8 llt_miss, 2 mss, smmu0, clock_measure and the 2025 blocks
    // (2 apt, 4 emi, gga0, msn0, prnf0).
    assert_eq!(r.len(), 30);
}

#[test]
fn info_names_device_generation_and_kinds() {
    let out = stdout_of(on_fixture("bf2").arg("info"));
    let dev = device_dir(&fixture("bf2"));
    assert_eq!(
        out,
        format!(
            "device      {}\ngeneration  BlueField-2\nblocks      19 (ecc 1, gic 1, l3cache 2, pcie 2, smmu 1, tile 4, tilenet 4, trio 2, triogen 2)\n",
            dev.display()
        )
    );
    let v: serde_json::Value =
        serde_json::from_str(&stdout_of(on_fixture("bf3").args(["info", "--json"]))).unwrap();
    assert_eq!(v["generation"], "BlueField-3");
    assert_eq!(v["blocks"], 30);
    assert_eq!(v["kinds"]["llt"], 8);
    assert_eq!(v["kinds"]["llt_miss"], 8);
    assert_eq!(v["kinds"]["mss"], 2);
    assert_eq!(v["kinds"]["gga"], 1);
}

#[test]
fn blocks_json_carries_raw_integers() {
    let v: serde_json::Value =
        serde_json::from_str(&stdout_of(on_fixture("bf2").args(["blocks", "--json"]))).unwrap();
    let tile2 = v["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["block"] == "tile2")
        .unwrap();
    assert_eq!(tile2["counters"], 4);
    assert_eq!(tile2["kind"], "tile");
    assert_eq!(tile2["mechanism"], "per-counter");
    assert_eq!(tile2["events"], 56);
    assert_eq!(tile2["enabled"], serde_json::Value::Null);
    let l3 = v["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["block"] == "l3cachehalf0")
        .unwrap();
    assert_eq!(l3["enabled"], true);
}

#[test]
fn generation_from_names_when_the_device_link_is_missing() {
    let c = Copy::of("bf1");
    fs::remove_file(c.device().join("device")).unwrap();
    let out = stdout_of(c.cmd().arg("info"));
    assert!(out.contains("generation  BlueField-1\n"), "{out}");
}

#[test]
fn device_option_skips_discovery() {
    let dev = device_dir(&fixture("bf3"));
    let out = stdout_of(bfperf().arg("--device").arg(&dev).arg("info"));
    assert!(out.contains("generation  BlueField-3"));
    // The environment variable names the root too.
    let out = stdout_of(
        bfperf()
            .env("BFPERF_SYSFS_ROOT", fixture("bf1"))
            .arg("info"),
    );
    assert!(out.contains("generation  BlueField-1"));
}

#[test]
fn unknown_block_kind_is_still_listed_and_readable() {
    let c = Copy::of("bf3");
    let foo = c.device().join("foo0");
    fs::create_dir(&foo).unwrap();
    fs::write(foo.join("event_list"), "0x0: FOO_CYCLES\n0x1: FOO_REQS\n").unwrap();
    fs::write(foo.join("event0"), "0x1: FOO_REQS\n").unwrap();
    fs::write(foo.join("counter0"), "0x2a\n").unwrap();
    let out = stdout_of(c.cmd().arg("blocks"));
    assert!(
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["foo0", "unknown", "per-counter", "1", "-", "2"]),
        "{out}"
    );
    let out = stdout_of(c.cmd().args(["read", "foo0"]));
    assert!(
        out.contains("foo0   counter0  0x1 FOO_REQS     42"),
        "{out}"
    );
}

#[test]
fn wrong_root_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    bfperf()
        .arg("--sysfs-root")
        .arg(dir.path())
        .arg("blocks")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("class/hwmon does not exist"))
        .stderr(predicate::str::contains("--sysfs-root"));
}

#[test]
fn missing_device_names_what_was_found_and_the_driver() {
    let c = Copy::of("bf2");
    fs::remove_dir_all(c.device()).unwrap();
    c.cmd()
        .arg("blocks")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no bfperf device"))
        .stderr(predicate::str::contains(
            "hwmon0 (acpitz), hwmon1 (no name file)",
        ))
        .stderr(predicate::str::contains("mlxbf-pmc"));
}

#[test]
fn two_devices_ask_for_device_option() {
    let c = Copy::of("bf2");
    copy_tree(&c.device(), &c.root().join("class/hwmon/hwmon7"));
    c.cmd()
        .arg("info")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("more than one bfperf device"))
        .stderr(predicate::str::contains("hwmon3"))
        .stderr(predicate::str::contains("hwmon7"))
        .stderr(predicate::str::contains("--device"));
}

#[test]
fn device_option_on_a_wrong_directory() {
    bfperf()
        .arg("--device")
        .arg(fixture("bf2").join("class/hwmon/hwmon0"))
        .arg("info")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("reads 'acpitz', not 'bfperf'"));
}

/// Where no hwmon device is named bfperf, the firmware's ACPI devices and the
/// driver's presence say why: a PMC the loaded driver did not take (its probe
/// failed, as 6.1's does on a table that lists tilenet), a PMC without the driver,
/// or no PMC at all; each with what to do.
#[test]
fn a_missing_device_is_explained_by_the_firmware_and_the_driver() {
    let c = Copy::of("bf2");
    fs::remove_dir_all(c.device()).unwrap();
    let acpi = c.root().join("bus/acpi/devices");
    let platform = c.root().join("devices/platform/MLNXBFD1:00");
    fs::create_dir_all(&acpi).unwrap();
    fs::create_dir_all(&platform).unwrap();
    fs::create_dir_all(acpi.join("PNP0A08:00")).unwrap();
    fs::create_dir_all(acpi.join("MLNXBFD1:00")).unwrap();
    std::os::unix::fs::symlink(&platform, acpi.join("MLNXBFD1:00/physical_node")).unwrap();
    let says = |c: &Copy| {
        let out = c.cmd().arg("blocks").output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8(out.stderr).unwrap()
    };

    // The firmware describes one, no driver is loaded.
    let err = says(&c);
    assert!(err.contains("the firmware describes a BlueField-2 PMC (MLNXBFD1:00), but the mlxbf-pmc driver is not loaded: try `modprobe mlxbf-pmc`"), "{err}");

    // The driver is loaded and did not take it.
    fs::create_dir_all(c.root().join("bus/platform/drivers/mlxbf-pmc")).unwrap();
    let err = says(&c);
    assert!(
        err.contains(
            "the driver did not take it: its probe failed, and `dmesg | grep -i mlxbf` says why"
        ),
        "{err}"
    );
    assert!(err.contains("6.1 one that lists tilenet blocks"), "{err}");

    // Bound, and still no hwmon device.
    fs::create_dir_all(platform.join("driver")).unwrap();
    let err = says(&c);
    assert!(
        err.contains("the mlxbf-pmc driver took it, but made no hwmon device named bfperf"),
        "{err}"
    );

    // No PMC in the firmware's tables at all.
    fs::remove_dir_all(acpi.join("MLNXBFD1:00")).unwrap();
    let err = says(&c);
    assert!(
        err.contains("the firmware's ACPI tables describe no BlueField PMC"),
        "{err}"
    );
    assert!(err.contains("--sim bf3"), "{err}");
}
