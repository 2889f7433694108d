//! program, start, stop, clear and read on copies of the fixtures: exact bytes written,
//! read-back, and refused input writing nothing.

use crate::support::*;
use predicates::prelude::*;

#[test]
fn program_by_name_writes_hex_and_reads_back() {
    let c = Copy::of("bf2");
    let out = c.run(&["program", "tile2", "1", "hnf_requests"]);
    assert_eq!(c.read("tile2/event1"), "0x45");
    assert_eq!(
        out,
        "tile2 counter 1: HNF_REQUESTS (0x45); event1 reads 0x45\n"
    );
    let out = c.run(&["read", "tile2"]);
    let r = rows(&out);
    assert_eq!(r[2], ["tile2", "counter1", "0x45", "HNF_REQUESTS", "0"]);
    // The fixture's traffic: (8 + 4) GB/s / 64 B over 4 tiles, for 2 s.
    assert_eq!(
        r[4],
        ["tile2", "counter3", "0x45", "HNF_REQUESTS", "93,750,000"]
    );
}

#[test]
fn the_issue_example() {
    let c = Copy::of("bf2");
    c.run(&["program", "tile2", "3", "HNF_REQUESTS"]);
    assert_eq!(c.read("tile2/event3"), "0x45");
    let v: serde_json::Value = serde_json::from_str(&c.run(&["read", "tile2", "--json"])).unwrap();
    let c3 = &v["blocks"][0]["counters"][3];
    assert_eq!(c3["event"], 0x45);
    assert_eq!(c3["event_name"], "HNF_REQUESTS");
    assert_eq!(c3["value"], 12_000_000_000u64 / 64 / 4 * 2);
}

#[test]
fn events_by_number_alias_and_decimal() {
    let c = Copy::of("bf2");
    c.run(&["program", "tile0", "0", "0x4d"]);
    assert_eq!(c.read("tile0/event0"), "0x4d");
    c.run(&["program", "tile0", "1", "69"]);
    assert_eq!(c.read("tile0/event1"), "0x45");
    c.run(&["program", "tile0", "2", "IO_Reads"]);
    assert_eq!(c.read("tile0/event2"), "0x74");
    c.run(&["program", "tile0", "3", "A72_Read"]);
    assert_eq!(c.read("tile0/event3"), "0x72");
    c.run(&["program", "trio0", "0", "0x99", "--force"]);
    assert_eq!(c.read("trio0/event0"), "0x99");
}

#[test]
fn l3_sequence_programs_then_enables_once() {
    let c = Copy::of("bf2");
    let before = c.contents();
    let out = c.run(&L3_PROGRAM_AND_START);
    assert!(out.contains("started l3cachehalf1"), "{out}");
    let after = c.contents();
    let changed: Vec<String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{}={}",
                k.strip_prefix("class/hwmon/hwmon3/").unwrap().display(),
                String::from_utf8_lossy(v)
            )
        })
        .collect();
    assert_eq!(
        changed,
        [
            "l3cachehalf1/enable=1",
            "l3cachehalf1/event0=0x17",
            "l3cachehalf1/event1=0x19",
            "l3cachehalf1/event2=0x18",
            "l3cachehalf1/event3=0x1a",
        ]
    );
}

#[test]
fn l3_without_start_says_the_half_is_stopped() {
    let c = Copy::of("bf2");
    c.cmd()
        .args(["program", "l3cachehalf0", "4", "CYCLES"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "programming stopped all counters of l3cachehalf0",
        ))
        .stdout(predicate::str::contains("bfperf start l3cachehalf0"));
    assert_eq!(
        c.read("l3cachehalf0/enable"),
        "1\n",
        "no enable write without --start"
    );
}

#[test]
fn crspace_count_clock_bitmask() {
    let c = Copy::of("bf3");
    c.run(&["program", "llt2", "3", "--count-clock"]);
    assert_eq!(c.read("llt2/count_clock"), "0x8");
    c.run(&["program", "llt1", "2=5", "--count-clock", "--start"]);
    assert_eq!(c.read("llt1/count_clock"), "0x5");
    assert_eq!(c.read("llt1/event2"), "0x5");
    assert_eq!(c.read("llt1/enable"), "1");
    // Programming an event on a clock-counting counter takes it out of clock mode.
    c.cmd()
        .args(["program", "llt1", "0", "GDC_BANK0_HIT"])
        .assert()
        .success()
        .stdout(predicate::str::contains("count their events now"));
    assert_eq!(c.read("llt1/count_clock"), "0x4");
    c.cmd()
        .args(["program", "tile0", "0", "--count-clock"])
        .env("BFPERF_SYSFS_ROOT", fixture("bf2"))
        .assert()
        .code(1);
}

#[test]
fn stop_on_each_kind() {
    let c = Copy::of("bf2");
    let out = c.run(&["stop", "tile2", "3"]);
    assert_eq!(
        out,
        "tile2 counter 3 before the stop: 93,750,000 (HNF_REQUESTS)\ntile2/event3: wrote 0x0\nnote: stopping re-programs a counter, which resets it to 0: the values before the stop are shown\n"
    );
    assert_eq!(c.read("tile2/event3"), "0x0");
    // SMGEN has no DISABLE: 0xff.
    c.run(&["stop", "triogen0"]);
    assert_eq!(c.read("triogen0/event0"), "0xff");
    c.run(&["stop", "l3cachehalf0"]);
    assert_eq!(c.read("l3cachehalf0/enable"), "0");
    c.cmd()
        .args(["stop", "l3cachehalf0", "2"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("stop together"));
    c.cmd()
        .args(["stop", "pcie0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("run free"));
    let c3 = Copy::of("bf3");
    c3.run(&["stop", "mss0"]);
    assert_eq!(c3.read("mss0/enable"), "0");
    c3.run(&["start", "llt2"]);
    assert_eq!(c3.read("llt2/enable"), "1");
}

#[test]
fn clear_counters_and_registers() {
    let c = Copy::of("bf2");
    c.run(&["clear", "tile2", "3"]);
    assert_eq!(c.read("tile2/counter3"), "0");
    assert_eq!(c.read("tile2/counter2"), "0x0\n", "only counter 3");
    c.run(&["clear", "pcie1", "PCIE_TLR_OUT_C_BYTE_CNT"]);
    assert_eq!(c.read("pcie1/OUT_C_BYTE_CNT"), "0");
    assert_ne!(c.read("pcie1/IN_C_BYTE_CNT"), "0");
    c.run(&["clear", "pcie0"]);
    for r in ["IN_P_PKT_CNT", "OUT_NP_BYTE_CNT", "OUT_C_PKT_CNT"] {
        assert_eq!(c.read(&format!("pcie0/{r}")), "0");
    }
    let before = c.contents();
    c.cmd()
        .args(["clear", "l3cachehalf0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bfperf start l3cachehalf0"));
    c.cmd()
        .args(["clear", "pcie0", "IN_P_BYTES"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("did you mean"));
    assert_eq!(before, c.contents());
    let c3 = Copy::of("bf3");
    c3.cmd()
        .args(["clear", "clock_measure"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("read-only"));
}

#[test]
fn dry_run_prints_exact_writes_and_writes_nothing() {
    let c = Copy::of("bf2");
    let before = c.contents();
    let out = c.run(&[
        "program",
        "l3cachehalf1",
        "0=HITS_BANK0",
        "4=CYCLES",
        "--start",
        "--dry-run",
    ]);
    let dev = c.device();
    assert_eq!(
        out.lines().take(4).collect::<Vec<_>>(),
        [
            "dry run: nothing written; these writes would be made:".to_string(),
            format!("  write {}/l3cachehalf1/event0: \"0x17\"", dev.display()),
            format!("  write {}/l3cachehalf1/event4: \"0x1\"", dev.display()),
            format!("  write {}/l3cachehalf1/enable: \"1\"", dev.display()),
        ]
    );
    c.run(&["stop", "gic0", "--dry-run"]);
    c.run(&["clear", "pcie0", "--dry-run"]);
    c.run(&["start", "l3cachehalf1", "--dry-run"]);
    assert_eq!(before, c.contents());
}

#[test]
fn bad_input_is_refused_with_nothing_written() {
    let c = Copy::of("bf2");
    let before = c.contents();
    let cases: &[(&[&str], &str)] = &[
        (&["program", "tlie2", "3", "HNF_REQUESTS"], "unknown block 'tlie2'; did you mean"),
        (&["program", "pcie0", "0", "0x0"], "registers block"),
        (&["program", "tile2", "4", "HNF_REQUESTS"], "tile2 has no counter 4 (it has counters 0-3)"),
        (&["program", "tile2", "x", "HNF_REQUESTS"], "'x' is not a counter number"),
        (&["program", "tile2", "3", "HNF_REQEUSTS"], "unknown event 'HNF_REQEUSTS' for block tile2; did you mean one of HNF_REQUESTS, RNF_REQUESTS?"),
        (&["program", "tile2", "3", "0x99"], "not in the tile event table"),
        (&["program", "tile2", "3", "-1"], "is not an event"),
        (&["program", "tile2", "3", "0xzz"], "is not an event number"),
        (&["program", "tile2", "3", "99999999999999999999999"], "is not an event number"),
        (&["program", "tile2", "3", "0x100", "--force"], "out of range"),
        (&["program", "l3cachehalf0", "0", "0x40", "--force"], "0 to 0x3f"),
        (&["program", "../tile2", "3", "0x45"], "no '/' or '..'"),
        (&["program", "..", "3", "0x45"], "no '/' or '..'"),
        (&["program", "tile2/event3", "3", "0x45"], "no '/' or '..'"),
        (&["program", "tile2", "0=HNF_REQUESTS", "1=NOPE"], "unknown event 'NOPE'"),
        (&["program", "tile2", "0=HNF_REQUESTS", "0=MEMORY_READS"], "given twice"),
        (&["program", "tile2", "3", "HNF_REQUESTS", "--start"], "--start is for blocks started all at once"),
        (&["stop", "tile2", "9"], "no counter 9"),
        (&["clear", "tile9"], "unknown block"),
        (&["start", "tile2"], "counts per counter"),
        (&["read", "nosuch"], "give a block name, a kind"),
        (&["read", "llt"], "this device (BlueField-2) has no llt blocks; its kinds are ecc, gic"),
        (&["events", "tile2/../tile1"], "no '/' or '..'"),
    ];
    for (args, message) in cases {
        c.cmd()
            .args(*args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(*message).from_utf8())
            .stderr(predicate::str::starts_with("bfperf: error: "));
    }
    // Usage errors exit 2.
    c.cmd().args(["program", "tile2"]).assert().code(2);
    c.cmd().args(["read", "--json", "--csv"]).assert().code(2);
    assert_eq!(before, c.contents(), "a refused command wrote something");
}

#[test]
fn permission_denied_says_run_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root writes read-only files anyway; simulate the refusal with a directory
        // where the file should be.
        let c = Copy::of("bf2");
        let f = c.device().join("tile2/event3");
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir(&f).unwrap();
        c.cmd()
            .args(["program", "tile2", "3", "0x45"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("writing tile2/event3"));
        return;
    }
    let c = Copy::of("bf2");
    let f = c.device().join("tile2/event3");
    let mut p = std::fs::metadata(&f).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o444);
    std::fs::set_permissions(&f, p).unwrap();
    c.cmd()
        .args(["program", "tile2", "3", "0x45"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "permission denied writing tile2/event3: run as root",
        ));
}

#[test]
fn read_selectors_and_formats() {
    let out = stdout_of(on_fixture("bf2").args(["read", "l3cache", "--csv"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "block,counter,register,event,event_name,counts_clock,value,problem"
    );
    // 12 GB/s / 64 B, 75 % hits, one bank of two, one half of two, 2 s.
    assert_eq!(lines[1], "l3cachehalf0,0,,23,HITS_BANK0,false,70312500,");
    assert_eq!(lines.len(), 11);
    let out = stdout_of(on_fixture("bf2").args(["read", "pcie1", "tile2", "pcie1"]));
    assert_eq!(rows(&out).len(), 1 + 12 + 4);
    let out = stdout_of(on_fixture("bf3").args(["read", "llt1"]));
    assert_eq!(
        rows(&out)[1],
        [
            "llt1",
            "counter0",
            "(clock",
            "cycles)",
            "4,000,000,000",
            "running"
        ]
    );
    let out = stdout_of(on_fixture("bf2").args(["read", "l3cachehalf1"]));
    assert_eq!(
        rows(&out)[1],
        ["l3cachehalf1", "counter0", "0x0", "DISABLE", "0", "stopped"]
    );
}

#[test]
fn writing_commands_take_kinds_globs_and_lists_validated_as_a_whole() {
    let c = Copy::of("bf2");
    let before = c.contents();
    // One block of the list cannot be programmed: nothing is written anywhere.
    c.cmd()
        .args(["program", "tile[0-3],pcie0", "0", "HNF_REQUESTS"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("pcie0 is a registers block"));
    assert_eq!(before, c.contents());
    let out = c.run(&["program", "tile[0-2]", "0", "HNF_REQUESTS", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let blocks: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["block"].as_str().unwrap())
        .collect();
    assert_eq!(blocks, ["tile0", "tile1", "tile2"]);
    for t in ["tile0", "tile1", "tile2"] {
        assert_eq!(c.read(&format!("{t}/event0")), "0x45");
    }
    assert_ne!(c.read("tile3/event0"), "0x45");
    let out = c.run(&["stop", "tile", "0", "--csv"]);
    assert_eq!(
        out,
        "path,data,fallback\ntile0/event0,0x0,\ntile1/event0,0x0,\ntile2/event0,0x0,\ntile3/event0,0x0,\n"
    );
    c.run(&["start", "l3cache"]);
    assert_eq!(c.read("l3cachehalf0/enable"), "1");
    assert_eq!(c.read("l3cachehalf1/enable"), "1");
}

#[test]
fn a_glob_over_two_kinds_programs_the_kind_that_has_the_event() {
    // tile* is the tile and the tilenet blocks; only the tiles have HNF_REQUESTS.
    let c = Copy::of("bf2");
    let before = c.contents();
    c.cmd()
        .args(["program", "tile*", "0=HNF_REQUESTS"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "tile* also matches 4 tilenet block(s), skipped",
        ));
    for t in 0..4 {
        assert_eq!(c.read(&format!("tile{t}/event0")), "0x45");
    }
    let after = c.contents();
    let changed: Vec<String> = after
        .iter()
        .filter(|(p, v)| before.get(*p) != Some(*v))
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert!(
        changed
            .iter()
            .all(|p| p.contains("/tile") && !p.contains("tilenet")),
        "{changed:?}"
    );
    // No kind has it: refused, nothing written.
    let c = Copy::of("bf2");
    let before = c.contents();
    c.cmd()
        .args(["program", "tile*", "0=NO_SUCH_EVENT"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("NO_SUCH_EVENT"));
    assert_eq!(before, c.contents());
    // A counter no block of either kind has: refused, nothing written.
    c.cmd()
        .args(["program", "tile*", "9=HNF_REQUESTS"])
        .assert()
        .code(1);
    assert_eq!(before, c.contents());
}
