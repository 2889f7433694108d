//! `bfperf top` in a real terminal: tmux runs it against the FUSE simulator with a
//! workload that changes; the captured screen shows the panels with the simulator's
//! rates, follows the phase change, and `q` or SIGTERM leave the terminal and the
//! device as they were. tmux is required in CI (`BFPERF_REQUIRE`).

use std::process::Command as Process;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use bfperf::sim::{ManualClock, Sim, SimOptions, Workload};
use bfperf::Generation;

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server is gone already when its one pane's command ended.
        let _ = self
            .cmd(&["kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

const WORKLOAD: &str = "repeat = false\n\
    [[phase]]\nseconds = 6\nread_bytes_per_s = 8e9\nhit_ratio = 0.75\n\
    [[phase]]\nseconds = 1000\nread_bytes_per_s = 20e9\nhit_ratio = 0.5\n";

/// The simulator's memory read bandwidth over every tile at `secs`, GB/s.
fn truth_gb_per_s(secs: u64) -> f64 {
    let clock = Arc::new(ManualClock::new(0));
    let sim = Sim::with_options(
        Generation::Bf2,
        bfperf::sim::Kernel::V6_16,
        clock.clone(),
        &SimOptions {
            workload: toml::from_str::<Workload>(WORKLOAD).unwrap(),
            ..Default::default()
        },
    );
    clock.advance_secs(secs);
    (0..8)
        .filter_map(|t| sim.event_rate(&format!("tile{t}"), 0x4c))
        .map(|r| r as f64 * 64.0 / 1e9)
        .sum()
}

#[test]
fn top_shows_the_simulators_rates_follows_a_phase_and_restores_everything() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    std::fs::write(&workload, WORKLOAD).unwrap();
    // The mount's clock starts after this instant: the simulator is in its first
    // phase for at least 6 s from here.
    let launched = Instant::now();
    let Some(m) = Mount::start_with("2", "6.16", &["--workload", workload.to_str().unwrap()])
    else {
        return;
    };
    let before: Vec<_> = ["tile0", "tile3", "l3cachehalf0"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    let rc = dir.path().join("rc");
    let cmd = format!(
        "{bin} --sysfs-root {root} --lock-file {lock} top --interval 500ms; echo $? > {rc}; sleep 60",
        bin = assert_cmd::cargo::cargo_bin!("bfperf").display(),
        root = m.root().display(),
        lock = dir.path().join("lock").display(),
        rc = rc.display(),
    );
    let t = Tmux::start(&cmd, 80, 24);
    let screen = t.wait_for("the panels with values", |s| {
        shown(s, "memory_read_bandwidth").is_some() && shown(s, "l3_hit_ratio").is_some()
    });
    for title in [
        "PCIe",
        "Memory (tiles)",
        "L3 cache",
        "bfperf top",
        "BlueField-2",
    ] {
        assert!(screen.contains(title), "no {title}:\n{screen}");
    }
    let (want, later) = (truth_gb_per_s(2), truth_gb_per_s(7));
    let got = shown(&screen, "memory_read_bandwidth").unwrap();
    if launched.elapsed() < Duration::from_secs(6) {
        // Captured inside the first phase: every sample it shows is of that phase.
        assert_rate(got, want, &format!("memory read GB/s\n{screen}"));
        let hit = shown(&screen, "l3_hit_ratio").unwrap();
        assert_rate(hit, 75.0, &format!("L3 hit %\n{screen}"));
    } else {
        // A machine slow enough to start top after the change: a refresh that spans
        // it shows a rate between the two phases', never outside them.
        assert!(
            (want * 0.99..=later * 1.01).contains(&got),
            "{got} GB/s outside the phases' {want} and {later}\n{screen}"
        );
    }
    // The phase changes 6 s after the mount: a later refresh shows the second
    // phase's rate, whenever it comes (one that spans the change shows a mix).
    let screen = t.wait_for("the second phase's rate", |s| {
        launched.elapsed() > Duration::from_secs(6)
            && shown(s, "memory_read_bandwidth").is_some_and(|g| (g - later).abs() <= later * 0.01)
    });
    let hit = shown(&screen, "l3_hit_ratio").unwrap();
    assert_rate(hit, 50.0, &format!("L3 hit % after the phase\n{screen}"));
    // The other views.
    t.keys("2");
    t.wait_for("the blocks view", |s| {
        s.contains("SHARE OF THE BUSIEST") && s.contains("tile3")
    });
    t.keys("3");
    t.wait_for("the raw view", |s| s.contains("IN_P_BYTE_CNT"));
    // `/` filters the blocks.
    t.keys("/");
    t.keys("tile");
    t.keys("Enter");
    t.wait_for("the tiles only", |s| {
        s.contains("MEMORY_READS") && !s.contains("IN_P_BYTE_CNT")
    });
    // The four tiles read memory at one rate: their rows are in block order.
    let screen = t.screen();
    let tiles: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("MEMORY_READS "))
        .filter_map(|l| {
            l.split_whitespace()
                .map(|w| w.trim_start_matches('│'))
                .find(|w| w.starts_with("tile"))
        })
        .collect();
    assert_eq!(tiles, ["tile0", "tile1", "tile2", "tile3"], "{screen}");
    assert_eq!(t.display("#{alternate_on}"), "1");
    t.keys("q");
    t.wait_exit(&rc, "top did not exit on q");
    assert_eq!(std::fs::read_to_string(&rc).unwrap().trim(), "0");
    assert_eq!(t.display("#{alternate_on} #{cursor_flag}"), "0 1");
    let after: Vec<_> = ["tile0", "tile3", "l3cachehalf0"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    assert_eq!(before, after, "the device is not as it was");
}

#[test]
fn sigterm_restores_the_terminal_and_the_device_and_read_only_writes_nothing() {
    if !tmux_available() {
        return;
    }
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let before: Vec<_> = ["mss0", "llt0", "llt_miss7"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    let rc = dir.path().join("rc");
    let pid = dir.path().join("pid");
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let cmd = format!(
        "sh -c 'echo $$ > {pid}; exec {bin} --sysfs-root {root} --lock-file {lock} top -i 300ms'; echo $? > {rc}; sleep 60",
        pid = pid.display(),
        bin = bin.display(),
        root = m.root().display(),
        lock = dir.path().join("lock").display(),
        rc = rc.display(),
    );
    let t = Tmux::start(&cmd, 120, 40);
    let screen = t.wait_for("the BF3 panels", |s| {
        shown(s, "ddr_read_bandwidth").is_some() && shown(s, "llc_read_bandwidth").is_some()
    });
    for title in ["DDR", "LLC", "PLL"] {
        assert!(screen.contains(title), "{screen}");
    }
    let pid: i32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signalling the top process this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    t.wait_exit(&rc, "top did not end on SIGTERM");
    assert_eq!(t.display("#{alternate_on} #{cursor_flag}"), "0 1");
    let after: Vec<_> = ["mss0", "llt0", "llt_miss7"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    assert_eq!(before, after);
    drop(t);

    // Read-only: nothing is written, the registers and programmed counters are shown.
    let rc = dir.path().join("rc-read-only");
    let t = Tmux::start(
        &format!(
            "{} --sysfs-root {} top --read-only -i 300ms; echo $? > {}; sleep 60",
            bin.display(),
            m.root().display(),
            rc.display()
        ),
        100,
        30,
    );
    t.wait_for("the read-only header", |s| {
        s.contains("read-only") && s.contains("clock_t1_frequency")
    });
    t.keys("3");
    t.wait_for("the raw view", |s| {
        s.contains("not programmed") || s.contains("PER SECOND")
    });
    t.keys("q");
    t.wait_exit(&rc, "read-only top to quit");
    let after: Vec<_> = ["mss0", "llt0", "llt_miss7"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    assert_eq!(before, after);
}

#[test]
fn a_panic_restores_the_terminal_and_the_device() {
    if !tmux_available() {
        return;
    }
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let before: Vec<_> = ["tile0", "l3cachehalf1"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    let rc = dir.path().join("rc");
    let cmd = format!(
        "BFPERF_TOP_PANIC_AFTER=2 {bin} --sysfs-root {root} --lock-file {lock} top -i 200ms 2>{err}; echo $? > {rc}; sleep 60",
        bin = assert_cmd::cargo::cargo_bin!("bfperf").display(),
        root = m.root().display(),
        lock = dir.path().join("lock").display(),
        err = dir.path().join("err").display(),
        rc = rc.display(),
    );
    let t = Tmux::start(&cmd, 80, 24);
    t.wait_exit(&rc, "top did not end");
    assert_eq!(std::fs::read_to_string(&rc).unwrap().trim(), "101");
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    assert!(err.contains("the crash path"), "{err}");
    assert_eq!(t.display("#{alternate_on} #{cursor_flag}"), "0 1");
    let after: Vec<_> = ["tile0", "l3cachehalf1"]
        .iter()
        .map(|b| m.config(b))
        .collect();
    assert_eq!(before, after, "the device is not as it was after the panic");
}

#[test]
fn top_counts_perf_events_beside_the_blocks_and_mixes_them_in_metrics() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("mixed.json");
    std::fs::write(
        &metrics,
        r#"[{"MetricName": "cpus_counted", "MetricExpr": "perf@cpu-clock@ / duration_time / 1e9",
             "Unit": "perf", "MetricGroup": "mixed"},
            {"MetricName": "reads_per_cpu_second", "MetricExpr": "MEMORY_READS / perf@cpu-clock@ * 1e9",
             "ScaleUnit": "1e-6M/s", "Unit": "tile", "MetricGroup": "mixed"}]"#,
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let cmd = format!(
        "{} --sim bf2 --metrics {} top -i 500ms -e cpu-clock -M mixed,ipc; sleep 60",
        bin.display(),
        metrics.display()
    );
    let t = Tmux::start(&cmd, 130, 45);
    let screen = t.wait_for("the mixed metrics", |s| {
        shown(s, "cpus_counted").is_some() && shown(s, "reads_per_cpu_second").is_some()
    });
    // System-wide cpu-clock is every online CPU's time.
    let cpus = online_cpus();
    let counted = shown(&screen, "cpus_counted").unwrap();
    assert!(
        (counted - cpus).abs() / cpus < 0.1,
        "{counted} vs {cpus}\n{screen}"
    );
    // The tiles' MEMORY_READS rate shared among the CPUs, from the simulator's rates.
    let rate = bf2_tile_read_rate();
    let want = rate / cpus / 1e6;
    let mixed = shown(&screen, "reads_per_cpu_second").unwrap();
    assert!(
        (mixed - want).abs() / want < 0.1,
        "{mixed} vs {want}\n{screen}"
    );
    // ipc has a value where the cores count cycles, else says why it has none.
    assert!(screen.contains("│ipc "), "{screen}");
    t.keys("3");
    t.wait_for("cpu-clock in the raw view", |s| {
        s.lines()
            .any(|l| l.contains("software") && l.contains("cpu-clock"))
    });
    t.keys("q");
}

#[test]
fn top_beside_the_exporter_is_counted_by_it_and_a_killed_top_leaves_nothing() {
    use crate::support::{config, get, sample, serve};
    if !tmux_available() {
        return;
    }
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let gic0 = m.config("gic0");
    let (mut e, port) = serve(&m, dir.path(), &cfg);
    let rc = dir.path().join("rc");
    let blocks = ["mss0", "llt0", "llt_miss7", "clock_measure"];
    // A block's programming: its events and count_clock. Its `enable` is left out
    // while the exporter runs: each sweep of an all-at-once block stops it to read
    // its counters in one window, so a read can land while it reads 0.
    let programming = |block: &str| -> Vec<(String, String)> {
        m.config(block)
            .into_iter()
            .filter(|(f, _)| f != "enable")
            .collect()
    };
    let programmed: Vec<_> = blocks.iter().map(|b| programming(b)).collect();
    let cmd = format!(
        "{bin} --sysfs-root {root} --lock-file {lock} top --interval 500ms -e gic0/AW_BEATS/ -e 'llt/GDC_BANK0_HIT/'",
        bin = assert_cmd::cargo::cargo_bin!("bfperf").display(),
        root = m.root().display(),
        lock = dir.path().join("lock").display(),
    );
    let t = Tmux::start(&format!("exec {cmd}"), 100, 30);
    let screen = t.wait_for("the panels with values", |s| {
        [
            "ddr_read_bandwidth",
            "llc_read_bandwidth",
            "llc_read_miss_ratio",
        ]
        .iter()
        .all(|metric| shown(s, metric).is_some())
    });
    assert!(screen.contains("lock: the exporter's"), "{screen}");
    assert_ne!(m.config("gic0"), gic0, "top's own event is not programmed");
    let llts: Vec<String> = (0..8).map(|i| format!("llt{i}")).collect();
    let llts: Vec<&str> = llts.iter().map(String::as_str).collect();
    let llc_read =
        bf3_gb_per_s(&llts, "GDC_BANK0_RD_REQ") + bf3_gb_per_s(&llts, "GDC_BANK1_RD_REQ");
    for (metric, truth) in [
        (
            "ddr_read_bandwidth",
            bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS"),
        ),
        (
            "ddr_write_bandwidth",
            bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_RX_FLITS"),
        ),
        ("llc_read_bandwidth", llc_read),
    ] {
        let got = shown(&screen, metric).unwrap();
        assert_rate(got, truth, &format!("{metric}\n{screen}"));
    }
    // The counters the exporter leaves free on the llt blocks (they count all at
    // once) are lent to top's event: its rate is the simulator's.
    t.keys("3");
    t.keys("/");
    t.keys("llt0");
    t.keys("Enter");
    let screen = t.wait_for("llt0's GDC_BANK0_HIT in the raw view", |s| {
        s.lines()
            .any(|l| l.contains("GDC_BANK0_HIT ") && l.contains("/sec"))
    });
    let line = screen
        .lines()
        .find(|l| l.contains("GDC_BANK0_HIT "))
        .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "GDC_BANK0_HIT").unwrap();
    let scale = match words[at + 2] {
        "M/sec" => 1e6,
        "G/sec" => 1e9,
        other => panic!("{other} in {line}"),
    };
    let hit = words[at + 1].parse::<f64>().unwrap() * scale;
    // Shown to three digits: 0.5 % at most of rounding, within the 1 %.
    assert_rate(hit, bf3_event_rate("llt0", "GDC_BANK0_HIT"), &screen);
    // The exporter's own series keep their counters (no turns taken), nothing of
    // theirs was re-programmed, and its programming is as it was.
    let (_, text) = get(port, "/metrics", "text/plain");
    let ddr = text
        .lines()
        .find(|l| {
            l.starts_with("bfperf_events_total{")
                && l.contains("block=\"mss0\"")
                && l.contains("SKYLIB_DDN_TX_FLITS")
        })
        .unwrap_or_else(|| panic!("no mss0 DDR series:\n{text}"));
    assert!(
        !ddr.contains("multiplexed") && ddr.contains("counter=\""),
        "{ddr}"
    );
    assert_eq!(
        sample(&text, "bfperf_reprogrammed_total", &[]),
        0.0,
        "{text}"
    );
    // llt0's counters 5-7 were free: one is lent to top.
    let unlent = |config: Vec<(String, String)>| -> Vec<(String, String)> {
        let lent = ["event5", "event6", "event7"];
        config
            .into_iter()
            .filter(|(f, _)| !lent.contains(&f.as_str()))
            .collect()
    };
    assert_eq!(
        blocks
            .iter()
            .map(|b| unlent(programming(b)))
            .collect::<Vec<_>>(),
        programmed.iter().cloned().map(unlent).collect::<Vec<_>>()
    );
    assert_ne!(
        programming("llt0"),
        programmed[1],
        "no counter lent on llt0"
    );
    // SIGKILL: no clean-up runs in top; the exporter ends its measurement when
    // the connection closes, and puts back the counter it programmed for top.
    let pid: i32 = t.display("#{pane_pid}").parse().unwrap();
    // SAFETY: signals the process this test started in its tmux pane.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while m.config("gic0") != gic0 || programming("llt0") != programmed[1] {
        assert!(
            Instant::now() < deadline,
            "gic0 still programmed for the killed top"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, text) = get(port, "/metrics", "text/plain");
    assert_eq!(sample(&text, "bfperf_up", &[]), 1.0, "{text}");
    assert_eq!(
        blocks.iter().map(|b| programming(b)).collect::<Vec<_>>(),
        programmed
    );
    // Another top is served, and quits as usual.
    drop(t);
    let t = Tmux::start(&format!("{cmd}; echo $? > {}", rc.display()), 100, 30);
    t.wait_for("a second top's values", |s| {
        shown(s, "ddr_read_bandwidth").is_some()
    });
    t.keys("q");
    t.wait_exit(&rc, "the second top did not exit on q");
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    let _ = e.0.wait();
    let err = crate::support::said_to_end(&e);
    // Logged by the uid and pid the kernel gives, the command as the client's claim.
    assert!(err.contains("counting for uid 0, pid "), "{err}");
    assert!(
        err.contains(
            "top --interval 500ms -e gic0/AW_BEATS/ -e llt/GDC_BANK0_HIT/`) ended (it closed the connection); its counters are as they were"
        ),
        "{err}"
    );
    assert!(
        err.contains(" -e llt/GDC_BANK0_HIT/`) ended; its counters are as they were"),
        "{err}"
    );
    assert_eq!(m.config("gic0"), gic0);
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[test]
fn top_ends_and_restores_when_its_terminal_vanishes() {
    if !tmux_available() {
        return;
    }
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let blocks = ["mss0", "llt0", "llt_miss7", "gic0"];
    let before: Vec<_> = blocks.iter().map(|b| m.config(b)).collect();
    let cmd = format!(
        "exec {bin} --sysfs-root {root} --lock-file {lock} top -i 300ms -e gic0/AW_BEATS/",
        bin = assert_cmd::cargo::cargo_bin!("bfperf").display(),
        root = m.root().display(),
        lock = dir.path().join("lock").display(),
    );
    let t = Tmux::start(&cmd, 100, 30);
    t.wait_for("the panels with values", |s| {
        shown(s, "ddr_read_bandwidth").is_some()
    });
    assert_ne!(
        blocks.iter().map(|b| m.config(b)).collect::<Vec<_>>(),
        before
    );
    let pid: i32 = t.display("#{pane_pid}").parse().unwrap();
    // The terminal goes away under top: its pty is closed (and a hangup sent).
    drop(t);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ended(pid) {
        assert!(
            Instant::now() < deadline,
            "top still runs after its terminal vanished"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        blocks.iter().map(|b| m.config(b)).collect::<Vec<_>>(),
        before
    );
}

/// A pseudo-terminal: the master end (read by a thread, so top never blocks on a full
/// terminal) and the slave end top runs on. Dropping it closes the master: the terminal
/// hangs up.
struct Pty {
    slave: std::os::fd::OwnedFd,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// The bytes read from the master end so far.
    drawn: Arc<std::sync::atomic::AtomicUsize>,
    reader: Option<std::thread::JoinHandle<usize>>,
}

impl Pty {
    fn open(width: u16, height: u16) -> Pty {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // Both ends close on exec (openpty's do not): a master another test's child
        // inherited would keep the terminal from ever hanging up.
        let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: plain calls on a descriptor owned here; ptsname_r writes at most
        // name.len() bytes into name.
        let (master, slave) = unsafe {
            let master = OwnedFd::from_raw_fd(libc::posix_openpt(flags));
            assert!(master.as_raw_fd() >= 0 && libc::grantpt(master.as_raw_fd()) == 0);
            assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
            let mut name = [0 as libc::c_char; 64];
            assert_eq!(
                libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
                0
            );
            let slave = libc::open(name.as_ptr(), flags);
            assert!(slave >= 0, "{}", std::io::Error::last_os_error());
            (master, OwnedFd::from_raw_fd(slave))
        };
        let size = libc::winsize {
            ws_row: height,
            ws_col: width,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize, alive across the call.
        assert_eq!(
            unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) },
            0
        );
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let drawn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = drawn.clone();
        let reader = std::thread::spawn(move || drain(master, &flag, &count));
        Pty {
            slave,
            stop,
            drawn,
            reader: Some(reader),
        }
    }

    fn stdio(&self) -> std::process::Stdio {
        self.slave.try_clone().unwrap().into()
    }

    /// The bytes top has written so far.
    fn drawn(&self) -> usize {
        self.drawn.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Closes the master end; the bytes top wrote.
    fn hang_up(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.reader.take().unwrap().join().unwrap()
    }
}

/// Reads the master end until `stop`, then closes it.
fn drain(
    master: std::os::fd::OwnedFd,
    stop: &std::sync::atomic::AtomicBool,
    drawn: &std::sync::atomic::AtomicUsize,
) -> usize {
    use std::os::fd::AsRawFd;
    let mut total = 0;
    let mut buf = [0u8; 4096];
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let mut fd = libc::pollfd {
            fd: master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd and a buffer, alive across the calls.
        unsafe {
            if libc::poll(&mut fd, 1, 50) == 1 && fd.revents & libc::POLLIN != 0 {
                let n = libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len());
                total += n.max(0) as usize;
                drawn.store(total, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
    total
}

/// A terminal can hang up with no SIGHUP for top (top is not its session's leader, or
/// the leader ignores the signal): top must notice from the terminal alone, end and put
/// the device back, within a second or so; it must not spin on the dead terminal.
#[test]
fn top_ends_and_restores_when_its_terminal_hangs_up_without_a_signal() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let blocks = ["mss0", "llt0", "llt_miss7", "gic0"];
    let before: Vec<_> = blocks.iter().map(|b| m.config(b)).collect();
    let pty = Pty::open(100, 30);
    let mut top = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(dir.path().join("lock"))
        .args(["top", "-i", "300ms", "-e", "gic0/AW_BEATS/"])
        .stdin(pty.stdio())
        .stdout(pty.stdio())
        .stderr(pty.stdio())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while blocks.iter().map(|b| m.config(b)).collect::<Vec<_>>() == before {
        assert!(Instant::now() < deadline, "top never programmed the device");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Two draws, then the terminal goes away.
    let deadline = Instant::now() + Duration::from_secs(15);
    let first = loop {
        match pty.drawn() {
            0 => assert!(Instant::now() < deadline, "top drew nothing"),
            n => break n,
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    while pty.drawn() == first {
        assert!(Instant::now() < deadline, "top drew once only");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(pty.hang_up() > 0, "top drew nothing");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = top.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = top.kill();
            let _ = top.wait();
            panic!("top still runs 5 s after its terminal hung up");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Ended as on q: no panic over the dead terminal (101), no error.
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        blocks.iter().map(|b| m.config(b)).collect::<Vec<_>>(),
        before
    );
}

/// The raw view's rows on `screen`: (block, counter, name, value).
fn raw_rows(screen: &str) -> Vec<(String, String, String, String)> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('│')?.strip_suffix('│'))
        .filter(|l| !l.starts_with("BLOCK"))
        .filter_map(|l| {
            // Columns: block (16), counter (4), name, value; one space between.
            let chars: Vec<char> = l.chars().collect();
            let cut = |a: usize, b: usize| -> String {
                chars[a.min(chars.len())..b.min(chars.len())]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_string()
            };
            let block = cut(0, 16);
            let rest = cut(22, chars.len());
            let (name, value) = rest.split_once(char::is_whitespace)?;
            (!block.is_empty()).then(|| {
                (
                    block,
                    cut(17, 21),
                    name.to_string(),
                    value.trim().to_string(),
                )
            })
        })
        .collect()
}

#[test]
fn top_at_80_columns_numbers_counters_shows_bytes_in_gb_per_s_and_keeps_its_order() {
    if !tmux_available() {
        return;
    }
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!(
        "exec {bin} --sysfs-root {root} --lock-file {lock} top -i 300ms",
        bin = assert_cmd::cargo::cargo_bin!("bfperf").display(),
        root = m.root().display(),
        lock = dir.path().join("lock").display(),
    );
    let t = Tmux::start(&cmd, 80, 40);
    t.wait_for("the panels with values", |s| {
        shown(s, "memory_read_bandwidth").is_some()
    });
    t.keys("3");
    // Every kind's rows rated (a row appears once it has a rate, a busy machine
    // draws them over more than one refresh).
    let screen = t.wait_for("the raw view with rates", |s| {
        let rows = raw_rows(s);
        rows.iter().any(|r| r.3.ends_with("GB/s")) && rows.iter().any(|r| r.2 == "MEMORY_WRITES")
    });
    // A byte register reads in bytes per second, as the simulator drives it.
    let (sim, _) =
        bfperf::sim::Sim::with_manual_clock(bfperf::Generation::Bf2, bfperf::sim::Kernel::V6_16);
    let truth = sim.register_rate("pcie0", "IN_P_BYTE_CNT").unwrap() as f64 / 1e9;
    let rows = raw_rows(&screen);
    let pcie = rows
        .iter()
        .find(|r| r.0 == "pcie0" && r.2 == "IN_P_BYTE_CNT")
        .unwrap_or_else(|| panic!("{screen}"));
    let got: f64 = pcie.3.strip_suffix(" GB/s").unwrap().parse().unwrap();
    assert_rate(got, truth, "pcie0 IN_P_BYTE_CNT GB/s");
    assert_eq!(pcie.1, "", "a register has no counter number");
    // Each counter of a block is its own numbered row.
    let l3: Vec<&String> = rows
        .iter()
        .filter(|r| r.0 == "l3cachehalf0")
        .map(|r| &r.1)
        .collect();
    let mut numbers: Vec<u32> = l3.iter().map(|c| c.parse().unwrap()).collect();
    numbers.sort();
    numbers.dedup();
    assert_eq!(numbers.len(), l3.len(), "{screen}");
    // Sorted by activity, equal rows keep their order from refresh to refresh.
    let order = |rows: &[(String, String, String, String)]| -> Vec<(String, String, String)> {
        rows.iter()
            .map(|r| (r.0.clone(), r.1.clone(), r.2.clone()))
            .collect()
    };
    // A busy machine may draw a block's rows a refresh later, and a row may leave
    // the bottom of the screen: the rows both screens show keep their order.
    let first = order(&rows);
    let mut seen = t.screen();
    for _ in 0..3 {
        let now = t.wait_for("a later refresh", |s| s != seen);
        let later = order(&raw_rows(&now));
        let kept: Vec<_> = first.iter().filter(|r| later.contains(r)).collect();
        let still: Vec<_> = later.iter().filter(|r| first.contains(r)).collect();
        assert!(kept.len() * 2 >= first.len(), "most rows went away:\n{now}");
        assert_eq!(kept, still, "the rows' order changed:\n{screen}\n{now}");
        seen = now;
    }
    drop(t);

    // Read-only at 80 columns: the reasons are whole, the header cut at a word.
    let t = Tmux::start(
        &format!(
            "exec {} --sysfs-root {} top --read-only -i 300ms",
            assert_cmd::cargo::cargo_bin!("bfperf").display(),
            m.root().display()
        ),
        80,
        30,
    );
    // The tiles' and L3's counters are not programmed: each panel says so whole.
    let screen = t.wait_for("the reasons", |s| {
        s.matches("│memory_read_bandwidth  -            not counted on this device ")
            .count()
            == 1
    });
    assert!(
        screen.contains("lock: read-only: nothing is written;"),
        "{screen}"
    );
}

/// Watching without writing, a counter another program programs or stops is seen
/// at the next sample: that interval has no rate and says why, and the row takes
/// the new event's name, counting at its rate from then on.
#[test]
fn a_watched_counter_that_another_program_changes_is_marked_and_renamed() {
    use bfperf::sysfs::Sysfs;
    let (sim, clock) = Sim::with_manual_clock(Generation::Bf2, bfperf::sim::Kernel::V6_16);
    let sim = Arc::new(sim);
    let device = bfperf::Device::open(Box::new(sim.clone())).unwrap();
    sim.write("tile2/event0", b"0x4c").unwrap();
    let mut watch = bfperf::ops::watch::Watch::open(&device, &[]).unwrap();
    let row = |w: &bfperf::ops::watch::Watch| {
        w.rates()
            .iter()
            .find(|r| r.block == "tile2" && r.counter == Some(0))
            .cloned()
            .unwrap()
    };
    watch.sample(sim.now_ns());
    clock.advance_secs(10);
    watch.sample(sim.now_ns());
    let r = row(&watch);
    assert_eq!(r.name, "MEMORY_READS");
    assert!(!r.reprogrammed && !r.idle, "{r:?}");
    // The count is exact over the manual 10 s; the watch also adds the real time its
    // reads take within a sample (ms under emulation), so the rate is held to 1 %.
    let want = sim.event_rate("tile2", 0x4c).unwrap() as f64;
    assert_rate(r.per_s.expect("a rate"), want, "tile2 MEMORY_READS");
    // Another program stops it: the interval is not the old event's.
    sim.write("tile2/event0", b"0x0").unwrap();
    clock.advance_secs(1);
    watch.sample(sim.now_ns());
    let r = row(&watch);
    assert!(r.reprogrammed && r.per_s.is_none(), "{r:?}");
    assert!(r.idle, "{r:?}");
    // Programmed again, to another event: its name and, an interval on, its rate.
    sim.write("tile2/event0", b"0x45").unwrap();
    clock.advance_secs(1);
    watch.sample(sim.now_ns());
    let r = row(&watch);
    assert!(r.reprogrammed && r.per_s.is_none() && !r.idle, "{r:?}");
    assert_eq!(r.name, "HNF_REQUESTS");
    clock.advance_secs(10);
    watch.sample(sim.now_ns());
    let r = row(&watch);
    let want = sim.event_rate("tile2", 0x45).unwrap() as f64;
    assert!(!r.reprogrammed, "{r:?}");
    assert_rate(r.per_s.expect("a rate"), want, "tile2 HNF_REQUESTS");
}
