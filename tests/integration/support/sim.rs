//! The binary, fixture copies, the FUSE and in-process simulators, and the simulator's
//! rates as truth.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use walkdir::WalkDir;

/// Programs the four bank counters of l3cachehalf1 and starts it: the L3 sequence.
pub const L3_PROGRAM_AND_START: [&str; 7] = [
    "program",
    "l3cachehalf1",
    "0=HITS_BANK0",
    "1=MISSES_BANK0",
    "2=HITS_BANK1",
    "3=MISSES_BANK1",
    "--start",
];

/// The checked-in fixture root of a generation (`bf1`, `bf2`, `bf3`).
pub fn fixture(gen: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(gen)
}

/// The device directory inside a fixture root.
pub fn device_dir(root: &Path) -> PathBuf {
    root.join("class/hwmon/hwmon3")
}

/// Copies a tree, keeping symlinks as symlinks.
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in WalkDir::new(from).follow_links(false) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        let ft = entry.file_type();
        if ft.is_symlink() {
            symlink(fs::read_link(entry.path()).unwrap(), &dest).unwrap();
        } else if ft.is_dir() {
            fs::create_dir_all(&dest).unwrap();
        } else {
            fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Copies program `from` to `to` for a test to run it there. The copy is made by
/// `cp`, a process of its own: a copy this multi-threaded process wrote would leave
/// its open descriptor to every child another test forks meanwhile (until that
/// child's exec), and running the copy then fails with ETXTBSY.
pub fn copy_program(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

/// A writable copy of a fixture in a temp dir.
pub struct Copy {
    pub dir: tempfile::TempDir,
}

impl Copy {
    pub fn of(gen: &str) -> Copy {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&fixture(gen), dir.path());
        Copy { dir }
    }

    /// Every file's content, to prove a rejected command wrote nothing.
    pub fn contents(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        tree_contents(self.root())
    }
}

impl Tree for Copy {
    fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// A sysfs root the tests drive bfperf against: a fixture copy or a mounted simulator.
pub trait Tree {
    fn root(&self) -> &Path;

    fn device(&self) -> PathBuf {
        device_dir(self.root())
    }

    /// A file of the device, e.g. `tile2/event3`.
    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.device().join(rel)).unwrap()
    }

    /// bfperf with `--sysfs-root` set to this tree.
    fn cmd(&self) -> Command {
        let mut c = bfperf();
        c.arg("--sysfs-root").arg(self.root());
        c
    }

    /// Runs bfperf on this tree, asserts success, returns stdout.
    fn run(&self, args: &[&str]) -> String {
        stdout_of(self.cmd().args(args))
    }
}

pub fn tree_contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(root).unwrap().to_path_buf(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// The bfperf binary, with no environment that could point it elsewhere. The fixtures
/// were captured under kernels with 4 KiB pages (their event lists are cut at 4096
/// bytes), so the page size is 4 KiB whatever the machine running the tests uses.
pub fn bfperf() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    c.env_remove("BFPERF_SYSFS_ROOT");
    c.env_remove("BFPERF_SIM");
    c.env("BFPERF_PAGE_SIZE", "4096");
    c
}

/// `bfperf --sim GEN stat -o -`: stat on the in-process simulator of a generation,
/// its counts on standard output; the caller adds the rest.
pub fn sim_stat(gen: &str) -> Command {
    let mut c = bfperf();
    c.args(["--sim", gen, "stat", "-o", "-"]);
    c
}

/// Whether a test that needs root must skip here (not root): says so, with why.
pub fn not_root(why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("note: skipping: {why} needs root");
    }
    !root
}

/// A rate bfperf measured against the simulator's: within 1 % on any machine, loaded
/// or emulated. A value bfperf marked with a coverage below 1 (multiplexed, or an
/// all-at-once block stopped to be read) is its scaled estimate, held to the same
/// bound.
pub fn assert_rate(got: f64, want: f64, what: &str) {
    assert!(
        ((got - want) / want).abs() <= 0.01,
        "{what}: {got}, the simulator's {want}: more than 1 % off"
    );
}

/// A coverage bfperf printed in percent: counted, and at most all of the span.
pub fn assert_coverage(percent: &str, what: &str) {
    let c: f64 = percent
        .parse()
        .unwrap_or_else(|_| panic!("{what}: coverage {percent:?}"));
    assert!(c > 0.0 && c <= 100.0, "{what}: coverage {c} %");
}

/// Whether a value's reason says a busy machine delayed the writes that bound its
/// counting (its rate not known to 0.5 %): a mark a loaded machine may earn.
pub fn busy_marked(reason: &serde_json::Value) -> bool {
    reason
        .as_str()
        .is_some_and(|r| r.contains("a busy machine delayed the writes"))
}

/// Whether the tests run under user-mode emulation (.ci/aarch64 sets
/// BFPERF_TEST_EMULATED), where starting a process takes longer.
pub fn emulated() -> bool {
    std::env::var_os("BFPERF_TEST_EMULATED").is_some()
}

/// bfperf on a checked-in fixture (read-only commands).
pub fn on_fixture(gen: &str) -> Command {
    let mut c = bfperf();
    c.arg("--sysfs-root").arg(fixture(gen));
    c
}

/// Runs and returns stdout; panics with stderr on failure.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The files bfperf, run on `tree` with `args`, opened (strace's `openat` lines,
/// each with its flags and result); None (having said why) when strace is missing
/// and the run may skip (see [`required`]).
pub fn opens_of(tree: &dyn Tree, args: &[&str], tests: &str) -> Option<Vec<String>> {
    let strace = std::process::Command::new("strace").arg("-V").output();
    let found = strace
        .is_ok_and(|o| o.status.success())
        .then_some(())
        .ok_or_else(|| "strace is not installed".to_string());
    if !required("strace", tests, found) {
        return None;
    }
    let trace_dir = tempfile::tempdir().unwrap();
    let trace = trace_dir.path().join("trace");
    let bfperf = tree.cmd();
    stdout_of(
        Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-o"])
            .arg(&trace)
            .arg(bfperf.get_program())
            .args(bfperf.get_args())
            .args(args)
            .envs(bfperf.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .env_remove("BFPERF_SYSFS_ROOT")
            .env_remove("BFPERF_SIM"),
    );
    Some(
        fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// Rows of a table output, each split on runs of spaces.
pub fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// A `bfperf sim mount` running in a temp dir; unmounted when dropped.
pub struct Mount {
    pub dir: tempfile::TempDir,
    child: std::process::Child,
    /// Its server was killed ([`Mount::lose`]): the mount is left to be undone.
    lost: bool,
}

fn fuse_unavailable_reason() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let helper = [
        "/bin/fusermount3",
        "/usr/bin/fusermount3",
        "/bin/fusermount",
        "/usr/bin/fusermount",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    if !root && !helper {
        return Some("not root and no fusermount3 helper".into());
    }
    None
}

fn skip_or_fail(reason: &str) {
    required(
        "fuse",
        "FUSE-backed simulator tests",
        Err(reason.to_string()),
    );
}

/// The one way a test says a real component (`fuse`, `prometheus`, `tmux`) is
/// missing: where `BFPERF_REQUIRE` names it (or says `all`: CI), that fails the
/// test; elsewhere the test is skipped, said once on the real stderr (past the
/// harness's capture), and reports ok. True when it is there.
pub fn required(what: &str, tests: &str, available: Result<(), String>) -> bool {
    let Err(why) = available else {
        return true;
    };
    let wanted = std::env::var("BFPERF_REQUIRE").unwrap_or_default();
    if wanted
        .split(',')
        .any(|w| w.trim() == what || w.trim() == "all")
    {
        panic!("{tests} need {what} (BFPERF_REQUIRE={wanted}), which is missing: {why}");
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "note: skipping {tests}: {why} (BFPERF_REQUIRE={what} makes this a failure)"
    );
    false
}

impl Mount {
    /// Mounts a simulated device, or returns None (after saying why) where FUSE cannot
    /// be used. Where `BFPERF_REQUIRE` names `fuse`, failing to mount fails the test.
    pub fn start(gen: &str, flavor: &str) -> Option<Mount> {
        Mount::start_with(gen, flavor, &[])
    }

    /// Mounts a simulated device with more `sim mount` arguments (`--workload F`).
    pub fn start_with(gen: &str, flavor: &str, extra: &[&str]) -> Option<Mount> {
        if let Some(reason) = fuse_unavailable_reason() {
            skip_or_fail(&reason);
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .args(["sim", "mount", "--gen", gen, "--kernel", flavor])
            .args(extra)
            .arg(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut m = Mount {
            dir,
            child,
            lost: false,
        };
        let name = m.device().join("name");
        // Half a minute at most: a busy machine emulating another architecture may
        // take that long to mount (a readiness wait, never a bound on a figure).
        for _ in 0..600 {
            if name.exists() {
                return Some(m);
            }
            if let Ok(Some(_)) = m.child.try_wait() {
                let mut err = String::new();
                use std::io::Read;
                if let Some(mut e) = m.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                skip_or_fail(&format!("bfperf sim mount failed: {}", err.trim()));
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        skip_or_fail("the simulator did not appear within 30 s");
        None
    }

    /// The configuration files (events, enable, count_clock) of a block, to prove a
    /// rejected command changed nothing.
    pub fn config(&self, block: &str) -> Vec<(String, String)> {
        block_config(&self.device(), block)
    }

    /// `block`'s events and count_clock, without its `enable`: what to compare
    /// while an exporter owns the device, since its sweeps switch an all-at-once
    /// block's `enable` off and on to read it.
    pub fn programming(&self, block: &str) -> Vec<(String, String)> {
        let mut config = self.config(block);
        config.retain(|(f, _)| f != "enable");
        config
    }
}

/// The configuration files (events, enable, count_clock) of `block` of the device
/// at `device`.
pub fn block_config(device: &Path, block: &str) -> Vec<(String, String)> {
    let mut names: Vec<String> = fs::read_dir(device.join(block))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("event") && n != "event_list" || n == "enable" || n == "count_clock"
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let v = fs::read_to_string(device.join(block).join(&n))
                .unwrap_or_else(|e| format!("error: {e}"));
            (n, v)
        })
        .collect()
}

impl Tree for Mount {
    fn root(&self) -> &Path {
        self.dir.path()
    }
}

impl Mount {
    /// Sends the server `signal` and waits `limit` at most for it to end; its exit
    /// status, or None if it is still running.
    pub fn signal_and_wait(
        &mut self,
        signal: i32,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        // SAFETY: sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let until = std::time::Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Whether `dir` is a mount point now (in this process's mount table).
pub fn is_mounted(dir: &Path) -> bool {
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir = dir.to_string_lossy();
    table
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.as_ref()))
}

impl Mount {
    /// The device comes back where it was lost ([`Mount::lose`]): the dead mount
    /// undone, a new simulator of generation `gen` mounted at the same path.
    pub fn revive(&mut self, gen: &str) {
        self.revive_at(gen, 3)
    }

    /// As [`Mount::revive`], the device under `hwmon{hwmon}` this time (a driver
    /// loaded again takes a new number).
    pub fn revive_at(&mut self, gen: &str, hwmon: u32) {
        self.revive_as(gen, hwmon, &[])
    }

    /// As [`Mount::revive_at`], with more `sim mount` arguments (`--kernel 6.12`:
    /// another driver, which lists other blocks).
    pub fn revive_as(&mut self, gen: &str, hwmon: u32, extra: &[&str]) {
        assert!(self.lost, "revive a lost mount");
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
        self.child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .args(["sim", "mount", "--gen", gen, "--hwmon", &hwmon.to_string()])
            .args(extra)
            .arg(self.dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.lost = false;
        let name = self.root().join(format!("class/hwmon/hwmon{hwmon}/name"));
        for _ in 0..600 {
            if name.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the simulator did not appear again within 30 s");
    }

    /// The device goes away as a driver unloaded or a FUSE tree failing: the
    /// server is killed, the mount left in place, every read of it failing
    /// (ENOTCONN). Undone when the mount is dropped.
    pub fn lose(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.lost = true;
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.lost {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
            return;
        }
        // SAFETY: sends SIGTERM to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A pacer on the simulator's manual clock: sleeping advances it.
pub struct Manual(pub std::sync::Arc<bfperf::sim::ManualClock>);

impl bfperf::measure::Pacer for Manual {
    fn now_ns(&self) -> u64 {
        use bfperf::sim::Clock;
        self.0.now_ns()
    }
    fn sleep(&self, d: std::time::Duration) {
        self.0.advance_ns(d.as_nanos() as u64)
    }
}

/// The count of `event` of `block` (or of a kind's sum) in a measurement.
pub fn find<'a>(
    counts: &'a [bfperf::measure::Count],
    block: &str,
    event: &str,
) -> &'a bfperf::measure::Count {
    counts
        .iter()
        .find(|c| &*c.block == block && &*c.event == event)
        .unwrap_or_else(|| panic!("no {block} {event} in {counts:?}"))
}

/// The lines of an NDJSON output.
pub fn ndjson(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The CPUs online (`/sys/devices/system/cpu/online`): what system-wide cpu-clock
/// counts, in seconds per second.
#[allow(dead_code)]
pub fn online_cpus() -> f64 {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online
        .trim()
        .split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => b.parse::<f64>().unwrap() - a.parse::<f64>().unwrap() + 1.0,
            None => 1.0,
        })
        .sum()
}

/// The simulated BF2's MEMORY_READS per second over its tiles (no workload).
#[allow(dead_code)]
pub fn bf2_tile_read_rate() -> f64 {
    let (sim, _) =
        bfperf::sim::Sim::with_manual_clock(bfperf::Generation::Bf2, bfperf::sim::Kernel::V6_16);
    (0..8)
        .filter_map(|t| sim.event_rate(&format!("tile{t}"), 0x4c))
        .map(|r| r as f64)
        .sum()
}

/// The in-process simulated BlueField-3's bandwidth of `event` (64-byte units)
/// summed over `blocks`, in GB/s: its rates, the ground truth.
pub fn bf3_gb_per_s(blocks: &[&str], event: &str) -> f64 {
    blocks
        .iter()
        .map(|b| bf3_event_rate(b, event) * 64.0 / 1e9)
        .sum()
}

/// The in-process simulated BlueField-3's rate of `event` on `block`, per second.
pub fn bf3_event_rate(block: &str, event: &str) -> f64 {
    let (sim, _) =
        bfperf::sim::Sim::with_manual_clock(bfperf::Generation::Bf3, bfperf::sim::Kernel::V6_16);
    let listed = stdout_of(bfperf().args(["--sim", "bf3", "events", block, event, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let n = v["events"][0]["event"].as_u64().unwrap() as u32;
    sim.event_rate(block, n).unwrap() as f64
}

/// A simulated device in process on a manual clock, and the device opened on it.
pub struct Rig {
    pub sim: std::sync::Arc<bfperf::sim::Sim>,
    pub clock: std::sync::Arc<bfperf::sim::ManualClock>,
    pub device: bfperf::Device,
}

/// A [`Rig`] of `gen` (kernel 6.16) with the simulator's `options`.
pub fn rig_with(gen: bfperf::Generation, options: &bfperf::sim::SimOptions) -> Rig {
    let clock = std::sync::Arc::new(bfperf::sim::ManualClock::new(0));
    let sim = std::sync::Arc::new(bfperf::sim::Sim::with_options(
        gen,
        bfperf::sim::Kernel::V6_16,
        clock.clone(),
        options,
    ));
    let device = bfperf::Device::open(Box::new(sim.clone())).unwrap();
    Rig { sim, clock, device }
}

/// A [`Rig`] of `gen` with the simulator's defaults.
pub fn rig(gen: bfperf::Generation) -> Rig {
    rig_with(gen, &bfperf::sim::SimOptions::default())
}

/// An exporter's config counting `spec`.
pub fn counting(spec: &str) -> bfperf::collector::Counting {
    bfperf::collector::Counting {
        events: vec![spec.into()],
        ..Default::default()
    }
}
