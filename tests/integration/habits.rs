//! perf's habits, carried over: `stat CMD` without `--`, the counts on standard
//! error (the command's standard output untouched), `--metric-only` as columns, the
//! variance column of `-x` with `-r`, an `-I` header and the last partial interval,
//! and a count of one block labelled with that block. Values are checked against the
//! in-process simulator's rates.

use crate::support::*;

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

/// `bfperf ARGS`, which must succeed.
fn succeeded(args: &[&str]) -> std::process::Output {
    let out = bfperf().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// stat's report lines (on stderr) from `bfperf ARGS`, which must succeed.
fn stat_report(args: &[&str]) -> Vec<String> {
    report(&succeeded(args).stderr)
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
    assert_rate(value, ddr_read_truth(), "ddr_read_bandwidth");
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
fn metric_only_prints_a_column_per_metric_and_the_last_partial_interval() {
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
    // perf's header: ` time`, then each metric's `unit  name`, each field ended
    // by the separator.
    let head: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(head[0], " time", "{lines:?}");
    assert_eq!(head.last(), Some(&""), "{lines:?}");
    let col = head
        .iter()
        .position(|h| *h == "GB/s  ddr_read_bandwidth")
        .unwrap_or_else(|| panic!("no DDR column in {head:?}"));
    // Intervals of 100 ms (three when every tick is on time), then the 20 ms left
    // over in a line of its own, as perf prints a last partial interval. A tick a
    // busy machine made late lengthens the interval after it, so no line but the
    // last is under half an interval, and the lines end with the run.
    let rows = &lines[1..];
    let times: Vec<f64> = rows
        .iter()
        .map(|r| r.split(',').next().unwrap().trim().parse().unwrap())
        .collect();
    assert!((2..=4).contains(&rows.len()), "{lines:?}");
    let mut previous = 0.0;
    for t in &times[..times.len() - 1] {
        assert!(t - previous >= 0.05, "a sliver of an interval: {lines:?}");
        previous = *t;
    }
    let last = times[times.len() - 1];
    assert!(
        last >= 0.32 && last > previous,
        "the last line is not the run's end: {lines:?}"
    );
    for row in rows {
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields.len(), head.len(), "{row}");
        // An interval whose only window a busy machine left unknown has no value:
        // marked, never a wrong one.
        if fields[col].is_empty() {
            continue;
        }
        // The stopped gaps of llt's windows are not counted: the value is scaled
        // to the whole interval.
        assert_rate(
            fields[col].parse().unwrap(),
            ddr_read_truth(),
            "ddr_read_bandwidth",
        );
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

/// Every `-x` line has perf's fields, as README lists them:
/// `[time,][location,]value,unit,event,[variance,]run_time_ns,percentage,metric_value,metric_unit`:
/// count and metric lines alike, with -I, -A, -r and each of their combinations.
/// perf prints the interval a command's exit cut short: `perf stat -I 1000 -e
/// task-clock -- sleep 2.05` prints lines at 1.001, 2.002 and 2.051 s.
#[test]
fn a_command_s_last_partial_interval_has_its_line_as_perf_prints_it() {
    let lines = stat_report(&[
        "--sim",
        "bf3",
        "stat",
        "-x,",
        "-I",
        "200",
        "-e",
        "llt0/cycles/",
        "--",
        "sleep",
        "0.5",
    ]);
    let times: Vec<f64> = lines
        .iter()
        .filter(|l| !l.starts_with('#'))
        .map(|r| r.split(',').next().unwrap().trim().parse().unwrap())
        .collect();
    let last = *times.last().unwrap_or_else(|| panic!("{lines:?}"));
    // 0.2 and 0.4 (later on a busy machine, one line fewer), then the end at 0.5.
    assert!(last >= 0.5, "the last 0.1 s has no line: {lines:?}");
    assert!(times.len() >= 2, "{lines:?}");
}

#[test]
fn every_x_line_has_perfs_fields_with_i_a_and_r() {
    for (interval, per_block, repeat) in (0..8).map(|m| (m & 1 != 0, m & 2 != 0, m & 4 != 0)) {
        let mut args = vec!["--sim", "bf3", "stat", "-x,", "-M", "ddr_read_bandwidth"];
        args.extend(["--duration", "250ms"]);
        if interval {
            args.extend(["-I", "100"]);
        }
        if per_block {
            args.push("-A");
        }
        if repeat {
            args.extend(["-r", "2"]);
        }
        let lines = stat_report(&args);
        let want = 7 + usize::from(interval) + usize::from(per_block) + usize::from(repeat);
        let (mut counts, mut on_counts) = (0, 0);
        for l in &lines {
            let fields: Vec<&str> = l.split(',').collect();
            assert_eq!(fields.len(), want, "{args:?}: {l}");
            let value = fields[usize::from(interval) + usize::from(per_block)];
            counts += usize::from(!value.is_empty());
            // The metric's value is in the metric column, never the percentage's
            // (per block with -A, the block last in its unit: `GB/s NAME mss0`),
            // on the line of the count it is made of, as perf puts a metric on
            // its leader's line: the block's DDR reads.
            if !fields[want - 2].is_empty() {
                let metric: f64 = fields[want - 2].parse().unwrap();
                let block = fields[want - 1].rsplit(' ').next().unwrap();
                let truth = match block {
                    "mss0" | "mss1" => bf3_gb_per_s(&[block], "SKYLIB_DDN_TX_FLITS"),
                    _ => ddr_read_truth(),
                };
                assert_rate(metric, truth, &format!("{args:?}: {l}"));
                if !value.is_empty() {
                    on_counts += 1;
                    let event = fields[usize::from(interval) + usize::from(per_block) + 2];
                    assert_eq!(event, format!("{block}/SKYLIB_DDN_TX_FLITS/"), "{l}");
                }
            }
        }
        assert!(counts > 0 && on_counts > 0, "{args:?}: {lines:?}");
    }
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
    // 0.1, 0.2 and the last 20 ms (one fewer when a busy machine made a tick late).
    assert!((2..=3).contains(&intervals), "{lines:?}");
}

/// A command that spends 0.3 s of CPU time.
const BURN: [&str; 3] = [
    "python3",
    "-c",
    "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass",
];

/// The number in a `   0.301 seconds WHAT` line after a command's counts.
fn seconds(lines: &[String], what: &str) -> f64 {
    let line = lines
        .iter()
        .find(|l| {
            l.ends_with(&format!("seconds {what}")) || l.contains(&format!("seconds {what} ("))
        })
        .unwrap_or_else(|| panic!("no 'seconds {what}' in {lines:?}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// The (value, unit) of a table row whose first two columns are `block event`.
fn row(lines: &[String], block: &str, event: &str) -> (f64, String) {
    let fields: Vec<&str> = lines
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == block && f[1] == event)
        .unwrap_or_else(|| panic!("no {block} {event} in {lines:?}"));
    (
        fields[2].replace(',', "").parse().unwrap(),
        fields[3].to_string(),
    )
}

#[test]
fn task_clock_reads_in_msec_with_cpus_utilized_and_the_command_s_times() {
    let cpus = online_cpus();
    // -a: system-wide while the command runs, as perf stat -a.
    let mut args = vec!["--sim", "bf3", "stat", "-a", "-e", "task-clock"];
    args.extend(BURN);
    let lines = stat_report(&args);
    assert!(
        lines[0].ends_with(&format!("; perf events system-wide, {cpus} CPUs:")),
        "{lines:?}"
    );
    let elapsed = seconds(&lines, "time elapsed");
    let (user, sys) = (seconds(&lines, "user"), seconds(&lines, "sys"));
    // The command's own account: 0.3 s of CPU (reading the clock, partly the kernel's).
    assert!(
        user + sys >= 0.29 && user + sys <= elapsed + 0.05,
        "{lines:?}"
    );
    // System-wide, every CPU's task clock runs (idle included) through the window,
    // which lasts at least the command's 0.3 s of CPU (how closely each CPU's count
    // is its time enabled, the kernel's own account: a_splits_perf_events_per_cpu).
    let (ms, unit) = row(&lines, "software", "task-clock");
    assert_eq!(unit, "msec");
    assert!(ms >= 300.0 * cpus, "{ms} ms on {cpus} CPUs: {lines:?}");
    // perf's "CPUs utilized": the task clock over the time elapsed, to its digits.
    let (utilized, unit) = row(&lines, "cpus_utilized", "perf");
    assert_eq!(unit, "CPUs");
    let want = ms / 1000.0 / elapsed;
    assert!(
        (utilized - want).abs() <= 0.005 + want * 1e-5 / elapsed,
        "{lines:?}"
    );
}

/// With a command, perf events count that command, as perf's do: `perf stat -e
/// task-clock -- sleep 0.2` says `0.82 msec task-clock # 0.004 CPUs utilized`
/// (system-wide it would be 400 msec on 2 CPUs).
#[test]
fn per_process_task_clock_is_the_command_s_cpu_time() {
    let mut args = vec!["--sim", "bf3", "stat", "-e", "task-clock"];
    args.extend(BURN);
    let lines = stat_report(&args);
    assert!(
        lines[0].ends_with("; perf events of the process measured and its children:"),
        "{lines:?}"
    );
    let (ms, unit) = row(&lines, "software", "task-clock");
    assert_eq!(unit, "msec");
    let cpu_ms = (seconds(&lines, "user") + seconds(&lines, "sys")) * 1000.0;
    // The kernel's two accounts of the same process tree agree (to its ticks).
    assert!(
        ms >= 290.0 && (ms - cpu_ms).abs() < 0.1 * cpu_ms,
        "{ms} ms against {cpu_ms}: {lines:?}"
    );
    let elapsed = seconds(&lines, "time elapsed");
    let (utilized, _) = row(&lines, "cpus_utilized", "perf");
    assert!((utilized - ms / 1000.0 / elapsed).abs() < 0.02, "{lines:?}");
}

/// A command that hardly runs: perf says `0.72 msec task-clock # 0.004 CPUs
/// utilized`; bfperf never shows a measured value as `0.00`, but with two
/// significant digits. A second of sleep keeps the share under 0.005 on a loaded
/// machine too (`sleep 0.2` once ran 1.58 ms there: 0.0073).
#[test]
fn a_small_value_is_shown_with_its_digits_not_as_zero() {
    let lines = stat_report(&["--sim", "bf3", "stat", "-e", "task-clock", "sleep", "1"]);
    let (ms, _) = row(&lines, "software", "task-clock");
    let elapsed = seconds(&lines, "time elapsed");
    let shown = lines
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[0] == "cpus_utilized")
        .map(|f| f[2].to_string())
        .unwrap_or_else(|| panic!("{lines:?}"));
    let want = ms / 1000.0 / elapsed;
    assert!(
        want > 0.0 && want < 0.005,
        "the command ran {ms} ms: {lines:?}"
    );
    // Two significant digits: `0.0039`, not `0.00`.
    let digits = shown.trim_start_matches(['0', '.']);
    assert_eq!(digits.len(), 2, "{shown}: {lines:?}");
    let utilized: f64 = shown.parse().unwrap();
    // (The task clock is shown to 0.01 ms: its rounding, and the last digit's.)
    let step = 10f64.powf(want.log10().floor() - 1.0);
    assert!(
        (utilized - want).abs() <= step / 2.0 + want * 0.01 / ms,
        "{shown} against {want}: {lines:?}"
    );
}

#[test]
fn a_splits_perf_events_per_cpu_as_perf_does() {
    let cpus = online_cpus() as usize;
    let lines = stat_report(&[
        "--sim",
        "bf3",
        "stat",
        "-A",
        "-x,",
        "-e",
        "task-clock",
        "-e",
        "mss0/SKYLIB_DDN_TX_FLITS/",
        "--duration",
        "200ms",
    ]);
    let rows: Vec<Vec<&str>> = lines.iter().map(|l| l.split(',').collect()).collect();
    // Where first, then value, unit and event, as perf stat -A -x.
    let clocks: Vec<&Vec<&str>> = rows.iter().filter(|f| f[3] == "task-clock").collect();
    assert_eq!(clocks.len(), cpus, "{lines:?}");
    for (cpu, f) in clocks.iter().enumerate() {
        assert_eq!(f[0], format!("CPU{cpu}"));
        assert_eq!(f[2], "msec");
        // Each CPU's clock counted for as long as the kernel ran its event (its
        // own account, in ns), and that for the whole 200 ms at least.
        let ms: f64 = f[1].parse().unwrap();
        let run_ms = f[4].parse::<f64>().unwrap() / 1e6;
        assert!(run_ms >= 200.0, "{f:?}");
        assert!((ms - run_ms).abs() <= 0.005 + run_ms * 1e-4, "{f:?}");
    }
    let mss = rows
        .iter()
        .find(|f| f[0] == "mss0")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(mss[3], "mss0/SKYLIB_DDN_TX_FLITS/");
    // The value covers the span: perf's run time over its share of it.
    let flits: f64 = mss[1].parse().unwrap();
    let run_ns: f64 = mss[4].parse().unwrap();
    let share: f64 = mss[5].parse::<f64>().unwrap() / 100.0;
    let truth = bf3_gb_per_s(&["mss0"], "SKYLIB_DDN_TX_FLITS") * 1e9 / 64.0;
    assert_rate(
        flits / (run_ns / 1e9 / share),
        truth,
        "mss0 flits per second",
    );
}

#[test]
fn an_event_the_kernel_refuses_reads_as_perf_says_it() {
    // cycles: counted where the CPU has counters, else refused at open (a virtual
    // machine, qemu-user); the run goes on either way.
    let lines = stat_report(&[
        "--sim",
        "bf3",
        "stat",
        "-e",
        "cycles",
        "-e",
        "task-clock",
        "--duration",
        "100ms",
    ]);
    let cycles = lines
        .iter()
        .find(|l| l.starts_with("hardware"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    if cycles.contains("<not supported>") {
        // No coverage to speak of, no "invalid", no footnote about turns.
        assert!(
            !cycles.contains('%') && !cycles.contains("invalid"),
            "{cycles}"
        );
        assert!(!lines.iter().any(|l| l.contains("took turns")), "{lines:?}");
    } else {
        assert!(cycles.contains("100.00%"), "{cycles}");
    }
}

#[test]
fn list_works_anywhere_and_lists_whole_groups() {
    // No DPU here (an empty sysfs root): every generation's catalog, marked.
    let empty = tempfile::tempdir().unwrap();
    let root = empty.path().to_str().unwrap();
    let out = succeeded(&[
        "--sysfs-root",
        root,
        "list",
        "HNF_REQUESTS",
        "--format",
        "csv",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no BlueField here"));
    let csv = String::from_utf8(out.stdout).unwrap();
    // BlueField-1 and -2 have the tile's HNF_REQUESTS (0x45); BlueField-3 has no tile.
    assert!(
        csv.lines()
            .any(|l| l.starts_with("event,tile,69,HNF_REQUESTS,") && l.ends_with(",bf1 bf2")),
        "{csv}"
    );
    let json = bfperf()
        .args([
            "--sysfs-root",
            root,
            "list",
            "--json",
            "GDC_MISS_MACHINE_RD_REQ",
        ])
        .output()
        .unwrap();
    let listing: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        listing["events"][0]["generations"],
        serde_json::json!(["bf3"])
    );
    // A device named that cannot be opened is still an error.
    bfperf().args(["--device", root, "list"]).assert().failure();
    // A group is listed whole, whichever of its metrics matched.
    let lines = stdout_lines(&["--sim", "bf3", "list", "memory"]);
    assert!(
        lines.contains(
            &"group ddr: ddr_read_bandwidth, ddr_write_bandwidth, ddr_bandwidth".to_string()
        ),
        "{lines:?}"
    );
    // Only a metric matched: no empty events table above it.
    let lines = stdout_lines(&["--sim", "bf3", "list", "--details", "ddr_bandwidth"]);
    assert!(lines[0].starts_with("METRIC"), "{lines:?}");
    // A metric two generations define alike is listed once; the group it is in is
    // whole (perf's metrics too), whichever of its metrics matched.
    let lines = stdout_lines(&["--sysfs-root", root, "list", "cpu"]);
    let l3_mpki = lines.iter().filter(|l| l.starts_with("l3_mpki ")).count();
    assert_eq!(l3_mpki, 1, "{lines:?}");
    let whole = "group cpu: l3_mpki, memory_bytes_per_instruction, ddr_bytes_per_instruction, llc_mpki, ipc, cpus_utilized, branch_mpki";
    assert!(lines.contains(&whole.to_string()), "{lines:?}");
    let lines = stdout_lines(&["--sysfs-root", root, "list", "ddr"]);
    assert!(lines.contains(&whole.to_string()), "{lines:?}");
    // metrics works anywhere too: every generation's, each once.
    let out = succeeded(&["--sysfs-root", root, "metrics"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no BlueField here"));
    let text = String::from_utf8(out.stdout).unwrap();
    for metric in [
        "l3_hit_ratio",
        "memory_read_bandwidth",
        "llc_read_miss_ratio",
    ] {
        let n = text
            .lines()
            .filter(|l| l.starts_with(&format!("{metric} ")))
            .count();
        assert_eq!(n, 1, "{metric}: {text}");
    }
}

#[test]
fn completion_follows_sim() {
    let candidates = stdout_lines(&[
        "__complete",
        "--index",
        "5",
        "--",
        "bfperf",
        "--sim",
        "bf3",
        "stat",
        "-M",
        "ddr_",
    ]);
    assert!(
        candidates.contains(&"ddr_bandwidth".to_string()),
        "{candidates:?}"
    );
    let candidates = stdout_lines(&[
        "__complete",
        "--index",
        "4",
        "--",
        "bfperf",
        "--sim=bf3",
        "stat",
        "-e",
        "llt_m",
    ]);
    assert!(
        candidates.contains(&"llt_miss/".to_string()),
        "{candidates:?}"
    );
    let sims = stdout_lines(&["__complete", "--index", "2", "--", "bfperf", "--sim", ""]);
    assert_eq!(sims, ["bf1", "bf2", "bf3"]);
}

/// The lines `bfperf ARGS` prints on standard output; it must succeed.
fn stdout_lines(args: &[&str]) -> Vec<String> {
    let out = succeeded(args);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// An interval table shows each metric in one unit down its column (perf scales per
/// event, not per line): DDR writes at 1 GB/s never turn into 999.99 MB/s.
#[test]
fn a_metric_keeps_its_unit_down_the_intervals() {
    let lines = stat_report(&[
        "--sim",
        "bf3",
        "stat",
        "-M",
        "ddr",
        "-I",
        "100",
        "--duration",
        "1s",
    ]);
    for metric in ["ddr_read_bandwidth", "ddr_write_bandwidth", "ddr_bandwidth"] {
        let units: std::collections::BTreeSet<String> = lines
            .iter()
            .filter(|l| l.split_whitespace().nth(2) == Some(metric))
            .map(|l| l.split_whitespace().nth(4).unwrap().to_string())
            .collect();
        assert_eq!(units.len(), 1, "{metric}: {units:?} in {lines:?}");
    }
}

/// The rest of perf stat's and perf list's habits: --append adds to -o's file,
/// --no-big-num prints counts without separators, `list hw`/`list sw` are perf's
/// classes, `list KIND/GLOB` perf's form, and a perf modifier on a BlueField event
/// is refused as one.
#[test]
fn append_no_big_num_list_classes_and_modifiers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("counts.csv");
    for _ in 0..2 {
        let path = file.to_str().unwrap();
        succeeded(&[
            "--sim",
            "bf2",
            "stat",
            "-x,",
            "-e",
            "tile2/MEMORY_READS/",
            "--duration",
            "50ms",
            "-o",
            path,
            "--append",
        ]);
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.lines().all(|l| l.contains(",tile2/MEMORY_READS/,")),
        "{text}"
    );
    let lines = stat_report(&[
        "--sim",
        "bf2",
        "stat",
        "--no-big-num",
        "-e",
        "tile2/MEMORY_READS/",
        "--duration",
        "100ms",
    ]);
    let row = lines.iter().find(|l| l.contains("MEMORY_READS")).unwrap();
    let value = row.split_whitespace().nth(2).unwrap();
    assert!(value.parse::<u64>().is_ok(), "{row}");
    for (class, want, not) in [
        ("hw", "hardware event", "software event"),
        ("sw", "software event", "hardware event"),
    ] {
        let lines = stdout_lines(&["--sim", "bf2", "list", class]);
        assert!(lines.iter().any(|l| l.contains(want)), "{class}: {lines:?}");
        assert!(
            !lines.iter().any(|l| l.contains(not) || l.contains("tile/")),
            "{class}: {lines:?}"
        );
    }
    let lines = stdout_lines(&["--sim", "bf2", "list", "tile/*READ*"]);
    let events: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("tile "))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert!(events.contains(&"tile/MEMORY_READS/"), "{lines:?}");
    assert!(
        events
            .iter()
            .all(|e| e.starts_with("tile/") && e.contains("READ")),
        "{lines:?}"
    );
    bfperf()
        .args([
            "--sim",
            "bf3",
            "stat",
            "-e",
            "llt/GDC_BANK0_RD_REQ/u",
            "--",
            "true",
        ])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "'u' is a perf modifier, for perf events only",
        ));
}

/// 100 ms intervals of an all-at-once block are right or carry their coverage, on any
/// machine, loaded or emulated: every interval's DDR read bandwidth within 1 % of the
/// simulator's, its coverage said (the time llt and mss spent stopped to be read).
#[test]
fn every_100_ms_interval_is_right_or_marked() {
    let out = succeeded(&[
        "--sim",
        "bf3",
        "stat",
        "-M",
        "ddr",
        "-I",
        "100",
        "--duration",
        "3s",
        "-j",
        "-o",
        "-",
    ]);
    let records = ndjson(&String::from_utf8(out.stdout).unwrap());
    let intervals: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| {
            r["record"] == "metric" && r["of"] == "interval" && r["metric"] == "ddr_read_bandwidth"
        })
        .collect();
    assert!(intervals.len() >= 29, "{records:?}");
    for r in intervals {
        // An interval whose only window a busy machine left unknown: no value, and
        // why (marked, never a wrong value).
        if r["value"].is_null() {
            assert!(r["reason"].as_str().is_some_and(|w| !w.is_empty()), "{r}");
            continue;
        }
        let coverage = r["coverage"].as_f64().unwrap();
        assert!(coverage > 0.0 && coverage <= 1.0, "{r}");
        assert_rate(
            r["value"].as_f64().unwrap(),
            ddr_read_truth(),
            &r.to_string(),
        );
    }
}

/// `-I` takes milliseconds, at least 10, as perf's does; a shorter one or a unit is
/// refused saying the minimum in milliseconds (not a range up to 2^64 - 1), before
/// anything is counted.
#[test]
fn an_interval_below_10_ms_is_refused_saying_the_minimum() {
    for (arg, says) in [
        (
            "5",
            "the shortest interval is 10 ms (as perf stat's); '5' is 5 ms: give -I 10 or more",
        ),
        (
            "1s",
            "-I takes a whole number of milliseconds (as perf stat -I), not '1s'",
        ),
    ] {
        let out = bfperf()
            .args([
                "--sim", "bf3", "stat", "-I", arg, "-e", "llt/0x1/", "--", "true",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "-I {arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "-I {arg}: {err}");
        assert!(!err.contains("18446744073709551615"), "{err}");
    }
    succeeded(&[
        "--sim",
        "bf3",
        "stat",
        "-I",
        "10",
        "-e",
        "llt/0x1/",
        "--duration",
        "30ms",
    ]);
}

/// `-r N --json` ends with the metrics of the mean, as the table shows them (and
/// `--format csv` alike): `record: metric, of: mean`, the mean of the runs' values,
/// and right against the simulator's rate.
#[test]
fn repeated_runs_give_the_mean_metrics_in_json_and_csv() {
    let out = succeeded(
        &"--sim bf3 stat -r 3 --json -o - -M ddr --duration 200ms"
            .split(' ')
            .collect::<Vec<_>>(),
    );
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |of: &str| -> Vec<&serde_json::Value> {
        records
            .iter()
            .filter(|r| {
                r["record"] == "metric" && r["of"] == of && r["metric"] == "ddr_read_bandwidth"
            })
            .collect()
    };
    let (totals, mean) = (of("total"), of("mean"));
    assert_eq!((totals.len(), mean.len()), (3, 1), "{records:?}");
    // Each run's value is right, or (a run that could not count, on a starved
    // machine) null with its reason, and then the mean is null too: never a number
    // that was not measured.
    let truth = ddr_read_truth();
    let values: Vec<f64> = totals.iter().filter_map(|r| r["value"].as_f64()).collect();
    for r in &totals {
        match r["value"].as_f64() {
            Some(v) => assert!((v - truth).abs() / truth < 0.01, "{v} against {truth}: {r}"),
            None => assert!(r["reason"].is_string(), "no value and no reason: {r}"),
        }
    }
    match mean[0]["value"].as_f64() {
        Some(mean) => {
            assert_eq!(
                values.len(),
                3,
                "a mean of runs that did not all count: {records:?}"
            );
            let avg = values.iter().sum::<f64>() / 3.0;
            assert!((mean - avg).abs() / avg < 1e-4, "mean {mean} of {values:?}");
            assert!(
                (mean - truth).abs() / truth < 0.01,
                "mean {mean} against {truth}"
            );
        }
        None => assert!(
            values.len() < 3,
            "no mean of three counted runs: {records:?}"
        ),
    }
    // The mean comes before the end record.
    let end = records.iter().position(|r| r["record"] == "end").unwrap();
    let last_mean = records.iter().rposition(|r| r["of"] == "mean").unwrap();
    assert!(last_mean < end);

    let out = succeeded(
        &"--sim bf3 stat -r 2 --format csv -o - -M ddr --duration 100ms"
            .split(' ')
            .collect::<Vec<_>>(),
    );
    let csv = String::from_utf8_lossy(&out.stdout);
    let means: Vec<&str> = csv
        .lines()
        .filter(|l| l.starts_with("metric,") && l.ends_with(",mean"))
        .collect();
    assert_eq!(means.len(), 3, "{csv}");
}

/// A summed row's note says a reason every block shares once, naming no block (it
/// named the first block, as if only it had been delayed).
#[test]
fn a_summed_row_says_a_shared_reason_without_naming_one_block() {
    let out = succeeded(&[
        "--sim", "bf3", "stat", "-D", "200", "-e", "mss/0x1/", "--", "sleep", "0.5",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    let row = text
        .lines()
        .find(|l| l.starts_with("mss (2 blocks)"))
        .unwrap_or_else(|| panic!("no mss row:\n{text}"));
    assert!(row.contains("counting enabled"), "{row}");
    assert!(!row.contains("mss0") && !row.contains("mss1"), "{row}");
}

/// perf's `--timeout MSECS` (`perf stat --timeout 300 -- sleep 5`): the count stops
/// then, the command is ended with SIGTERM (perf says `sleep: Terminated`) and the
/// exit status is 0; a command that catches it ends as it chooses, and that is the
/// status; under 10 ms or with -I it is refused, as perf refuses it.
#[test]
fn timeout_ends_the_count_and_the_command_as_perfs_does() {
    let out = bfperf()
        .args(["--sim", "bf3", "stat", "--timeout", "300", "-j", "-o", "-"])
        .args(["-e", "mss0/SKYLIB_DDN_TX_FLITS/", "--", "sleep", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("'sleep 5' ended with SIGTERM at --timeout 300 ms"),
        "{err}"
    );
    let records = ndjson(&String::from_utf8(out.stdout).unwrap());
    let end = records.iter().find(|r| r["record"] == "end").unwrap();
    assert_eq!(end["ended_by_timeout"], true, "{end}");
    assert_eq!(end["exit_status"], 128 + 15, "{end}");
    let enabled = end["enabled_s"].as_f64().unwrap();
    // At 300 ms, not at the command's end (a loaded machine may wake it late).
    assert!((0.3..4.0).contains(&enabled), "{end}");
    let count = records
        .iter()
        .find(|r| r["event"] == "SKYLIB_DDN_TX_FLITS")
        .and_then(|r| r["value"].as_f64())
        .unwrap_or_else(|| panic!("{records:?}"));
    assert_rate(
        count / enabled,
        bf3_event_rate("mss0", "SKYLIB_DDN_TX_FLITS"),
        "mss0 until --timeout",
    );
    // A command that catches SIGTERM: its own status, nothing said of a timeout.
    let out = bfperf()
        .args(["--sim", "bf3", "stat", "--timeout", "200", "-j", "-o", "-"])
        .args(["-e", "mss0/SKYLIB_DDN_TX_FLITS/", "--", "sh", "-c"])
        .arg("trap 'kill $!; exit 3' TERM; sleep 5 >/dev/null 2>&1 & wait")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let records = ndjson(&String::from_utf8(out.stdout).unwrap());
    let end = records.iter().find(|r| r["record"] == "end").unwrap();
    assert_eq!(
        (&end["ended_by_timeout"], &end["exit_status"]),
        (&false.into(), &3.into())
    );
    // Refused before anything is counted.
    for (args, want) in [
        (
            vec!["--timeout", "5", "--", "true"],
            "--timeout must be at least 10 milliseconds",
        ),
        (
            vec!["--timeout", "1s", "--", "true"],
            "--timeout takes a whole number of milliseconds",
        ),
        (
            vec!["--timeout", "100", "-I", "100", "--", "true"],
            "'--timeout <MSECS>' cannot be used with '--interval-print <MS>'",
        ),
    ] {
        bfperf()
            .args(["--sim", "bf3", "stat"])
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(want));
    }
}

/// `-I` intervals of a command's perf events add up to its total, the first
/// interval holding what the command counted from its exec (in 3 of 8 runs of
/// `-I 500 -e page-faults,task-clock -- sleep 1.2` every interval read 0 and
/// 0.06 ms while the total said about 75 faults and 0.7 ms; perf's first interval
/// says 76-77). Five runs, each exact.
#[test]
fn intervals_of_a_commands_perf_events_add_up_to_its_total() {
    for _ in 0..5 {
        let out = stdout_of(bfperf().args([
            "--sim",
            "bf3",
            "stat",
            "-o",
            "-",
            "--json",
            "-I",
            "500",
            "-e",
            "page-faults,task-clock",
            "--",
            "sleep",
            "1.2",
        ]));
        let records = ndjson(&out);
        for event in ["page-faults", "task-clock"] {
            let of = |kind: &str| -> Vec<u64> {
                records
                    .iter()
                    .filter(|r| r["record"] == kind && r["event"] == event)
                    .map(|r| r["raw"].as_u64().unwrap())
                    .collect()
            };
            let (intervals, total) = (of("interval"), of("total"));
            assert_eq!(total.len(), 1, "{out}");
            assert_eq!(intervals.iter().sum::<u64>(), total[0], "{event}: {out}");
            assert!(
                intervals[0] > 0,
                "{event}: the exec's counts are lost: {out}"
            );
        }
    }
}
