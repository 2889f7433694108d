//! One device, one owner: the exporter's lock, socket and journal are keyed on what
//! the device is and held while it goes and comes back (at its place or another
//! `hwmonN`); only the device is taken again, never what else appears at its old
//! place; a client asks only the owner of its own device; and a killed exporter's
//! journal puts the device back wherever it returned. Each scenario runs the real
//! binary on a sysfs root laid out as the kernel lays one out (`class/hwmon/hwmonN`
//! links to the devices' directories), the device a FUSE simulator.

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use crate::support::{config, get, said, sample, served_port, Running};

/// A sysfs root whose `class/hwmon/hwmon3` leads to a simulated BlueField-3, a
/// state directory of its own, and what every block held before the exporter.
struct Site {
    root: tempfile::TempDir,
    state: tempfile::TempDir,
    mount: Mount,
    /// Scratch space: configs, other trees.
    dir: tempfile::TempDir,
}

/// A block's configuration files (events, enable, count_clock), by block.
type Blocks = BTreeMap<String, Vec<(String, String)>>;

impl Site {
    fn new() -> Option<Site> {
        let mount = Mount::start("3", "6.16")?;
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("class/hwmon")).unwrap();
        let state = tempfile::tempdir().unwrap();
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let site = Site {
            root,
            state,
            mount,
            dir: tempfile::tempdir().unwrap(),
        };
        site.link(3, &site.mount.root().join("class/hwmon/hwmon3"));
        Some(site)
    }

    /// A site whose device was pre-programmed ([`Site::pre_program`]), what every
    /// block held then, and the exporter serving it.
    fn started() -> Option<(Site, Blocks, Running, u16)> {
        let site = Site::new()?;
        site.pre_program();
        let before = site.tree(3);
        let (e, port) = site.exporter();
        up_at(port, &site.place(3), &e);
        Some((site, before, e, port))
    }

    /// The device goes away (the driver unloaded), and the exporter serving on
    /// `port` has seen it.
    fn lose(&mut self, port: u16) {
        self.mount.lose();
        down(port);
    }

    /// `class/hwmon/hwmon{n}` leads to `to` from now on.
    fn link(&self, n: u32, to: &Path) {
        let at = self.place(n);
        let _ = std::fs::remove_file(&at);
        symlink(to, &at).unwrap();
    }

    /// Where bfperf finds `hwmon{n}`.
    fn place(&self, n: u32) -> PathBuf {
        self.root.path().join(format!("class/hwmon/hwmon{n}"))
    }

    /// bfperf, its state (locks, journals, sockets) in the site's.
    fn base(&self) -> Process {
        let mut c = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
        c.env_remove("BFPERF_LOCK_FILE")
            .env_remove("BFPERF_SYSFS_ROOT")
            .env("BFPERF_STATE_DIR", self.state.path())
            .env("BFPERF_PAGE_SIZE", "4096");
        c
    }

    /// bfperf on this root.
    fn cmd(&self) -> Process {
        let mut c = self.base();
        c.arg("--sysfs-root").arg(self.root.path());
        c
    }

    /// bfperf on the device at `hwmon{n}` (`--device`: another bfperf device
    /// may be beside it).
    fn at(&self, n: u32) -> Process {
        let mut c = self.base();
        c.arg("--device").arg(self.place(n));
        c
    }

    /// Programs llt0's counter 0 and llt1's counter 1, which the exporter's config
    /// takes, with events it does not count: what the device holds before it.
    fn pre_program(&self) {
        for (block, assignment) in [("llt0", "0=HNF0_DIR_HIT"), ("llt1", "1=HNF0_DIR_MISS")] {
            let o = self
                .cmd()
                .args(["program", block, assignment])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
    }

    /// The exporter, counting llt0 and llt1 (their first counters), serving on a
    /// port it chose, its lock, socket and journal by the device's key.
    fn exporter(&self) -> (Running, u16) {
        let cfg = config(
            self.dir.path(),
            "events = [\"llt0/HNF0_CYCLES/\", \"llt0/HNF0_REQS_RECEIVED/\", \"llt1/HNF0_CYCLES/\", \"llt1/HNF0_REQS_RECEIVED/\"]\n",
        );
        let mut e = Running(
            self.cmd()
                .args(["exporter", "--config"])
                .arg(cfg)
                .args(["--listen", "127.0.0.1:0"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let port = served_port(&mut e);
        (e, port)
    }

    /// A root `stat` of llt0's cycles for a second on the device at `hwmon{n}`,
    /// its records as JSON on standard output.
    fn stat(&self, n: u32) -> std::process::Output {
        self.at(n)
            .args(["stat", "-e", "llt0/HNF0_CYCLES/", "--duration", "1s"])
            .args(["--json", "-o", "-"])
            .output()
            .unwrap()
    }

    /// Every block's configuration at `hwmon{n}`.
    fn tree(&self, n: u32) -> Blocks {
        tree_of(&self.place(n))
    }

    /// The journal in the state directory, if any.
    fn journal(&self) -> Option<PathBuf> {
        journal_in(self.state.path())
    }

    /// A copy of the BlueField-2 fixture, its device linked at `hwmon{n}`: another
    /// bfperf device where this one was.
    fn stranger_at(&self, n: u32) -> Copy {
        let c = Copy::of("bf2");
        self.link(n, &c.device());
        c
    }
}

fn tree_of(device: &Path) -> Blocks {
    let mut out = Blocks::new();
    for e in std::fs::read_dir(device).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() && name != "power" {
            out.insert(name.clone(), block_config(device, &name));
        }
    }
    out
}

fn journal_in(state: &Path) -> Option<PathBuf> {
    std::fs::read_dir(state)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "journal"))
}

/// Waits (a minute at most) until the exporter serves its counters with
/// `bfperf_up 1` from the device at `place`.
fn up_at(port: u16, place: &Path, e: &Running) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = get(port, "/metrics", "text/plain");
        let there = body.contains(&format!("device=\"{}\"", place.display()));
        if sample(&body, "bfperf_up", &[]) == 1.0 && body.contains("bfperf_events_total{") && there
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the exporter never served the device at {}: {body}\n{}",
            place.display(),
            said(e)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the exporter reads `bfperf_up 0` (it has seen the loss).
fn down(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while sample(&get(port, "/metrics", "text/plain").1, "bfperf_up", &[]) != 0.0 {
        assert!(Instant::now() < deadline, "the loss was never seen");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A root `stat` and `program` beside the exporter: the first is counted by it
/// (its log says so), the second refused naming it; the device unchanged by them.
fn beside_the_owner(site: &Site, e: &Running, port: u16, n: u32) {
    let before = site.tree(n);
    let o = site.stat(n);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stat beside the exporter: {err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !said(e).contains("stat -e llt0/HNF0_CYCLES/") {
        assert!(
            Instant::now() < deadline,
            "stat was not the exporter's client (it wrote the device itself): {err}\n{}",
            said(e)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let count = ndjson(&out)
        .into_iter()
        .find(|r| r["record"] == "total" && r["event"] == "HNF0_CYCLES")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        count["valid"] == true && count["value"].as_f64().is_some_and(|v| v > 0.0),
        "the client's count is marked: {count}"
    );
    let o = site
        .at(n)
        .args(["program", "llt1", "5", "HNF0_DIR_HIT"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "program beside the exporter: {err}"
    );
    assert!(
        err.contains("another program is writing") && err.contains(&format!("pid {}", e.0.id())),
        "{err}"
    );
    let after = site.tree(n);
    assert_eq!(
        before["llt1"], after["llt1"],
        "program wrote beside the exporter"
    );
    top_beside(site, e, n);
    let body = get(port, "/metrics", "text/plain").1;
    assert_eq!(
        sample(&body, "bfperf_reprogrammed_total", &[]),
        0.0,
        "another writer disturbed the exporter: {}",
        said(e)
    );
}

/// `bfperf top` beside the exporter, in a real terminal: it shows the device's
/// DDR reads at the simulator's rate and says the exporter holds the lock (it is
/// its client).
fn top_beside(site: &Site, e: &Running, n: u32) {
    use crate::support::{shown, tmux_available, Tmux};
    if !tmux_available() {
        return;
    }
    let cmd = format!(
        "exec env BFPERF_STATE_DIR={state} BFPERF_PAGE_SIZE=4096 {bin} --device {dev} top --interval 500ms",
        state = site.state.path().display(),
        bin = assert_cmd::cargo::cargo_bin!("bfperf").display(),
        dev = site.place(n).display(),
    );
    let t = Tmux::start(&cmd, 100, 30);
    let screen = t.wait_for("top's panels with values", |s| {
        shown(s, "ddr_read_bandwidth").is_some()
    });
    assert!(
        screen.contains("lock: the exporter's"),
        "{screen}\n{}",
        said(e)
    );
    let truth = bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS");
    assert_rate(
        shown(&screen, "ddr_read_bandwidth").unwrap(),
        truth,
        &screen,
    );
    t.keys("q");
}

/// Ends the exporter with SIGTERM; its exit status must be success.
fn stop(mut e: Running) -> String {
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    let status = e.0.wait().unwrap();
    let log = crate::support::said_to_end(&e);
    assert!(status.success(), "{log}");
    log
}

/// The driver loaded again at the same `hwmonN`: the directory is a new one (new
/// device and inode numbers), the device the same. The exporter takes it up again
/// under the same lock, socket and journal: a root `stat` beside it is its client,
/// `program` is refused naming it, `restore` leaves its journal alone; at its end
/// the device holds what it held before the exporter.
#[test]
fn a_device_back_at_its_place_has_one_owner() {
    let Some((mut site, before, e, port)) = Site::started() else {
        return;
    };
    site.lose(port);
    site.mount.revive("3");
    up_at(port, &site.place(3), &e);
    assert_eq!(said(&e).matches("answers again").count(), 1, "{}", said(&e));
    beside_the_owner(&site, &e, port, 3);
    // A restore while the exporter lives is refused: its journal is its own.
    let o = site.cmd().arg("restore").output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(site.journal().is_some(), "the live exporter's journal went");
    stop(e);
    assert_eq!(site.tree(3), before);
    assert!(site.journal().is_none());
}

/// The device back under another `hwmonN`, another bfperf device (a BlueField-2)
/// where it was and a hwmon device of another driver beside: the exporter writes
/// neither, says so once, and takes the device where it is; stat and program
/// beside it are its client or refused; the journal is there, and records the
/// device's prior state, at every instant of the move.
#[test]
fn a_device_back_elsewhere_is_found_and_nothing_else_is_written() {
    let Some((mut site, before, e, port)) = Site::started() else {
        return;
    };
    let journal = site.journal().expect("the exporter's journal");
    let recorded = std::fs::read_to_string(&journal).unwrap();
    let saved = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .map(|v| v["saved"].clone())
    };
    let want = saved(&recorded).unwrap();
    // Watch the journal through the move, every millisecond.
    let stop_watch = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let (stop_watch, journal, want) = (stop_watch.clone(), journal.clone(), want.clone());
        std::thread::spawn(move || {
            let mut faults = Vec::new();
            let (mut looks, start) = (0u64, Instant::now());
            while !stop_watch.load(std::sync::atomic::Ordering::SeqCst) {
                looks += 1;
                match std::fs::read_to_string(&journal) {
                    Err(_) => faults.push(format!("no journal at {:?}", start.elapsed())),
                    Ok(t) => {
                        if saved(&t).as_ref() != Some(&want) {
                            faults.push(format!("another record at {:?}: {t}", start.elapsed()))
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            (looks, faults)
        })
    };
    site.lose(port);
    let stranger = site.stranger_at(3);
    let strangers_files = stranger.contents();
    let other = site.dir.path().join("coretemp");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("name"), "coretemp\n").unwrap();
    std::fs::write(other.join("temp1_input"), "41000\n").unwrap();
    site.link(5, &other);
    site.mount.revive_at("3", 7);
    site.link(7, &site.mount.root().join("class/hwmon/hwmon7"));
    up_at(port, &site.place(7), &e);
    stop_watch.store(true, std::sync::atomic::Ordering::SeqCst);
    let (looks, faults) = watch.join().unwrap();
    assert!(looks > 10 && faults.is_empty(), "{looks} looks: {faults:?}");
    assert_eq!(
        stranger.contents(),
        strangers_files,
        "the stranger was written"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("temp1_input")).unwrap(),
        "41000\n"
    );
    let log = said(&e);
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("is not the device this exporter owns"))
        .collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains("hwmon3") && refused[0].contains("BlueField-2"),
        "{log}"
    );
    assert!(
        log.contains(&format!("answers again at {}", site.place(7).display())),
        "{log}"
    );
    beside_the_owner(&site, &e, port, 7);
    stop(e);
    assert_eq!(
        site.tree(7),
        before,
        "the device is not as it was before the exporter"
    );
    assert_eq!(stranger.contents(), strangers_files);
    assert!(site.journal().is_none());
}

/// The device back at its place with other blocks (another kernel's driver): it is
/// not taken for the exporter's (whose lock it shares, being the same platform
/// device), nothing is written to it, and a root `stat` on it is refused by the
/// exporter with both devices named, its numbers never given.
#[test]
fn a_client_of_another_device_is_told_both_and_given_no_numbers() {
    let Some((mut site, _, e, port)) = Site::started() else {
        return;
    };
    site.lose(port);
    site.mount.revive_as("3", 3, &["--kernel", "6.12"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !said(&e).contains("is not the device this exporter owns") {
        assert!(Instant::now() < deadline, "{}", said(&e));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(said(&e).contains("its blocks differ"), "{}", said(&e));
    let before = site.tree(3);
    let o = site.stat(3);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("this owner serves"), "{err}");
    let inventories: Vec<&str> = err.matches("blocks ").collect();
    assert_eq!(inventories.len(), 2, "both devices are named: {err}");
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("\"value\""),
        "numbers were given"
    );
    assert_eq!(
        site.tree(3),
        before,
        "something was written to another device"
    );
    assert_eq!(
        sample(&get(port, "/metrics", "text/plain").1, "bfperf_up", &[]),
        0.0
    );
    // Stopped, it cannot put back what it never found again: its journal stays
    // for `bfperf restore`, and it says so.
    let mut e = e;
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    let status = e.0.wait().unwrap();
    let log = crate::support::said_to_end(&e);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("bfperf restore"), "{log}");
    assert_eq!(site.tree(3), before);
    assert!(site.journal().is_some());
}

/// A config broken on disk, without a SIGHUP, never keeps the device from coming
/// back: the exporter programs it with the configuration in force (it read the
/// file again each time it looked, and refused it, 20 lines a second), and the
/// file is not read.
#[test]
fn a_broken_config_on_disk_never_keeps_the_device_from_coming_back() {
    let Some((mut site, _, e, port)) = Site::started() else {
        return;
    };
    std::fs::write(
        site.dir.path().join("exporter.toml"),
        "events = [\"nosuchblock/X/\"\n",
    )
    .unwrap();
    site.lose(port);
    site.mount.revive("3");
    up_at(port, &site.place(3), &e);
    let log = said(&e);
    assert!(!log.contains("reload"), "{log}");
    assert!(log.lines().count() <= 4, "{log}");
    stop(e);
}

/// Where the exporter is killed (SIGKILL): before the loss, during it, just as the
/// device returns under another `hwmonN`, and once it serves it there.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kill {
    BeforeTheLoss,
    DuringIt,
    AtTheMove,
    RightAfter,
}

/// A SIGKILL at each step leaves a journal with which `bfperf restore` puts the
/// device back as it was before the exporter, wherever it came back; the other
/// bfperf device at its old place is never written, by the exporter or the
/// restore.
#[test]
fn a_killed_exporters_journal_restores_the_device_wherever_it_returns() {
    for kill in [
        Kill::BeforeTheLoss,
        Kill::DuringIt,
        Kill::AtTheMove,
        Kill::RightAfter,
    ] {
        let Some((mut site, before, mut e, port)) = Site::started() else {
            return;
        };
        let killed = |e: &mut Running| {
            let _ = e.0.kill();
            let _ = e.0.wait();
        };
        if kill == Kill::BeforeTheLoss {
            killed(&mut e);
        }
        site.mount.lose();
        if kill != Kill::BeforeTheLoss {
            down(port);
        }
        if kill == Kill::DuringIt {
            killed(&mut e);
        }
        let stranger = site.stranger_at(3);
        let strangers_files = stranger.contents();
        site.mount.revive_at("3", 7);
        site.link(7, &site.mount.root().join("class/hwmon/hwmon7"));
        match kill {
            Kill::AtTheMove => killed(&mut e),
            Kill::RightAfter => {
                up_at(port, &site.place(7), &e);
                killed(&mut e);
            }
            _ => {}
        }
        assert!(site.journal().is_some(), "{kill:?}: no journal");
        let o = site.at(7).arg("restore").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{kill:?}: restore: {err}");
        assert_eq!(site.tree(7), before, "{kill:?}: restore said {err}");
        assert_eq!(stranger.contents(), strangers_files, "{kill:?}");
        assert!(site.journal().is_none(), "{kill:?}");
        drop(e);
    }
}

/// Another device that comes where the exporter's device was (a FUSE mount's
/// device number handed out again) is no device the exporter owns: root's `stat
/// -M ddr` on it reads its own traffic, twice the first device's, and `program`
/// on it is not refused in the exporter's name.
#[test]
fn a_stale_identity_names_no_stranger() {
    let Some((mut site, _, e, port)) = Site::started() else {
        return;
    };
    site.lose(port);
    // Gone for good: its mount undone, so its numbers are free for the next.
    let Site { mount, state, .. } = site;
    drop(mount);
    let workload = std::env::temp_dir().join(format!("bfperf-owner-{}.toml", std::process::id()));
    std::fs::write(
        &workload,
        "repeat = false\n[[phase]]\nseconds = 3600\nread_bytes_per_s = 16e9\n",
    )
    .unwrap();
    let Some(b) = Mount::start_with("3", "6.16", &["--workload", workload.to_str().unwrap()])
    else {
        return;
    };
    let _ = std::fs::remove_file(&workload);
    let stat = b
        .cmd()
        .env_remove("BFPERF_LOCK_FILE")
        .env("BFPERF_STATE_DIR", state.path())
        .args(["stat", "-M", "ddr", "--duration", "1s", "--json", "-o", "-"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&stat.stderr);
    assert!(stat.status.success(), "{err}");
    let read = ndjson(&String::from_utf8_lossy(&stat.stdout))
        .into_iter()
        .find(|r| r["record"] == "metric" && r["metric"] == "ddr_read_bandwidth")
        .unwrap_or_else(|| panic!("{err}"));
    // The model's DDR reads are the LLC's read misses: twice the default reads.
    let want = 2.0 * bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS");
    assert_rate(
        read["value"].as_f64().unwrap(),
        want,
        "DDR reads of the new device",
    );
    assert!(!said(&e).contains("stat -M ddr"), "{}", said(&e));
    let o = b
        .cmd()
        .env_remove("BFPERF_LOCK_FILE")
        .env("BFPERF_STATE_DIR", state.path())
        .args(["program", "llt1", "5", "HNF0_DIR_HIT"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
