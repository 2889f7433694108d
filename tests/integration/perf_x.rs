//! `stat -x` beside perf's own `-x`, both taken here on the same command: line by
//! line the same fields, units, event names, metric texts, `<not counted>` and
//! `<not supported>`, so that a script written for `perf stat -x,` reads bfperf
//! unchanged. The outputs perf 6.1 gave on a 2-core virtual machine (no hardware
//! counters) are quoted beside each test.

use std::path::Path;
use std::process::Command as Process;

use crate::support::*;

/// `perf stat ARGS` (its output to a file), and its exit status.
fn perf(dir: &Path, args: &[&str]) -> (String, i32) {
    let out = dir.join("perf.out");
    let st = Process::new("perf")
        .arg("stat")
        .arg("-o")
        .arg(&out)
        .args(args)
        .status()
        .expect("perf (linux-perf) is installed");
    (
        std::fs::read_to_string(&out).unwrap(),
        st.code().unwrap_or(-1),
    )
}

/// `bfperf --sim bf3 stat ARGS` (its output to a file), and its exit status.
fn ours(dir: &Path, args: &[&str]) -> (String, i32) {
    let out = dir.join("bfperf.out");
    let st = bfperf()
        .args(["--sim", "bf3", "stat", "-o"])
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    (
        std::fs::read_to_string(&out).unwrap(),
        st.status.code().unwrap_or(-1),
    )
}

/// The lines of perf's CSV (perf's `# started on` and blank lines left out).
fn lines(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.parse::<f64>().is_ok()
}

/// perf's interval time: `%6lu.%09lu`.
fn is_time(s: &str) -> bool {
    s.len() == 16
        && s.trim_start().split_once('.').is_some_and(|(a, b)| {
            a.parse::<u64>().is_ok() && b.len() == 9 && b.parse::<u64>().is_ok()
        })
}

/// The unit perf gives a count's rate per second of task clock (`convert_unit_double`
/// in perf's stat-shadow.c): `G/sec`, `M/sec`, `K/sec` above 1e9, 1e6 and 1e3, else
/// `/sec`.
fn perf_rate_unit(count: f64, clock_ms: f64) -> &'static str {
    let rate = if clock_ms > 0.0 {
        count / clock_ms * 1e3
    } else {
        0.0
    };
    match rate {
        r if r > 1e9 => "G/sec",
        r if r > 1e6 => "M/sec",
        r if r > 1e3 => "K/sec",
        _ => "/sec",
    }
}

/// A rate's unit on one of bfperf's lines, where it may differ from perf's: perf
/// scales it by the value, and the two programs' counts (a CPU migration in one run
/// and none in the other, on a loaded machine) can differ. It must then be the unit
/// perf would give bfperf's own count over bfperf's own task clock (the line of the
/// same interval).
fn rate_unit_is_perf_s(o: &[Vec<String>], line: &[String], skip: usize) -> bool {
    let clock = o.iter().find(|l| {
        l.get(2 + skip).map(String::as_str) == Some("task-clock") && (skip == 0 || l[0] == line[0])
    });
    let (Some(clock), Ok(count)) = (clock, line[skip].parse::<f64>()) else {
        return false;
    };
    let Ok(ms) = clock[skip].parse::<f64>() else {
        return false;
    };
    line.get(6 + skip).map(String::as_str) == Some(perf_rate_unit(count, ms))
}

/// Each of bfperf's lines has perf's fields: numbers where perf has numbers, the
/// same text where perf has text (units, events, percentages, metric units,
/// `<not counted>`), empty where perf's are empty.
fn same_fields(perf: &str, ours: &str, timed: bool) {
    let (p, o) = (lines(perf), lines(ours));
    assert_eq!(p.len(), o.len(), "perf:\n{perf}\nbfperf:\n{ours}");
    for (pl, ol) in p.iter().zip(&o) {
        assert_eq!(pl.len(), ol.len(), "perf: {pl:?}\nbfperf: {ol:?}");
        let fields = if timed {
            assert!(is_time(&pl[0]) && is_time(&ol[0]), "{pl:?}\n{ol:?}");
            &pl[1..]
        } else {
            &pl[..]
        };
        let skip = usize::from(timed);
        for (i, pf) in fields.iter().enumerate() {
            let of = &ol[i + skip];
            match is_number(pf) && !pf.contains('%') {
                // The value, run time and metric value: measured by each.
                true if i != 4 => assert!(is_number(of), "field {i}: {pl:?}\n{ol:?}"),
                _ if i == 6 && pf.ends_with("/sec") && pf != of && pl[skip] != ol[skip] => assert!(
                    rate_unit_is_perf_s(&o, ol, skip),
                    "field {i} (the counts differ): perf {pl:?}\nbfperf {ol:?}"
                ),
                _ => assert_eq!(pf, of, "field {i}: perf {pl:?}\nbfperf {ol:?}"),
            }
        }
    }
}

/// perf 6.1, `perf stat -x, -e task-clock,page-faults,cpu-migrations -- sleep 0.3`:
/// ```text
/// 1.21,msec,task-clock,1210369,100.00,0.004,CPUs utilized
/// 74,,page-faults,1210369,100.00,61.138,K/sec
/// 0,,cpu-migrations,1210369,100.00,0.000,/sec
/// ```
/// The run time is the counter's (the group's) running time, not the wall time,
/// and the rate is per second of the task clock.
#[test]
fn x_lines_are_perf_s_field_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-x,",
        "-e",
        "task-clock,page-faults,cpu-migrations",
        "--",
        "sleep",
        "0.3",
    ];
    let (p, _) = perf(dir.path(), &args);
    let (o, code) = ours(dir.path(), &args);
    assert_eq!(code, 0, "{o}");
    same_fields(&p, &o, false);
    let o = lines(&o);
    let clock_ms: f64 = o[0][0].parse().unwrap();
    let run_ns: f64 = o[0][3].parse().unwrap();
    // A task clock runs whenever its task does: its running time is its count.
    assert!((run_ns / 1e6 - clock_ms).abs() <= 0.005, "{o:?}");
    assert!(run_ns < 0.1e9, "the wall time, not the counter's: {o:?}");
    assert_eq!(o[1][3], o[0][3], "one group, one running time: {o:?}");
    // K/sec: faults per second of task clock, from the fields as shown (the
    // clock's two decimals of a millisecond bound the last digit).
    let faults: f64 = o[1][0].parse().unwrap();
    let shown: f64 = o[1][5].parse().unwrap();
    let per_ms = |ms: f64| faults / ms;
    assert!(
        shown <= per_ms(clock_ms - 0.005) + 0.0005 && shown >= per_ms(clock_ms + 0.005) - 0.0005,
        "{shown} K/sec for {faults} faults in {clock_ms} ms"
    );
}

/// perf 6.1, `perf stat -x, -I 500 -e task-clock,page-faults -- sleep 1.2`:
/// ```text
///      0.500308965,1.29,msec,task-clock,1294738,100.00,0.003,CPUs utilized
///      0.500308965,76,,page-faults,1294738,100.00,58.699,K/sec
///      1.000992488,<not counted>,msec,task-clock,0,100.00,,
///      1.000992488,<not counted>,,page-faults,0,100.00,,
///      1.204554949,0.06,msec,task-clock,58409,100.00,0.000,CPUs utilized
///      1.204554949,0,,page-faults,58409,100.00,0.000,/sec
/// ```
/// An interval in which the command never ran is `<not counted>`, not `0.00`.
#[test]
fn an_interval_the_command_did_not_run_is_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-x,",
        "-I",
        "500",
        "-e",
        "task-clock,page-faults",
        "--",
        "sleep",
        "1.2",
    ];
    let (p, _) = perf(dir.path(), &args);
    let (o, code) = ours(dir.path(), &args);
    assert_eq!(code, 0, "{o}");
    same_fields(&p, &o, true);
    let o = lines(&o);
    assert_eq!(
        o[2][1..],
        ["<not counted>", "msec", "task-clock", "0", "100.00", "", ""]
    );
    assert_eq!(
        o[3][1..],
        ["<not counted>", "", "page-faults", "0", "100.00", "", ""]
    );
}

/// perf 6.1, `perf stat -x, -e cycles,branches,cpu-clock -- sleep 0.2` where the
/// kernel has no hardware counters:
/// ```text
/// <not supported>,,cycles,0,100.00,,
/// <not supported>,,branches,0,100.00,,
/// 2.10,msec,cpu-clock,2103698,100.00,0.010,CPUs utilized
/// ```
/// (With hardware counters, both print counts, and bfperf's must be numbers too.)
#[test]
fn refused_events_read_as_perf_s_and_keep_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-x,",
        "-e",
        "cycles,branches,cpu-clock",
        "--",
        "sleep",
        "0.2",
    ];
    let (p, _) = perf(dir.path(), &args);
    let (o, code) = ours(dir.path(), &args);
    assert_eq!(code, 0, "{o}");
    same_fields(&p, &o, false);
    assert_eq!(lines(&o)[1][2], "branches", "{o}");
}

/// perf prints its events in `-e` order (`-e page-faults,task-clock` gives
/// page-faults first); bfperf interleaves the device's as given.
#[test]
fn lines_follow_the_e_order() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-x,",
        "-e",
        "page-faults,mss0/cycles/,task-clock",
        "--",
        "sleep",
        "0.1",
    ];
    let (o, code) = ours(dir.path(), &args);
    assert_eq!(code, 0, "{o}");
    let events: Vec<String> = lines(&o).iter().map(|l| l[2].clone()).collect();
    assert_eq!(events, ["page-faults", "mss0/cycles/", "task-clock"], "{o}");
}

/// perf 6.1, `perf stat -x, -I 300 --interval-count 2 -e task-clock -- sh -c
/// 'sleep 1; exit 3'`: two intervals, then it waits for the command and exits
/// with its status (3), printing nothing more.
#[test]
fn interval_count_with_a_command_lets_it_run_on() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("ended");
    let script = format!("sleep 1; : > {}; exit 3", mark.display());
    let args = [
        "-x,",
        "-I",
        "300",
        "--interval-count",
        "2",
        "-e",
        "task-clock",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let (p, perf_code) = perf(dir.path(), &args);
    assert!(mark.exists());
    std::fs::remove_file(&mark).unwrap();
    let (o, code) = ours(dir.path(), &args);
    assert_eq!((code, perf_code), (3, 3), "{o}");
    assert!(mark.exists(), "the command was ended early");
    assert_eq!(lines(&o).len(), lines(&p).len(), "perf:\n{p}\nbfperf:\n{o}");
    assert_eq!(lines(&o).len(), 2, "{o}");
}

/// perf 6.1, `perf stat -I 300 -e task-clock -- sleep 0.5`:
/// ```text
/// #           time             counts unit events
///      0.300395653               2.13 msec task-clock    #    0.007 CPUs utilized
///      0.504059203               0.05 msec task-clock    #    0.000 CPUs utilized
/// ```
/// and nothing after the intervals.
#[test]
fn an_interval_table_has_no_totals_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = perf(
        dir.path(),
        &["-I", "300", "-e", "task-clock", "--", "sleep", "0.5"],
    );
    assert!(!p.contains("elapsed"), "{p}");
    let (o, code) = ours(
        dir.path(),
        &["-I", "300", "-e", "task-clock", "--", "sleep", "0.5"],
    );
    assert_eq!(code, 0, "{o}");
    let last = o.lines().last().unwrap();
    assert!(
        last.split_whitespace().next().is_some_and(is_number),
        "the last line is an interval's: {o}"
    );
    assert!(!o.contains("elapsed"), "{o}");
}

/// perf 6.1, `perf stat --metric-only -x, -I 300 -e task-clock,page-faults --
/// sleep 0.5` (perf shows no metric of these in that mode, so only its frame):
/// ```text
///  time,
///      0.301863948,
///      0.502244415,
/// ```
/// bfperf's header names each metric as perf does (`unit  name`), every field
/// ended by the separator; `--metric-only` in a table keeps the table's digits.
#[test]
fn metric_only_has_perf_s_frame_and_the_table_s_digits() {
    let dir = tempfile::tempdir().unwrap();
    let (o, code) = ours(
        dir.path(),
        &[
            "--metric-only",
            "-x,",
            "-I",
            "300",
            "-M",
            "ddr",
            "--",
            "sleep",
            "0.5",
        ],
    );
    assert_eq!(code, 0, "{o}");
    let l: Vec<&str> = o.lines().collect();
    assert_eq!(
        l[0], " time,GB/s  ddr_read_bandwidth,GB/s  ddr_write_bandwidth,GB/s  ddr_bandwidth,",
        "{o}"
    );
    assert_eq!(l.len(), 3, "{o}");
    let want = bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS");
    for line in &l[1..] {
        let f: Vec<&str> = line.split(',').collect();
        assert!(is_time(f[0]) && f[4].is_empty(), "{line}");
        let read: f64 = f[1].parse().unwrap();
        assert_rate(read, want, "ddr_read_bandwidth");
    }
    // A share of a CPU over a second of sleep: two significant digits, never 0.00.
    let (t, _) = ours(
        dir.path(),
        &["--metric-only", "-e", "task-clock", "--", "sleep", "1"],
    );
    let value = t.lines().nth(1).unwrap().trim();
    assert!(
        value.starts_with("0.00") && value.trim_start_matches(['0', '.']).len() == 2,
        "{t}"
    );
}
