//! The event catalog as the `events` command shows it.

use crate::support::*;
use predicates::prelude::*;

#[test]
fn tile_events_with_descriptions() {
    let out = stdout_of(on_fixture("bf2").args(["events", "tile2"]));
    let line = out.lines().find(|l| l.contains("HNF_REQUESTS")).unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>().join(" "),
        "0x45 HNF_REQUESTS Number of REQs that were processed in HNF"
    );
    assert_eq!(out.lines().count(), 1 + 56);
}

#[test]
fn pattern_filters_names_and_descriptions() {
    let out = stdout_of(on_fixture("bf2").args(["events", "tile2", "mss"]));
    let names: Vec<&str> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "MEMORY_READS",
            "MEMORY_WRITES",
            "MSS_NO_CREDIT",
            "MEMORY_READS_BYPASS"
        ]
    );
}

#[test]
fn bf3_llt_includes_histogram_bins_the_driver_cut() {
    let list =
        std::fs::read_to_string(device_dir(&fixture("bf3")).join("llt0/event_list")).unwrap();
    assert!(!list.contains("HISTOGRAM"));
    assert!(list.len() < 4096);
    let out = stdout_of(on_fixture("bf3").args(["events", "llt0", "histogram"]));
    let r = rows(&out);
    for bin in 0..10 {
        let number = 0xa2 + bin;
        assert_eq!(
            r[1 + bin][..2],
            [
                format!("0x{number:x}"),
                format!("HISTOGRAM_HISTOGRAM_BIN{bin}*")
            ]
        );
    }
    assert!(out.contains("cuts it at one page"));
    let v: serde_json::Value = serde_json::from_str(&stdout_of(
        on_fixture("bf3").args(["events", "mss0", "--json"]),
    ))
    .unwrap();
    assert_eq!(v["truncated_event_list"], true);
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 155);
    assert_eq!(events[154]["event"], 154);
    assert_eq!(events[154]["event_name"], "HISTOGRAM_HISTOGRAM_BIN9");
    assert_eq!(events[154]["source"], "builtin");
    assert_eq!(events[0]["source"], "device");
}

#[test]
fn json_marks_reserved_events() {
    let v: serde_json::Value = serde_json::from_str(&stdout_of(
        on_fixture("bf2").args(["events", "tile0", "--json"]),
    ))
    .unwrap();
    let ev = |name: &str| {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event_name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(ev("HNF_REJECTS")["reserved"], true);
    assert_eq!(ev("HNF_REQUESTS")["reserved"], false);
    assert_eq!(ev("HNF_REQUESTS")["event"], 69);
}

#[test]
fn registers_show_offsets() {
    let out = stdout_of(on_fixture("bf2").args(["events", "pcie0"]));
    assert!(out.starts_with("OFFSET"));
    let line = out.lines().find(|l| l.contains("OUT_P_BYTE_CNT")).unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>().join(" "),
        "0x50 OUT_P_BYTE_CNT Outgoing posted bytes"
    );
}

#[test]
fn out_of_tree_lists_without_0x_prefix() {
    let c = Copy::of("bf2");
    let p = c.device().join("tile1/event_list");
    let text = std::fs::read_to_string(&p).unwrap().replace("0x", "");
    std::fs::write(&p, text).unwrap();
    let out = stdout_of(c.cmd().args(["events", "tile1", "HNF_REQ"]));
    assert_eq!(rows(&out)[1][..2], ["0x45", "HNF_REQUESTS"]);
}

#[test]
fn unknown_block_gets_suggestions() {
    on_fixture("bf2")
        .args(["events", "tlie2"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "unknown block 'tlie2'; did you mean",
        ))
        .stderr(predicate::str::contains("tile2"));
}

/// On an arm64 kernel with 16 or 64 KiB pages the driver's list is whole: every event
/// comes from the device, none is marked as completed from the table.
#[test]
fn larger_pages_give_the_whole_list() {
    for page in ["16k", "64k"] {
        let out = stdout_of(bfperf().args([
            "--sim",
            "bf3",
            "--page-size",
            page,
            "events",
            "mss0",
            "--json",
        ]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["truncated_event_list"], false, "{page}");
        let events = v["events"].as_array().unwrap();
        assert_eq!(events.len(), 155, "{page}");
        assert!(
            events.iter().all(|e| e["source"] == "device"),
            "{page}: {out}"
        );
        let text = stdout_of(bfperf().args([
            "--sim",
            "bf3",
            "--page-size",
            page,
            "events",
            "llt0",
            "histogram",
        ]));
        assert!(!text.contains("cuts it at one page"), "{page}: {text}");
        assert!(
            text.contains("HISTOGRAM_HISTOGRAM_BIN9\n")
                || text.contains("HISTOGRAM_HISTOGRAM_BIN9 "),
            "{text}"
        );
    }
}

/// The same over the FUSE mount of a 64 KiB-page kernel, and the page size is checked.
#[test]
fn a_mounted_64k_kernel_lists_everything() {
    let Some(m) = Mount::start_with("3", "6.12", &["--page-size", "64k"]) else {
        return;
    };
    let list = m.read("llt0/event_list");
    assert!(
        list.len() > 4096 && list.contains("HISTOGRAM_BIN9"),
        "{}",
        list.len()
    );
    let out = stdout_of(
        m.cmd()
            .args(["--page-size", "64k", "events", "llt0", "--json"]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["truncated_event_list"], false);
    // Programming a histogram bin by name works: the device's own list names it.
    m.run(&["program", "llt0", "0", "HISTOGRAM_HISTOGRAM_BIN9"]);
    assert_eq!(
        m.read("llt0/event0").trim(),
        "0xab: HISTOGRAM_HISTOGRAM_BIN9"
    );
}

#[test]
fn a_page_size_that_no_kernel_has_is_refused() {
    bfperf()
        .args(["--sim", "bf3", "--page-size", "5000", "events", "llt0"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("page size"));
}
