//! The CLI against a FUSE mount of the simulator: the driver's refusals are real here,
//! unlike on plain-file fixtures. Skipped with one line where FUSE cannot be used;
//! required where `BFPERF_REQUIRE` names `fuse` (CI).

use crate::support::*;
use predicates::prelude::*;
use std::fs;
use std::io::Write;

fn counter(m: &Mount, rel: &str) -> u64 {
    let t = m.read(rel);
    u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn mounted_files_behave_like_the_driver() {
    let Some(m) = Mount::start("2", "new") else {
        return;
    };
    assert_eq!(m.read("tile2/event3"), "0x0: DISABLE\n");
    fs::write(m.device().join("tile2/event3"), "0x45\n").unwrap();
    assert_eq!(m.read("tile2/event3"), "0x45: HNF_REQUESTS\n");
    let a = counter(&m, "tile2/counter3");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let b = counter(&m, "tile2/counter3");
    assert!(b > a, "counter3 grows: {a} then {b}");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(m.device().join("tile2/counter3"))
        .unwrap();
    let err = f.write_all(b"5\n").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(22), "EINVAL");
    assert_eq!(
        fs::read_link(m.device().join("device"))
            .unwrap()
            .to_str()
            .unwrap(),
        "../../../devices/platform/MLNXBFD1:00"
    );
    assert_eq!(
        fs::read_to_string(m.root().join("class/hwmon/hwmon0/name")).unwrap(),
        "acpitz\n"
    );
    let err = fs::write(m.device().join("tile2/event_list"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(13), "EACCES");
    // Sysfs has no create: EACCES, as on a DPU (not ENOSYS).
    let err = fs::write(m.device().join("tile2/newfile"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(13), "create: EACCES");
    let err = fs::create_dir(m.device().join("tile2/dir")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(13), "mkdir: EACCES");
    let err = fs::remove_file(m.device().join("tile2/event3")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(1), "unlink: EPERM");
}

#[test]
fn blocks_and_program_through_bfperf() {
    let Some(m) = Mount::start("2", "old") else {
        return;
    };
    let out = stdout_of(m.cmd().arg("blocks"));
    assert_eq!(rows(&out).len(), 1 + 19);
    let out = m.run(&["program", "tile2", "3", "HNF_REQUESTS"]);
    assert_eq!(
        out,
        "tile2 counter 3: HNF_REQUESTS (0x45); event3 reads 0x45: HNF_REQUESTS\n"
    );
    let out = m.run(&["read", "tile2"]);
    let r = rows(&out);
    assert_eq!(r[4][..4], ["tile2", "counter3", "0x45", "HNF_REQUESTS"]);
    assert_eq!(m.read("tile2/event3"), "0x45: HNF_REQUESTS\n");
}

#[test]
fn l3_sequence_on_every_flavor() {
    for flavor in ["old", "new", "oot"] {
        let Some(m) = Mount::start("2", flavor) else {
            return;
        };
        let out = stdout_of(m.cmd().args(L3_PROGRAM_AND_START).arg("--dry-run"));
        let writes: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("  write "))
            .map(|l| l.rsplit('/').next().unwrap())
            .collect();
        assert_eq!(
            writes,
            [
                "event0: \"0x17\"",
                "event1: \"0x19\"",
                "event2: \"0x18\"",
                "event3: \"0x1a\"",
                "enable: \"1\""
            ],
            "{flavor}"
        );
        assert_eq!(m.read("l3cachehalf1/enable"), "0\n");
        m.run(&L3_PROGRAM_AND_START);
        assert_eq!(m.read("l3cachehalf1/enable"), "1\n");
        assert_eq!(m.read("l3cachehalf1/event3"), "0x1a: MISSES_BANK1\n");
        // Programming without --start stops the half, as the driver does.
        m.run(&["program", "l3cachehalf1", "4", "CYCLES"]);
        assert_eq!(m.read("l3cachehalf1/enable"), "0\n");
        let frozen = m.read("l3cachehalf1/counter0");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(m.read("l3cachehalf1/counter0"), frozen);
        m.run(&["start", "l3cachehalf1"]);
        assert_eq!(m.read("l3cachehalf1/enable"), "1\n");
        m.cmd().args(["clear", "l3cachehalf1"]).assert().code(1);
    }
}

#[test]
fn bad_input_changes_nothing_on_the_device() {
    let Some(m) = Mount::start("2", "new") else {
        return;
    };
    m.run(&["program", "tile2", "3", "HNF_REQUESTS"]);
    let before: Vec<_> = ["tile2", "l3cachehalf0", "gic0"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    let cases: &[&[&str]] = &[
        &["program", "tile9", "3", "HNF_REQUESTS"],
        &["program", "pcie0", "0", "0x0"],
        &["program", "tile2", "4", "HNF_REQUESTS"],
        &["program", "tile2", "3", "HNF_REQEUSTS"],
        &["program", "tile2", "3", "0x99"],
        &["program", "tile2", "3", "-5"],
        &["program", "tile2", "3", "abc!"],
        &["program", "tile2", "3", "18446744073709551616"],
        &["program", "../tile2", "3", "0x45"],
        &["program", "tile2", "0=MEMORY_READS", "3=NOPE"],
        &[
            "program",
            "l3cachehalf0",
            "0=HITS_BANK0",
            "9=MISSES_BANK0",
            "--start",
        ],
        &["stop", "l3cachehalf0", "1"],
        &["clear", "l3cachehalf0"],
    ];
    for args in cases {
        m.cmd()
            .args(*args)
            .assert()
            .code(1)
            .stderr(predicate::str::starts_with("bfperf: error: "));
    }
    let after: Vec<_> = ["tile2", "l3cachehalf0", "gic0"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    assert_eq!(before, after);
    assert!(
        counter(&m, "tile2/counter3") > 0,
        "tile2 counter 3 was not reset"
    );
}

#[test]
fn stop_per_flavor() {
    // Old kernels take 0xff; SMGEN has no DISABLE, so that is what bfperf writes.
    if let Some(m) = Mount::start("2", "old") {
        m.run(&["program", "gic0", "0", "TBU_MISS"]);
        m.cmd()
            .args(["stop", "gic0", "0"])
            .assert()
            .success()
            .stdout(predicate::str::contains("gic0/event0: wrote 0xff"));
        let out = m.run(&["read", "gic0"]);
        assert_eq!(
            rows(&out)[1],
            ["gic0", "counter0", "(not", "programmed)", "0"]
        );
        m.run(&["stop", "tile1"]);
        assert_eq!(m.read("tile1/event0"), "0x0: DISABLE\n");
    }
    // New kernels refuse 0xff: DISABLE where the table has it; SMGEN cannot stop.
    if let Some(m) = Mount::start("2", "new") {
        m.run(&["program", "tile0", "2", "MEMORY_READS"]);
        m.run(&["stop", "tile0", "2"]);
        assert_eq!(m.read("tile0/event2"), "0x0: DISABLE\n");
        m.run(&["program", "gic0", "1", "TBU_MISS"]);
        m.cmd()
            .args(["stop", "gic0", "1"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("gic0/event1"))
            .stderr(predicate::str::contains("cannot be stopped on this kernel"));
        assert_eq!(m.read("gic0/event1"), "0xe: TBU_MISS\n");
    }
    if let Some(m) = Mount::start("3", "oot") {
        m.run(&["stop", "llt0"]);
        assert_eq!(m.read("llt0/enable"), "0\n");
        m.run(&["stop", "smmu0", "0"]);
        m.cmd()
            .args(["read", "smmu0"])
            .assert()
            .success()
            .stdout(predicate::str::contains("(not programmed)"));
    }
}

#[test]
fn registers_and_crspace_on_bf3() {
    let Some(m) = Mount::start("3", "new") else {
        return;
    };
    m.run(&["program", "llt2", "0", "--count-clock", "--start"]);
    assert_eq!(m.read("llt2/count_clock"), "1\n");
    assert_eq!(m.read("llt2/enable"), "1\n");
    let out = m.run(&["read", "llt2", "--csv"]);
    assert!(
        out.lines()
            .nth(1)
            .unwrap()
            .starts_with("llt2,0,,0,CLOCK_CYCLES,true,"),
        "{out}"
    );
    m.run(&["clear", "llt2", "0"]);
    m.cmd().args(["clear", "clock_measure"]).assert().code(1);
    let Some(m2) = Mount::start("2", "new") else {
        return;
    };
    m2.run(&["clear", "pcie0", "IN_P_PKT_CNT"]);
    assert!(counter(&m2, "pcie0/IN_P_PKT_CNT") < counter(&m2, "pcie0/IN_NP_PKT_CNT"));
}

#[test]
fn a_refused_0xff_points_to_stop() {
    let Some(m) = Mount::start("2", "new") else {
        return;
    };
    m.cmd()
        .args(["program", "tile2", "3", "0xff", "--force"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the driver rejected writing '0xff' to tile2/event3 (Invalid argument): the kernel rejected event 0xff; this kernel validates event numbers: use `bfperf stop tile2 3`",
        ));
}

/// SIGTERM or SIGINT ends `sim mount` within a second whatever is in flight, with
/// its mount gone (no "Transport endpoint is not connected" left behind), even
/// while a file in it is open and a process works in it.
#[test]
fn sim_mount_ends_within_a_second_and_leaves_no_mount() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let Some(mut m) = Mount::start("3", "6.16") else {
            return;
        };
        let device = device_dir(m.dir.path());
        let open = fs::File::open(device.join("llt0/counter0")).unwrap();
        let mut busy = std::process::Command::new("sh")
            .args([
                "-c",
                "while cat llt0/counter1 >/dev/null; do printf .; done",
            ])
            .current_dir(&device)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The reads are under way once the first has been answered.
        let mut first = [0u8; 1];
        std::io::Read::read_exact(busy.stdout.as_mut().unwrap(), &mut first).unwrap();
        let status = m.signal_and_wait(signal, std::time::Duration::from_millis(1500));
        let _ = busy.kill();
        let _ = busy.wait();
        drop(open);
        assert!(
            status.is_some(),
            "sim mount still runs 1.5 s after signal {signal}"
        );
        assert!(
            !is_mounted(m.dir.path()),
            "signal {signal}: {} is still mounted",
            m.dir.path().display()
        );
    }
}
