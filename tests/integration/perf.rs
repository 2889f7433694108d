//! perf_event events beside the blocks: perf's generic names and sysfs PMUs, counted
//! in the same window as the hwmon counters. Hardware events may be missing here (a
//! virtual machine): exact checks use software events, and a hardware event must show
//! `<not supported>` without failing the run.

use crate::support::*;

/// The `total` record of `event` in a run's NDJSON records.
fn total_of(records: &[serde_json::Value], event: &str) -> serde_json::Value {
    records
        .iter()
        .find(|r| r["record"] == "total" && r["event"] == event)
        .unwrap_or_else(|| panic!("no {event}: {records:?}"))
        .clone()
}

#[test]
fn cpu_clock_and_a_tile_count_share_one_window() {
    let mut out = sim_stat("bf2");
    out.args(["--json", "--duration", "600ms"]).args([
        "-e",
        "cpu-clock",
        "-e",
        "tile/MEMORY_READS/",
        "-e",
        "cycles",
    ]);
    let records = ndjson(&stdout_of(&mut out));
    let total = |event: &str| total_of(&records, event);
    let clock = total("cpu-clock");
    let secs = clock["time_s"].as_f64().unwrap();
    // System-wide, cpu-clock is every online CPU's time over the window.
    let ns = clock["value"].as_f64().unwrap();
    let want = online_cpus() * secs * 1e9;
    assert!(
        ((ns - want) / want).abs() < 0.05,
        "cpu-clock {ns} vs {want}"
    );
    assert_eq!(clock["kind"], "perf");
    // The tiles over the same window, from the simulator's rates.
    let rate = bf2_tile_read_rate();
    let reads = total("MEMORY_READS")["value"].as_f64().unwrap();
    assert_rate(reads / secs, rate, "MEMORY_READS per second");
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

/// A PMU tree under ROOT/bus/event_source/devices/NAME: its type, two formats and
/// one event, `l2_refill`.
fn fake_pmu(root: &std::path::Path, name: &str, type_: u32) {
    let pmu = root.join("bus/event_source/devices").join(name);
    std::fs::create_dir_all(pmu.join("format")).unwrap();
    std::fs::create_dir_all(pmu.join("events")).unwrap();
    std::fs::write(pmu.join("type"), format!("{type_}\n")).unwrap();
    std::fs::write(pmu.join("format/event"), "config:0-7,32-35\n").unwrap();
    std::fs::write(pmu.join("format/umask"), "config:8-15\n").unwrap();
    std::fs::write(pmu.join("events/l2_refill"), "event=0x1ab,umask=0x3\n").unwrap();
}

/// stat and top read a PMU's files only when an event names that PMU: a block's
/// events and perf's generic names open nothing in any PMU's directory (an Arm
/// core's PMU has a file per event, an x86 server's uncore PMUs hundreds), and
/// `fakepmu/l2_refill/` opens fakepmu's alone. strace sees every open.
#[test]
fn stat_reads_only_the_pmus_its_events_name() {
    let copy = Copy::of("bf2");
    fake_pmu(copy.root(), "fakepmu", 4000);
    fake_pmu(copy.root(), "otherpmu", 4001);
    let opened = |args: &[&str]| -> Option<Vec<String>> {
        let opens = opens_of(&copy, args, "the PMU-reading test")?;
        Some(
            opens
                .into_iter()
                .filter(|l| l.contains("/bus/event_source/devices/"))
                .collect(),
        )
    };
    let stat = ["stat", "-o", "/dev/null", "--duration", "100ms"];
    let Some(blocks) = opened(
        &[
            &stat[..],
            &["-e", "tile0/MEMORY_READS/", "-e", "task-clock"],
        ]
        .concat(),
    ) else {
        return;
    };
    assert!(blocks.is_empty(), "{blocks:#?}");
    let named = opened(
        &[
            &stat[..],
            &["-e", "tile0/MEMORY_READS/", "-e", "fakepmu/l2_refill/"],
        ]
        .concat(),
    )
    .unwrap();
    assert!(
        named.iter().any(|l| l.contains("/devices/fakepmu/type")),
        "{named:#?}"
    );
    assert!(
        !named.iter().any(|l| l.contains("/devices/otherpmu/")),
        "{named:#?}"
    );
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
    let pmus = bfperf::perf::discover(root.path());
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
    let shown = stdout_of(copy.cmd().args([
        "stat",
        "-o",
        "-",
        "-e",
        "fakepmu/l2_refill/",
        "--duration",
        "100ms",
    ]));
    assert!(shown.contains("<not supported>"), "{shown}");
    // An event the PMU lacks is refused before anything is written to the device.
    let before = copy.contents();
    copy.cmd()
        .args([
            "stat",
            "-o",
            "-",
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

fn total<'a>(records: &'a [serde_json::Value], field: &str, name: &str) -> &'a serde_json::Value {
    records
        .iter()
        .find(|r| (r["record"] == "total" || r["record"] == "metric") && r[field] == name)
        .unwrap_or_else(|| panic!("no {name}: {records:?}"))
}

#[test]
fn per_process_counts_the_command_tree_from_its_exec() {
    // bash burns CPU itself and in a child, then says both CPU times (`times`).
    let script = "burn() { i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; }; \
                  (burn); burn; times >&2";
    let out = sim_stat("bf2")
        .args(["--json", "--per-process"])
        .args(["-e", "task-clock", "-e", "tile/MEMORY_READS/"])
        .args(["--", "bash", "-c", script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // `times`: the shell's user and system time, then its children's.
    let cpu_s: f64 = stderr
        .lines()
        .filter(|l| l.contains("m0") || l.contains('m'))
        .flat_map(|l| l.split_whitespace())
        .filter_map(|t| {
            let (m, s) = t.strip_suffix('s')?.split_once('m')?;
            Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
        })
        .sum();
    let records = ndjson(&String::from_utf8(out.stdout).unwrap());
    let clock = total(&records, "event", "task-clock");
    let counted_s = clock["value"].as_f64().unwrap() / 1e9;
    // The clock ticks `times` counts in are 10 ms: a tolerance of 15 % and 30 ms.
    assert!(
        (counted_s - cpu_s).abs() < 0.15 * cpu_s + 0.03,
        "task-clock {counted_s} s, the shell says {cpu_s} s"
    );
    assert!(cpu_s > 0.1, "the burn was too short to tell: {stderr}");
    // The blocks over the same window, from the simulator's rates.
    let secs = clock["time_s"].as_f64().unwrap();
    let reads = total(&records, "event", "MEMORY_READS")["value"]
        .as_f64()
        .unwrap();
    let rate = bf2_tile_read_rate();
    assert!(
        ((reads / secs - rate) / rate).abs() < 0.03,
        "{reads} in {secs} s vs {rate}/s"
    );
}

#[test]
fn a_metric_mixes_a_perf_event_with_block_events() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mixed.json");
    std::fs::write(
        &file,
        r#"[
  {"MetricName": "reads_per_cpu_second", "MetricExpr": "MEMORY_READS / perf@cpu-clock@ * 1e9",
   "Unit": "tile", "MetricGroup": "mixed"},
  {"MetricName": "cpus_busy_or_idle", "MetricExpr": "perf@cpu-clock@ / duration_time / 1e9",
   "Unit": "perf", "MetricGroup": "mixed"}
]"#,
    )
    .unwrap();
    let records = ndjson(&stdout_of(
        bfperf()
            .args(["--sim", "bf2", "--metrics"])
            .arg(&file)
            .args([
                "stat",
                "-o",
                "-",
                "--json",
                "-M",
                "mixed",
                "--duration",
                "500ms",
            ]),
    ));
    // System-wide cpu-clock is every online CPU's time: reads per CPU-second is the
    // tiles' rate shared among the CPUs.
    let mixed = total(&records, "metric", "reads_per_cpu_second")["value"]
        .as_f64()
        .unwrap();
    let want = bf2_tile_read_rate() / online_cpus();
    assert!(((mixed - want) / want).abs() < 0.05, "{mixed} vs {want}");
    let n = total(&records, "metric", "cpus_busy_or_idle")["value"]
        .as_f64()
        .unwrap();
    assert!(
        (n - online_cpus()).abs() / online_cpus() < 0.05,
        "{n} vs {} CPUs",
        online_cpus()
    );
}

#[test]
fn ipc_beside_cycles_and_instructions_is_a_value_or_says_why_not() {
    let records = ndjson(&stdout_of(
        sim_stat("bf3")
            .args(["--json", "-e", "cycles,instructions"])
            .args(["-M", "ddr", "--", "sleep", "0.2"]),
    ));
    // perf's "insn per cycle" comes with the two events, beside the DDR bandwidth.
    let ipc = total(&records, "metric", "ipc");
    let count = |e: &str| total(&records, "event", e)["value"].as_f64();
    match (count("instructions"), count("cycles")) {
        (Some(i), Some(c)) => {
            let v = ipc["value"].as_f64().unwrap();
            assert!((v - i / c).abs() < 1e-6 * v.abs().max(1.0), "{ipc}");
        }
        _ => {
            assert!(ipc["value"].is_null(), "{ipc}");
            assert!(
                ipc["reason"].as_str().unwrap().contains("not supported"),
                "{ipc}"
            );
        }
    }
    // The DDR bandwidth beside them: a value, or (its only window's bounds left
    // unknown by a machine too busy, as under emulation) marked with why.
    let ddr = total(&records, "metric", "ddr_bandwidth");
    assert!(
        ddr["value"].as_f64().is_some() || ddr["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{ddr}"
    );
}

#[test]
fn a_metric_naming_a_pmu_the_machine_lacks_is_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pmu.json");
    std::fs::write(
        &file,
        r#"[{"MetricName": "l2_mpki", "MetricExpr": "nosuchpmu@l2d_cache_refill@ / instructions * 1000",
            "Unit": "perf"}]"#,
    )
    .unwrap();
    let copy = Copy::of("bf2");
    let before = copy.contents();
    copy.cmd()
        .arg("--metrics")
        .arg(&file)
        .args([
            "stat",
            "-o",
            "-",
            "-M",
            "l2_mpki",
            "-e",
            "tile/MEMORY_READS/",
        ])
        .args(["--duration", "100ms"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("no PMU named 'nosuchpmu'"));
    assert_eq!(before, copy.contents());
}

#[test]
fn perf_csv_names_perf_events_as_perf_does() {
    let out = stdout_of(
        sim_stat("bf2")
            .args(["-a", "-x,", "-e", "cpu-clock,cycles"])
            .args(["-e", "tile/MEMORY_READS/", "--", "sleep", "0.1"]),
    );
    let fields = |event: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .find(|f| f[2] == event)
            .unwrap_or_else(|| panic!("no {event}:\n{out}"))
    };
    // In milliseconds, as perf prints cpu-clock: with -a, every CPU's clock over
    // the 0.1 s.
    assert_eq!(fields("cpu-clock")[1], "msec", "{out}");
    let clock_ms: f64 = fields("cpu-clock")[0].parse().unwrap();
    assert!(clock_ms > 95.0 * online_cpus(), "{out}");
    assert!(clock_ms < 1000.0 * online_cpus(), "{out}");
    let cycles = &fields("cycles")[0];
    assert!(
        cycles == "<not supported>" || cycles.parse::<u64>().is_ok(),
        "{out}"
    );
    assert!(fields("tile/MEMORY_READS/")[0].parse::<u64>().unwrap() > 0);
}

/// perf's -p: the perf events of a process already running (its CPU time, here a
/// busy loop's), until it ends; the blocks as always. perf's -C: perf events on
/// those CPUs only. A process that is not there, or CPUs that are not online, are
/// refused before anything is written.
#[test]
fn p_counts_a_running_process_until_it_ends_and_c_chooses_cpus() {
    let mut busy = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = busy.id().to_string();
    let mut cmd = sim_stat("bf2");
    cmd.args(["--json", "--duration", "400ms", "-p", &pid])
        .args(["-e", "task-clock", "-e", "tile/MEMORY_READS/"]);
    let records = ndjson(&stdout_of(&mut cmd));
    let _ = busy.kill();
    let _ = busy.wait();
    let total = |event: &str| total_of(&records, event);
    let secs = total("task-clock")["time_s"].as_f64().unwrap();
    // A busy loop runs all of the window, less what other work took of its core.
    let ms = total("task-clock")["value"].as_f64().unwrap() / 1e6;
    assert!(
        ms > 0.0 && ms <= secs * 1000.0 * 1.01,
        "{ms} ms in {secs} s"
    );
    let reads = total("MEMORY_READS")["value"].as_f64().unwrap();
    assert_rate(reads / secs, bf2_tile_read_rate(), "MEMORY_READS beside -p");
    // It ends with the process.
    let mut short = std::process::Command::new("sleep")
        .arg("0.3")
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    sim_stat("bf2")
        .args(["-p", &short.id().to_string(), "-e", "task-clock"])
        .assert()
        .success();
    let _ = short.wait();
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        t.elapsed()
    );
    sim_stat("bf2")
        .args(["-p", "999999999", "-e", "task-clock"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("-p 999999999: no such process"));
    // -C: system-wide perf events on one CPU.
    let out = sim_stat("bf2")
        .args(["-C", "0", "-e", "cpu-clock", "--duration", "300ms"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("perf events system-wide, 1 CPU:"), "{text}");
    sim_stat("bf2")
        .args(["-C", "4096", "-e", "cpu-clock", "--duration", "100ms"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "-C 4096: CPU 4096 not online here",
        ));
}
