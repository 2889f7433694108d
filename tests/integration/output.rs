//! The output layer and hostile input: closed pipes, full disks, device trees that
//! hold FIFOs, endless or huge files, bad names and escape sequences; safe snapshot
//! targets; kernel-style number parsing.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::FromRawFd;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use predicates::prelude::*;

/// bfperf as a plain process on a sysfs root, to give it any stdout.
fn process(root: &std::path::Path) -> Process {
    let mut p = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    p.env_remove("BFPERF_SYSFS_ROOT")
        .arg("--sysfs-root")
        .arg(root);
    p
}

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe fills two fds we own; the read end is closed at once.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        Stdio::from(fs::File::from_raw_fd(fds[1]))
    }
}

fn dev_full() -> Stdio {
    Stdio::from(
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    )
}

const READ_COMMANDS: &[&[&str]] = &[
    &["info"],
    &["blocks"],
    &["blocks", "--csv"],
    &["events", "tile2"],
    &["events", "tile2", "--json"],
    &["read", "all"],
    &["read", "all", "--csv"],
    &["snapshot", "all"],
    &["completions", "zsh"],
    &["--help"],
];

#[test]
fn a_closed_pipe_is_a_quiet_success() {
    for args in READ_COMMANDS {
        let out = process(&fixture("bf2"))
            .args(*args)
            .stdout(closed_pipe())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
    }
}

#[test]
fn read_all_into_head_exits_0_every_time() {
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let script = r#"for i in $(seq 100); do
        "$0" --sysfs-root "$1" read all | head -1 > /dev/null
        s=${PIPESTATUS[0]}; [ "$s" = 0 ] || { echo "exit $s on run $i"; exit 1; }
    done"#;
    let out = Process::new("bash")
        .args(["-c", script])
        .arg(bin)
        .arg(fixture("bf3"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_full_disk_is_one_line_and_exit_1() {
    for args in READ_COMMANDS.iter().filter(|a| a[0] != "--help") {
        let out = process(&fixture("bf2"))
            .args(*args)
            .stdout(dev_full())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            err, "bfperf: error: cannot write the output: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
}

#[test]
fn a_writing_command_says_what_it_wrote_when_it_cannot_report() {
    let c = Copy::of("bf2");
    let out = process(c.root())
        .args(["program", "tile2", "3", "HNF_REQUESTS"])
        .stdout(dev_full())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(c.read("tile2/event3"), "0x45");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with(
            "bfperf: wrote \"0x45\" to tile2/event3\nbfperf: error: cannot write the output"
        ),
        "{err}"
    );
    let out = process(c.root())
        .args(["stop", "tile2", "3"])
        .stdout(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "bfperf: wrote \"0x0\" to tile2/event3\n"
    );
}

/// Runs a command with a time limit; returns (exit code, stdout, stderr).
fn run_bounded(cmd: &mut Process) -> (i32, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            break;
        }
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("bfperf did not finish within 5 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_fifo_attribute_is_refused_without_blocking() {
    let c = Copy::of("bf2");
    let f = c.device().join("tile2/counter1");
    fs::remove_file(&f).unwrap();
    let path = std::ffi::CString::new(f.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
    // Left out and said; the block's other values are read.
    let (code, out, _) = run_bounded(process(c.root()).args(["read", "tile2"]));
    assert_eq!(code, 0);
    assert!(
        out.contains("tile2/counter1: not read, left out") && out.contains("a FIFO"),
        "{out}"
    );
    assert!(out.contains("HNF_REQUESTS"), "{out}");
    // The other blocks still read.
    let (code, _, _) = run_bounded(process(c.root()).args(["read", "tile1"]));
    assert_eq!(code, 0);
}

#[test]
fn huge_and_linked_attributes_are_refused() {
    let c = Copy::of("bf2");
    fs::write(c.device().join("tile2/counter1"), vec![b'1'; 100_000]).unwrap();
    let (code, out, _) = run_bounded(process(c.root()).args(["read", "tile2"]));
    assert_eq!(code, 0);
    assert!(
        out.contains("tile2/counter1: not read") && out.contains("more than 64 KiB"),
        "{out}"
    );
    let counter = c.device().join("tile2/counter2");
    fs::remove_file(&counter).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &counter).unwrap();
    fs::write(c.device().join("tile2/counter1"), "0x1").unwrap();
    let (code, out, _) = run_bounded(process(c.root()).args(["read", "tile2"]));
    assert_eq!(code, 0);
    assert!(
        out.contains("tile2/counter2: not read") && out.contains("symbolic link"),
        "{out}"
    );
}

#[test]
fn an_endless_device_node_is_refused() {
    // A bind mount of /dev/zero over an attribute, in a private mount namespace.
    let c = Copy::of("bf2");
    let target = c.device().join("tile2/counter1");
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let script = r#"mount --bind /dev/zero "$1" || exit 77
        exec "$0" --sysfs-root "$2" read tile2"#;
    let out = Process::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(bin)
        .arg(&target)
        .arg(c.root())
        .output();
    match out {
        Ok(out) if out.status.code() == Some(1) => {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("tile2/counter1") && err.contains("a device node"),
                "{err}"
            );
        }
        other => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: skipping the bind-mounted /dev/zero case (no private mount namespace here): {other:?}"
            );
        }
    }
}

#[test]
fn a_non_utf8_block_is_skipped_with_a_warning() {
    let c = Copy::of("bf2");
    let name = std::ffi::OsStr::from_bytes(b"tile\xff9");
    fs::create_dir(c.device().join(name)).unwrap();
    let out = c.cmd().args(["read", "tile2"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("bfperf: warning: skipped the entry \"tile\u{fffd}9\"")
            && err.contains("not UTF-8"),
        "{err}"
    );
}

#[test]
fn an_unlistable_block_is_skipped_and_the_rest_works() {
    use bfperf::sysfs::{Entry, RealFs, Sysfs};
    struct Unlistable(RealFs);
    impl Sysfs for Unlistable {
        fn read(&self, rel: &str) -> std::io::Result<String> {
            self.0.read(rel)
        }
        fn write_here(&self, rel: &str, data: &[u8]) -> std::io::Result<()> {
            self.0.write_here(rel, data)
        }
        fn still_here(&self) -> std::io::Result<()> {
            self.0.still_here()
        }
        fn list(&self, rel: &str) -> std::io::Result<Vec<Entry>> {
            if rel == "tile1" {
                return Err(std::io::Error::from_raw_os_error(libc::EACCES));
            }
            self.0.list(rel)
        }
        fn read_link(&self, rel: &str) -> std::io::Result<String> {
            self.0.read_link(rel)
        }
        fn location(&self) -> String {
            self.0.location()
        }
    }
    let fs = Unlistable(RealFs::new(device_dir(&fixture("bf2"))));
    let device = bfperf::Device::open(Box::new(fs)).unwrap();
    assert_eq!(
        device.warnings(),
        ["skipped block tile1: permission denied listing tile1: run as root"]
    );
    assert!(device.block("tile1").is_err());
    assert_eq!(device.blocks().len(), 18);
}

#[test]
fn an_empty_block_is_empty_and_refused_by_writers() {
    let c = Copy::of("bf2");
    fs::create_dir(c.device().join("tile9")).unwrap();
    let out = c.run(&["blocks", "--csv"]);
    assert!(out.contains("\ntile9,tile,per-counter,0,0,,"), "{out}");
    let before = c.contents();
    for args in [
        &["program", "tile9", "0", "HNF_REQUESTS"][..],
        &["clear", "tile9"],
        &["stop", "tile9"],
    ] {
        c.cmd()
            .args(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("tile9 is an empty block"));
    }
    assert_eq!(before, c.contents());
}

#[test]
fn device_strings_are_escaped_for_people_and_quoted_in_csv() {
    let c = Copy::of("bf2");
    let list = c.device().join("tile2/event_list");
    let mut text = fs::read_to_string(&list).unwrap();
    text.push_str("0xfe: EVIL\x1b[31m,999\n");
    fs::write(&list, text).unwrap();
    let out = c.run(&["events", "tile2", "evil"]);
    assert!(out.contains("EVIL\\x1b[31m,999"), "{out}");
    assert!(!out.contains('\x1b'));
    let out = c.run(&["events", "tile2", "evil", "--csv"]);
    assert_eq!(
        out,
        "block,event,event_name,description,reserved,source\ntile2,254,\"EVIL\x1b[31m,999\",,false,device\n"
    );
    // On a terminal (a pseudo-terminal from script(1)) CSV is escaped too.
    let on_tty = Process::new("script")
        .args(["-qec"])
        .arg(format!(
            "{} --sysfs-root {} events tile2 evil --csv",
            assert_cmd::cargo::cargo_bin!("bfperf").display(),
            c.root().display()
        ))
        .arg("/dev/null")
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&on_tty.stdout);
    assert!(tty.contains("EVIL\\x1b[31m,999"), "{tty}");
    assert!(!tty.contains('\x1b'), "{tty}");
    // The same name programmed and read back shows escaped in the table too.
    c.run(&["program", "tile2", "0", "0xfe", "--force"]);
    fs::write(c.device().join("tile2/event0"), "0xfe: EVIL\x1b[31m,999\n").unwrap();
    let out = c.run(&["read", "tile2"]);
    assert!(out.contains("0xfe EVIL\\x1b[31m,999"), "{out}");
    assert!(!out.contains('\x1b'));
}

#[test]
fn tables_wrap_text_to_the_terminal_but_never_split_numbers() {
    let out = stdout_of(
        on_fixture("bf2")
            .env("COLUMNS", "60")
            .args(["events", "tile2"]),
    );
    assert!(out.lines().all(|l| l.chars().count() <= 60), "{out}");
    assert!(out.lines().any(|l| l.starts_with("0x45 ")), "{out}");
    let wide = stdout_of(on_fixture("bf2").args(["events", "tile2"]));
    assert!(wide.lines().any(|l| l.chars().count() > 100));
    let out = stdout_of(
        on_fixture("bf2")
            .env("COLUMNS", "40")
            .args(["read", "l3cache"]),
    );
    assert!(out.contains("70,312,500"), "{out}");
}

#[test]
fn event_numbers_parse_as_the_kernel_reads_them() {
    let c = Copy::of("bf2");
    for (typed, written) in [
        ("0105", "0x45"),
        ("010", "0x8"),
        ("0x45", "0x45"),
        ("69", "0x45"),
    ] {
        let out = c.run(&["program", "tile2", "3", typed, "--force"]);
        assert_eq!(c.read("tile2/event3"), written, "{typed}");
        if typed == "0105" {
            assert!(out.contains("0105 is octal"), "{out}");
        }
    }
    c.cmd()
        .args(["program", "tile2", "3", "09"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("octal"));
}

#[test]
fn count_clock_refuses_counters_its_mask_cannot_name() {
    let c = Copy::of("bf3");
    for i in 8..41 {
        fs::write(c.device().join(format!("llt0/counter{i}")), "0x0").unwrap();
        fs::write(c.device().join(format!("llt0/event{i}")), "0x0").unwrap();
    }
    let before = c.contents();
    c.cmd()
        .args(["program", "llt0", "40", "--count-clock"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "counter 40 of llt0 cannot count clock cycles",
        ));
    assert_eq!(before, c.contents());
    // Programming an event there leaves the mask alone.
    let mask = c.read("llt0/count_clock");
    c.run(&["program", "llt0", "40", "HNF0_CYCLES"]);
    assert_eq!(c.read("llt0/count_clock"), mask);
}

#[test]
fn a_failed_read_back_says_the_write_was_made() {
    use bfperf::ops::program;
    use bfperf::sysfs::{Entry, RealFs, Sysfs};
    struct NoReadBack(RealFs);
    impl Sysfs for NoReadBack {
        fn read(&self, rel: &str) -> std::io::Result<String> {
            if rel == "tile2/event3" {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            self.0.read(rel)
        }
        fn write_here(&self, rel: &str, data: &[u8]) -> std::io::Result<()> {
            self.0.write_here(rel, data)
        }
        fn still_here(&self) -> std::io::Result<()> {
            self.0.still_here()
        }
        fn list(&self, rel: &str) -> std::io::Result<Vec<Entry>> {
            self.0.list(rel)
        }
        fn read_link(&self, rel: &str) -> std::io::Result<String> {
            self.0.read_link(rel)
        }
        fn location(&self) -> String {
            self.0.location()
        }
    }
    let c = Copy::of("bf2");
    let device = bfperf::Device::open(Box::new(NoReadBack(RealFs::new(c.device())))).unwrap();
    let a = program::parse_assignments(&["3".into(), "HNF_REQUESTS".into()], false).unwrap();
    let err = program::program(&device, "tile2", &a, &Default::default()).unwrap_err();
    assert_eq!(c.read("tile2/event3"), "0x45");
    let msg = err.to_string();
    assert!(
        msg.contains("the writes were made (tile2/event3 <- 0x45)"),
        "{msg}"
    );
}

fn mode(p: &std::path::Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn snapshot_targets_are_replaced_only_when_regular() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A regular file keeps its mode.
    let file = d.join("snap.json");
    fs::write(&file, "old").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(&file)
        .assert()
        .success();
    assert_eq!(mode(&file), 0o640);
    assert!(fs::read_to_string(&file)
        .unwrap()
        .contains("bfperf-snapshot"));
    // A new file is 0644 less the umask.
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let new = d.join("new.json");
    let st = Process::new("sh")
        .args([
            "-c",
            "umask 027; exec \"$0\" --sysfs-root \"$1\" snapshot -o \"$2\"",
        ])
        .arg(bin)
        .arg(fixture("bf2"))
        .arg(&new)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(mode(&new), 0o640);
    // A symlink the user names is followed: the file it points to is replaced.
    let link = d.join("link.json");
    std::os::unix::fs::symlink("snap.json", &link).unwrap();
    fs::write(&file, "old").unwrap();
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(&link)
        .assert()
        .success();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::read_to_string(&file)
        .unwrap()
        .contains("bfperf-snapshot"));
    // A hard-linked file is refused rather than split.
    let hard = d.join("hard.json");
    fs::hard_link(&file, &hard).unwrap();
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(&hard)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("2 hard links"));
    fs::remove_file(&hard).unwrap();
    // A FIFO is written in place (`-o >(gzip > s.gz)`); one nobody reads is an error,
    // never a hang. A directory is refused.
    let fifo = d.join("fifo");
    let p = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o644) }, 0);
    let (code, _, err) = run_bounded(process(&fixture("bf2")).args(["snapshot", "-o"]).arg(&fifo));
    assert_eq!(code, 1);
    assert!(err.contains("no process reads this FIFO"), "{err}");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (code, _, err) = run_bounded(process(&fixture("bf2")).args(["snapshot", "-o"]).arg(&fifo));
    assert_eq!(code, 0, "{err}");
    assert!(reader.join().unwrap().contains("bfperf-snapshot"));
    on_fixture("bf2")
        .args(["snapshot", "-o"])
        .arg(d)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("it is a directory"));
    // `-o -` is standard output.
    let out = stdout_of(on_fixture("bf2").args(["snapshot", "-o", "-"]));
    assert!(out.contains("\"schema\": \"bfperf-snapshot\""));
    // Nothing else was left in the directory.
    let mut names: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fifo", "link.json", "new.json", "snap.json"]);
}

#[test]
fn a_device_node_target_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("null");
    let p = std::ffi::CString::new(node.as_os_str().as_bytes()).unwrap();
    // SAFETY: mknod with a valid C string; makes a character device like /dev/null.
    let rc = unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if rc != 0 {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: skipping the device-node target (mknod refused: {})",
            std::io::Error::last_os_error()
        );
        return;
    }
    for args in [
        &["snapshot", "all", "-o"][..],
        &[
            "stat",
            "-e",
            "tile2/MEMORY_READS/",
            "--duration",
            "10ms",
            "-o",
        ][..],
    ] {
        let c = Copy::of("bf2");
        c.cmd().args(args).arg(&node).assert().success();
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&node)
        .unwrap()
        .file_type()
        .is_char_device());
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing beside it"
    );
}

fn tmp_files(dir: &std::path::Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn interrupted_snapshots_leave_no_temp_file_and_never_a_truncated_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("snap.json");
    on_fixture("bf3")
        .args(["snapshot", "all", "-o"])
        .arg(&target)
        .assert()
        .success();
    let whole: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&target).unwrap()).unwrap();
    let blocks = whole["blocks"].as_array().unwrap().len();
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    for (i, signal) in (0..60).map(|i| {
        (
            i,
            if i % 2 == 0 {
                libc::SIGINT
            } else {
                libc::SIGKILL
            },
        )
    }) {
        let mut child = Process::new(bin)
            .arg("--sysfs-root")
            .arg(fixture("bf3"))
            .args(["snapshot", "all", "-o"])
            .arg(&target)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(200 * (i % 15)));
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        child.wait().unwrap();
        // Whole: it parses and holds every block (times differ from run to run).
        let now: serde_json::Value = serde_json::from_str(&fs::read_to_string(&target).unwrap())
            .unwrap_or_else(|e| panic!("a truncated target after run {i}: {e}"));
        assert_eq!(
            now["blocks"].as_array().map(Vec::len),
            Some(blocks),
            "run {i}"
        );
        if signal == libc::SIGINT {
            assert_eq!(
                tmp_files(dir.path()),
                Vec::<String>::new(),
                "after SIGINT {i}"
            );
        } else {
            for t in tmp_files(dir.path()) {
                fs::remove_file(dir.path().join(t)).unwrap();
            }
        }
    }
}

/// A closed standard output is an error for every command (the report would be
/// lost), not a silent success; /dev/null and a pipe closed early stay fine.
#[test]
fn a_closed_stdout_is_an_error() {
    for args in [&["read"][..], &["snapshot", "all"], &["blocks"], &["list"]] {
        let out = Process::new("sh")
            .args(["-c", "exec \"$0\" --sysfs-root \"$1\" \"$@\" >&-"])
            .arg(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg(fixture("bf2"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("standard output is closed"),
            "{args:?}"
        );
        let status = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(fixture("bf2"))
            .args(args)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{args:?} > /dev/null");
    }
}

#[test]
fn an_empty_rate_window_is_refused() {
    for w in ["0s", "00m"] {
        bfperf()
            .args([
                "metrics",
                "--all",
                "--format",
                "prometheus-rules",
                "--window",
                w,
            ])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("empty range"));
    }
}

/// `--version` or `-V` alone is answered before the command line is parsed; it says
/// what clap says when the flag comes with other arguments.
#[test]
fn version_alone_says_what_the_parser_says() {
    let want = format!("bfperf {}\n", env!("CARGO_PKG_VERSION"));
    let forms: [&[&str]; 5] = [
        &["--version"],
        &["-V"],
        &["--version", "read"],
        &["--sim", "bf3", "-V"],
        &["-V", "--json"],
    ];
    for args in forms {
        bfperf().args(args).assert().success().stdout(want.clone());
    }
}
