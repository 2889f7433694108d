//! Safe as root on a shared machine: the writer lock cannot be pointed at another
//! file, every spelling of a device shares one lock, the state directory must be
//! private, and a killed writer's programming is put back from its journal.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use predicates::prelude::*;

/// bfperf on a mount, keeping its lock and journal in `state` (not the test's lock
/// file).
fn with_state(m: &Mount, state: &Path) -> assert_cmd::Command {
    let mut c = m.cmd();
    c.env_remove("BFPERF_LOCK_FILE")
        .env("BFPERF_STATE_DIR", state);
    c
}

fn state_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
    d
}

#[test]
fn a_link_at_the_lock_path_is_refused_and_its_target_unchanged() {
    let c = Copy::of("bf2");
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("notes.txt");
    fs::write(&precious, "keep me\n").unwrap();
    let symlink = dir.path().join("sym.lock");
    std::os::unix::fs::symlink(&precious, &symlink).unwrap();
    let hard = dir.path().join("hard.lock");
    fs::hard_link(&precious, &hard).unwrap();
    for (lock, says) in [(&symlink, "symbolic link"), (&hard, "2 hard links")] {
        for how in ["flag", "env"] {
            let mut cmd = c.cmd();
            match how {
                "flag" => cmd.arg("--lock-file").arg(lock),
                _ => cmd.env("BFPERF_LOCK_FILE", lock),
            };
            cmd.args(["program", "tile2", "0", "MEMORY_READS"])
                .assert()
                .code(1)
                .stderr(predicate::str::contains(says));
            assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me\n");
        }
    }
    // Another user's file is refused too, never emptied.
    let foreign = dir.path().join("foreign.lock");
    fs::write(&foreign, "theirs\n").unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    c.cmd()
        .arg("--lock-file")
        .arg(&foreign)
        .args(["program", "tile2", "0", "MEMORY_READS"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("belongs to uid 65534"));
    assert_eq!(fs::read_to_string(&foreign).unwrap(), "theirs\n");
}

#[test]
fn a_state_directory_others_can_write_is_refused() {
    let c = Copy::of("bf2");
    let open = tempfile::tempdir().unwrap();
    fs::set_permissions(open.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    let before = c.contents();
    c.cmd()
        .env_remove("BFPERF_LOCK_FILE")
        .env("BFPERF_STATE_DIR", open.path())
        .args(["program", "tile2", "0", "MEMORY_READS"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("writable by group or others"));
    assert_eq!(before, c.contents());
}

#[test]
fn every_spelling_of_a_device_shares_one_lock() {
    let c = Copy::of("bf2");
    let state = state_dir();
    let root = c.root().to_path_buf();
    let parent = root.parent().unwrap().to_path_buf();
    let link = parent.join("another-name");
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let tile2 = block_config(&device_dir(&root), "tile2");
    let mut holder: Child = Command::new(env!("CARGO_BIN_EXE_bfperf"))
        .env_remove("BFPERF_LOCK_FILE")
        .env("BFPERF_STATE_DIR", state.path())
        .arg("--sysfs-root")
        .arg(&root)
        .args(["stat", "-e", "tile2/MEMORY_READS/", "--duration", "20s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The holder has the lock once it has programmed tile2 (it writes under it).
    let deadline = Instant::now() + Duration::from_secs(30);
    while block_config(&device_dir(&root), "tile2") == tile2 {
        assert!(
            Instant::now() < deadline,
            "the holder never programmed tile2"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let name = root.file_name().unwrap().to_str().unwrap().to_string();
    let spellings: Vec<Vec<String>> = vec![
        vec!["--sysfs-root".into(), format!("{}/", root.display())],
        vec!["--sysfs-root".into(), format!("{}//", root.display())],
        vec!["--sysfs-root".into(), name.clone()],
        vec!["--sysfs-root".into(), link.display().to_string()],
        vec![
            "--device".into(),
            format!("{}/class/hwmon/hwmon3/", root.display()),
        ],
    ];
    for s in &spellings {
        Command::new(env!("CARGO_BIN_EXE_bfperf"))
            .current_dir(&parent)
            .env_remove("BFPERF_LOCK_FILE")
            .env_remove("BFPERF_SYSFS_ROOT")
            .env("BFPERF_STATE_DIR", state.path())
            .args(s)
            .args(["program", "tile2", "1", "MEMORY_WRITES"])
            .output()
            .map(|o| {
                assert_eq!(o.status.code(), Some(1), "{s:?}");
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(err.contains("another program is writing"), "{s:?}: {err}");
                assert!(err.contains(&format!("pid {}", holder.id())), "{err}");
            })
            .unwrap();
    }
    // A bind mount of the tree (in a mount namespace of its own): the same
    // directory, so the same lock. Mounting needs root, as bfperf's writes do.
    if unsafe { libc::geteuid() } == 0 {
        let bound = tempfile::tempdir().unwrap();
        let o = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount --bind \"$1\" \"$2\" && exec \"$3\" --sysfs-root \"$2\" program tile2 1 MEMORY_WRITES")
            .args(["sh", root.to_str().unwrap(), bound.path().to_str().unwrap()])
            .arg(env!("CARGO_BIN_EXE_bfperf"))
            .env_remove("BFPERF_LOCK_FILE")
            .env_remove("BFPERF_SYSFS_ROOT")
            .env("BFPERF_STATE_DIR", state.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "bind mount: {err}");
        assert!(
            err.contains("another program is writing"),
            "bind mount: {err}"
        );
    }
    let _ = holder.kill();
    let _ = holder.wait();
    let _ = fs::remove_file(&link);
}

/// A lock file bfperf did not make (it holds something else) is refused and left as
/// it was; one bfperf made is taken again.
#[test]
fn a_lock_file_with_other_content_is_never_emptied() {
    let c = Copy::of("bf2");
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    fs::write(&notes, "my notes\n").unwrap();
    fs::set_permissions(&notes, fs::Permissions::from_mode(0o600)).unwrap();
    let before = c.contents();
    c.cmd()
        .arg("--lock-file")
        .arg(&notes)
        .args(["program", "tile2", "0", "MEMORY_READS"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "never empties a file it did not make",
        ));
    assert_eq!(fs::read_to_string(&notes).unwrap(), "my notes\n");
    assert_eq!(before, c.contents());
    let lock = dir.path().join("bfperf.lock");
    for _ in 0..2 {
        c.cmd()
            .arg("--lock-file")
            .arg(&lock)
            .args(["program", "tile2", "0", "MEMORY_READS"])
            .assert()
            .success();
    }
}

/// Event, enable and count_clock of every block of a mounted simulator.
fn whole_config(m: &Mount) -> Vec<(String, Vec<(String, String)>)> {
    let mut blocks: Vec<String> = fs::read_dir(m.device())
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.file_type()
                .unwrap()
                .is_dir()
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .filter(|n| n != "power" && n != "device")
        .collect();
    blocks.sort();
    blocks
        .into_iter()
        .map(|b| (b.clone(), m.config(&b)))
        .collect()
}

/// Starts `args`, waits until its journal exists and every block of `programmed`
/// reads otherwise than before it started (its programming is on the device), then
/// SIGKILLs it.
fn killed_mid_measurement(m: &Mount, state: &Path, args: &[&str], programmed: &[&str]) {
    let before: Vec<_> = programmed.iter().map(|b| m.config(b)).collect();
    let mut w = spawn_with_state(m, state, args);
    // Wait for the journal, then for the programming.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fs::read_dir(state).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".journal")
    }) {
        assert!(Instant::now() < deadline, "no journal");
        std::thread::sleep(Duration::from_millis(20));
    }
    let changed = || {
        programmed
            .iter()
            .zip(&before)
            .all(|(b, was)| &m.config(b) != was)
    };
    while !changed() {
        assert!(
            Instant::now() < deadline,
            "{args:?} never programmed {programmed:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.kill().unwrap();
    w.wait().unwrap();
}

#[test]
fn a_killed_writer_is_undone_by_restore_or_by_the_next_writer() {
    let Some(m) = Mount::start("3", "new") else {
        return;
    };
    let state = state_dir();
    let original = whole_config(&m);
    let specs = [
        "stat",
        "-e",
        "llt0/cycles,GDC_BANK0_RD_REQ/",
        "-e",
        "mss0/SKYLIB_DDN_TX_FLITS/",
        "--duration",
        "60s",
    ];
    killed_mid_measurement(&m, state.path(), &specs, &["llt0", "mss0"]);
    assert_ne!(
        whole_config(&m),
        original,
        "the kill left the device programmed"
    );
    let restore = |says: &str| {
        with_state(&m, state.path())
            .arg("restore")
            .assert()
            .success()
            .stdout(predicate::str::contains(says));
    };
    restore("put back llt0, mss0");
    assert_eq!(whole_config(&m), original);
    restore("nothing to restore");

    // The exporter, killed; then a measurement restores the leftover first and
    // leaves the device as it originally was.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("exporter.toml");
    fs::write(&cfg, "events = [\"llt1/GDC_BANK1_RD_REQ/\"]\n").unwrap();
    // Killed before anyone scrapes it: the port it binds is its own business.
    let listen = "127.0.0.1:0".to_string();
    killed_mid_measurement(
        &m,
        state.path(),
        &[
            "exporter",
            "--config",
            cfg.to_str().unwrap(),
            "--listen",
            &listen,
        ],
        &["llt1"],
    );
    assert_ne!(whole_config(&m), original);
    with_state(&m, state.path())
        .args([
            "stat",
            "-o",
            "-",
            "-e",
            "llt2/GDC_BANK0_RD_REQ/",
            "--duration",
            "100ms",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("put back llt1"));
    assert_eq!(whole_config(&m), original);
}

/// Output paths by the kernel's rules. Run as root (as bfperf is on a DPU), with
/// links made as another user (uid 65534) in a sticky directory anyone can write to.
#[test]
fn output_paths_follow_the_kernels_rules_for_links() {
    if not_root("planting another user's links") {
        return;
    }
    let shared = tempfile::tempdir().unwrap();
    fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    let private = tempfile::tempdir().unwrap();
    let victim = private.path().join("victim");
    fs::write(&victim, "SECRET\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
    let plant = |name: &str, to: &Path| {
        let link = shared.path().join(name);
        std::os::unix::fs::symlink(to, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        link
    };
    let to_victim = plant("out.json", &victim);
    let dangling = plant("dangling.json", &private.path().join("made"));
    for (link, says) in [
        (&to_victim, "a directory anyone can write to"),
        (&dangling, "a directory anyone can write to"),
    ] {
        for args in [
            &["snapshot", "all", "-o"][..],
            &[
                "stat",
                "-e",
                "tile2/MEMORY_READS/",
                "--duration",
                "50ms",
                "-o",
            ],
        ] {
            on_fixture("bf2")
                .args(args)
                .arg(link)
                .assert()
                .code(1)
                .stderr(predicate::str::contains(says));
        }
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "SECRET\n");
    assert!(!private.path().join("made").exists());
    // A root-owned link in a root-only directory is followed; its file replaced.
    let link = private.path().join("link.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&link)
        .assert()
        .success();
    assert!(fs::read_to_string(&victim)
        .unwrap()
        .contains("bfperf-snapshot"));
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // A dangling link of our own is refused too: nothing is created through it.
    let mine = private.path().join("mine.json");
    std::os::unix::fs::symlink(private.path().join("nowhere"), &mine).unwrap();
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&mine)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("a symbolic link to nothing"));
    // The process's own descriptors are written through, in place.
    let log = private.path().join("log");
    fs::write(&log, "OLD\n").unwrap();
    let bin = env!("CARGO_BIN_EXE_bfperf");
    let fixture = fixture("bf2");
    let sh = |script: &str| {
        Command::new("sh")
            .args([
                "-c",
                script,
                "sh",
                bin,
                fixture.to_str().unwrap(),
                log.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    let o = sh("\"$1\" --sysfs-root \"$2\" snapshot all -o /dev/stdout >> \"$3\"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("OLD\n{"), "{}", &text[..20]);
    // Into a pipe: a whole snapshot comes out the other end (its size varies by a
    // few bytes with the times it records).
    let snapshot = |bytes: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(bytes).expect("a whole snapshot");
        assert_eq!(v["schema"], "bfperf-snapshot");
    };
    let o = sh("\"$1\" --sysfs-root \"$2\" snapshot all -o /dev/stdout | cat");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    snapshot(&o.stdout);
    // A deleted file behind stdout: written into, and no stray file appears.
    let o = sh("cd \"$(dirname \"$3\")\" && exec 3>gone.txt && rm gone.txt && \"$1\" --sysfs-root \"$2\" snapshot all -o /dev/stdout >&3 && ls");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("gone"));
    // A UNIX socket is connected to and written.
    let sock = private.path().join("s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let reader = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut c, &mut got).unwrap();
        got
    });
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&sock)
        .assert()
        .success();
    snapshot(&reader.join().unwrap());
}

/// Runs bfperf with a deadline; its exit code, stderr and how long it took.
fn run_bounded(cmd: &mut Command, limit: Duration) -> (Option<i32>, String, Duration) {
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

/// /dev/zero, a FIFO and a directory given as a certificate, a key, a metric file, a
/// workload, an exporter config or a web config: a clear error at once, naming the
/// file and what it is, and nothing written to the device.
#[test]
fn files_read_as_configuration_must_be_regular() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let subdir = dir.path().join("subdir");
    fs::create_dir(&subdir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    fs::write(dir.path().join("server.crt"), cert.cert.pem()).unwrap();
    fs::write(
        dir.path().join("server.key"),
        cert.signing_key.serialize_pem(),
    )
    .unwrap();
    let limit = if emulated() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(1)
    };
    let copy = Copy::of("bf2");
    let before = copy.contents();
    let targets = [
        (Path::new("/dev/zero"), "a device node"),
        (fifo.as_path(), "a FIFO"),
        (subdir.as_path(), "a directory"),
    ];
    for (target, is) in targets {
        let t = target.to_str().unwrap();
        let web = |cert: &str, key: &str| {
            let p = dir.path().join("web.yml");
            fs::write(
                &p,
                format!("tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"),
            )
            .unwrap();
            p
        };
        let exporter = |extra: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_bfperf"));
            c.arg("--sysfs-root")
                .arg(copy.root())
                .arg("--lock-file")
                .arg(dir.path().join("lock"))
                .args(["exporter", "--listen", "127.0.0.1:0"])
                .args(extra);
            c
        };
        let cases: Vec<(&str, Command)> = vec![
            ("certificate", {
                let w = web(t, "server.key");
                exporter(&["--web.config.file", w.to_str().unwrap()])
            }),
            ("key", {
                let w = web("server.crt", t);
                exporter(&["--web.config.file", w.to_str().unwrap()])
            }),
            ("web config", exporter(&["--web.config.file", t])),
            ("exporter config", exporter(&["--config", t])),
            ("metric file", {
                let mut c = Command::new(env!("CARGO_BIN_EXE_bfperf"));
                c.args([
                    "--sim",
                    "bf3",
                    "--metrics",
                    t,
                    "stat",
                    "-o",
                    "-",
                    "-M",
                    "ddr",
                    "--duration",
                    "100ms",
                ]);
                c
            }),
            ("workload", {
                let mut c = Command::new(env!("CARGO_BIN_EXE_bfperf"));
                c.args(["--sim", "bf3", "--workload", t, "info"]);
                c
            }),
        ];
        for (what, mut cmd) in cases {
            let (code, err, took) = run_bounded(&mut cmd, limit);
            assert_eq!(code, Some(1), "{what} {t}: {err}");
            assert!(
                err.contains(t) && err.contains(is),
                "{what} {t}: the error should name the file and say it is {is}: {err}"
            );
            assert!(took < limit, "{what} {t}: {took:?}");
        }
    }
    assert_eq!(before, copy.contents());
}

/// The journal file in a state directory.
fn journal_in(state: &Path) -> Option<std::path::PathBuf> {
    fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "journal"))
}

/// A stale journal never undoes a deliberate write later: `program` is refused while
/// one is pending, until `restore` or `--discard-journal`; the journal's word is
/// then final.
#[test]
fn a_pending_journal_refuses_one_shot_writes_until_restored_or_discarded() {
    let Some(m) = Mount::start("3", "new") else {
        return;
    };
    let state = state_dir();
    let cmd = || with_state(&m, state.path());
    let original = m.config("llt0");
    killed_mid_measurement(
        &m,
        state.path(),
        &["stat", "-e", "llt0/GDC_BANK0_RD_REQ/", "--duration", "60s"],
        &["llt0"],
    );
    let left = m.config("llt0");
    assert_ne!(left, original);
    for args in [
        &["program", "llt0", "0", "GDC_BANK1_RD_REQ"][..],
        &["start", "llt0"],
        &["stop", "llt0"],
        &["clear", "llt0"],
    ] {
        cmd()
            .args(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "was stopped without restoring llt0",
            ))
            .stderr(predicate::str::contains("bfperf restore"))
            .stderr(predicate::str::contains("--discard-journal"));
        assert_eq!(m.config("llt0"), left, "{args:?} wrote");
    }
    // A dry run says what the real write would meet.
    cmd()
        .args(["program", "llt0", "0", "GDC_BANK1_RD_REQ", "--dry-run"])
        .assert()
        .success()
        .stderr(predicate::str::contains("journal is pending"));
    // A refused command discards nothing, the journal included.
    cmd()
        .args(["program", "llt0", "0", "NO_SUCH_EVENT", "--discard-journal"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("NO_SUCH_EVENT"));
    assert!(
        journal_in(state.path()).is_some(),
        "a refused command discarded the journal"
    );
    assert_eq!(m.config("llt0"), left);
    // Discarded: the write goes ahead, and a later measurement keeps it.
    cmd()
        .args([
            "program",
            "llt0",
            "0",
            "GDC_BANK1_RD_REQ",
            "--discard-journal",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("discarded the journal"));
    assert!(journal_in(state.path()).is_none());
    let programmed = m.config("llt0");
    assert!(
        programmed
            .iter()
            .any(|(f, v)| f == "event0" && v.contains("GDC_BANK1_RD_REQ")),
        "{programmed:?}"
    );
    cmd()
        .args([
            "stat",
            "-o",
            "-",
            "-e",
            "llt0/GDC_BANK0_RD_REQ/",
            "--duration",
            "100ms",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("put back").not());
    assert_eq!(m.config("llt0"), programmed);

    // Restored: the device is as before the killed measurement; then writes go.
    killed_mid_measurement(
        &m,
        state.path(),
        &["stat", "-e", "llt0/GDC_BANK0_RD_REQ/", "--duration", "60s"],
        &["llt0"],
    );
    cmd().arg("restore").assert().success();
    assert_eq!(m.config("llt0"), programmed);
    cmd()
        .args(["program", "llt0", "0", "GDC_BANK0_RD_REQ"])
        .assert()
        .success();
}

/// A journal naming a block outside the device (`../..`, an absolute path, a block
/// this device lacks, a counter the block lacks) is refused whole, before anything
/// is written back.
#[test]
fn a_journal_that_points_outside_the_device_is_refused() {
    let Some(m) = Mount::start("3", "new") else {
        return;
    };
    let state = state_dir();
    killed_mid_measurement(
        &m,
        state.path(),
        &["stat", "-e", "llt0/GDC_BANK0_RD_REQ/", "--duration", "60s"],
        &["llt0"],
    );
    let journal = journal_in(state.path()).expect("a journal");
    let good = fs::read_to_string(&journal).unwrap();
    assert!(good.contains("\"llt0\""), "{good}");
    let outside = tempfile::tempdir().unwrap();
    let bait = outside.path().join("event0");
    fs::write(&bait, "untouched\n").unwrap();
    let traversal = format!("../../../../../../../..{}", outside.path().display());
    let left = m.config("llt0");
    for (block, says) in [
        (traversal.as_str(), "does not have"),
        (outside.path().to_str().unwrap(), "does not have"),
        ("llt99", "does not have"),
    ] {
        // Edited in place: the file stays the caller's, 0600, one link.
        fs::write(&journal, good.replace("\"llt0\"", &format!("{block:?}"))).unwrap();
        for args in [
            &["restore"][..],
            &[
                "stat",
                "-o",
                "-",
                "-e",
                "llt1/GDC_BANK0_RD_REQ/",
                "--duration",
                "100ms",
            ],
        ] {
            with_state(&m, state.path())
                .args(args)
                .assert()
                .code(1)
                .stderr(predicate::str::contains(says))
                .stderr(predicate::str::contains("writes nothing from it"));
        }
        assert_eq!(fs::read_to_string(&bait).unwrap(), "untouched\n");
        assert_eq!(m.config("llt0"), left);
    }
    // A counter the block does not have.
    let mut record: serde_json::Value = serde_json::from_str(&good).unwrap();
    record["saved"][0]["events"][0][0] = 99.into();
    fs::write(&journal, record.to_string()).unwrap();
    with_state(&m, state.path())
        .arg("restore")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("counter 99"));
    fs::write(&journal, good).unwrap();
    with_state(&m, state.path())
        .arg("restore")
        .assert()
        .success()
        .stdout(predicate::str::contains("put back llt0"));
}

/// An exporter whose start-up programming the device refuses leaves nothing behind;
/// a reload the device refuses puts the old configuration back to work, and the
/// exporter keeps serving it.
#[test]
fn a_refused_exporter_start_or_reload_leaves_no_journal_and_keeps_serving() {
    let Some(m) = Mount::start_with(
        "3",
        "new",
        &[
            "--sim-faults",
            "write:llt2/event0@1=EINVAL,write:llt3/event0@1=EINVAL",
        ],
    ) else {
        return;
    };
    let state = state_dir();
    let original = whole_config(&m);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("exporter.toml");
    let exporter = || {
        Command::new(env!("CARGO_BIN_EXE_bfperf"))
            .arg("--sysfs-root")
            .arg(m.root())
            .env_remove("BFPERF_LOCK_FILE")
            .env("BFPERF_STATE_DIR", state.path())
            .args(["exporter", "--config"])
            .arg(&cfg)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    fs::write(&cfg, "events = [\"llt2/GDC_BANK0_RD_REQ/\"]\n").unwrap();
    let out = exporter().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("rejected writing") && err.contains("llt2/event0"),
        "{err}"
    );
    assert!(journal_in(state.path()).is_none(), "a journal stayed");
    assert_eq!(whole_config(&m), original);

    fs::write(&cfg, "events = [\"llt1/GDC_BANK0_RD_REQ/\"]\n").unwrap();
    let mut e = crate::support::Running(exporter());
    let port = crate::support::served_port(&mut e);
    let scrape = || {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10"])
            .arg(format!("http://127.0.0.1:{port}/metrics"))
            .output()
            .expect("curl is installed (.ci/run installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !scrape().contains("block=\"llt1\"") {
        assert!(Instant::now() < deadline, "the exporter never served llt1");
        std::thread::sleep(Duration::from_millis(100));
    }
    let running = whole_config(&m);
    fs::write(&cfg, "events = [\"llt3/GDC_BANK0_RD_REQ/\"]\n").unwrap();
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !crate::support::said(&e).contains("reload failed") {
        assert!(
            Instant::now() < deadline,
            "the reload was never refused: {}",
            crate::support::said(&e)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        e.0.try_wait().unwrap().is_none(),
        "a refused reload stopped the exporter"
    );
    let text = scrape();
    assert!(
        text.contains("block=\"llt1\"") && !text.contains("block=\"llt3\""),
        "{text}"
    );
    assert_eq!(whole_config(&m), running);
    assert!(
        journal_in(state.path()).is_some(),
        "the running exporter has a journal"
    );
    // SAFETY: as above.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGTERM) };
    let status = e.0.wait().unwrap();
    let err = crate::support::said_to_end(&e);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains("reload failed, the old configuration runs again"),
        "{err}"
    );
    assert!(err.contains("llt3/event0"), "{err}");
    assert!(journal_in(state.path()).is_none(), "a journal stayed");
    assert_eq!(whole_config(&m), original);
}

/// bfperf on a mounted simulator with its state in `state` (its default lock
/// there), started and left running, its output discarded.
fn spawn_with_state(m: &Mount, state: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_bfperf"))
        .arg("--sysfs-root")
        .arg(m.root())
        .env_remove("BFPERF_LOCK_FILE")
        .env("BFPERF_STATE_DIR", state)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The exporter killed while it counts a client's events on counters it left free:
/// its journal holds those too, so `bfperf restore` puts back the whole device.
#[test]
fn a_killed_exporter_s_journal_covers_its_clients_counters() {
    let Some(m) = Mount::start("3", "new") else {
        return;
    };
    let state = state_dir();
    let original = whole_config(&m);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("exporter.toml");
    fs::write(&cfg, "events = [\"llt1/GDC_BANK1_RD_REQ/\"]\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let spawn = |args: &[&str]| spawn_with_state(&m, state.path(), args);
    let listen = format!("127.0.0.1:{port}");
    let mut exporter = spawn(&[
        "exporter",
        "--config",
        cfg.to_str().unwrap(),
        "--listen",
        &listen,
    ]);
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ok() {
            assert!(Instant::now() < deadline, "waited for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("the exporter", &|| {
        std::net::TcpStream::connect(&listen).is_ok()
    });
    let gic0 = m.config("gic0");
    let mut client = spawn(&["stat", "-e", "gic0/AW_BEATS/", "--duration", "60s"]);
    wait("the client's event", &|| m.config("gic0") != gic0);
    exporter.kill().unwrap();
    exporter.wait().unwrap();
    let _ = client.kill();
    client.wait().unwrap();
    assert_ne!(
        whole_config(&m),
        original,
        "the kill left nothing programmed"
    );
    with_state(&m, state.path())
        .arg("restore")
        .assert()
        .success()
        .stdout(predicate::str::contains("gic0").and(predicate::str::contains("llt1")));
    assert_eq!(whole_config(&m), original);
}

/// A regular file swapped for a FIFO between bfperf's look at `-o`'s target and its
/// open never hangs it: the open is non-blocking and what was opened is checked.
/// (Without that, `snapshot -o` blocked in open(O_WRONLY), deaf to SIGTERM, in 10 of
/// 200 such races.)
#[test]
fn an_output_swapped_for_a_fifo_never_hangs_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("x.json");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (dir, target, stop) = (dir.path().to_path_buf(), target.clone(), stop.clone());
        std::thread::spawn(move || {
            let (file, fifo) = (dir.join("file"), dir.join("fifo"));
            let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = fs::write(&file, "{}");
                let _ = fs::rename(&file, &target);
                // SAFETY: mkfifo on a NUL-terminated path we own.
                unsafe { libc::mkfifo(path.as_ptr(), 0o644) };
                let _ = fs::rename(&fifo, &target);
            }
        })
    };
    // A count of runs, not a time: under emulation a run takes a second or more.
    // (10 of 200 hung before: 40 runs meet the race with odds of about 7 in 8.)
    let runs = if emulated() { 40 } else { 200 };
    for _ in 0..runs {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("bfperf"));
        cmd.args(["--sim", "bf2", "snapshot", "pcie0", "-o"])
            .arg(&target);
        // Written, or refused at once: never blocked.
        run_bounded(&mut cmd, Duration::from_secs(10));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
}

/// The exporter's socket gets its mode and group where nobody else can reach it:
/// another user who swaps the socket for a link to a root file, in a directory anyone
/// may write to, never has that file's mode changed (it was, in 11 of 30 tries, when
/// the mode was set through the socket's path).
#[test]
fn a_link_swapped_for_the_socket_never_has_its_target_chmodded() {
    if not_root("a root file as the victim") {
        return;
    }
    let open = tempfile::tempdir().unwrap();
    fs::set_permissions(open.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let private = tempfile::tempdir().unwrap();
    let victim = private.path().join("victim");
    fs::write(&victim, "root's\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o640)).unwrap();
    let lock = open.path().join("lock");
    let socket = open.path().join("lock.sock");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (socket, victim, stop) = (socket.clone(), victim.clone(), stop.clone());
        let aside = open.path().join("aside");
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if fs::rename(&socket, &aside).is_ok() {
                    let _ = std::os::unix::fs::symlink(&victim, &socket);
                }
            }
        })
    };
    let c = Copy::of("bf2");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("exporter.toml");
    fs::write(
        &cfg,
        "events = [\"tile2/MEMORY_READS/\"]\nsocket_group = \"0\"\n",
    )
    .unwrap();
    for _ in 0..30 {
        let mut e = Command::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(c.root())
            .arg("--lock-file")
            .arg(&lock)
            .args(["exporter", "--listen", "127.0.0.1:0", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let _ = e.kill();
        let _ = e.wait();
        let _ = fs::remove_file(&socket);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    let mode = fs::metadata(&victim).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "the victim's mode was changed");
}

/// A BlueField-3 msn counter holds event 0 at boot, which no table names and kernels
/// that validate event numbers take back neither as 0 nor as 0xff: a measurement
/// still ends restored (the block stopped, as it was), with no journal left to block
/// every later writer.
#[test]
fn an_msn_counter_the_kernel_cannot_name_is_restored_as_stopped() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let state = state_dir();
    let before = m.config("msn0");
    for _ in 0..2 {
        with_state(&m, state.path())
            .args([
                "stat",
                "-o",
                "-",
                "-e",
                "msn0/MSN_CORE_MMA_WQE_DONE_PUSH_STRB/",
            ])
            .args(["--", "true"])
            .assert()
            .success();
        assert!(journal_in(state.path()).is_none(), "a journal was left");
    }
    let after = m.config("msn0");
    let enable = |c: &Vec<(String, String)>| {
        c.iter()
            .find(|(n, _)| n == "enable")
            .map(|(_, v)| v.trim().to_string())
    };
    assert_eq!(enable(&after), enable(&before), "{before:?} {after:?}");
    assert_eq!(enable(&after).as_deref(), Some("0"));
}

/// The exporter killed while a client's measurement mixes a counter lent on a block
/// the exporter counts (llt0) with blocks of its own (gic0, programmed beforehand
/// with other events, smmu0, apt0, emi0, gga0, prnf0): the journal held the lent
/// counter only, so `bfperf restore` left the others programmed. Now every write
/// is journalled first and restore puts back exactly what was there, every kind.
#[test]
fn a_killed_exporter_s_journal_covers_a_mixed_request() {
    let Some(m) = Mount::start("3", "new") else {
        return;
    };
    let state = state_dir();
    with_state(&m, state.path())
        .args(["program", "gic0", "1", "0x8"])
        .assert()
        .success();
    with_state(&m, state.path())
        .args(["program", "smmu0", "0", "0x9"])
        .assert()
        .success();
    let original = whole_config(&m);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("exporter.toml");
    fs::write(&cfg, "events = [\"default\"]\n").unwrap();
    let spawn = |args: &[&str]| spawn_with_state(&m, state.path(), args);
    // Port 0: it serves nowhere the test needs; its socket is what the client asks.
    let mut exporter = spawn(&[
        "exporter",
        "--config",
        cfg.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ok() {
            assert!(Instant::now() < deadline, "waited for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let socket = || {
        fs::read_dir(state.path())
            .map(|d| {
                d.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "sock"))
            })
            .unwrap_or(false)
    };
    wait("the exporter's socket", &socket);
    let exporting = whole_config(&m);
    let mut client = spawn(&[
        "stat",
        "-e",
        "llt0/HNF0_DIR_MISS/",
        "-e",
        "gic0/AW_REQ,AW_TRANS/",
        "-e",
        "smmu0/AW_BEATS/",
        "-e",
        "apt0/APT_DATA_1/",
        "-e",
        "emi0/MCH_RD_IN_MCH_REQ_IN_STRB/",
        "-e",
        "gga0/GGA_PERF_DESC_CQE_STRB/",
        "-e",
        "prnf0/PRNF_DMA_RD_ICMC_BYPASS_REQ/",
        "--duration",
        "60s",
    ]);
    let counting = || {
        let now = whole_config(&m);
        ["gic0", "smmu0", "apt0", "emi0", "gga0", "prnf0"]
            .iter()
            .all(|b| now.iter().find(|(n, _)| n == b) != exporting.iter().find(|(n, _)| n == b))
    };
    wait("the client's events on every block", &counting);
    exporter.kill().unwrap();
    exporter.wait().unwrap();
    let _ = client.kill();
    client.wait().unwrap();
    with_state(&m, state.path())
        .arg("restore")
        .assert()
        .success();
    let now = whole_config(&m);
    let differ: Vec<_> = now
        .iter()
        .zip(&original)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("{}: {:?}, was {:?}", a.0, a.1, b.1))
        .collect();
    assert!(differ.is_empty(), "restore left: {differ:?}");
}
