//! Remote write against a real Prometheus (its remote-write receiver): the pushed
//! counters give the simulator's rates; a receiver down for 30 s loses nothing a
//! large queue holds, and a small queue loses exactly what it counts as dropped.

use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::time::Duration;

use crate::support::*;
use crate::support::{config, get, prometheus_port, prometheus_query, prometheus_tools, Running};

/// Prometheus with its remote-write receiver, its data in `dir`, on `port` (0: the
/// port it binds and says); with `web` (its web config: TLS, basic auth) when
/// given. Its port.
fn receiver(prometheus: &Path, dir: &Path, port: u16, web: Option<&Path>) -> (Running, u16) {
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, "global:\n  scrape_interval: 15s\n").unwrap();
    let mut p = Process::new(prometheus);
    p.arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver");
    if let Some(web) = web {
        p.arg(format!("--web.config.file={}", web.display()));
    }
    let mut p = Running(
        p.stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let port = prometheus_port(&mut p);
    (p, port)
}

/// An exporter of the simulated BlueField-3 pushing every second to `port`.
fn pusher(dir: &Path, name: &str, port: u16, queue: usize) -> Running {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let cfg = config(
        &sub,
        &format!(
            "events = [\"default\"]\n[remote_write]\nurl = \"http://127.0.0.1:{port}/api/v1/write\"\n\
             interval = \"1s\"\nqueue_samples = {queue}\nlabels = {{ instance = \"{name}\" }}\n"
        ),
    );
    Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .args(["--sim", "bf3", "--lock-file"])
            .arg(sub.join("lock"))
            .arg("exporter")
            .arg("--config")
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The raw samples (time in seconds, value) of `series` over the last `range`.
fn samples(port: u16, series: &str, range: &str) -> Vec<(f64, f64)> {
    let q: String = format!("{series}[{range}]")
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (_, body) = get(port, &format!("/api/v1/query?query={q}"), "*/*");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["result"][0]["values"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p[0].as_f64()?, p[1].as_str()?.parse().ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The pushes of `instance` the receiver holds over the last `range`: each one's
/// time, and the samples the pusher had queued before it (its own
/// `bfperf_remote_write_samples_in_total`, read as it swept). The difference
/// between two stored pushes' counts is what was queued from the first up to
/// the second, stored or not: how many pushes are missing between them,
/// whatever the clock did.
fn pushes(port: u16, instance: &str, range: &str) -> Vec<(f64, f64)> {
    samples(
        port,
        &format!("bfperf_remote_write_samples_in_total{{instance=\"{instance}\"}}"),
        range,
    )
}

/// The value `series` had in the push at time `t`.
fn value_at(port: u16, series: &str, t: f64) -> f64 {
    samples(port, series, "300s")
        .into_iter()
        .find(|s| (s.0 - t).abs() < 1e-6)
        .unwrap_or_else(|| panic!("no sample of {series} at {t}"))
        .1
}

#[test]
fn remote_write_gives_the_simulators_rates_and_a_receiver_outage_loses_only_what_it_counts() {
    let Some((_, prometheus)) = prometheus_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (first, port) = receiver(&prometheus, dir.path(), 0, None);
    let mut prom = Some(first);
    // Two DPUs: one queue holds the whole outage, one holds about ten pushes (a
    // hundred series each) of it.
    let _big = pusher(dir.path(), "big", port, 100_000);
    let _small = pusher(dir.path(), "small", port, 1_000);
    let q = |s: &str| prometheus_query(port, s);
    wait_until("ten pushes of each", Duration::from_secs(90), || {
        q("min(count_over_time(bfperf_up[10s]))").is_some_and(|n| n >= 10.0)
    });
    // The receiver's rate() of DDR and LLC counters against the simulator's truth.
    for (block, event) in [
        ("mss0", "SKYLIB_DDN_TX_FLITS"),
        ("mss0", "SKYLIB_DDN_RX_FLITS"),
        ("llt0", "GDC_BANK0_RD_REQ"),
        ("llt_miss0", "GDC_MISS_MACHINE_RD_REQ"),
    ] {
        let query = format!(
            "rate(bfperf_events_total{{instance=\"big\",block=\"{block}\",event=\"{event}\"}}[8s])"
        );
        let got = q(&query).unwrap_or_else(|| panic!("no value for {query}"));
        let want = bf3_event_rate(block, event);
        assert!(
            ((got - want) / want).abs() <= 0.02,
            "{query}: {got}, the simulator counts {want}"
        );
    }
    // The receiver down for 30 s, then back on the same data.
    drop(prom.take());
    std::thread::sleep(Duration::from_secs(30));
    // Back at the address the pushers know (a restart binds it again).
    prom = Some(receiver(&prometheus, dir.path(), port, None).0);
    // Both queues delivered what they held.
    wait_until("the queues drained", Duration::from_secs(120), || {
        q("max(bfperf_remote_write_queue_samples) < 200").is_some()
            && q("max(time() - timestamp(bfperf_up)) < 3").is_some()
    });
    // Every push queued after a full batch (the first sweep has no rates yet).
    let per_push = q("count({instance=\"small\"} offset 1s)").unwrap();
    let steps = |pushes: &[(f64, f64)]| -> Vec<(usize, f64, f64)> {
        pushes
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[0].1 >= per_push)
            .map(|(i, w)| (i, w[1].0 - w[0].0, w[1].1 - w[0].1))
            .collect()
    };
    // The large queue: every push of the outage arrived, nothing dropped.
    let big = pushes(port, "big", "150s");
    let missing: Vec<_> = steps(&big)
        .into_iter()
        .filter(|s| s.2 != per_push)
        .collect();
    assert!(
        missing.is_empty() && big.len() > 40,
        "pushes of the large queue are missing (at, seconds, samples queued between): \
         {missing:?} of {big:?}"
    );
    assert_eq!(
        q("sum(bfperf_remote_write_dropped_samples_total{instance=\"big\"})"),
        Some(0.0)
    );
    // The small queue: one gap, and what it dropped is exactly what is missing.
    let small = pushes(port, "small", "150s");
    let gaps: Vec<_> = steps(&small)
        .into_iter()
        .filter(|s| s.2 != per_push)
        .collect();
    let [(i, gap, queued)] = gaps[..] else {
        panic!("not one gap in the small queue's pushes: {gaps:?} of {small:?}");
    };
    assert!(
        gap > 10.0,
        "the small queue's gap: {gap} s of a 30 s outage"
    );
    let dropped_series =
        "bfperf_remote_write_dropped_samples_total{instance=\"small\",reason=\"queue_full\"}";
    let dropped = q(dropped_series).expect("the small queue's dropped samples")
        - value_at(port, dropped_series, small[i].0);
    // The samples queued from the push before the gap up to the one after it, but
    // for that push's own.
    let unstored = queued - per_push;
    assert_eq!(
        dropped, unstored,
        "dropped {dropped} samples; {unstored} queued in the gap never arrived ({per_push} a push)"
    );
    // The queue held what its bound allows (whole pushes) while the receiver was
    // down, and no more than that and a request's half of it while one was on
    // its way. (Whether the pushes it held reach the receiver depends on when the
    // sender's backoff tries again; either way they are stored or counted above.)
    let most = q("max_over_time(bfperf_remote_write_queue_samples{instance=\"small\"}[150s])")
        .expect("the small queue's size");
    assert!(
        most > 1_000.0 - per_push && most <= 1_500.0,
        "the small queue held at most {most} samples, not its bound's whole pushes"
    );
    drop(prom);
}

#[test]
fn a_bad_remote_write_section_is_refused_before_the_device_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    for (body, says) in [
        ("url = \"ftp://x/\"", "is not http:// or https://"),
        (
            "url = \"http://127.0.0.1:9/w\"\ninterval = \"10ms\"",
            "interval must be 1s or more",
        ),
        (
            "url = \"http://127.0.0.1:9/w\"\nbearer_token_file = \"/nonexistent\"",
            "bearer_token_file",
        ),
        (
            "url = \"http://127.0.0.1:9/w\"\nlabels = { __x = \"1\" }",
            "is not a label name",
        ),
        (
            "url = \"http://127.0.0.1:9/w\"\nqueue_samples = 5",
            "queue_samples 5",
        ),
    ] {
        let cfg = config(
            dir.path(),
            &format!("events = [\"default\"]\n[remote_write]\n{body}\n"),
        );
        bfperf()
            .args(["--sim", "bf3", "exporter", "--config"])
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0"])
            .timeout(Duration::from_secs(10))
            .assert()
            .code(1)
            .stderr(predicates::str::contains(says));
    }
}

#[test]
fn remote_write_over_tls_with_basic_auth_and_a_refusal_counted() {
    let Some((_, prometheus)) = prometheus_tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    std::fs::write(d.join("server.crt"), cert.cert.pem()).unwrap();
    std::fs::write(d.join("server.key"), cert.signing_key.serialize_pem()).unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(
        d.join("web.yml"),
        format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  dpu: {hash}\n"),
    )
    .unwrap();
    let (_prom, port) = receiver(&prometheus, d, 0, Some(&d.join("web.yml")));
    let start = |name: &str, password: &str| {
        let sub = d.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("password"), format!("{password}\n")).unwrap();
        std::fs::copy(d.join("server.crt"), sub.join("ca.crt")).unwrap();
        let cfg = config(
            &sub,
            &format!(
                "events = [\"default\"]\n[remote_write]\nurl = \"https://127.0.0.1:{port}/api/v1/write\"\n\
                 interval = \"1s\"\nca_file = \"ca.crt\"\nlabels = {{ instance = \"{name}\" }}\n\
                 basic_auth = {{ username = \"dpu\", password_file = \"password\" }}\n"
            ),
        );
        sim_exporter(&sub, &cfg)
    };
    let (_good, _) = start("good", "s3cret");
    let (_bad, bad_port) = start("bad", "wrong");
    // Prometheus' API needs the credentials too: read it over curl.
    // How many series the query found; None unless Prometheus answered it.
    let query = |q: &str| -> Option<usize> {
        let out = Process::new("curl")
            .args(["-s", "--cacert"])
            .arg(d.join("server.crt"))
            .args([
                "-u",
                "dpu:s3cret",
                "--data-urlencode",
                &format!("query={q}"),
            ])
            .arg(format!("https://127.0.0.1:{port}/api/v1/query"))
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (out.status.success() && v["status"] == "success")
            .then(|| v["data"]["result"].as_array().map(Vec::len))
            .flatten()
    };
    wait_until(
        "the good exporter's series over TLS",
        Duration::from_secs(60),
        || query("bfperf_events_total{instance=\"good\",block=\"mss0\"}") == Some(2),
    );
    // The refused one: counted as refused (the receiver said 401), never stored.
    wait_refused(bad_port);
    assert_eq!(query("bfperf_up{instance=\"bad\"}"), Some(0));
}

/// Waits for an exporter's own scrape to count refused samples.
fn wait_refused(port: u16) {
    wait_until("refused samples counted", Duration::from_secs(60), || {
        let (_, body) = get(port, "/metrics", "text/plain");
        body.lines().any(|l| {
            l.starts_with("bfperf_remote_write_dropped_samples_total{reason=\"refused\"}")
                && !l.ends_with(" 0")
        })
    });
}

/// remote_write's secrets are read as TLS keys are: a member's link to a root-only
/// file (as `/etc/shadow` was sent) is refused, as is a file of another user, one
/// others can write, or one of several lines; the error names the file, and nothing
/// is sent. Credentials for plain http to another machine are warned about.
#[test]
fn remote_write_secrets_are_never_read_through_a_members_link() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    if not_root("files of another user") {
        return;
    }
    let rootonly = tempfile::tempdir().unwrap();
    let shadow = rootonly.path().join("shadow");
    std::fs::write(
        &shadow,
        "root:$6$secret:19000:0:99999:7:::\ndaemon:*:19000::::::\n",
    )
    .unwrap();
    std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o640)).unwrap();
    let member = tempfile::tempdir().unwrap();
    let m = member.path();
    let chown = |p: &Path| std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
    chown(m);
    let link = m.join("password");
    symlink(&shadow, &link).unwrap();
    chown(&link);
    let theirs = m.join("theirs");
    std::fs::write(&theirs, "pw\n").unwrap();
    chown(&theirs);
    let dir = tempfile::tempdir().unwrap();
    let writable = dir.path().join("writable");
    std::fs::write(&writable, "pw\n").unwrap();
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o622)).unwrap();
    let d = |p: &Path| p.display().to_string();
    for (key, file, says) in [
        ("password_file", d(&link), "symbolic link"),
        ("password_file", d(&theirs), "belongs to user 65534"),
        ("password_file", d(&writable), "others can write it"),
        ("password_file", d(&shadow), "holds 2 lines, not one line"),
        ("bearer", d(&link), "symbolic link"),
    ] {
        let auth = match key {
            "bearer" => format!("bearer_token_file = \"{file}\""),
            _ => format!("basic_auth = {{ username = \"dpu\", password_file = \"{file}\" }}"),
        };
        let cfg = config(
            dir.path(),
            &format!(
                "events = [\"default\"]\n[remote_write]\nurl = \"https://127.0.0.1:9/w\"\n{auth}\n"
            ),
        );
        exporter_of(&cfg)
            .assert()
            .code(1)
            .stderr(predicates::str::contains(&file))
            .stderr(predicates::str::contains(says));
    }
    // A good password for plain http to another machine is warned about. The
    // config's labels are bad, which is found right after, so that the exporter
    // ends before it starts and nothing is ever sent anywhere.
    let good = dir.path().join("good");
    std::fs::write(&good, "pw\n").unwrap();
    for (url, warned) in [
        ("http://192.0.2.1:9/w", true),
        ("http://127.0.0.1:9/w", false),
    ] {
        let cfg = config(
            dir.path(),
            &format!(
                "events = [\"default\"]\n[remote_write]\nurl = \"{url}\"\nlabels = {{ __x = \"1\" }}\n\
                 basic_auth = {{ username = \"dpu\", password_file = \"{}\" }}\n",
                good.display()
            ),
        );
        let out = exporter_of(&cfg).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("is not a label name"), "{err}");
        assert_eq!(err.contains("over plain http"), warned, "{url}: {err}");
    }
}

/// An exporter of the simulated BlueField-3 pushing every second to `port`,
/// serving ([`sim_exporter`]).
fn pusher_serving(dir: &Path, name: &str, port: u16) -> (Running, u16) {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let cfg = config(
        &sub,
        &format!(
            "events = [\"default\"]\n[remote_write]\nurl = \"http://127.0.0.1:{port}/api/v1/write\"\ninterval = \"1s\"\n"
        ),
    );
    sim_exporter(&sub, &cfg)
}

/// Against HTTP 429 the sender backs off (1 s doubling) or waits the receiver's
/// Retry-After, whatever new sweeps queue meanwhile (it retried 16 times in 15 s);
/// the queue holds each sample in at most 160 bytes.
#[test]
fn a_receiver_that_says_429_is_given_its_backoff_and_the_queue_stays_small() {
    let plain = Refuser::start("HTTP/1.1 429 Too Many Requests");
    let after = Refuser::start("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3");
    let dir = tempfile::tempdir().unwrap();
    let (_a, port_a) = pusher_serving(dir.path(), "plain", plain.port);
    let (_b, _) = pusher_serving(dir.path(), "after", after.port);
    wait_until("four requests backed off", Duration::from_secs(60), || {
        plain.gaps().len() >= 3 && after.gaps().len() >= 2
    });
    // Each wait at least its backoff (a busy machine only adds to it).
    for (i, g) in plain.gaps().iter().take(3).enumerate() {
        let want = f64::from(1u32 << i);
        assert!(
            *g >= want - 0.05,
            "retry {} came {g} s after the one before, not {want}",
            i + 1
        );
    }
    for g in after.gaps().iter().take(2) {
        assert!(
            *g >= 2.95,
            "a retry came {g} s after the one before; Retry-After said 3"
        );
    }
    let mut body = String::new();
    wait_until("1,000 samples queued", Duration::from_secs(60), || {
        body = get(port_a, "/metrics", "text/plain").1;
        sample_of(&body, "bfperf_remote_write_queue_samples") >= 1000.0
    });
    let samples = sample_of(&body, "bfperf_remote_write_queue_samples");
    let bytes = sample_of(&body, "bfperf_remote_write_queue_bytes");
    assert!(
        bytes / samples <= 160.0,
        "the queue takes {bytes} bytes for {samples} samples"
    );
}

fn sample_of(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {body}"))
}

/// A receiver that refuses every push is said as a failing device is: its first
/// refusal, then a count at most once a minute, not a line per push (it was).
#[test]
fn a_receiver_that_keeps_refusing_is_said_once_not_per_push() {
    let refuser = Refuser::start("HTTP/1.1 400 Bad Request");
    let dir = tempfile::tempdir().unwrap();
    let (e, port) = pusher_serving(dir.path(), "refused", refuser.port);
    wait_until("five refused pushes", Duration::from_secs(60), || {
        refuser.requests() >= 5
    });
    wait_refused(port);
    let log = crate::support::said(&e);
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("HTTP 400"), "{log}");
}
