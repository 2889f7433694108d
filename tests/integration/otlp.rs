//! OTLP/HTTP push against a receiver built on the official opentelemetry-proto
//! bindings (`tests/otlp/receiver.py`): every request decodes; counters are
//! cumulative monotonic Sums whose start time holds; gauges carry base units; the
//! points give the simulator's rates; a receiver down for 30 s loses nothing the
//! queue holds; a refusal is counted; TLS with a CA and a token works.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::Duration;

use crate::support::*;
use crate::support::{config, get, said, Running};
use crate::support::{exporter_of, sim_exporter, wait_until, Refuser};

/// A Python with the opentelemetry-proto bindings: `BFPERF_OTLP_PYTHON` (CI's
/// venv) or `python3`; None (after saying why) where there is none.
fn otlp_python() -> Option<PathBuf> {
    let python = std::env::var_os("BFPERF_OTLP_PYTHON").map_or("python3".into(), PathBuf::from);
    let ok = Process::new(&python)
        .args(["-c", "import opentelemetry.proto.collector.metrics.v1"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let why = match ok {
        true => Ok(()),
        false => Err(format!(
            "{} cannot import opentelemetry.proto (pip install opentelemetry-proto)",
            python.display()
        )),
    };
    required("otlp", "the OTLP tests", why).then_some(python)
}

/// The receiver, writing what it decodes to `out`, on `port` (0: any); its port.
fn receiver(python: &Path, out: &Path, port: u16, extra: &[&str]) -> (Running, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
    let mut child = Process::new(python)
        .arg(script)
        .arg(out)
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the receiver did not start: {line:?}"));
    (Running(child), port)
}

/// Every line the receiver wrote.
fn lines(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The points of one series of `name` whose attributes hold `attrs`.
fn series<'a>(
    all: &'a [serde_json::Value],
    name: &str,
    attrs: &[(&str, &str)],
) -> Vec<&'a serde_json::Value> {
    all.iter()
        .filter(|p| p["name"] == name && attrs.iter().all(|(k, v)| p["attributes"][k] == *v))
        .collect()
}

/// The exporter of the simulated BlueField-3 pushing over OTLP every second, with
/// `more` in its `[otlp]` section; its port.
fn otlp_exporter(dir: &Path, name: &str, endpoint: &str, more: &str) -> (Running, u16) {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let cfg = config(
        &sub,
        &format!(
            "events = [\"default\"]\nmetrics = [\"ddr\"]\nmetric_gauges = true\n\
             [otlp]\nendpoint = \"{endpoint}\"\ninterval = \"1s\"\n{more}"
        ),
    );
    sim_exporter(&sub, &cfg)
}

#[test]
fn otlp_counters_are_cumulative_sums_giving_the_simulators_rates() {
    let Some(python) = otlp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("points.ndjson");
    let (_r, port) = receiver(&python, &out, 0, &[]);
    let (_e, _) = otlp_exporter(
        dir.path(),
        "dpu",
        &format!("http://127.0.0.1:{port}/v1/metrics"),
        "resource_attributes = { \"deployment.environment\" = \"test\" }\n",
    );
    let mss0 = [("block", "mss0"), ("event", "SKYLIB_DDN_TX_FLITS")];
    wait_until(
        "five points of mss0's DDR reads",
        Duration::from_secs(60),
        || series(&lines(&out), "bfperf_events", &mss0).len() >= 5,
    );
    let all = lines(&out);
    assert!(
        all.iter().all(|l| l.get("undecodable").is_none()),
        "a request did not decode: {all:?}"
    );
    let requests: Vec<_> = all.iter().filter(|l| l["request"] == true).collect();
    assert!(requests
        .iter()
        .all(|r| r["type"] == "application/x-protobuf" && r["encoding"] == "gzip"));
    // Counters: cumulative (2), monotonic, one start time, never falling.
    let mut ddr_read = 0.0;
    for block in ["mss0", "mss1"] {
        let points = series(&all, "bfperf_events", &[("block", block), mss0[1]]);
        let first = points[0];
        assert_eq!(first["kind"], "sum", "{first}");
        assert_eq!(
            (first["temporality"].as_i64(), first["monotonic"].as_bool()),
            (Some(2), Some(true))
        );
        assert_eq!(first["unit"], "1");
        assert_eq!(first["value_kind"], "as_double");
        for w in points.windows(2) {
            assert_eq!(w[0]["start"], w[1]["start"], "the start time moved: {w:?}");
            assert!(w[1]["value"].as_f64() >= w[0]["value"].as_f64(), "{w:?}");
            assert!(w[1]["time"].as_u64() > w[0]["time"].as_u64(), "{w:?}");
        }
        assert!(first["start"].as_u64().unwrap() < first["time"].as_u64().unwrap());
        // The rate from consecutive points, over the span they cover.
        let (a, b) = (points[1], points[points.len() - 1]);
        let dv = b["value"].as_f64().unwrap() - a["value"].as_f64().unwrap();
        let dt = (b["time"].as_u64().unwrap() - a["time"].as_u64().unwrap()) as f64 / 1e9;
        ddr_read += dv / dt * 64.0;
        let attrs = &first["attributes"];
        assert_eq!(attrs["kind"], "mss");
        assert_eq!(attrs["generation"], "BlueField-3");
        let resource = &first["resource"];
        assert_eq!(resource["service.name"], "bfperf");
        assert_eq!(resource["service.version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(resource["bfperf.generation"], "BlueField-3");
        assert_eq!(resource["deployment.environment"], "test");
        assert!(resource["host.name"]
            .as_str()
            .is_some_and(|h| !h.is_empty()));
        assert!(resource["bfperf.device"].as_str().is_some());
    }
    let truth = bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS") * 1e9;
    assert!(
        ((ddr_read - truth) / truth).abs() < 0.02,
        "DDR read {ddr_read} B/s from the points, the simulator's {truth}"
    );
    // Metrics: gauges in base units, per block, the same as the sums' rates.
    let name = "bfperf_metric_ddr_read_bandwidth_bytes_per_second";
    let gauge = series(&all, name, &[("kind", "mss")]);
    let last = gauge.last().unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(
        (last["kind"].as_str(), last["unit"].as_str()),
        (Some("gauge"), Some("By/s"))
    );
    let v: f64 = gauge
        .iter()
        .filter(|p| p["time"] == last["time"])
        .map(|p| p["value"].as_f64().unwrap())
        .sum();
    assert!(((v - truth) / truth).abs() < 0.02, "{v} against {truth}");
}

#[test]
fn an_otlp_receiver_down_30_s_loses_nothing_the_queue_holds() {
    let Some(python) = otlp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = (
        dir.path().join("before.ndjson"),
        dir.path().join("after.ndjson"),
    );
    let (r, port) = receiver(&python, &before, 0, &[]);
    let (_e, listen) = otlp_exporter(
        dir.path(),
        "dpu",
        &format!("http://127.0.0.1:{port}/v1/metrics"),
        "",
    );
    let mss0 = [("block", "mss0"), ("event", "SKYLIB_DDN_TX_FLITS")];
    wait_until("points before the outage", Duration::from_secs(60), || {
        series(&lines(&before), "bfperf_events", &mss0).len() >= 3
    });
    drop(r);
    std::thread::sleep(Duration::from_secs(30));
    let (_r, _) = receiver(&python, &after, port, &[]);
    wait_until("the queue delivered", Duration::from_secs(60), || {
        let (_, body) = get(listen, "/metrics", "text/plain");
        body.lines()
            .any(|l| l.starts_with("bfperf_otlp_queue_samples ") && l.ends_with(" 0"))
            && series(&lines(&after), "bfperf_events", &mss0).len() >= 30
    });
    let mut all = lines(&before);
    all.extend(lines(&after));
    let points = series(&all, "bfperf_events", &mss0);
    // Requests tried again through the outage are the same requests: no point
    // says the count started again.
    assert!(
        points.iter().all(|p| p["start"] == points[0]["start"]),
        "a start time moved: {:?}",
        points.iter().map(|p| &p["start"]).collect::<Vec<_>>()
    );
    // Every sweep's samples arrived, the outage's too: the exporter's own count of
    // what it queued (read as it swept, in the same request) grows by one sweep's
    // samples from point to point, never by two sweeps'. (Counted, not timed: a
    // sweep a loaded machine runs late is still one sweep; one whose metric a busy
    // machine left without a value queues those samples fewer.)
    let mut queued: Vec<(u64, f64)> = series(&all, "bfperf_otlp_samples_in", &[])
        .iter()
        .map(|p| (p["time"].as_u64().unwrap(), p["value"].as_f64().unwrap()))
        .collect();
    queued.sort_by_key(|p| p.0);
    queued.dedup_by_key(|p| p.0);
    // (The first sweep has no rates yet: its request is smaller.)
    let steps: Vec<f64> = queued.windows(2).skip(1).map(|w| w[1].1 - w[0].1).collect();
    let full = steps.iter().cloned().fold(0.0, f64::max);
    assert!(
        steps.len() >= 32 && steps.iter().all(|s| *s > full / 2.0),
        "sweeps missing: samples queued between points {steps:?}"
    );
    let (_, body) = get(listen, "/metrics", "text/plain");
    assert!(
        body.contains("bfperf_otlp_dropped_samples_total{reason=\"queue_full\"} 0"),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l.starts_with("bfperf_otlp_failures_total ") && !l.ends_with(" 0")),
        "{body}"
    );
}

#[test]
fn otlp_over_tls_with_a_ca_a_server_name_and_a_token_and_a_refusal_counted() {
    let Some(python) = otlp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A certificate for a name the address does not carry: server_name says it.
    let cert = rcgen::generate_simple_self_signed(vec!["otlp.test".into()]).unwrap();
    std::fs::write(d.join("server.crt"), cert.cert.pem()).unwrap();
    std::fs::write(d.join("server.key"), cert.signing_key.serialize_pem()).unwrap();
    let out = d.join("points.ndjson");
    let (_r, port) = receiver(
        &python,
        &out,
        0,
        &[
            "--cert",
            d.join("server.crt").to_str().unwrap(),
            "--key",
            d.join("server.key").to_str().unwrap(),
            "--refuse",
            "2",
            "--partial",
            "1",
        ],
    );
    let sub = d.join("dpu");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(d.join("server.crt"), sub.join("ca.crt")).unwrap();
    std::fs::write(sub.join("token"), "t0ken\n").unwrap();
    let (e, listen) = otlp_exporter(
        d,
        "dpu",
        &format!("https://127.0.0.1:{port}/v1/metrics"),
        "ca_file = \"ca.crt\"\nserver_name = \"otlp.test\"\nbearer_token_file = \"token\"\n\
         headers = { \"X-Scope-OrgID\" = \"dpu-fleet\" }\n",
    );
    wait_until(
        "points over TLS after two refusals",
        Duration::from_secs(60),
        || lines(&out).iter().any(|l| l["name"] == "bfperf_events"),
    );
    let all = lines(&out);
    assert_eq!(all.iter().filter(|l| l["refused"] == true).count(), 2);
    let request = all.iter().find(|l| l["request"] == true).unwrap();
    assert_eq!(request["authorization"], "Bearer t0ken");
    assert_eq!(request["tenant"], "dpu-fleet");
    // The two refused requests' samples, and the three points the partial success
    // rejected, are counted as refused, not retried; every sample queued is
    // accepted, refused or waiting, as one scrape reads them.
    let counted: f64 = all
        .iter()
        .filter(|l| l["refused"] == true)
        .map(|l| l["points"].as_f64().unwrap())
        .sum::<f64>()
        + 3.0;
    assert_eq!(all.iter().filter(|l| l["partial"] == true).count(), 1);
    let (_, body) = get(listen, "/metrics", "text/plain");
    let value = |series: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {body}"))
    };
    let refused = value("bfperf_otlp_dropped_samples_total{reason=\"refused\"}");
    assert_eq!(refused, counted, "{body}");
    assert_eq!(
        value("bfperf_otlp_samples_in_total"),
        value("bfperf_otlp_samples_total")
            + refused
            + value("bfperf_otlp_dropped_samples_total{reason=\"queue_full\"}")
            + value("bfperf_otlp_queue_samples"),
        "{body}"
    );
    // The refusals' google.rpc.Status and the partial success, said by their
    // messages.
    let err = said(&e);
    assert!(
        err.contains("(dropped): HTTP 400 refused by the test")
            && err.contains("rejected 3 of ")
            && err.contains("3 points rejected by the test"),
        "{err}"
    );
}

/// A partial success as a hostile receiver sends it: i64::MAX points rejected, and
/// a message with a newline and a terminal escape.
fn claims_everything(conn: &mut std::net::TcpStream) {
    use std::io::Write;
    let message = b"all\nof it \x1b[31mred";
    let mut inner = vec![0x08];
    inner.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
    inner.extend([0x12, message.len() as u8]);
    inner.extend(message);
    let mut body = vec![0x0a, inner.len() as u8];
    body.extend(inner);
    let _ = write!(
        conn,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(&body);
}

/// An answer that says a gigabyte follows and sends it until the exporter hangs up
/// (half a minute at most).
fn endless(conn: &mut std::net::TcpStream) {
    use std::io::Write;
    let _ = conn.write_all(b"Content-Length: 1000000000\r\nConnection: close\r\n\r\n");
    let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
    let end = std::time::Instant::now() + Duration::from_secs(30);
    let chunk = [0x0a; 8192];
    while std::time::Instant::now() < end && conn.write_all(&chunk).is_ok() {}
}

/// What a receiver answers is another party's input: a partial success claiming
/// more points than the request held rejects what it held, no more, and its
/// message reaches the log as one line of text; an answer without end is read in
/// part (64 KiB): it never holds a request to its deadline, keeps a connection
/// open or fills memory.
#[test]
fn a_hostile_receivers_answers_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (claims, without_end) = (
        Refuser::answering(
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf",
            claims_everything,
        ),
        Refuser::answering(
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf",
            endless,
        ),
    );
    let at = |r: &Refuser| format!("http://127.0.0.1:{}/v1/metrics", r.port);
    let (c, listen_c) = otlp_exporter(dir.path(), "claims", &at(&claims), "");
    let (e, listen_e) = otlp_exporter(dir.path(), "endless", &at(&without_end), "");
    wait_until("three answers each", Duration::from_secs(60), || {
        claims.requests() >= 3 && without_end.requests() >= 3
    });
    let value = |body: &str, series: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {body}"))
    };
    // Everything the claiming receiver took is refused; the books still balance.
    let (_, body) = get(listen_c, "/metrics", "text/plain");
    let refused = value(
        &body,
        "bfperf_otlp_dropped_samples_total{reason=\"refused\"}",
    );
    assert!(refused > 0.0, "{body}");
    assert_eq!(value(&body, "bfperf_otlp_samples_total"), 0.0, "{body}");
    assert_eq!(
        value(&body, "bfperf_otlp_samples_in_total"),
        refused + value(&body, "bfperf_otlp_queue_samples"),
        "{body}"
    );
    let err = said(&c);
    let line = err
        .lines()
        .find(|l| l.contains("rejected"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("(dropped): all of it  [31mred\"") && !err.contains('\x1b'),
        "{err}"
    );
    // The endless answers were accepted, none failed at the deadline, and their
    // connections are closed: the open descriptors do not grow with the requests
    // (six more; at any moment one request may be on its way and the one before
    // closing).
    let (_, first) = get(listen_e, "/metrics", "text/plain");
    let seen = without_end.requests();
    wait_until("six answers more", Duration::from_secs(60), || {
        without_end.requests() >= seen + 6
    });
    let (_, body) = get(listen_e, "/metrics", "text/plain");
    assert!(value(&body, "bfperf_otlp_samples_total") > 0.0, "{body}");
    assert_eq!(value(&body, "bfperf_otlp_failures_total"), 0.0, "{body}");
    assert!(
        value(&body, "process_open_fds") <= value(&first, "process_open_fds") + 2.0,
        "{first}\n{body}"
    );
    // Its peak: a body read whole would be a gigabyte (the exporter takes 11 MB;
    // under an emulator, the emulator is counted too).
    let status = std::fs::read_to_string(format!("/proc/{}/status", e.0.id())).unwrap();
    let peak_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        peak_kb < 256e3,
        "the exporter took {peak_kb} kB at its peak"
    );
}

#[test]
fn an_otlp_section_with_remote_writes_keys_is_refused_before_the_device_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    for (section, want) in [
        (
            "url = \"http://127.0.0.1:1/v1/metrics\"\n",
            "otlp: url is not a key of this section",
        ),
        ("interval = \"1s\"\n", "otlp: endpoint is missing"),
        (
            "endpoint = \"http://127.0.0.1:1/v1/metrics\"\nheaders = { Authorization = \"x\" }\n",
            "otlp: headers: Authorization is bfperf's to send",
        ),
    ] {
        let cfg = config(
            dir.path(),
            &format!("events = [\"default\"]\n[otlp]\n{section}"),
        );
        exporter_of(&cfg)
            .assert()
            .code(1)
            .stderr(predicates::str::contains(want));
    }
}
