//! promtool and a real Prometheus server: found or required, started on loopback
//! scraping an exporter, asked over its HTTP API; and the window its rates may span.

use super::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};

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
pub(crate) fn promtool_accepts(promtool: &Path, text: &str) {
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

pub(crate) fn prometheus_query(port: u16, query: &str) -> Option<f64> {
    prometheus_query_at(port, query, None)
}

/// An instant query's value at `at` (seconds since the epoch), or now.
pub(crate) fn prometheus_query_at(port: u16, query: &str, at: Option<f64>) -> Option<f64> {
    prometheus_result(port, query, at)?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// Prometheus' answer to an instant query at `at`, or now: its result list.
pub(crate) fn prometheus_results(
    port: u16,
    query: &str,
    at: Option<f64>,
) -> Option<serde_json::Value> {
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
pub(crate) fn prometheus_result(
    port: u16,
    query: &str,
    at: Option<f64>,
) -> Option<serde_json::Value> {
    prometheus_results(port, query, at)?
        .get_mut(0)
        .map(serde_json::Value::take)
}

/// The stored samples (seconds, value) a range selector holds at `at`.
pub(crate) fn prometheus_samples(port: u16, selector: &str, at: f64) -> Vec<(f64, f64)> {
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
pub(crate) struct RateWindow {
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
    pub(crate) fn candidates(prom_port: u16, instance: &str, q: &str) -> (f64, Vec<RateWindow>) {
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
    pub(crate) fn at(prom_port: u16, instance: &str, at: f64) -> RateWindow {
        RateWindow::of(&RateWindow::scrapes(prom_port, instance, at), at)
    }

    /// The scrapes of the window ending at `at` that answered, as (stamp, lag,
    /// length): a scrape that timed out (a loaded machine) has a length but no
    /// values, and rate() does not see it either.
    pub(crate) fn scrapes(prom_port: u16, instance: &str, at: f64) -> Vec<(f64, f64, f64)> {
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
    pub(crate) fn of(scrapes: &[(f64, f64, f64)], at: f64) -> RateWindow {
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
    pub(crate) fn holds(&self, got: f64, truth: f64) -> bool {
        let e = got / (truth * self.scale) - 1.0;
        (self.low - 1e-9..=self.high + 1e-9).contains(&e)
    }

    /// Whether a ratio of two rates `got` is `truth`: the scale cancels; each rate
    /// is off within the ends' bounds.
    pub(crate) fn holds_for_ratio(&self, got: f64, truth: f64) -> bool {
        let r = got / truth;
        let (lo, hi) = (
            (1.0 + self.low) / (1.0 + self.high),
            (1.0 + self.high) / (1.0 + self.low),
        );
        (lo - 1e-9..=hi + 1e-9).contains(&r)
    }
}

pub(crate) fn prometheus_series(port: u16, query: &str) -> usize {
    prometheus_results(port, query, None)
        .and_then(|r| r.as_array().map(Vec::len))
        .unwrap_or(0)
}
