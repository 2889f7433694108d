//! Faults: the writer lock, restore and re-programming; a device lost and found again; reads
//! that fail without the device being lost.

use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use predicates::prelude::*;

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
