//! What the exporter serves and how: the exposition promtool accepts, a real Prometheus's rates
//! against the simulator's, the shipped rules, alerts and dashboard, textfiles, the config,
//! the log and the usage errors.

use std::io::Read;
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use bfperf::collector::{self, Collector};
use bfperf::metrics::MetricSet;
use bfperf::sim::{Clock, Kernel, Sim};
use bfperf::Generation;
use predicates::prelude::*;

#[test]
fn the_exposition_passes_promtool_and_serves_only_metrics() {
    let Some((promtool, _)) = prometheus_tools() else {
        return;
    };
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"llt0/cycles,GDC_BANK0_RD_REQ/\", \"mss0/SKYLIB_DDN_TX_FLITS/\"]\nmetrics = [\"ddr\"]\nmetric_gauges = true\n");
    let (_e, port) = serve(&m, dir.path(), &cfg);
    // A metric gauge covers the time since the previous scrape: let it be a second
    // (the reads of one sweep take a few milliseconds over FUSE).
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (status, text) = get(port, "/metrics", "text/plain");
    assert!(status.contains("200"), "{status}");
    promtool_accepts(&promtool, &text);
    assert_eq!(sample(&text, "bfperf_up", &[]), 1.0);
    // The simulated PLL T1 runs at 2 GHz; the frequency is exported in hertz.
    assert_eq!(
        sample(&text, "bfperf_pll_frequency_hertz", &[("pll", "PLL_T1")]),
        2e9
    );
    // Base units in names, no unit label, no per-kind sum beside the blocks.
    // The simulator's memory reads miss the LLC at 8e9 × 0.25 B/s, over two mss.
    let ddr = sample(
        &text,
        "bfperf_metric_ddr_read_bandwidth_bytes_per_second",
        &[("block", "mss0"), ("kind", "mss")],
    );
    let truth = bf3_gb_per_s(&["mss0"], "SKYLIB_DDN_TX_FLITS");
    assert_rate(ddr / 1e9, truth, "mss0's exported DDR read bandwidth");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            !line.contains("unit=") && !line.contains("block=\"mss\""),
            "{line}"
        );
    }
    // Families sorted by name; the series in the same order every scrape.
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut sorted = families.clone();
    sorted.sort();
    assert_eq!(families, sorted);
    let series = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
            .collect()
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        series(&text),
        series(&get(port, "/metrics", "text/plain").1)
    );
    let (_, om) = get(
        port,
        "/metrics",
        "application/openmetrics-text; version=1.0.0",
    );
    assert!(
        om.ends_with("# EOF\n") && om.contains("# TYPE bfperf_cycles counter"),
        "{om}"
    );
    assert!(get(port, "/", "*/*").1.contains("/metrics"));
    assert!(get(port, "/other", "*/*").0.contains("404"));
}

#[test]
fn a_real_prometheus_scrapes_it_and_computes_the_simulators_rates() {
    let Some((_, prometheus)) = prometheus_tools() else {
        return;
    };
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"tile2/MEMORY_READS/\"]\n");
    let (_e, port) = serve(&m, dir.path(), &cfg);
    let (_p, prom_port) = scraping(&prometheus, dir.path(), port);
    // The simulator's rates, from the same model in process (same generation,
    // kernel, layout).
    let (model, _) = Sim::with_manual_clock(Generation::Bf2, Kernel::V6_16);
    let bytes_rate = model.register_rate("pcie0", "IN_P_BYTE_CNT").unwrap() as f64;
    let reads_rate = model.event_rate("tile2", 0x4c).unwrap() as f64;
    let series = [
        (
            "bfperf_register_bytes_total{block=\"pcie0\",register=\"IN_P_BYTE_CNT\"}",
            bytes_rate,
        ),
        (
            "bfperf_events_total{block=\"tile2\",event=\"MEMORY_READS\"}",
            reads_rate,
        ),
    ];
    // Fifteen scrapes in the last 15 s: the 12 s window is full and each counter has
    // counted for longer than a scrape before it (see [`RateWindow`]).
    let deadline = Instant::now() + Duration::from_secs(90);
    let full = |s: &str| {
        prometheus_query(prom_port, &format!("count_over_time({s}[15s])"))
            .is_some_and(|n| n >= 15.0)
    };
    while !series.iter().all(|(s, _)| full(s)) {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape the exporter fifteen times"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let instance = format!("127.0.0.1:{port}");
    for (s, want) in &series {
        // At the last scrape's stamp: the rate's window is the one the samples show.
        let at = prometheus_query(prom_port, &format!("timestamp({s})")).unwrap();
        let q = format!("rate({s}[12s])");
        let got = prometheus_query_at(prom_port, &q, Some(at))
            .unwrap_or_else(|| panic!("Prometheus has no value for {q}"));
        let window = RateWindow::at(prom_port, &instance, at);
        assert!(
            window.holds(got, *want),
            "{q}: Prometheus computed {got}, against the simulator's {want}: not within \
             what the scrapes' timing allows ({window:?})"
        );
    }
}

#[test]
fn textfiles_are_atomic_and_sigterm_leaves_no_temporary_file() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("textfiles");
    std::fs::create_dir(&out_dir).unwrap();
    let file = out_dir.join("bfperf.prom");
    let mut e = exporter(
        &m,
        &dir.path().join("lock"),
        &["--textfile", file.to_str().unwrap(), "--interval", "50ms"],
    );
    let start = Instant::now();
    while !file.exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "no textfile");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Whole every time: the last family (they are sorted) ends it, with its newline.
    // (Its number of lines may change: a metric without a value for one interval has
    // no sample in it.)
    let first = std::fs::read_to_string(&file).unwrap();
    let name = |line: Option<&str>| {
        line.and_then(|l| l.split(['{', ' ']).next())
            .unwrap_or_default()
            .to_string()
    };
    let last = name(first.lines().last());
    for i in 0..1000 {
        let t = std::fs::read_to_string(&file).unwrap();
        assert!(
            t.ends_with('\n') && name(t.lines().last()) == last && t.contains("\nbfperf_up 1"),
            "read {i}: a partial file\n{t}"
        );
    }
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    assert!(e.0.wait().unwrap().success());
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["bfperf.prom"]);
}

#[test]
fn running_totals_never_go_backwards_across_wraps_and_window_resets() {
    let Rig { sim, clock, device } = rig(Generation::Bf3);
    let config = counting("llt0/cycles,GDC_BANK0_RD_REQ/");
    let set = MetricSet::load(&[Generation::Bf3], &[]);
    let mut e = Collector::start(&device, &config, set, || 0).unwrap();
    let hz = sim.clock_hz("llt0").unwrap();
    let mut previous = 0.0;
    for s in 1..=10u64 {
        clock.advance_secs(1);
        e.scrape(s * 1_000_000_000).unwrap();
        let text = e.exposition(true, 0.0, collector::TextFormat::Text004);
        let cycles = sample(&text, "bfperf_cycles_total", &[("block", "llt0")]);
        assert!(cycles > previous, "went backwards at {s} s");
        assert_eq!(cycles, (hz * s) as f64, "at {s} s");
        previous = cycles;
    }
    assert!(
        previous > u32::MAX as f64 * 4.0,
        "wrapped a 32-bit counter several times"
    );
    e.stop().unwrap();
}

/// A sweep whose writes a busy machine delayed (its window's bounds not known to
/// 0.5 %: stat leaves such a window out) still moves the series: a sample that
/// stood a whole sweep behind its time would put a rate off by a whole interval.
#[test]
fn a_sweep_whose_writes_were_delayed_still_moves_the_series() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Rig { sim, clock, device } = rig(Generation::Bf3);
    let config = counting("mss0/SKYLIB_DDN_TX_FLITS/");
    let set = MetricSet::load(&[Generation::Bf3], &[]);
    // While `slow`, each reading of the clock finds it 20 ms on: every write the
    // sweep times took 20 ms, which bounds its window to 1 % only.
    let slow = Arc::new(AtomicBool::new(false));
    let stamp = {
        let (clock, slow) = (clock.clone(), slow.clone());
        move || {
            let t = clock.now_ns();
            if slow.load(Ordering::SeqCst) {
                clock.advance_ns(20_000_000);
            }
            t
        }
    };
    let mut e = Collector::start(&device, &config, set, stamp).unwrap();
    let rate = sim.event_rate("mss0", 0x1).unwrap() as f64;
    let mut previous = 0.0;
    for s in 1..=6u64 {
        clock.advance_secs(1);
        slow.store(s == 3, Ordering::SeqCst);
        let now = clock.now_ns();
        e.scrape(now).unwrap();
        let text = e.exposition(true, 0.0, collector::TextFormat::Text004);
        let got = sample(&text, "bfperf_events_total", &[("block", "mss0")]);
        // The count at a moment of the sweep's pass (from its time to the end of
        // its reads, as the exposition says), within what a bound known to 10 ms
        // either way makes of its scaling; never a sweep behind.
        let read = sample(&text, "bfperf_scrape_read_seconds", &[]);
        let (low, high) = (now as f64 / 1e9 - 0.02, now as f64 / 1e9 + read + 0.02);
        assert!(
            (rate * low..=rate * high).contains(&got),
            "at sweep {s}: {got}, the count of {low}..{high} s (it moved {} of {rate} a second)",
            got - previous
        );
        previous = got;
    }
    e.stop().unwrap();
}

#[test]
fn the_example_config_serves_what_promtool_accepts() {
    let Some((promtool, _)) = prometheus_tools() else {
        return;
    };
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exporter.example.toml");
    // Each generation's default set, with the same file and no edits.
    type Series<'a> = (&'a str, &'a [(&'a str, &'a str)]);
    let expect: [(&str, &[Series]); 3] = [
        (
            "1",
            &[
                (
                    "bfperf_events_total",
                    &[("block", "l3cache0half1"), ("event", "MISSES_BANK1")],
                ),
                (
                    "bfperf_events_total",
                    &[("block", "tile7"), ("event", "MEMORY_WRITES")],
                ),
                (
                    "bfperf_register_bytes_total",
                    &[("block", "pcie2"), ("register", "IN_P_BYTE_CNT")],
                ),
            ],
        ),
        (
            "2",
            &[
                (
                    "bfperf_events_total",
                    &[("block", "l3cachehalf1"), ("event", "HITS_BANK0")],
                ),
                (
                    "bfperf_events_total",
                    &[("block", "tile3"), ("event", "MEMORY_READS")],
                ),
                (
                    "bfperf_register_bytes_total",
                    &[("block", "pcie1"), ("register", "OUT_C_BYTE_CNT")],
                ),
            ],
        ),
        (
            "3",
            &[
                (
                    "bfperf_events_total",
                    &[("block", "mss1"), ("event", "SKYLIB_DDN_RX_FLITS")],
                ),
                (
                    "bfperf_events_total",
                    &[("block", "llt7"), ("event", "GDC_BANK1_WR_REQ")],
                ),
                (
                    "bfperf_events_total",
                    &[("block", "llt_miss0"), ("event", "GDC_MISS_MACHINE_RD_REQ")],
                ),
                ("bfperf_cycles_total", &[("block", "mss0")]),
                ("bfperf_pll_frequency_hertz", &[("pll", "PLL_N1")]),
            ],
        ),
    ];
    for (gen, series) in expect {
        let Some(m) = Mount::start(gen, "6.16") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (_e, port) = serve(&m, dir.path(), &example);
        // Every series has counted once a sweep after the first has read it.
        let deadline = Instant::now() + Duration::from_secs(30);
        let text = loop {
            let (_, text) = get(port, "/metrics", "text/plain");
            if series
                .iter()
                .all(|(name, labels)| sample(&text, name, labels) > 0.0)
            {
                break text;
            }
            assert!(
                Instant::now() < deadline,
                "bf{gen}: a series never counted: {text}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        promtool_accepts(&promtool, &text);
    }
}

#[test]
fn user_metrics_cannot_break_the_exposition() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.json");
    std::fs::write(
        &file,
        r#"[
  {"MetricName": "bad name", "MetricExpr": "MEMORY_READS", "Unit": "tile"},
  {"MetricName": "odd_help", "MetricExpr": "MEMORY_READS / duration_time",
   "BriefDescription": "line one\nline two \\ with a backslash\u0007", "Unit": "tile"}
]"#,
    )
    .unwrap();
    // A name Prometheus (and the formula parser) cannot take is refused, named.
    bfperf()
        .args(["--sim", "bf2", "--metrics"])
        .arg(&file)
        .args(["stat", "-o", "-", "-M", "bad name", "--duration", "10ms"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "metric 'bad name' ({})",
            file.display()
        )))
        .stderr(predicate::str::contains("not a usable name"));
    let Some((promtool, _)) = prometheus_tools() else {
        return;
    };
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let cfg = config(
        dir.path(),
        "metrics = [\"odd_help\"]\nmetric_gauges = true\n",
    );
    let (_e, port) = serve_with(&m, dir.path(), &cfg, &["--metrics", file.to_str().unwrap()]);
    let (_, text) = get(port, "/metrics", "text/plain");
    assert!(
        text.contains("# HELP bfperf_metric_odd_help line one\\nline two \\\\ with a backslash"),
        "{text}"
    );
    promtool_accepts(&promtool, &text);
    let (_, om) = get(
        port,
        "/metrics",
        "application/openmetrics-text; version=1.0.0",
    );
    assert!(om.contains("bfperf_metric_odd_help"), "{om}");
}

#[test]
fn the_shipped_rules_and_alerts_pass_promtool_and_stay_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = root.join("contrib/prometheus/bfperf.rules.yml");
    let made = stdout_of(bfperf().args(["metrics", "--all", "--format", "prometheus-rules"]));
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(
        text == made,
        "contrib/prometheus/bfperf.rules.yml is stale: bfperf metrics --all --format prometheus-rules > contrib/prometheus/bfperf.rules.yml"
    );
    let Some((promtool, _)) = prometheus_tools() else {
        return;
    };
    for args in [
        vec!["check", "rules", shipped.to_str().unwrap()],
        vec!["test", "rules", "rules.test.yml"],
        vec![
            "check",
            "rules",
            "../../contrib/prometheus/bfperf.alerts.yml",
        ],
        vec!["test", "rules", "alerts.test.yml"],
    ] {
        let out = Process::new(&promtool)
            .args(&args)
            .current_dir(root.join("tests/prometheus"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Two simulated DPUs (BlueField-2 and -3) with the example config, a real
/// Prometheus with the shipped rules: the rules' values are the metrics of the
/// simulator's exact counts (as [`crate::metrics`] checks them against its rates)
/// within what the scrapes' timing allows ([`RateWindow`]), and every query of the
/// dashboard returns data.
#[test]
fn prometheus_computes_the_metrics_with_the_shipped_rules_and_the_dashboard_has_data() {
    let Some((_, prometheus)) = prometheus_tools() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = root.join("docs/exporter.example.toml");
    let dir = tempfile::tempdir().unwrap();
    // (metric, block, of its kind, value, a ratio, which target)
    let mut want: Vec<(String, String, bool, f64, bool, usize)> = Vec::new();
    // Declared first, dropped last: the exporters stop before their mounts go.
    let mut mounts = Vec::new();
    let mut running = Vec::new();
    let mut targets = Vec::new();
    for (gen, generation, metrics) in [
        ("2", Generation::Bf2, "l3,memory,pcie"),
        ("3", Generation::Bf3, "ddr,llc"),
    ] {
        let Some(m) = Mount::start(gen, "6.16") else {
            return;
        };
        let lock = dir.path().join(format!("lock{gen}"));
        // The same model in process, counted on a manual clock: no timing error.
        for v in crate::metrics::exact(generation, metrics) {
            let (base, ratio) = match (v.value, v.unit.as_str()) {
                (Some(v), "GB/s") => (v * 1e9, false),
                (Some(v), "%") => (v / 100.0, true),
                _ => continue,
            };
            if v.of_kind || v.block == "pcie0" {
                want.push((v.metric, v.block, v.of_kind, base, ratio, targets.len()));
            }
        }
        let mut e = exporter(
            &m,
            &lock,
            &[
                "--config",
                example.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ],
        );
        let port = served_port(&mut e);
        running.push(e);
        targets.push(format!("127.0.0.1:{port}"));
        mounts.push(m);
    }
    // rate() divides by its whole range: the shipped rules (1m) are right after a
    // minute of scrapes; the comparison uses the same rules over 12 s.
    let short = dir.path().join("short.rules.yml");
    std::fs::write(
        &short,
        stdout_of(bfperf().args([
            "metrics",
            "--all",
            "--format",
            "prometheus-rules",
            "--window",
            "12s",
        ])),
    )
    .unwrap();
    let prom_cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n  - {}\nscrape_configs:\n  - job_name: bfperf\n    static_configs:\n      - targets: [{}]\n",
            root.join("contrib/prometheus/bfperf.rules.yml").display(),
            short.display(),
            targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ")
        ),
    )
    .unwrap();
    let mut _p = Running(
        Process::new(prometheus)
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let prom_port = prometheus_port(&mut _p);
    let rule = |name: &str, block: &str, kind_level: bool| {
        let base = name
            .replace("_bandwidth", "_bandwidth_bytes_per_second")
            .replace("_bytes_per_second_bytes_per_second", "_bytes_per_second");
        match kind_level {
            true => format!("kind:bfperf_{base}:rate12s{{kind=\"{block}\"}}"),
            false => format!("block:bfperf_{base}:rate12s{{block=\"{block}\"}}"),
        }
    };
    // Wait until every rule has a window full of scrapes behind it where its
    // windows are read, 3 s back (RateWindow::candidates).
    let deadline = Instant::now() + Duration::from_secs(120);
    let full = || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let q = "min(count_over_time(bfperf_up[15s]))";
        prometheus_query_at(prom_port, q, Some(now - 3.0)).is_some_and(|n| n >= 15.0)
    };
    while !full() {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape both exporters"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(want.len() >= 10, "{want:?}");
    for (name, block, kind_level, expected, ratio, target) in &want {
        let q = rule(name, block, *kind_level);
        // At an evaluation of the rule: the windows its rates may have taken.
        let (at, windows) = RateWindow::candidates(prom_port, &targets[*target], &q);
        let got = prometheus_query_at(prom_port, &q, Some(at)).unwrap();
        // Shown with --nocapture: how close each rule came, and the bounds.
        eprintln!("{q}: {:.5} of the truth, {windows:?}", got / expected);
        let holds = |w: &RateWindow| match ratio {
            true => w.holds_for_ratio(got, *expected),
            false => w.holds(got, *expected),
        };
        assert!(
            windows.iter().any(holds),
            "{q}: Prometheus computed {got}, against the simulator's {expected}: not \
             within what the scrapes' timing allows ({windows:?})"
        );
    }
    // The dashboard: every query returns data, its variables standing for everything.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("contrib/grafana/bfperf.json")).unwrap(),
    )
    .unwrap();
    let mut queries: Vec<String> = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            queries.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]["query"].as_str() {
            // label_values(SELECTOR, label): the selector must select something.
            let inner = q
                .trim_start_matches("label_values(")
                .rsplit_once(',')
                .unwrap()
                .0;
            queries.push(inner.to_string());
        }
    }
    assert!(queries.len() >= 15, "{queries:?}");
    for q in queries {
        let q = q
            .replace("$instance", ".+")
            .replace("$block", ".+")
            .replace("$__rate_interval", "1m");
        // A scrape a loaded machine let time out leaves a moment with no sample:
        // each query must return series, within a deadline.
        let deadline = Instant::now() + Duration::from_secs(60);
        while prometheus_series(prom_port, &q) == 0 {
            assert!(
                Instant::now() < deadline,
                "the dashboard's {q} returns no data"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[test]
fn a_perf_event_in_the_config_is_refused_not_taken_for_a_blocks_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"cycles\"]\nstrict = true\n");
    bfperf()
        .args(["--sim", "bf3", "exporter", "--config"])
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0"])
        .timeout(std::time::Duration::from_secs(10))
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "cycles is a perf event of the Arm cores, which the exporter does not count",
        ));
}

/// `listen` and `web_config_file` in the config serve as the flags would (the web
/// config relative to the config's directory); a flag wins over the config; a bad
/// address is refused before the device is touched.
#[test]
fn the_config_says_where_and_how_to_serve() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(
        dir.path().join("web.yml"),
        format!("basic_auth_users:\n  alice: {hash}\n"),
    )
    .unwrap();
    // Another loopback address in the config, so that --listen's can be told apart.
    let cfg = config(
        dir.path(),
        "events = [\"tile2/MEMORY_READS/\"]\nlisten = \"127.0.0.2:0\"\nweb_config_file = \"web.yml\"\n",
    );
    let c = Copy::of("bf2");
    let run = |extra: &[&str]| {
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(c.root())
            .arg("--lock-file")
            .arg(dir.path().join("lock"))
            .args(["exporter", "--config"])
            .arg(&cfg)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut e = Running(run(&[]));
    let at = served_at(&mut e).unwrap();
    assert!(at.starts_with("127.0.0.2:"), "{at}");
    let url = format!("http://{at}/metrics");
    assert_eq!(curl_status(&url, &[]), "401");
    assert_eq!(curl_status(&url, &["-u", "alice:s3cret"]), "200");
    drop(e);
    // --listen wins over the config.
    let mut e = Running(run(&["--listen", "127.0.0.1:0"]));
    let other = served_at(&mut e).unwrap();
    assert!(other.starts_with("127.0.0.1:"), "{other}");
    assert_eq!(
        curl_status(&format!("http://{other}/metrics"), &["-u", "alice:s3cret"]),
        "200"
    );
    drop(e);
    // A bad address in the config: refused, nothing written.
    let before = c.contents();
    std::fs::write(&cfg, "listen = \"localhost\"\n").unwrap();
    let out = run(&[]).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("listen in the config") && err.contains("'localhost'"),
        "{err}"
    );
    assert_eq!(before, c.contents());
}

/// A config that is not TOML is refused at start (and on reload, by the same
/// reading) with where the mistake is: its line and column.
#[test]
fn a_config_that_is_not_toml_is_refused_with_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "listen = \"127.0.0.1:1\"\nevents = [\"a\" \"b\"]\n",
    );
    bfperf()
        .args(["--sim", "bf2", "exporter", "--config"])
        .arg(&cfg)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "not an exporter config: line 2, column 15: missing comma between array elements",
        ));
}

/// The dashboard asks for its Prometheus on import (`__inputs`, which the data
/// source variable starts on), and a panel links down to a DPU only when each of its
/// queries keeps the `instance` label: one that sums it away would open the DPU view
/// with none chosen.
#[test]
fn the_dashboard_asks_for_its_data_source_and_drills_down_only_from_per_dpu_series() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/grafana/bfperf.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let inputs = dash["__inputs"].as_array().expect("no __inputs");
    assert!(
        inputs
            .iter()
            .any(|i| i["type"] == "datasource" && i["pluginId"] == "prometheus"),
        "{inputs:?}"
    );
    let ds = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["type"] == "datasource")
        .unwrap();
    assert_eq!(ds["current"]["value"], "${DS_PROMETHEUS}");
    // Aggregations that keep only their `by` labels (topk and bottomk keep all).
    let dropping = ["sum", "count", "avg", "max", "min", "quantile"];
    let mut linked = 0;
    for p in dash["panels"].as_array().unwrap() {
        let links = p["fieldConfig"]["defaults"]["links"].as_array();
        let drills = links.is_some_and(|l| {
            l.iter()
                .any(|l| l["url"].as_str().unwrap_or("").contains("var-instance"))
        });
        if !drills {
            continue;
        }
        linked += 1;
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let drops = dropping.iter().any(|a| {
                expr.starts_with(&format!("{a}(")) || expr.starts_with(&format!("{a} by"))
            });
            assert!(
                !drops,
                "{}: {expr} drops instance but links to a DPU",
                p["title"]
            );
        }
    }
    assert!(linked >= 4, "{linked} panels drill down");
}

/// `bfperf exporter` runs bfperf-exporter with the same words, the global options
/// before `exporter` (and their values, even one that reads `exporter`) included:
/// the one beside bfperf first, then PATH's; without either, it says what it
/// looked for and exits 1.
#[test]
fn bfperf_exporter_runs_the_exporters_own_program_with_the_same_words() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("alone");
    std::fs::create_dir(&alone).unwrap();
    crate::support::copy_program(
        assert_cmd::cargo::cargo_bin!("bfperf"),
        &alone.join("bfperf"),
    );
    let o = Process::new(alone.join("bfperf"))
        .args(["--sim", "bf3", "exporter", "--version"])
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot run bfperf-exporter"), "{err}");
    // Found on PATH, when not beside it.
    let both = dir.path().join("both");
    std::fs::create_dir(&both).unwrap();
    let both_bfperf = installed(&both);
    let o = Process::new(alone.join("bfperf"))
        .args(["exporter", "--version"])
        .env("PATH", &both)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("bfperf-exporter "), "{o:?}");
    // The global options reach it: a textfile of a BlueField-3 tree, its lock where
    // --lock-file says (a file named `exporter`).
    let c = Copy::of("bf3");
    let textfile = dir.path().join("m.prom");
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let mut e = Running(
        Process::new(both_bfperf)
            .arg("--sysfs-root")
            .arg(c.root())
            .arg("--lock-file")
            .arg(dir.path().join("exporter"))
            .args(["exporter", "--config"])
            .arg(&cfg)
            .arg("--textfile")
            .arg(&textfile)
            .args(["--interval", "1s"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // It says it writes the textfile before it writes it the first time.
    announced(&mut e, "the exporter", |line| {
        line.contains("writing").then(String::new)
    })
    .unwrap_or_else(|why| panic!("{why}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !textfile.exists() {
        assert!(Instant::now() < deadline, "no textfile: {}", said(&e));
        assert!(
            e.0.try_wait().unwrap().is_none(),
            "the exporter ended: {}",
            said_to_end(&e)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(&textfile).unwrap();
    assert!(text.contains("generation=\"BlueField-3\""), "{text}");
    assert!(dir.path().join("exporter").exists(), "{}", said(&e));
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    assert!(e.0.wait().unwrap().success(), "{}", said(&e));
}

/// What every exporter has: `--version`; the process collector's `process_*`
/// series, right for this process; gzip for a scraper that asks for it (and not for
/// one that refuses it).
#[test]
fn the_basics_every_exporter_has() {
    let version = stdout_of(bfperf().args(["exporter", "--version"]));
    let first = format!("bfperf-exporter {} (revision: ", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&first), "{version}");
    for field in ["build date:", "rust version:", "platform:     linux/"] {
        assert!(version.contains(field), "{version}");
    }
    let revision = version[first.len()..].split(')').next().unwrap();
    assert!(
        revision.len() == 12 && revision.chars().all(|c| c.is_ascii_hexdigit())
            || revision == "unknown",
        "{version}"
    );
    let Some((_m, _dir, e, port)) = default_exporter() else {
        return;
    };
    let raw = |encoding: &str| -> (String, Vec<u8>) {
        let (head, body) = get_with(port, "/metrics", &format!("Accept-Encoding: {encoding}"));
        (head.to_ascii_lowercase(), body)
    };
    let (head, body) = raw("gzip");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let mut text = String::new();
    flate2::read::GzDecoder::new(body.as_slice())
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(sample(&text, "bfperf_up", &[]), 1.0, "{text}");
    let (head, body) = raw("gzip;q=0, identity");
    assert!(!head.contains("content-encoding"), "{head}");
    let text = String::from_utf8(body).unwrap();
    let pid = e.0.id();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as f64;
    let open = sample(&text, "process_open_fds", &[]);
    assert!(
        (open - fds).abs() <= 4.0,
        "process_open_fds {open}; /proc says {fds}"
    );
    let rss = sample(&text, "process_resident_memory_bytes", &[]);
    assert!(rss > 1e6 && rss < 1e9, "{rss}");
    assert!(sample(&text, "process_max_fds", &[]) >= open);
    assert!(
        text.contains("# TYPE process_cpu_seconds_total counter"),
        "{text}"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = sample(&text, "process_start_time_seconds", &[]);
    assert!(
        started <= now && started > now - 600.0,
        "{started}, now {now}"
    );
    let build = text
        .lines()
        .find(|l| l.starts_with("bfperf_build_info{"))
        .unwrap_or_else(|| panic!("{text}"));
    for label in ["version=\"", "revision=\"", "rustversion=\"1."] {
        assert!(build.contains(label), "{build}");
    }
}

/// The exporter's log as Prometheus' exporters write theirs: logfmt or JSON lines,
/// each with time, level and message; `--log.level` leaves out what is below it;
/// under journald (its `JOURNAL_STREAM` names standard error) the time is left to it.
#[test]
fn the_log_is_logfmt_or_json_with_levels_and_no_time_under_journald() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, args: &[&str], journal: bool| -> String {
        let log = dir.path().join(name);
        let file = std::fs::File::create(&log).unwrap();
        let md = file.metadata().unwrap();
        let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
        cmd.args(["--sim", "bf3", "--lock-file"])
            .arg(dir.path().join(format!("{name}.lock")))
            .args(["exporter", "--textfile"])
            .arg(dir.path().join(format!("{name}.prom")))
            .args(["--interval", "1s"])
            .args(args)
            .env_remove("JOURNAL_STREAM")
            .stderr(file);
        if journal {
            cmd.env("JOURNAL_STREAM", format!("{}:{}", md.dev(), md.ino()));
        }
        let mut e = Running(cmd.spawn().unwrap());
        let prom = dir.path().join(format!("{name}.prom"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !prom.exists() {
            assert!(Instant::now() < deadline, "no textfile");
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: signals our own child.
        unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
        e.0.wait().unwrap();
        std::fs::read_to_string(&log).unwrap()
    };
    let json = run("json", &["--log.format", "json"], false);
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.len() >= 2, "{json}");
    for l in &lines {
        assert!(
            l["time"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z') && t.len() == 24),
            "{l}"
        );
        assert!(
            ["info", "warn"].contains(&l["level"].as_str().unwrap()),
            "{l}"
        );
        assert!(l["msg"].is_string(), "{l}");
    }
    assert!(json.contains("writing "), "{json}");
    let logfmt = run("logfmt", &[], false);
    let first = logfmt.lines().next().unwrap();
    assert!(
        first.starts_with("time=") && first.contains(" level=info msg=\""),
        "{logfmt}"
    );
    let quiet = run("warn", &["--log.level", "warn"], false);
    assert!(!quiet.contains("level=info"), "{quiet}");
    let journald = run("journal", &[], true);
    assert!(
        journald.lines().all(|l| l.starts_with("level=")),
        "{journald}"
    );
    // An error is logged at level error (a missing config was logged at info).
    let out = crate::support::exporter_of(&dir.path().join("no-such.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains(" level=error msg=\"cannot read the configuration file")),
        "{err}"
    );
}

/// `--listen 127.0.0.1:0` takes a port the kernel chooses and says which, so that a
/// server needs no port found free beforehand (which another can take first).
#[test]
fn an_exporter_on_port_0_says_the_port_it_took_and_serves_there() {
    use std::io::BufRead;
    let mut child = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .args(["--sim", "bf3", "exporter", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let port: u16 = loop {
        let line = lines
            .next()
            .expect("the exporter ended before serving")
            .unwrap();
        if let Some(rest) = line.split("serving http://127.0.0.1:").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    let e = Running(child);
    assert_ne!(port, 0);
    let (status, body) = get(port, "/metrics", "text/plain");
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("bfperf_up 1"), "{body}");
    drop(e);
}

/// Each scrape says how late its values are against the time Prometheus stamps
/// them with (the request's): the lag from the request to the sweep's first read
/// and the span of its reads, both within the request's own round trip.
#[test]
fn a_scrape_says_how_late_its_values_are() {
    let Some((_m, _dir, _e, port)) = default_exporter() else {
        return;
    };
    for _ in 0..5 {
        let asked = Instant::now();
        let (_, body) = get(port, "/metrics", "text/plain");
        let round_trip = asked.elapsed().as_secs_f64();
        let lag = sample(&body, "bfperf_scrape_lag_seconds", &[]);
        let read = sample(&body, "bfperf_scrape_read_seconds", &[]);
        assert!(
            lag > 0.0 && read > 0.0 && lag + read <= round_trip,
            "lag {lag} s and reads {read} s in a request of {round_trip} s"
        );
        // Apart by more than the exporter shares one sweep among scrapes.
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The exporter's usage errors are lines of its log, as its other errors are: one
/// JSON or logfmt line at level error (they were clap's plain lines), exit 2.
#[test]
fn usage_errors_are_log_lines_in_the_format_asked() {
    for (args, format) in [
        (&["--log.format", "json", "--interval", "xyz"][..], "json"),
        (&["--log.format=json", "--nosuch"][..], "json"),
        (&["--nosuch"][..], "logfmt"),
    ] {
        let o = bfperf()
            .args(["--sim", "bf3", "exporter"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        match format {
            "json" => {
                let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
                assert_eq!(v["level"], "error", "{err}");
                assert!(v["msg"].as_str().unwrap().contains("--help"), "{err}");
            }
            _ => assert!(lines[0].contains("level=error msg=\""), "{err}"),
        }
    }
    // Another command's usage errors stay clap's.
    let o = bfperf().args(["stat", "--nosuch"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: unexpected argument"));
}
