//! perf's habits, carried over: `stat CMD` without `--`, the counts on standard
//! error (the command's standard output untouched), `--metric-only` as columns, the
//! variance column of `-x` with `-r`, an `-I` header and no sliver of an interval,
//! and a count of one block labelled with that block. Values are checked against the
//! in-process simulator's rates.

use crate::common::*;

/// stat's own lines on stderr (its warnings start with `bfperf:`).
fn report(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.starts_with("bfperf:"))
        .map(str::to_string)
        .collect()
}

/// The simulated BlueField-3's DDR read bandwidth (both mss), GB/s.
fn ddr_read_truth() -> f64 {
    bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS")
}

/// stat's report lines (on stderr) from `bfperf ARGS`, which must succeed.
fn stat_report(args: &[&str]) -> Vec<String> {
    let out = bfperf().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report(&out.stderr)
}

fn close(got: f64, want: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() < 0.02,
        "{what}: {got}, simulator {want}"
    );
}

#[test]
fn stat_takes_the_command_without_dashes_and_leaves_its_stdout_alone() {
    let out = bfperf()
        .args([
            "--sim",
            "bf3",
            "stat",
            "-M",
            "ddr",
            "-x,",
            "sh",
            "-c",
            "echo hello; sleep 0.2; echo world",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hello\nworld\n");
    let lines = report(&out.stderr);
    let ddr = lines
        .iter()
        .find(|l| l.contains("ddr_read_bandwidth"))
        .unwrap_or_else(|| panic!("no DDR metric on stderr: {lines:?}"));
    // perf's -x columns: the metric's value is the 6th field.
    let value: f64 = ddr.split(',').nth(5).unwrap().parse().unwrap();
    close(value, ddr_read_truth(), "ddr_read_bandwidth");
    // `-o -` puts the counts on standard output, `--` before the command as ever.
    let out = bfperf()
        .args([
            "--sim", "bf3", "stat", "-M", "ddr", "-x,", "-o", "-", "--", "true",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("ddr_read_bandwidth"));
}

#[test]
fn metric_only_prints_a_column_per_metric_and_no_sliver_interval() {
    let lines = stat_report(&[
        "--sim",
        "bf3",
        "stat",
        "--metric-only",
        "-x,",
        "-I",
        "100",
        "--duration",
        "320ms",
    ]);
    let head: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(head[0], "# TIME", "{lines:?}");
    let col = head
        .iter()
        .position(|h| *h == "ddr_read_bandwidth GB/s")
        .unwrap_or_else(|| panic!("no DDR column in {head:?}"));
    assert_eq!(head[col + 1], "ddr_read_bandwidth coverage");
    // Three intervals of 100 ms; the 20 ms left over is in no line of its own.
    let rows = &lines[1..];
    assert_eq!(rows.len(), 3, "{lines:?}");
    for row in rows {
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields.len(), head.len(), "{row}");
        close(
            fields[col].parse().unwrap(),
            ddr_read_truth(),
            "ddr_read_bandwidth",
        );
        assert_eq!(fields[col + 1], "100.00");
    }
    // Events that make no metric: said, nothing counted.
    bfperf()
        .args([
            "--sim",
            "bf3",
            "stat",
            "--metric-only",
            "-e",
            "mss0/SKYLIB_DDN_TX_FLITS/",
            "true",
        ])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "--metric-only: these events make no metric",
        ));
}

#[test]
fn x_with_r_carries_the_variance_and_one_block_is_named() {
    let lines = stat_report(&[
        "--sim",
        "bf2",
        "stat",
        "-x,",
        "-r",
        "3",
        "-e",
        "tile2/MEMORY_READS/",
        "--duration",
        "50ms",
    ]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let fields: Vec<&str> = lines[0].split(',').collect();
    // value, unit, event, variance, run time, percentage, metric value, metric unit.
    assert_eq!(fields.len(), 8, "{fields:?}");
    assert_eq!(fields[2], "tile2/MEMORY_READS/");
    let variance = fields[3]
        .strip_suffix('%')
        .unwrap_or_else(|| panic!("{fields:?}"));
    assert!(variance.parse::<f64>().is_ok(), "{fields:?}");
    assert_eq!(fields[5], "100.00");
}

#[test]
fn interval_tables_have_a_header_line() {
    let lines = stat_report(&[
        "--sim",
        "bf2",
        "stat",
        "-e",
        "tile/MEMORY_READS/",
        "-I",
        "100",
        "--duration",
        "220ms",
    ]);
    assert!(
        lines[0].trim_start().starts_with("# TIME") && lines[0].contains("EVENT OR METRIC"),
        "{lines:?}"
    );
    let intervals = lines[1..]
        .iter()
        .take_while(|l| l.contains("MEMORY_READS"))
        .count();
    assert_eq!(intervals, 2, "{lines:?}");
}
