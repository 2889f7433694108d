//! The exporter: its exposition passes promtool; a real Prometheus on loopback
//! scrapes it and computes the simulator's rates; textfile mode is atomic and leaves
//! no temporary file; the writer lock, the restore and the re-programming; running
//! totals that never go backwards across wraps and window resets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use bfperf::collector::{self, Collector};
use bfperf::metrics::MetricSet;
use bfperf::sim::{Clock, Kernel, Sim};
use bfperf::Generation;
use predicates::prelude::*;

/// promtool and prometheus, or None (after saying why) where they are missing and
/// not required (`BFPERF_REQUIRE`, see `common::required`).
pub(crate) fn prometheus_tools() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        ["/usr/bin", "/usr/local/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.exists())
    };
    match (find("promtool"), find("prometheus")) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => {
            let why = Err("promtool or prometheus is not installed".to_string());
            required("prometheus", "the Prometheus tests", why);
            None
        }
    }
}

/// Asserts that promtool accepts an exposition.
fn promtool_accepts(promtool: &Path, text: &str) {
    let mut check = Process::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An exporter on a mount with a config, serving on the port it bound (port 0) and
/// said.
pub(crate) fn serve(m: &Mount, dir: &Path, config: &Path) -> (Running, u16) {
    serve_with(m, dir, config, &[])
}

/// As [`serve`], with more of the exporter's arguments.
fn serve_with(m: &Mount, dir: &Path, config: &Path, more: &[&str]) -> (Running, u16) {
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(more);
    let mut e = exporter(m, &dir.join("lock"), &args);
    let port = served_port(&mut e);
    (e, port)
}

/// A connection to `port` on loopback, retried while it is refused (a server not
/// yet listening on a busy machine), for 30 s at most; its reads time out after 20 s.
pub(crate) fn connect(port: u16) -> TcpStream {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("connecting to 127.0.0.1:{port}: {e}"),
        }
    }
}

/// A plain HTTP/1.0 GET on loopback; returns (status line, body).
pub(crate) fn get(port: u16, path: &str, accept: &str) -> (String, String) {
    let (head, body) = get_with(port, path, &format!("Accept: {accept}"));
    (
        head.lines().next().unwrap_or("").to_string(),
        String::from_utf8(body).unwrap(),
    )
}

/// A plain HTTP/1.0 GET on loopback with one more `header` line; returns the
/// response's head (status line and headers) and its body's bytes.
fn get_with(port: u16, path: &str, header: &str) -> (String, Vec<u8>) {
    let mut s = connect(port);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{header}\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n");
    let (head, body) = at.map_or((&all[..], &[][..]), |at| (&all[..at], &all[at + 4..]));
    (String::from_utf8_lossy(head).into_owned(), body.to_vec())
}

/// How soon the exporter answers when nothing holds it up: a second, five under
/// user-mode emulation, where every process runs about ten times slower (a bound on
/// latency, never on a figure; what holds it up takes tens of seconds).
fn prompt() -> Duration {
    match emulated() {
        true => Duration::from_secs(5),
        false => Duration::from_secs(1),
    }
}

pub(crate) struct Running(pub(crate) Child);

/// What a server's standard error said, kept by the thread that reads it, by pid
/// ([`announced`]), for [`said`] and for its drop to show.
struct Tee {
    said: Arc<std::sync::Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

static TEES: std::sync::Mutex<std::collections::BTreeMap<u32, Tee>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The address exporter `e` serves on, as its `serving http://ADDRESS/metrics`
/// line says (it binds port 0 itself: no port is chosen here and released).
pub(crate) fn served_at(e: &mut Running) -> Result<String, String> {
    announced(e, "the exporter", |line| {
        line.split_once("serving http")
            .and_then(|(_, r)| r.split_once("://"))
            .and_then(|(_, r)| r.split_once("/metrics"))
            .map(|(a, _)| a.to_string())
    })
}

/// The port exporter `e` serves on ([`served_at`]); panics with what it said when
/// it never serves.
pub(crate) fn served_port(e: &mut Running) -> u16 {
    port_of(&served_at(e).unwrap_or_else(|why| panic!("{why}")))
}

/// A real Prometheus scraping the exporter on `port` every second, its data in
/// `dir`: the running Prometheus and the port it answers queries on.
pub(crate) fn scraping(prometheus: &Path, dir: &Path, port: u16) -> (Running, u16) {
    let prom_cfg = dir.join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: bfperf\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"),
    )
    .unwrap();
    let mut p = Running(
        Process::new(prometheus)
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let prom_port = prometheus_port(&mut p);
    (p, prom_port)
}

/// The port Prometheus `p` listens on, as its `msg="Listening on"
/// address=ADDRESS` line says (started with `--web.listen-address=127.0.0.1:0`).
pub(crate) fn prometheus_port(p: &mut Running) -> u16 {
    let at = announced(p, "Prometheus", |line| {
        let (_, r) = line.split_once("msg=\"Listening on\"")?;
        let (_, a) = r.split_once("address=")?;
        Some(a.split_whitespace().next()?.to_string())
    });
    port_of(&at.unwrap_or_else(|why| panic!("{why}")))
}

/// The port of `ADDRESS:PORT`.
fn port_of(at: &str) -> u16 {
    at.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {at}"))
}

/// What server `e` (`who`) says is its address on a line of its standard error
/// (`find` picks it out), within a minute; the reason, with what it said, when it
/// says nothing of it first. Its standard error (a pipe) is read on by a thread of
/// its own from then on, and kept ([`Tee`]).
fn announced(
    e: &mut Running,
    who: &str,
    find: fn(&str) -> Option<String>,
) -> Result<String, String> {
    let stderr =
        e.0.stderr
            .take()
            .ok_or(format!("{who}'s stderr is not a pipe"))?;
    let said = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let keep = said.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            keep.lock()
                .unwrap()
                .extend_from_slice(format!("{line}\n").as_bytes());
            if let Some(at) = find(&line) {
                let _ = tx.send(at);
            }
        }
    });
    let tee = Tee {
        said: said.clone(),
        reader: Some(reader),
    };
    TEES.lock().unwrap().insert(e.0.id(), tee);
    rx.recv_timeout(Duration::from_secs(60)).map_err(|_| {
        format!(
            "{who} never said where it listens: {}",
            String::from_utf8_lossy(&said.lock().unwrap())
        )
    })
}

/// Everything server `e`, which has ended, said on its standard error.
pub(crate) fn said_to_end(e: &Running) -> String {
    let reader = TEES
        .lock()
        .unwrap()
        .get_mut(&e.0.id())
        .and_then(|t| t.reader.take());
    if let Some(r) = reader {
        let _ = r.join();
    }
    said(e)
}

/// What server `e` has said on its standard error since [`announced`] took it.
pub(crate) fn said(e: &Running) -> String {
    TEES.lock()
        .unwrap()
        .get(&e.0.id())
        .map(|t| String::from_utf8_lossy(&t.said.lock().unwrap()).into_owned())
        .unwrap_or_default()
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(10);
        let mut ended = false;
        while !ended && Instant::now() < end {
            ended = matches!(self.0.try_wait(), Ok(Some(_)));
            if !ended {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if !ended {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        // A failing test shows what its exporter said (the last 16 KiB of it).
        let kept = TEES
            .lock()
            .map(|mut m| m.remove(&self.0.id()))
            .ok()
            .flatten();
        if std::thread::panicking() {
            let said = match (self.0.stderr.take(), kept) {
                (Some(mut stderr), _) => {
                    let mut said = Vec::new();
                    let _ = stderr.read_to_end(&mut said);
                    Some(said)
                }
                (None, Some(t)) => t.said.lock().ok().map(|v| v.clone()),
                (None, None) => None,
            };
            if let Some(said) = said {
                let tail = &said[said.len().saturating_sub(16 * 1024)..];
                eprintln!(
                    "--- the exporter's standard error (pid {}) ---\n{}",
                    self.0.id(),
                    String::from_utf8_lossy(tail)
                );
            }
        }
    }
}

fn exporter(m: &Mount, lock: &Path, args: &[&str]) -> Running {
    exporter_on(m.root(), lock, args)
}

/// An exporter on the sysfs tree at `root`.
fn exporter_on(root: &Path, lock: &Path, args: &[&str]) -> Running {
    Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(root)
            .arg("--lock-file")
            .arg(lock)
            .arg("exporter")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

pub(crate) fn config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("exporter.toml");
    std::fs::write(&p, text).unwrap();
    p
}

pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
}

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

pub(crate) fn prometheus_query(port: u16, query: &str) -> Option<f64> {
    prometheus_query_at(port, query, None)
}

/// An instant query's value at `at` (seconds since the epoch), or now.
fn prometheus_query_at(port: u16, query: &str, at: Option<f64>) -> Option<f64> {
    prometheus_result(port, query, at)?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// Prometheus' answer to an instant query at `at`, or now: its result list.
fn prometheus_results(port: u16, query: &str, at: Option<f64>) -> Option<serde_json::Value> {
    let q: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let time = at.map(|t| format!("&time={t:.3}")).unwrap_or_default();
    let (_, body) = get(
        port,
        &format!("/api/v1/query?query={q}{time}"),
        "application/json",
    );
    let mut v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v.pointer_mut("/data/result").map(serde_json::Value::take)
}

/// The first series of an instant query (at `at`, or now).
fn prometheus_result(port: u16, query: &str, at: Option<f64>) -> Option<serde_json::Value> {
    prometheus_results(port, query, at)?
        .get_mut(0)
        .map(serde_json::Value::take)
}

/// The stored samples (seconds, value) a range selector holds at `at`.
fn prometheus_samples(port: u16, selector: &str, at: f64) -> Vec<(f64, f64)> {
    let r = prometheus_result(port, selector, Some(at))
        .unwrap_or_else(|| panic!("no samples for {selector} at {at}"));
    r["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap(),
                p[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// What Prometheus' `rate(…[12s])` over one target's scrapes, evaluated at `at`,
/// gives for a true rate of 1, found from that window's own samples.
#[derive(Debug)]
struct RateWindow {
    /// Prometheus' extrapolation: it extends the sampled span to each edge of the
    /// window when the gap there is under 1.1 average intervals (else by half of
    /// one) and divides by the window, so a rate is `scale` times the truth. (Its
    /// cut at the counter's zero does not arise: every counter here has counted
    /// for longer before the window than the gap.)
    scale: f64,
    /// The relative error of the ends, from `low` to `high`. Prometheus stamps a
    /// sample with its scrape's start; the values were read no sooner than the
    /// exporter's lag after it (`bfperf_scrape_lag_seconds`, from the request's
    /// arrival; Prometheus' own way to the request only adds to it) and no later
    /// than the scrape's end (`scrape_duration_seconds`, from the same stamp). So
    /// the counted span is off from the stamped one by at least the last lag less
    /// the first scrape's length and at most the last length less the first lag.
    low: f64,
    high: f64,
}

impl RateWindow {
    const RANGE_S: f64 = 12.0;

    /// The windows an evaluation of rule `q` at least 3 s old may have taken (every
    /// scrape stamped before it stored by now), and its time. Prometheus stamps a
    /// sample with its scrape's start but stores it at its end: a scrape still
    /// running when the rule was evaluated (a loaded machine slows them) may or may
    /// not be in its value, so the window with it and the one without are both
    /// what the value may rest on.
    fn candidates(prom_port: u16, instance: &str, q: &str) -> (f64, Vec<RateWindow>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let at = prometheus_query_at(prom_port, &format!("timestamp({q})"), Some(now - 3.0))
            .unwrap_or_else(|| panic!("no value for {q}"));
        let scrapes = RateWindow::scrapes(prom_port, instance, at);
        let ended: Vec<_> = scrapes
            .iter()
            .copied()
            .filter(|(t, _, len)| t + len <= at)
            .collect();
        let mut windows = vec![RateWindow::of(&scrapes, at)];
        if ended.len() < scrapes.len() && ended.len() >= 2 {
            windows.push(RateWindow::of(&ended, at));
        }
        (at, windows)
    }

    /// The window of a rate at `at` over every scrape stored.
    fn at(prom_port: u16, instance: &str, at: f64) -> RateWindow {
        RateWindow::of(&RateWindow::scrapes(prom_port, instance, at), at)
    }

    /// The scrapes of the window ending at `at` that answered, as (stamp, lag,
    /// length): a scrape that timed out (a loaded machine) has a length but no
    /// values, and rate() does not see it either.
    fn scrapes(prom_port: u16, instance: &str, at: f64) -> Vec<(f64, f64, f64)> {
        let of = |family: &str| {
            let sel = format!("{family}{{instance=\"{instance}\"}}[{}s]", Self::RANGE_S);
            prometheus_samples(prom_port, &sel, at)
        };
        let lengths = of("scrape_duration_seconds");
        of("bfperf_scrape_lag_seconds")
            .iter()
            .map(|&(t, lag)| {
                let len = lengths.iter().find(|p| p.0 == t).map(|p| p.1);
                let len = len.unwrap_or_else(|| panic!("{instance} at {t}: a lag, no length"));
                (t, lag, len)
            })
            .collect()
    }

    /// The window of the scrapes (stamp, lag, length) a rate at `at` took.
    fn of(scrapes: &[(f64, f64, f64)], at: f64) -> RateWindow {
        assert!(scrapes.len() >= 2, "at {at}: {scrapes:?}");
        let ((first, lag_f, len_f), (last, lag_l, len_l)) =
            (scrapes[0], scrapes[scrapes.len() - 1]);
        let span = last - first;
        let average = span / (scrapes.len() - 1) as f64;
        let edge = |gap: f64| {
            if gap < average * 1.1 {
                gap
            } else {
                average / 2.0
            }
        };
        let reach = span + edge(first - (at - Self::RANGE_S)) + edge(at - last);
        RateWindow {
            scale: reach / Self::RANGE_S,
            low: (lag_l - len_f) / span,
            high: (len_l - lag_f) / span,
        }
    }

    /// Whether a rate (or a sum of rates) `got` is `truth` as Prometheus must see it.
    fn holds(&self, got: f64, truth: f64) -> bool {
        let e = got / (truth * self.scale) - 1.0;
        (self.low - 1e-9..=self.high + 1e-9).contains(&e)
    }

    /// Whether a ratio of two rates `got` is `truth`: the scale cancels; each rate
    /// is off within the ends' bounds.
    fn holds_for_ratio(&self, got: f64, truth: f64) -> bool {
        let r = got / truth;
        let (lo, hi) = (
            (1.0 + self.low) / (1.0 + self.high),
            (1.0 + self.high) / (1.0 + self.low),
        );
        (lo - 1e-9..=hi + 1e-9).contains(&r)
    }
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
fn the_lock_the_restore_and_re_programming() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let before = m.config("tile2");
    let cfg = config(
        dir.path(),
        "events = [\"tile2/MEMORY_READS,MEMORY_WRITES/\"]\n",
    );
    let mut e = exporter(
        &m,
        &lock,
        &["--config", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    let port = served_port(&mut e);
    bfperf()
        .arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(&lock)
        .args(["program", "tile2", "0", "HNF_REQUESTS"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("exporter"))
        .stderr(predicate::str::contains(format!("pid {}", e.0.id())));
    // Someone writes a counter anyway: the exporter puts its event back and counts it.
    let event0 = m.device().join("tile2/event0");
    let programmed = std::fs::read_to_string(&event0).unwrap();
    std::fs::write(&event0, "0x45").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let back = std::fs::read_to_string(&event0).unwrap() == programmed;
        let (_, text) = get(port, "/metrics", "text/plain");
        if back && sample(&text, "bfperf_reprogrammed_total", &[]) >= 1.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the exporter never put tile2/event0 back and counted it: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SIGTERM restores the device.
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    let status = e.0.wait().unwrap();
    assert!(status.success());
    let err = said_to_end(&e);
    assert!(
        err.contains("another program programmed event 0x45 on counter 0"),
        "{err}"
    );
    assert_eq!(m.config("tile2"), before);
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

/// The exporter's resident memory, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A scrape's status and how long it took.
fn timed_scrape(port: u16) -> (String, Duration) {
    let t = Instant::now();
    let (status, _) = get(port, "/metrics", "text/plain");
    (status, t.elapsed())
}

/// Raises this process's descriptor limit as far as allowed; returns it.
fn raise_nofile() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit fill and read the struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max.min(20_000);
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
    }
    l.rlim_cur
}

/// Writes raw bytes on a new connection and returns the first response line (empty
/// when the server closed it).
fn raw(port: u16, bytes: &[u8]) -> String {
    let mut s = connect(port);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn hostile_clients_never_stop_a_scrape() {
    let limit = raise_nofile();
    let c = Copy::of("bf2");
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"tile2/MEMORY_READS/\"]\n");
    let mut e = Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(c.root())
            .arg("--lock-file")
            .arg(dir.path().join("lock"))
            .args(["exporter", "--config"])
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = e.0.id();
    let port = served_port(&mut e);
    assert!(timed_scrape(port).0.contains("200"));
    let baseline = rss_kib(pid);

    // A body announced as 100 GB is never read; garbage and a 1 MiB header are refused.
    let huge = raw(
        port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n",
    );
    assert!(huge.contains("200"), "{huge}");
    let garbage = raw(port, b"\x00\xff\xfe not http at all\r\n\r\n");
    assert!(garbage.is_empty() || garbage.contains("400"), "{garbage}");
    let mut big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 1 << 20));
    big.extend(b"\r\n\r\n");
    let big = raw(port, &big);
    assert!(!big.contains("200"), "{big}");

    // Thousands of half-open connections: a scrape is still answered, well before the
    // 10 s header timeout would free a slot for it (5 s: a loaded machine takes more
    // than the usual tens of milliseconds, a starved scrape 10 s or never).
    let n = 5000.min(limit.saturating_sub(200) as usize);
    assert!(n >= 900, "descriptor limit {limit} too low for the test");
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(mut s) => {
                let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHo");
                held.push(s);
            }
            Err(_) => break,
        }
    }
    assert!(held.len() >= n / 2, "{} connections made", held.len());
    let (status, took) = timed_scrape(port);
    assert!(status.contains("200"), "{status}");
    assert!(
        took < Duration::from_secs(5),
        "a scrape under flood took {took:?}"
    );
    drop(held);
    // What the flood took is given back once the exporter has seen the connections
    // close: waited for, as the kernel accounts the process's memory.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let after = rss_kib(pid);
        if after <= 2 * baseline {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "RSS {baseline} KiB, 30 s after the flood {after} KiB"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 2,000 pipelined requests on one connection: a concurrent scrape answers
    // within 1 s, and every pipelined request gets its answer.
    let mut pipe = connect(port);
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let all: Vec<u8> = request
        .iter()
        .copied()
        .cycle()
        .take(request.len() * 2000)
        .collect();
    let mut writer = pipe.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&all);
    });
    std::thread::sleep(Duration::from_millis(50));
    let (status, took) = timed_scrape(port);
    assert!(status.contains("200"), "{status}");
    assert!(
        took < Duration::from_secs(5),
        "a scrape beside 2,000 pipelined took {took:?}"
    );
    pipe.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // Count status lines in what arrives; the unread end (shorter than one status
    // line) is carried over, so none is counted twice.
    const OK: &[u8] = b"HTTP/1.1 200 OK";
    let mut seen = 0;
    let mut buf = vec![0u8; 1 << 16];
    let mut window: Vec<u8> = Vec::new();
    while seen < 2000 {
        let n = pipe.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {seen} answers");
        window.extend_from_slice(&buf[..n]);
        seen += window.windows(OK.len()).filter(|w| *w == OK).count();
        window = window.split_off(window.len().saturating_sub(OK.len() - 1));
    }
    assert_eq!(seen, 2000);
    sender.join().unwrap();
}

/// curl's status code for a URL, with extra arguments; -k: the test's certificate is
/// self-signed.
fn curl_status(url: &str, extra: &[&str]) -> String {
    let out = Process::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl is installed (.ci/run installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tls_and_basic_auth_protect_the_exporter() {
    let dir = tempfile::tempdir().unwrap();
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    std::fs::write(dir.path().join("server.crt"), cert.cert.pem()).unwrap();
    std::fs::write(
        dir.path().join("server.key"),
        cert.signing_key.serialize_pem(),
    )
    .unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  alice: {hash}\n"
        ),
    )
    .unwrap();
    let c = Copy::of("bf2");
    let cfg = config(dir.path(), "");
    let run = |web: &Path| {
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(c.root())
            .arg("--lock-file")
            .arg(dir.path().join("lock"))
            .args(["exporter", "--config"])
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0", "--web.config.file"])
            .arg(web)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut _e = Running(run(&web));
    let port = served_port(&mut _e);
    let url = format!("https://127.0.0.1:{port}/metrics");
    assert_eq!(curl_status(&url, &[]), "401");
    assert_eq!(curl_status(&url, &["-u", "alice:wrong"]), "401");
    assert_eq!(curl_status(&url, &["-u", "mallory:s3cret"]), "401");
    assert_eq!(curl_status(&url, &["-u", "alice:s3cret"]), "200");
    // Plain HTTP to the TLS port gets nothing.
    assert_eq!(
        curl_status(
            &format!("http://127.0.0.1:{port}/metrics"),
            &["-u", "alice:s3cret"]
        ),
        "000"
    );
    drop(_e);
    // A web config with a key it does not implement, or a clear-text password, is
    // refused before the device is touched.
    let before = c.contents();
    for (text, says) in [
        ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n", "client_auth_type"),
        ("basic_auth_users:\n  alice: s3cret\n", "not a bcrypt hash"),
    ] {
        std::fs::write(&web, text).unwrap();
        let out = run(&web).wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
        assert_eq!(before, c.contents());
    }
}

fn prometheus_series(port: u16, query: &str) -> usize {
    prometheus_results(port, query, None)
        .and_then(|r| r.as_array().map(Vec::len))
        .unwrap_or(0)
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
    // Wait until every rule has a window full of scrapes behind it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let full = || {
        prometheus_query(prom_port, "min(count_over_time(bfperf_up[15s]))")
            .is_some_and(|n| n >= 15.0)
    };
    while !full() {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape both exporters"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Its windows are read 3 s back.
    std::thread::sleep(Duration::from_secs(3));
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
        assert!(
            prometheus_series(prom_port, &q) > 0,
            "the dashboard's {q} returns no data"
        );
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

/// One HTTP/1.1 keep-alive request on `s` with basic credentials; the status code
/// and whether the server said it closes the connection. None when the connection
/// was closed (or failed) before an answer.
fn keep_alive_get(s: &mut TcpStream, user_pass: &str) -> Option<(u16, bool)> {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(user_pass);
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {auth}\r\n\r\n"
    )
    .ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).ok()?;
    Some((status, head.contains("connection: close")))
}

/// A connection from another client: 127.0.0.2 (any 127/8 address is this machine).
fn connect_from_another_client(port: u16) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(
        &"127.0.0.2:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    s.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// One refused request on a new connection.
fn refused(port: u16, user_pass: &str) {
    let mut s = connect(port);
    let (status, _) = keep_alive_get(&mut s, user_pass).unwrap();
    assert_eq!(status, 401);
}

/// The processor time process `pid` has used (its threads', ended ones too): what
/// its work costs, whatever else the machine runs, which only ever adds waiting.
/// The kernel keeps it to the nanosecond and shows it in clock ticks.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's name (in parentheses): state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(") ").unwrap().1;
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Duration::from_secs_f64((fields[0] + fields[1]) as f64 / hz)
}

#[test]
fn password_guessing_neither_reveals_users_nor_locks_out_a_scraper() {
    let dir = tempfile::tempdir().unwrap();
    // Cost 8: a few milliseconds a check here, still tens of milliseconds emulated.
    let hash = bcrypt::hash("s3cret", 8).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, format!("basic_auth_users:\n  alice: {hash}\n")).unwrap();
    let c = Copy::of("bf2");
    let cfg = config(dir.path(), "events = [\"tile2/MEMORY_READS/\"]\n");
    let mut _e = Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(c.root())
            .arg("--lock-file")
            .arg(dir.path().join("lock"))
            .args(["exporter", "--config"])
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0", "--web.config.file"])
            .arg(&web)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let port = served_port(&mut _e);

    // A wrong password for a user that exists and any password for one that does not
    // cost the exporter as much: no timing tells user names apart. Its processor
    // time, not the time taken (another process taking the core only adds to
    // that): 40 checks (new credentials each time: no verdict is remembered) come to
    // hundreds of milliseconds, against the ticks of 10 ms it is shown in.
    let pid = _e.0.id();
    let mut spent = [Duration::ZERO; 2];
    for round in 0..4 {
        for (who, spent) in spent.iter_mut().enumerate() {
            let before = cpu_time(pid);
            for i in 0..10 {
                match who {
                    0 => refused(port, &format!("alice:wrong{round}-{i}")),
                    _ => refused(port, &format!("mallory{round}-{i}:wrong")),
                }
            }
            *spent += cpu_time(pid) - before;
        }
    }
    let [known, unknown] = spent;
    let ratio = known.as_secs_f64() / unknown.as_secs_f64();
    assert!(
        (0.8..=1.25).contains(&ratio),
        "known user {known:?}, unknown user {unknown:?}"
    );

    // A connection that keeps guessing is closed after its third wrong answer.
    let mut s = connect(port);
    for i in 1..=3 {
        let (status, closes) = keep_alive_get(&mut s, &format!("alice:guess{i}")).unwrap();
        assert_eq!((status, closes), (401, i == 3), "attempt {i}");
    }
    assert!(keep_alive_get(&mut s, "alice:s3cret").is_none());

    // 80 keep-alive loops guessing passwords (new ones every time, so each needs a
    // bcrypt check), reconnecting whenever closed; a scraper from another address
    // with the right password (never checked before: its first scrape needs a check
    // too), on its own keep-alive connection (one retry on a new connection when it
    // was closed, as Prometheus' client does), gets its scrapes within 1 s.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let guesses = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let attackers: Vec<_> = (0..80)
        .map(|a| {
            let (stop, guesses) = (stop.clone(), guesses.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
                        continue;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        n += 1;
                        if keep_alive_get(&mut s, &format!("alice:{a}-{n}")).is_none() {
                            break;
                        }
                        guesses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // The guessing is under way: its answers have begun to come.
    let deadline = Instant::now() + Duration::from_secs(30);
    while guesses.load(std::sync::atomic::Ordering::Relaxed) < 10 {
        assert!(
            Instant::now() < deadline,
            "the guessers were never answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut scraper = connect_from_another_client(port);
    let within = prompt();
    let (mut on_time, total) = (0, 100);
    let mut slowest = Duration::ZERO;
    for _ in 0..total {
        let t = Instant::now();
        let mut answer = keep_alive_get(&mut scraper, "alice:s3cret");
        if answer.is_none() {
            scraper = connect_from_another_client(port);
            answer = keep_alive_get(&mut scraper, "alice:s3cret");
        }
        let took = t.elapsed();
        slowest = slowest.max(took);
        if answer.is_some_and(|(status, _)| status == 200) && took <= within {
            on_time += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for a in attackers {
        a.join().unwrap();
    }
    let guessed = guesses.load(std::sync::atomic::Ordering::Relaxed);
    assert!(guessed > 20, "the attack made only {guessed} guesses");
    assert!(
        on_time * 100 >= total * 99,
        "{on_time} of {total} scrapes within {within:?} (slowest {slowest:?}) beside {guessed} wrong guesses"
    );
    eprintln!("{on_time} of {total} scrapes within {within:?}, slowest {slowest:?}; {guessed} wrong guesses; known user {known:?}, unknown {unknown:?}");
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

/// `bfperf stat` on `m` with the exporter's lock file; its output, unchecked.
fn stat_beside(m: &Mount, lock: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    cmd.arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(lock)
        .args(["stat", "-o", "-"])
        .args(args);
    run_within(cmd, Duration::from_secs(30))
}

/// `stat_beside`, which must succeed and say the exporter counted for it.
fn counted_beside(m: &Mount, lock: &Path, args: &[&str]) -> std::process::Output {
    let out = stat_beside(m, lock, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("owned by the exporter"), "{err}");
    out
}

/// Runs a command, killing it (and failing) if it has not ended within `limit`.
fn run_within(mut cmd: Process, limit: Duration) -> std::process::Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(limit);
        // SAFETY: signals the child by its pid; at worst it has ended already.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    assert!(
        !watchdog.is_finished(),
        "a command hung for {limit:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// While the exporter owns a BlueField-3, `stat -M ddr,llc -- sleep 1` is counted
/// by it: the simulator's rates (LLC reads 8 GB/s, writes 4 GB/s, a quarter of
/// them missing to DDR), the exporter's counters untouched and its series valid;
/// events it does not count go on counters it leaves free and are put back when
/// the client ends, or when it is killed; clients beyond what fits are refused,
/// never left hanging.
#[test]
fn stat_beside_the_exporter_is_counted_by_it() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let owned = ["mss0", "llt0", "llt_miss7"];
    let free = ["apt0", "gic0"];
    let before: Vec<_> = owned.iter().chain(&free).map(|b| m.config(b)).collect();
    let (e, port) = serve(&m, dir.path(), &cfg);
    // Compared without `enable`: the exporter's sweeps switch it off and on.
    let programmed: Vec<_> = owned.iter().map(|b| m.programming(b)).collect();

    let out = counted_beside(&m, &lock, &["-M", "ddr,llc", "--json", "--", "sleep", "1"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = |metric: &str| {
        ndjson(&stdout)
            .into_iter()
            .find(|r| r["record"] == "metric" && r["metric"] == metric)
            .and_then(|r| r["value"].as_f64())
            .unwrap_or_else(|| panic!("no {metric} in\n{stdout}"))
    };
    // An all-at-once block does not count while it is stopped to be read (a FUSE
    // round trip of emulated system calls under qemu-user): that time is not
    // counted, and the values are scaled over it.
    for (metric, truth) in [
        ("llc_read_bandwidth", 8.0),
        ("llc_write_bandwidth", 4.0),
        ("ddr_read_bandwidth", 2.0),
        ("ddr_write_bandwidth", 1.0),
        ("llc_read_miss_ratio", 25.0),
    ] {
        assert_rate(value(metric), truth, metric);
    }
    // The exporter's programming is as it was; nothing counted as re-programmed.
    assert_eq!(
        owned.iter().map(|b| m.programming(b)).collect::<Vec<_>>(),
        programmed
    );
    let (_, text) = get(port, "/metrics", "text/plain");
    assert_eq!(sample(&text, "bfperf_up", &[]), 1.0);
    assert_eq!(
        sample(&text, "bfperf_reprogrammed_total", &[]),
        0.0,
        "{text}"
    );

    // Events the exporter does not count: on free counters, put back afterwards.
    let out = stat_beside(
        &m,
        &lock,
        &[
            "-e",
            "apt0/APT_DATA_0/",
            "-e",
            "gic0/AW_BEATS/",
            "-x,",
            "--",
            "sleep",
            "0.3",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("APT_DATA_0") && text.contains("AW_BEATS"),
        "{text}"
    );
    assert_eq!(
        free.iter().map(|b| m.config(b)).collect::<Vec<_>>(),
        before[3..]
    );

    // A client killed mid-measurement: its counters are put back all the same.
    let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    cmd.arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(&lock);
    cmd.args([
        "stat",
        "-e",
        "apt0/APT_DATA_0/",
        "-e",
        "gic0/AW_BEATS/",
        "--duration",
        "20s",
    ]);
    let mut client = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let programmed_by_client = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        m.config("gic0") != before[4]
    });
    assert!(
        programmed_by_client,
        "the client's event never reached gic0"
    );
    client.kill().unwrap();
    client.wait().unwrap();
    let put_back = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        free.iter().map(|b| m.config(b)).collect::<Vec<_>>() == before[3..]
    });
    assert!(
        put_back,
        "{:?}",
        free.iter().map(|b| m.config(b)).collect::<Vec<_>>()
    );

    // Eight at once, each wanting one of gic0's two counters: two are counted, the
    // others refused with the reason; none hangs.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (root, lock) = (m.root().to_path_buf(), lock.clone());
            std::thread::spawn(move || {
                let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
                cmd.arg("--sysfs-root")
                    .arg(root)
                    .arg("--lock-file")
                    .arg(lock);
                cmd.args([
                    "stat",
                    "-o",
                    "-",
                    "-e",
                    "gic0/AW_BEATS/",
                    "-e",
                    "mss0/SKYLIB_DDN_TX_FLITS/",
                    "--",
                    "sleep",
                    "3",
                ]);
                run_within(cmd, Duration::from_secs(30))
            })
        })
        .collect();
    let outs: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let served = outs.iter().filter(|o| o.status.success()).count();
    for o in outs.iter().filter(|o| !o.status.success()) {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("gic0 has no counter free"), "{err}");
    }
    assert!((1..=2).contains(&served), "{served} served");
    drop(e);
    // The exporter stopped: everything as before it started.
    assert_eq!(
        owned
            .iter()
            .chain(&free)
            .map(|b| m.config(b))
            .collect::<Vec<_>>(),
        before
    );
}

/// The exporter's series, without their values.
fn series(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_string()))
        .collect()
}

/// On BlueField-3 the blocks profiled most count all at once (crspace): beside the
/// exporter's default set, the counters it leaves free on llt0 are lent to a
/// client's events from its next window on — counted right against the
/// simulator, shared by clients asking the same event, put back when the last
/// ends or is killed — while the exporter's counters, series and
/// reprogrammed count stay as they were; asking more than are free is refused
/// saying how many are, with nothing written.
#[test]
fn free_counters_of_an_all_at_once_block_are_lent_beside_the_exporter() {
    let Some((m, dir, e, port)) = default_exporter() else {
        return;
    };
    let lock = dir.path().join("lock");
    let programmed = m.programming("llt0");
    let (_, text) = get(port, "/metrics", "text/plain");
    let own_series = series(&text);

    let out = counted_beside(
        &m,
        &lock,
        &["-e", "llt0/GDC_BANK0_HIT/", "--json", "--", "sleep", "1"],
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let total = ndjson(&stdout)
        .into_iter()
        .find(|r| r["record"] == "total" && r["event"] == "GDC_BANK0_HIT")
        .unwrap_or_else(|| panic!("no GDC_BANK0_HIT in\n{stdout}"));
    // Right within 1 %, or marked: a busy machine that delayed the first window's
    // bounds by more than 0.5 % of the second.
    if total["valid"] == true {
        let rate = total["value"].as_f64().unwrap() / total["time_s"].as_f64().unwrap();
        assert_rate(
            rate,
            bf3_event_rate("llt0", "GDC_BANK0_HIT"),
            "llt0 GDC_BANK0_HIT",
        );
    } else {
        assert!(busy_marked(&total["invalid"]), "{total}");
    }
    assert_eq!(
        m.programming("llt0"),
        programmed,
        "the lent counter is not put back"
    );

    // Two clients of the same event share the counter lent to the first; it is
    // put back when the last ends, killed or not.
    let spawn = |secs: &str| {
        let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
        cmd.arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(&lock);
        cmd.args(["stat", "-e", "llt0/GDC_BANK0_HIT/", "--duration", secs]);
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut first = spawn("20s");
    let lent = |m: &Mount| {
        let now = m.programming("llt0");
        let changed: Vec<_> = now
            .iter()
            .filter(|c| !programmed.contains(c))
            .cloned()
            .collect();
        changed
    };
    let waited = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !lent(&m).is_empty()
    });
    assert!(waited, "no counter of llt0 was lent");
    let changed = lent(&m);
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(changed[0].1.contains("GDC_BANK0_HIT"), "{changed:?}");
    let second = stat_beside(
        &m,
        &lock,
        &["-e", "llt0/GDC_BANK0_HIT/", "--", "sleep", "0.3"],
    );
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(
        lent(&m),
        changed,
        "the second client's event took another counter"
    );

    // Three counters are free: four events are refused, saying so, nothing written.
    let during = m.programming("llt0");
    let refused = stat_beside(
        &m,
        &lock,
        &[
            "-e",
            "llt0/GDC_BANK1_HIT,GDC_BANK0_MISS,GDC_BANK1_MISS,HNF0_CYCLES/",
            "--",
            "true",
        ],
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("llt0 has 2 counters free, 4 asked"), "{err}");
    assert_eq!(m.programming("llt0"), during);

    let (_, text) = get(port, "/metrics", "text/plain");
    assert_eq!(series(&text), own_series, "the exporter's series changed");
    assert_eq!(
        sample(&text, "bfperf_reprogrammed_total", &[]),
        0.0,
        "{text}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let put_back = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        m.programming("llt0") == programmed
    });
    assert!(put_back, "{:?}", lent(&m));
    drop(e);
}

/// Runs the binary copied to `bin` (so that any user can run it) as nobody, with
/// the supplementary `groups` (none: `--clear-groups`).
fn as_nobody(bin: &Path, groups: &[u32], args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut cmd = Process::new("setpriv");
    cmd.args(["--reuid", "65534", "--regid", "65534"]);
    match groups.is_empty() {
        true => cmd.arg("--clear-groups"),
        false => cmd.arg("--groups").arg(
            groups
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    };
    cmd.arg(bin).args(args).output().unwrap()
}

#[test]
fn a_socket_group_lets_its_members_ask_and_no_one_else() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if not_root("switching users") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    open(dir.path()).unwrap();
    let bin = installed(dir.path());
    let c = Copy::of("bf2");
    open(c.root()).unwrap();
    let lock = dir.path().join("lock");
    let cfg = config(
        dir.path(),
        "events = [\"default\"]\nsocket_group = \"4242\"\n",
    );
    let mut _e = exporter_on(
        c.root(),
        &lock,
        &["--config", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    // Serving: the socket is there too.
    served_port(&mut _e);
    let socket = std::fs::metadata(dir.path().join("lock.sock")).unwrap();
    assert_eq!((socket.mode() & 0o777, socket.gid()), (0o660, 4242));
    let stat = [
        "--sysfs-root",
        c.root().to_str().unwrap(),
        "--lock-file",
        lock.to_str().unwrap(),
        "stat",
        "-o",
        "-",
        "-e",
        "tile0/MEMORY_READS/",
        "-x,",
        "--",
        "true",
    ]
    .map(std::ffi::OsStr::new);
    // A member of the group is counted by the exporter.
    let out = as_nobody(&bin, &[4242], &stat);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("owned by the exporter"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("MEMORY_READS"));
    // Anyone else is told why not, and what to do.
    let out = as_nobody(&bin, &[], &stat);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("permission denied") && err.contains("socket_group"),
        "{err}"
    );
}

/// A user's own state directory squatted by another user (`$TMPDIR/bfperf-UID`
/// made first, not theirs) does not keep them from root's exporter: their `stat`
/// still asks its socket in /run/bfperf (here a tmpfs of a mount namespace of the
/// test's own, so the machine's /run is never touched).
#[test]
fn a_squatted_state_directory_still_reaches_roots_exporter() {
    use std::os::unix::fs::PermissionsExt;
    if not_root("switching users and mounting a private /run") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open = |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
    open(dir.path(), 0o755).unwrap();
    let bin = installed(dir.path());
    let c = Copy::of("bf2");
    open(c.root(), 0o755).unwrap();
    let tmp = dir.path().join("tmp");
    let squatted = tmp.join("bfperf-65534");
    std::fs::create_dir_all(&squatted).unwrap();
    open(&tmp, 0o1777).unwrap();
    open(&squatted, 0o777).unwrap();
    std::os::unix::fs::chown(&squatted, Some(1234), Some(1234)).unwrap();
    let cfg = config(
        dir.path(),
        "events = [\"default\"]\nsocket_group = \"4242\"\n",
    );
    // Port 0: the test speaks to it through its socket only.
    let port = "0".to_string();
    // In a mount namespace of its own with /run a new tmpfs: root's exporter with
    // its default lock, then the member's stat with nothing but TMPDIR set.
    let script = r#"
        set -e
        mount -t tmpfs -o mode=0755 bfperf-test /run
        "$1" --sysfs-root "$2" exporter --config "$3" --listen "127.0.0.1:$4" 2>"$6" &
        exporter=$!
        trap 'kill $exporter; wait $exporter' EXIT
        for _ in $(seq 600); do
            ls /run/bfperf/*.sock >/dev/null 2>&1 && break
            sleep 0.05
        done
        env TMPDIR="$5" setpriv --reuid 65534 --regid 65534 --groups 4242 \
            "$1" --sysfs-root "$2" stat -o - -e tile0/MEMORY_READS/ -x, -- true
    "#;
    let log = dir.path().join("exporter.log");
    let out = Process::new("timeout")
        .arg("60")
        .args(["unshare", "--mount", "sh", "-c", script, "sh"])
        .arg(&bin)
        .arg(c.root())
        .arg(&cfg)
        .arg(&port)
        .arg(&tmp)
        .arg(&log)
        .env_remove("BFPERF_STATE_DIR")
        .env_remove("BFPERF_LOCK_FILE")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.status.success(), "{err}\nexporter: {logged}");
    assert!(err.contains("owned by the exporter"), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("MEMORY_READS"),
        "{err}"
    );
    assert!(logged.contains("counting for uid 65534, pid "), "{logged}");
}

#[test]
fn a_socket_of_another_user_is_never_asked() {
    if not_root("giving a socket away") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777),
    )
    .unwrap();
    let c = Copy::of("bf2");
    let lock = dir.path().join("lock");
    let socket = dir.path().join("lock.sock");
    // Another user listens there; the kernel names it whatever the path's owner says
    // (the socket is even given to root, as a squatter cannot but a race could).
    let listen = "use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), \
                  Local => $ARGV[0], Listen => 8) or die $!; sleep 30";
    let mut squatter = Running(
        Process::new("setpriv")
            .args([
                "--reuid=1234",
                "--regid=1234",
                "--clear-groups",
                "perl",
                "-e",
            ])
            .arg(listen)
            .arg(&socket)
            .spawn()
            .unwrap(),
    );
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::os::unix::fs::lchown(&socket, Some(0), None).unwrap();
    let before = c.contents();
    bfperf()
        .arg("--sysfs-root")
        .arg(c.root())
        .arg("--lock-file")
        .arg(&lock)
        .args(["stat", "-o", "-", "-e", "tile0/MEMORY_READS/", "--", "true"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("uid 1234, neither root nor you"));
    assert_eq!(c.contents(), before);
    let _ = squatter.0.kill();
}

/// A lock in a directory too deep for a socket's address (108 bytes): the exporter
/// still listens beside it and stat still asks it.
#[test]
fn a_deep_state_directory_still_shares_the_device() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let top = tempfile::tempdir().unwrap();
    let deep = top
        .path()
        .join("a-directory-name-of-forty-characters-each")
        .join("another-directory-name-of-forty-characters");
    std::fs::create_dir_all(&deep).unwrap();
    assert!(deep.join("lock.sock").as_os_str().len() > 108);
    let cfg = config(&deep, "events = [\"default\"]\n");
    let (_e, _port) = serve(&m, &deep, &cfg);
    counted_beside(
        &m,
        &deep.join("lock"),
        &["-e", "gic0/AW_BEATS/", "--duration", "200ms"],
    );
}

/// A BlueField-3 simulator with an exporter of the default set serving it: the
/// mount, the exporter's directory (its lock, socket and config), the exporter and
/// its port. None where FUSE cannot be used (said).
pub(crate) fn default_exporter() -> Option<(Mount, tempfile::TempDir, Running, u16)> {
    let m = Mount::start("3", "6.16")?;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let (e, port) = serve(&m, dir.path(), &cfg);
    Some((m, dir, e, port))
}

/// Connects to the exporter's socket in `dir` as a client speaking the protocol
/// itself, asks it to count `specs`, and returns the connection and the answer.
fn ask_to_count(dir: &Path, specs: &[&str]) -> (std::os::unix::net::UnixStream, String) {
    let mut client = std::os::unix::net::UnixStream::connect(dir.join("lock.sock")).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let ask = serde_json::json!({"bfperf": 2, "count": {"specs": specs, "command": "a test"}});
    // The exporter may refuse (and close) before a long request is all written: the
    // answer it sent is what counts.
    let sent = writeln!(client, "{ask}");
    let mut answer = String::new();
    let mut reader = std::io::BufReader::new(&client);
    let read = std::io::BufRead::read_line(&mut reader, &mut answer);
    assert!(
        !answer.is_empty(),
        "no answer: sent {sent:?}, read {read:?}"
    );
    (client, answer)
}

/// A member's worst request, one line of 10,000 `*/*` specs, is refused before
/// any is resolved: the exporter spends on it what reading the line costs (its
/// processor time, which a loaded machine does not stretch as it stretches a
/// wall-clock wait; resolving them would take seconds), and a scrape meanwhile is
/// answered.
#[test]
fn a_request_of_ten_thousand_specs_is_refused_at_once() {
    let Some((_m, dir, e, port)) = default_exporter() else {
        return;
    };
    let scraped = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        get(port, "/metrics", "text/plain").0
    });
    let before = cpu_time(e.0.id());
    let (_client, answer) = ask_to_count(dir.path(), &vec!["*/*"; 10_000]);
    let spent = cpu_time(e.0.id()) - before;
    assert!(
        answer.contains("refused") && answer.contains("at most"),
        "{answer}"
    );
    // Sweeps and scrapes go on meanwhile (a few ms each); under emulation every
    // instruction costs about ten.
    let most = match emulated() {
        true => Duration::from_millis(2500),
        false => Duration::from_millis(250),
    };
    assert!(spent < most, "refusing took {spent:?} of processor time");
    let status = scraped.join().unwrap();
    assert!(status.contains("200"), "{status}");
}

/// Connections a member opens and never asks on are limited (two waiting per user)
/// and closed after 5 s, and root keeps room beyond them: twelve idle connections of
/// another user never lock root's stat out of the exporter.
#[test]
fn idle_connections_of_a_member_never_lock_root_out() {
    let Some((m, dir, _e, _port)) = exporter_for_members("a member's connections beside root's")
    else {
        return;
    };
    let lock = dir.path().join("lock");
    let socket = dir.path().join("lock.sock");
    let squat = "use IO::Socket::UNIX; my @c; for (1..12) { my $s = IO::Socket::UNIX->new(\
                 Type => SOCK_STREAM(), Peer => $ARGV[0]); push @c, $s if $s } \
                 $| = 1; print scalar(@c), \"\\n\"; sleep 20";
    let mut squatter = Running(
        Process::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "perl",
                "-e",
            ])
            .arg(squat)
            .arg(&socket)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // It says how many connections it holds once it holds them.
    let mut held = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(squatter.0.stdout.take().unwrap())
        .read_line(&mut held)
        .unwrap();
    assert!(held.trim().parse::<u32>().is_ok_and(|n| n > 0), "{held:?}");
    counted_beside(&m, &lock, &["-e", "gic0/AW_BEATS/", "--", "true"]);
}

/// The simulated BlueField-3 with an exporter of its default set whose socket is
/// given to nobody's group (65534), in a directory anyone may enter (its lock is
/// `lock` there), for a test `why` that runs a member beside root; None (said)
/// where the test is not root, or FUSE is missing.
fn exporter_for_members(why: &str) -> Option<(Mount, tempfile::TempDir, Running, u16)> {
    if not_root(why) {
        return None;
    }
    let m = Mount::start("3", "6.16")?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let cfg = config(
        dir.path(),
        "events = [\"default\"]\nsocket_group = \"65534\"\n",
    );
    let (e, port) = serve(&m, dir.path(), &cfg);
    Some((m, dir, e, port))
}

/// A SIGHUP reload ends every client's measurement and puts its counters back, even
/// when the new configuration is refused and the old one keeps running: a later
/// request for the same counters is granted.
#[test]
fn a_refused_reload_puts_back_its_clients_counters() {
    let Some((m, dir, e, _port)) = default_exporter() else {
        return;
    };
    let lock = dir.path().join("lock");
    let gic0 = m.config("gic0");
    let client = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(&lock)
        .args([
            "stat",
            "-o",
            "-",
            "-e",
            "gic0/AW_BEATS/",
            "--",
            "sleep",
            "3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while m.config("gic0") == gic0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_ne!(
        m.config("gic0"),
        gic0,
        "the client's event was never programmed"
    );
    reload_with(&e, dir.path(), "events = [\"nosuchblock/X/\"]\n");
    let out = client.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a measurement cut short exits non-zero: {err}"
    );
    assert_eq!(m.config("gic0"), gic0, "gic0 was left programmed");
    let again = stat_beside(&m, &lock, &["-e", "gic0/AW_BEATS/", "--", "true"]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// One rule for groups whoever programs the counters: a `{...}` group larger than a
/// block's counters is refused by the exporter as stat alone refuses it, never
/// granted to take turns (asked over the protocol directly, as any client may).
#[test]
fn a_group_larger_than_a_block_is_refused_beside_the_exporter_too() {
    let Some((_m, dir, _e, _port)) = default_exporter() else {
        return;
    };
    let group = "{llt0/HNF0_REQS_RECEIVED,HNF0_REQS_PROCESSED,HNF0_DIR_HIT,HNF0_DIR_MISS,\
                 HNF0_DIR_RD_ALLOC,HNF0_DIR_WR_ALLOC,HNF0_DIR_VICTIM,HNF0_CL_HAZARD,HNF0_ALL_HAZARD/}";
    let (_client, answer) = ask_to_count(dir.path(), &[group]);
    assert!(answer.contains("refused"), "{answer}");
    assert!(
        answer.contains("a group is always counted at once"),
        "{answer}"
    );
}

/// A burst of reads (500 of them in one write) is answered from one reading of the
/// device per 10 ms at most: it never stalls the exporter's loop, and a scrape
/// meanwhile answers promptly.
#[test]
fn a_burst_of_reads_never_stalls_a_scrape() {
    let Some((_m, dir, _e, port)) = default_exporter() else {
        return;
    };
    let (mut client, answer) = ask_to_count(dir.path(), &["mss0/SKYLIB_DDN_TX_FLITS/"]);
    assert!(answer.contains("granted"), "{answer}");
    let reader = std::io::BufReader::new(client.try_clone().unwrap());
    let read = "{\"bfperf\":2,\"read\":null}\n";
    // As many as their answers fit in a socket's buffer: a client that asks faster
    // than it reads is cut off, not waited for.
    let n = 500;
    // The answers, read as they come: the time of each one's values.
    let answers = std::thread::spawn(move || {
        let mut times = Vec::new();
        for line in std::io::BufRead::lines(reader).take(n) {
            let Ok(line) = line else { break };
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            times.push(v["totals"]["at_ns"].as_u64().unwrap_or(0));
        }
        times
    });
    let t = Instant::now();
    client.write_all(read.repeat(n).as_bytes()).unwrap();
    let (status, _) = get(port, "/metrics", "text/plain");
    let scrape = t.elapsed();
    let times = answers.join().unwrap();
    let took = t.elapsed();
    assert!(status.contains("200"), "{status}");
    assert!(scrape < prompt(), "a scrape took {scrape:?}");
    assert_eq!(times.len(), n, "every read is answered");
    let mut distinct = times.clone();
    distinct.dedup();
    // One reading per 10 ms at most, by the readings' own stamps: each new one at
    // least 10 ms after the one before.
    assert!(!distinct.is_empty() && distinct[0] > 0, "{times:?}");
    for w in distinct.windows(2) {
        assert!(
            w[1] >= w[0] + 10_000_000,
            "readings at {} and {} ns, {} in all for {n} reads in {took:?}",
            w[0],
            w[1],
            distinct.len()
        );
    }
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

/// A member's requests that cost most to resolve: one glob of 20,000 `*` (it held
/// the exporter for 17-64 s), and 256 specs of the longest pattern that is let
/// through. Each is answered within 2 s; scrapes meanwhile are answered within 1 s,
/// and root's own stat beside the exporter is counted as ever.
#[test]
fn a_members_costliest_globs_never_hold_the_exporter() {
    let Some((m, dir, _e, port)) = exporter_for_members("a member's requests") else {
        return;
    };
    let lock = dir.path().join("lock");
    let ask = |specs: Vec<String>| {
        serde_json::json!({"bfperf": 2, "count": {"specs": specs, "command": "hostile"}})
            .to_string()
    };
    let longest = format!("*/{}*/", "*Q".repeat(63));
    let matching = format!("*/{}*/", "*_".repeat(63));
    let asks = [
        ask(vec![format!("*/{}Q/", "*".repeat(20_000))]),
        ask(vec![longest; 256]),
        ask(vec![matching; 256]),
        ask((0..256).map(|i| format!("*/*{i}*/")).collect()),
    ];
    let file = dir.path().join("asks");
    std::fs::write(&file, asks.join("\n") + "\n").unwrap();
    let script = "use IO::Socket::UNIX; use Time::HiRes qw(time); $| = 1; \
        open(my $f, '<', $ARGV[1]) or die; \
        while (my $a = <$f>) { \
            my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die \"connect: $!\"; \
            my $t = time; print $s $a; my $l = <$s>; \
            printf \"%.3f %s\", time - $t, defined $l ? $l : \"(no answer)\\n\"; }";
    let member = Process::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "perl",
            "-e",
        ])
        .arg(script)
        .arg(dir.path().join("lock.sock"))
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut member = Running(member);
    let mut slowest = Duration::ZERO;
    let mut scrapes = 0;
    while member.0.try_wait().unwrap().is_none() {
        let began = Instant::now();
        let (_, body) = get(port, "/metrics", "text/plain");
        assert!(body.contains("bfperf_up"), "{body}");
        slowest = slowest.max(began.elapsed());
        scrapes += 1;
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut member.0.stdout.take().unwrap(), &mut out).unwrap();
    let answers: Vec<&str> = out.lines().collect();
    assert_eq!(answers.len(), asks.len(), "{out}");
    for a in &answers {
        let (secs, line) = a.split_once(' ').unwrap();
        let secs: f64 = secs.parse().unwrap();
        assert!(line.contains("\"refused\""), "{a}");
        assert!(secs < 2.0, "answered after {secs} s: {a}");
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a scrape took {slowest:?} (of {scrapes}) while the member asked"
    );
    counted_beside(&m, &lock, &["-e", "gic0/AW_BEATS/", "--", "true"]);
}

/// A member of socket_group holds at most its share of a block's free counters
/// (half: one of gic0's two), and root's own measurement takes them back when it
/// needs them: root is counted, and the member's counts end marked with the reason
/// (a member asking every free counter locked root out for as long as it stayed).
#[test]
fn a_member_holds_its_share_and_root_takes_it_back() {
    let Some((m, dir, _e, _port)) = exporter_for_members("a member beside root") else {
        return;
    };
    let bin = installed(dir.path());
    let lock = dir.path().join("lock");
    let member_stat = |events: &str, secs: &str| {
        let mut cmd = Process::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--groups=65534"])
            .arg(&bin)
            .arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(&lock)
            .args(["stat", "-o", "-", "-e", events, "--duration", secs]);
        cmd
    };
    // Both of gic0's free counters: more than the member's share.
    let out = member_stat("gic0/AW_REQ,AW_BEATS/", "1s").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds at most 1 of gic0's 2 counters"),
        "{err}"
    );
    // One, held; a second measurement of the same user would exceed the share.
    let before = m.config("gic0");
    let held = Running(
        member_stat("gic0/AW_RESP/", "8s")
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while m.config("gic0") == before {
        assert!(
            Instant::now() < deadline,
            "the member's event was never programmed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = member_stat("gic0/AW_BEATS/", "1s").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("this user holds 1 and asks 1 more"), "{err}");
    // Root needs both: it takes the member's back and is counted.
    let out = counted_beside(
        &m,
        &lock,
        &["-x,", "-e", "gic0/AW_TRANS,AW_BEATS/", "--", "sleep", "1"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for event in ["AW_TRANS", "AW_BEATS"] {
        let line = text
            .lines()
            .find(|l| l.contains(event))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(!line.contains("<not counted>"), "{line}");
    }
    let mut held = held;
    let status = held.0.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut held.0.stdout.take().unwrap(), &mut out).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut held.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let total = ndjson(&out)
        .into_iter()
        .find(|r| r["record"] == "total" && r["event"] == "AW_RESP")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(total["valid"], false, "{total}");
    assert!(
        total["invalid"]
            .as_str()
            .is_some_and(|w| w.contains("for root's own measurement")),
        "the member's count is not marked: {total}"
    );
}

/// The device lost (the simulator's server killed: every read fails, as a driver
/// unloaded or a failing FUSE tree): within a sweep `bfperf_up` reads 0 and the
/// counters are left out, not exported frozen (they were, with `bfperf_up 1`), and
/// the log says so once, not once per block per sweep (190-250 lines in 10 s).
/// Mounted again at the same path, it is found and programmed again within
/// seconds (it stayed lost until a SIGHUP), its series back.
#[test]
fn a_lost_device_reads_up_0_its_series_left_out_is_logged_once_and_found_again() {
    let Some(mut m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let fresh = m.config("llt0");
    // A state directory of its own: the journal of a device that cannot be put
    // back stays, and must not meet another test's device.
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(
        &state,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o700),
    )
    .unwrap();
    let mut e = Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(dir.path().join("lock"))
            .env("BFPERF_STATE_DIR", &state)
            .args(["exporter", "--config"])
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let port = served_port(&mut e);
    let (_, before) = get(port, "/metrics", "text/plain");
    assert_eq!(sample(&before, "bfperf_up", &[]), 1.0);
    assert!(before.contains("bfperf_events_total{"), "{before}");
    m.lose();
    // The loss seen, then ten seconds more of sweeps (one a second) on a device
    // that fails every read: said once however many there were.
    let deadline = Instant::now() + Duration::from_secs(30);
    while sample(&get(port, "/metrics", "text/plain").1, "bfperf_up", &[]) != 0.0 {
        assert!(Instant::now() < deadline, "the loss was never seen");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(10));
    let (_, after) = get(port, "/metrics", "text/plain");
    assert_eq!(sample(&after, "bfperf_up", &[]), 0.0, "{after}");
    assert!(
        !after.contains("bfperf_events_total{") && !after.contains("bfperf_cycles_total{"),
        "a lost device's counters are still exported: {after}"
    );
    let logged = said(&e);
    let failing: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("cannot be read") || l.contains("failed while"))
        .collect();
    assert_eq!(failing.len(), 1, "{logged}");
    m.revive("3");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = get(port, "/metrics", "text/plain");
        if sample(&body, "bfperf_up", &[]) == 1.0 && body.contains("bfperf_events_total{") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the device was never found again: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let logged = said(&e);
    assert_eq!(logged.matches("answers again").count(), 1, "{logged}");
    // Lost again, and back under another hwmonN, as a driver loaded again: found
    // there and programmed there, its series a counter reset.
    let total = |body: &str| sample(body, "bfperf_cycles_total", &[("block", "llt0")]);
    let at = |_| {
        (
            Instant::now(),
            total(&get(port, "/metrics", "text/plain").1),
        )
    };
    let (t0, c0) = at(());
    std::thread::sleep(Duration::from_secs(1));
    let (t1, before) = at(());
    let rate = (before - c0) / (t1 - t0).as_secs_f64();
    m.lose();
    std::thread::sleep(Duration::from_secs(2));
    m.revive_at("3", 7);
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (_, body) = get(port, "/metrics", "text/plain");
        if sample(&body, "bfperf_up", &[]) == 1.0 && body.contains("bfperf_events_total{") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the device was never found under hwmon7: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // A series that went on would have counted on from `before`; one that
    // restarted counts from the new programming, 2 s or more after `before`.
    let went_on = before + rate * t1.elapsed().as_secs_f64();
    assert!(
        total(&body) < went_on - rate,
        "{before} at {rate}/s, then {body}"
    );
    let moved = m.root().join("class/hwmon/hwmon7");
    assert_ne!(
        std::fs::read_to_string(moved.join("llt0/count_clock"))
            .unwrap()
            .trim(),
        "0",
        "the exporter did not program the device where it was found"
    );
    let logged = said(&e);
    assert!(
        logged.contains(&format!("answers again at {}", moved.display())),
        "{logged}"
    );
    // At its end the exporter puts the device back where it now is.
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    assert!(e.0.wait().unwrap().success(), "{logged}");
    assert_eq!(block_config(&moved, "llt0"), fresh);
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
    crate::common::copy_program(
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

/// A reload, with or without a change of config, never sends a counter backwards:
/// a series that continues keeps its running total (1,962,355,239 fell to
/// 29,622,461 after a SIGHUP that changed the config).
#[test]
fn a_reload_never_sends_a_counter_backwards() {
    let Some((_m, dir, e, port)) = default_exporter() else {
        return;
    };
    let series = [("block", "mss0"), ("event", "SKYLIB_DDN_TX_FLITS")];
    let value = || {
        sample(
            &get(port, "/metrics", "text/plain").1,
            "bfperf_events_total",
            &series,
        )
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = value();
    while last == 0.0 {
        assert!(Instant::now() < deadline, "mss0 never counted");
        std::thread::sleep(Duration::from_millis(100));
        last = value();
    }
    for text in [
        "events = [\"default\"]\n",
        "events = [\"default\", \"gic0/AW_BEATS/\"]\n",
    ] {
        reload_with(&e, dir.path(), text);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, body) = get(port, "/metrics", "text/plain");
            let now = sample(&body, "bfperf_events_total", &series);
            assert!(now >= last, "{now} after {last}, across a reload to {text}");
            if now > last && body.contains("gic0") == text.contains("gic0") {
                last = now;
                break;
            }
            assert!(Instant::now() < deadline, "the reload to {text} never took");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// bfperf and bfperf-exporter copied into `dir`, side by side as the package
/// installs them (where another user can run them); the path of bfperf.
fn installed(dir: &Path) -> PathBuf {
    let exporter = assert_cmd::cargo::cargo_bin!("bfperf-exporter");
    crate::common::copy_program(exporter, &dir.join("bfperf-exporter"));
    let bin = dir.join("bfperf");
    crate::common::copy_program(assert_cmd::cargo::cargo_bin!("bfperf"), &bin);
    bin
}

/// Writes `text` as the config of exporter `e`, served from `dir` ([`config`]),
/// tells it to reload (SIGHUP) and waits until it says how the reload went. The
/// file is replaced whole (written beside it, then renamed), as configuration
/// management does: a reload never reads it half written. Waiting is what keeps
/// the next change from racing this reload: a scrape cannot tell a reload that
/// changed nothing from one not yet made.
fn reload_with(e: &Running, dir: &Path, text: &str) {
    let outcomes = |e: &Running| {
        said(e)
            .lines()
            .filter(|l| {
                ["configuration reloaded", "reload refused", "reload failed"]
                    .iter()
                    .any(|o| l.contains(o))
            })
            .count()
    };
    let before = outcomes(e);
    let next = dir.join(".exporter.toml.next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, dir.join("exporter.toml")).unwrap();
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(60);
    while outcomes(e) == before {
        assert!(
            Instant::now() < deadline,
            "the exporter never said how the reload to {text:?} went: {}",
            said(e)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scrape of `/metrics`, and when its values were read: no earlier than the
/// request's start plus the lag the exposition says, no later than the answer.
fn read_window(port: u16) -> (String, Instant, Instant) {
    let asked = Instant::now();
    let (_, body) = get(port, "/metrics", "text/plain");
    let done = Instant::now();
    let lag = sample(&body, "bfperf_scrape_lag_seconds", &[]);
    let earliest = asked + Duration::from_secs_f64(lag);
    (body, earliest.min(done), done)
}

/// A reload that changes some blocks leaves the others counting: mss0's events
/// across a SIGHUP that adds gic0 are the simulator's rate times the time between
/// the two reads, which each scrape's own lag places within its request (a reload
/// that put every block back and programmed it again lost part of every block's
/// counts: 0.83 of the truth over three seconds here).
#[test]
fn a_reload_keeps_the_blocks_it_does_not_change_counting() {
    let Some((_m, dir, e, port)) = default_exporter() else {
        return;
    };
    let series = [("block", "mss0"), ("event", "SKYLIB_DDN_TX_FLITS")];
    std::thread::sleep(Duration::from_secs(1));
    let (body, from_lo, from_hi) = read_window(port);
    let first = sample(&body, "bfperf_events_total", &series);
    reload_with(
        &e,
        dir.path(),
        "events = [\"default\", \"gic0/AW_BEATS/\"]\n",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_window(port).0.contains("gic0") {
        assert!(
            Instant::now() < deadline,
            "the reload never took: {}",
            said(&e)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(
        (from_hi + Duration::from_secs(3)).saturating_duration_since(Instant::now()),
    );
    let (body, to_lo, to_hi) = read_window(port);
    let last = sample(&body, "bfperf_events_total", &series);
    // The seconds mss0 counted for, at the simulator's rate, against the seconds
    // between the two reads (one count of rounding either way).
    let rate = bf3_event_rate("mss0", "SKYLIB_DDN_TX_FLITS");
    let counted = (last - first) / rate;
    let (shortest, longest) = (
        to_lo.saturating_duration_since(from_hi).as_secs_f64() - 1.0 / rate,
        (to_hi - from_lo).as_secs_f64() + 1.0 / rate,
    );
    assert!(
        (shortest..=longest).contains(&counted),
        "mss0 across a reload that changed gic0 counted {counted:.4} s at the simulator's \
         rate, read between {shortest:.4} s and {longest:.4} s apart: {}",
        said(&e)
    );
    assert!(said(&e).contains("configuration reloaded"), "{}", said(&e));
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
    let out = crate::remote_write::exporter_of(&dir.path().join("no-such.toml"))
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

/// A member's words reach the log escaped as the text path escapes them: the
/// command a client says it runs, with bidirectional overrides and isolates and
/// the line and paragraph separators in it, is one line in logfmt and in JSON,
/// every such character written as `\uXXXX` (they were written raw).
#[test]
fn a_clients_words_reach_the_structured_log_escaped() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let hostile =
        "stat \u{202e}gnirts\u{202c} \u{2066}x\u{2069}\u{2028}level=error msg=forged\u{2029}end";
    for format in ["logfmt", "json"] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), "events = [\"default\"]\n");
        let (e, _) = serve_with(&m, dir.path(), &cfg, &["--log.format", format]);
        let mut client =
            std::os::unix::net::UnixStream::connect(dir.path().join("lock.sock")).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let ask = serde_json::json!({"bfperf": 2, "count": {"specs": ["llt0/HNF0_DIR_HIT/"], "command": hostile}});
        writeln!(client, "{ask}").unwrap();
        let mut answer = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&client), &mut answer).unwrap();
        assert!(answer.contains("granted"), "{answer}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !said(&e).contains("gnirts") {
            assert!(Instant::now() < deadline, "{}", said(&e));
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = said(&e);
        let line = log.lines().find(|l| l.contains("gnirts")).unwrap();
        for c in [
            '\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\u{2028}', '\u{2029}',
        ] {
            assert!(
                !log.contains(c),
                "{format}: U+{:04X} raw in {line}",
                c as u32
            );
            assert!(
                line.contains(&format!("\\u{:04x}", c as u32)),
                "{format}: U+{:04X} not escaped in {line}",
                c as u32
            );
        }
        assert!(
            !log.lines().any(|l| l.starts_with("level=error msg=forged")),
            "{log}"
        );
        if format == "json" {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["msg"].as_str().unwrap().contains(hostile), "{line}");
        }
    }
}

/// A SIGHUP with the config as it is changes nothing: the exporter's counters go
/// on and a client counting beside it is not cut short (it was: every reload
/// ended every client and restarted every counter).
#[test]
fn an_identical_reload_changes_nothing_and_keeps_its_clients() {
    let Some((m, dir, e, _port)) = default_exporter() else {
        return;
    };
    let gic0 = m.config("gic0");
    let client = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(dir.path().join("lock"))
        .args([
            "stat",
            "-o",
            "-",
            "--json",
            "-e",
            "gic0/AW_BEATS/",
            "--",
            "sleep",
            "3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while m.config("gic0") == gic0 {
        assert!(
            Instant::now() < until,
            "the client's event was never programmed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGHUP) };
    let out = client.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client was cut short: {err}");
    let total = ndjson(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .find(|r| r["record"] == "total" && r["event"] == "AW_BEATS")
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        total["valid"] == true && total["value"].as_f64().unwrap() > 0.0,
        "{total}"
    );
    let log = said(&e);
    assert!(log.contains("unchanged"), "{log}");
    assert!(!log.contains("ended (the exporter reloads"), "{log}");
}

/// A short spell of failed reads of mss0's counters, as a flaky bus gives: the
/// 40th to the 47th after the simulator starts (past the exporter's start; a
/// probe's failed read between sweeps is read again at once, nothing lost and
/// nothing said, so a spell reaches a sweep).
const SPELL: [&str; 8] = [
    "mss0/counter*@40=EIO",
    "mss0/counter*@41=EIO",
    "mss0/counter*@42=EIO",
    "mss0/counter*@43=EIO",
    "mss0/counter*@44=EIO",
    "mss0/counter*@45=EIO",
    "mss0/counter*@46=EIO",
    "mss0/counter*@47=EIO",
];

/// Reads that fail (EIO on mss0's counters, [`SPELL`]) are those reads' fault,
/// not a lost device: scraped ten times a second across them, no counter series
/// ever goes backwards (`resets()` 0) and nothing is programmed again (all of
/// them restarted from 0 a tenth of a second later).
#[test]
fn a_failed_read_is_not_a_lost_device() {
    let Some(m) = Mount::start_with("3", "6.16", &["--sim-faults", &SPELL.join(",")]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let (e, port) = serve(&m, dir.path(), &cfg);
    let totals = |body: &str| -> std::collections::BTreeMap<String, f64> {
        body.lines()
            .filter(|l| {
                l.starts_with("bfperf_events_total{") || l.starts_with("bfperf_cycles_total{")
            })
            .filter_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                Some((series.to_string(), v.parse().ok()?))
            })
            .collect()
    };
    let mut last = totals(&get(port, "/metrics", "text/plain").1);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after_fault = 0;
    while after_fault < 30 {
        assert!(
            Instant::now() < deadline,
            "the fault never came: {}",
            said(&e)
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = totals(&get(port, "/metrics", "text/plain").1);
        for (series, v) in &now {
            if let Some(before) = last.get(series) {
                assert!(
                    v >= before,
                    "{series} went from {before} to {v}: {}",
                    said(&e)
                );
            }
        }
        last.extend(now);
        if said(&e).contains("cannot be read") {
            after_fault += 1;
        }
    }
    let log = said(&e);
    assert!(
        !log.contains("answers again") && !log.contains("programming it again"),
        "{log}"
    );
    assert!(log.contains("reads again"), "{log}");
}

/// What Prometheus sees across a failed read, an identical reload and one that
/// changes another block: no counter series of the exporter ever goes backwards
/// (`resets()` 0 over all of it), and mss0's series goes on.
#[test]
fn prometheus_sees_no_reset_across_a_fault_and_reloads() {
    let Some((_, prometheus)) = prometheus_tools() else {
        return;
    };
    let Some(m) = Mount::start_with("3", "6.16", &["--sim-faults", &SPELL.join(",")]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let (e, port) = serve(&m, dir.path(), &cfg);
    let (_p, prom_port) = scraping(&prometheus, dir.path(), port);
    let q = |s: &str| prometheus_query(prom_port, s);
    let mss0 = "bfperf_events_total{block=\"mss0\",event=\"SKYLIB_DDN_TX_FLITS\"}";
    let scrapes = |n: f64| {
        let deadline = Instant::now() + Duration::from_secs(90);
        let start = q(&format!("count_over_time({mss0}[5m])")).unwrap_or(0.0);
        while q(&format!("count_over_time({mss0}[5m])")).unwrap_or(0.0) < start + n {
            assert!(
                Instant::now() < deadline,
                "Prometheus stopped scraping: {}",
                said(&e)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    // The fault, then an identical reload, then one that adds gic0.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !said(&e).contains("cannot be read") {
        assert!(
            Instant::now() < deadline,
            "the fault never came: {}",
            said(&e)
        );
        // Sweeps between Prometheus' scrapes bring the spell sooner.
        get(port, "/metrics", "text/plain");
        std::thread::sleep(Duration::from_millis(100));
    }
    scrapes(3.0);
    for text in [
        "events = [\"default\"]\n",
        "events = [\"default\", \"gic0/AW_BEATS/\"]\n",
    ] {
        reload_with(&e, dir.path(), text);
        scrapes(3.0);
    }
    scrapes(10.0);
    for family in ["bfperf_events_total", "bfperf_cycles_total"] {
        let resets = q(&format!("sum(resets({family}[5m]))"));
        assert_eq!(resets, Some(0.0), "{family}: {}", said(&e));
    }
    // The series went on through all of it (its rate against the simulator's is
    // `a_real_prometheus_scrapes_it_and_computes_the_simulators_rates`'s).
    let rate = q(&format!("rate({mss0}[10s])")).unwrap_or_else(|| panic!("no rate of {mss0}"));
    assert!(rate > 0.0, "{mss0} stopped: {}", said(&e));
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
