//! Reloads (SIGHUP): refused, identical or partial, none sends a counter backwards or stops
//! the blocks it does not change.

use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

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
