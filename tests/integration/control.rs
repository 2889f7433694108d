//! perf's `--delay` and `--control`: a workload counts only its enabled phase. The
//! simulated BlueField-3's DDR and LLC counts are its rates times the enabled time
//! bfperf reports (1 %), and that time is the phase's (one second, not three); the
//! same through inherited descriptors, after a delay, for perf's task-clock, and
//! beside the exporter. Bad input is refused before anything is written.

use std::path::Path;
use std::process::Command as Process;

use crate::support::*;

/// The phases: 1 s, an enabled 1 s, 1 s, in bash. `ctl` writes a word and waits for
/// its ack. The script writes to `times` the clock (bash's, no process started)
/// before each word is written and after its ack is read: bfperf enabled between
/// the first two and disabled between the last two, so the time it counted lies
/// between the inner and the outer pair's distance, however late a busy machine ran
/// the shell ([`enabled_bounds`]).
fn phases(times: &Path) -> String {
    format!(
        "sleep 1; t0=$EPOCHREALTIME; ctl enable; t1=$EPOCHREALTIME; sleep 1; \
         t2=$EPOCHREALTIME; ctl disable; t3=$EPOCHREALTIME; echo $t0 $t1 $t2 $t3 > {}; sleep 1",
        times.display()
    )
}

/// The least and most time counting can have been enabled, s, by the script's
/// clock readings ([`phases`]; a locale may write them with a decimal comma).
fn enabled_bounds(times: &Path) -> (f64, f64) {
    let text = std::fs::read_to_string(times).unwrap();
    let t: Vec<f64> = text
        .split_whitespace()
        .map(|w| w.replace(',', ".").parse::<f64>().unwrap())
        .collect();
    assert_eq!(t.len(), 4, "{text}");
    (t[2] - t[1], t[3] - t[0])
}

/// The enabled time bfperf reported lies within the script's bounds (1 ms for the
/// clocks' granularity), and covers the enabled second.
fn assert_enabled(on: f64, times: &Path) {
    let (least, most) = enabled_bounds(times);
    assert!(least >= 1.0, "the enabled phase lasted {least} s");
    assert!(
        on >= least - 0.001 && on <= most + 0.001,
        "counted for {on} s; the script enabled and disabled counting {least}..{most} s apart"
    );
}

fn fifos(dir: &Path) -> (String, String) {
    let (ctl, ack) = (dir.join("ctl"), dir.join("ack"));
    for f in [&ctl, &ack] {
        assert!(Process::new("mkfifo").arg(f).status().unwrap().success());
    }
    (ctl.display().to_string(), ack.display().to_string())
}

/// `bfperf --sim bf3 stat ARGS --json -o OUT -D -1 --control fifo:CTL,ACK -- bash -c
/// SCRIPT`, which must succeed.
fn gated(args: &[&str], out: &Path, fifos: &(String, String), script: &str) {
    let (ctl, ack) = fifos;
    bfperf()
        .args(["--sim", "bf3", "stat"])
        .args(args)
        .arg("--json")
        .arg("-o")
        .arg(out)
        .args(["-D", "-1", "--control", &format!("fifo:{ctl},{ack}")])
        .args(["--", "bash", "-c", script])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .success();
}

/// The NDJSON records of a stat run.
fn records(out: &Path) -> Vec<serde_json::Value> {
    ndjson(&std::fs::read_to_string(out).unwrap())
}

/// Each DDR and LLC count of block 0 of each kind against the simulator's rate
/// times the enabled time; returns that time.
fn check_counts(recs: &[serde_json::Value], what: &str) -> f64 {
    let end = recs
        .iter()
        .find(|r| r["record"] == "end")
        .expect("an end record");
    let on = end["enabled_s"].as_f64().unwrap();
    let mut checked = 0;
    for r in recs.iter().filter(|r| r["record"] == "total") {
        let block = r["block"].as_str().unwrap();
        if !["mss0", "llt0", "llt_miss0"].contains(&block) {
            continue;
        }
        let event = r["event"].as_str().unwrap();
        let want = bf3_event_rate(block, event) * on;
        let got = r["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{what}: {block} {event} has no value"));
        assert!(
            ((got - want) / want).abs() <= 0.01,
            "{what}: {block} {event} counted {got}; the simulator's rate over the {on} s enabled gives {want}"
        );
        checked += 1;
    }
    assert!(checked >= 6, "{what}: {checked} counts checked");
    on
}

#[test]
fn control_through_fifos_counts_the_enabled_second_only() {
    let dir = tempfile::tempdir().unwrap();
    let f = fifos(dir.path());
    let out = dir.path().join("out.json");
    let times = dir.path().join("times");
    let script = format!(
        "ctl() {{ echo $1 > {}; read a < {}; }}; {}",
        f.0,
        f.1,
        phases(&times)
    );
    gated(&["-A", "-M", "ddr,llc"], &out, &f, &script);
    let recs = records(&out);
    let on = check_counts(&recs, "fifo");
    assert_enabled(on, &times);
    let end = recs.iter().find(|r| r["record"] == "end").unwrap();
    assert!(end["elapsed_s"].as_f64().unwrap() >= 3.0);
}

#[test]
fn control_through_inherited_descriptors_as_perf_users_script_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ctl, ack) = fifos(dir.path());
    let out = dir.path().join("out.json");
    let times = dir.path().join("times");
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let script = format!(
        "exec 3<>{ctl} 4<>{ack}; {bin} --sim bf3 stat -A -M ddr,llc --json -o {out} -D -1 --control fd:3,4 -- \
         bash -c 'ctl() {{ echo $1 >&3; read a <&4; }}; {phases}'",
        bin = bin.display(),
        out = out.display(),
        phases = phases(&times)
    );
    let st = Process::new("bash").args(["-c", &script]).status().unwrap();
    assert!(st.success());
    let on = check_counts(&records(&out), "fd");
    assert_enabled(on, &times);
}

#[test]
fn a_delay_counts_what_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    bfperf()
        .args([
            "--sim", "bf3", "stat", "-A", "-M", "ddr,llc", "--json", "-o",
        ])
        .arg(&out)
        .args(["-D", "500", "--", "sleep", "1.5"])
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .success();
    let recs = records(&out);
    let on = check_counts(&recs, "-D 500");
    let elapsed = recs.iter().find(|r| r["record"] == "end").unwrap()["elapsed_s"]
        .as_f64()
        .unwrap();
    // Counting starts 0.5 s after the command, never before; a busy machine may
    // wake bfperf late, and the counts above are right for the time it reports.
    assert!(
        elapsed - on >= 0.499 && elapsed - on < 0.75,
        "{on} s counted of {elapsed} s"
    );
}

#[test]
fn task_clock_counts_the_enabled_phase_of_a_busy_command() {
    let dir = tempfile::tempdir().unwrap();
    let f = fifos(dir.path());
    let (ctl, ack) = (&f.0, &f.1);
    let perf_fifos = dir.path().join("perf");
    std::fs::create_dir(&perf_fifos).unwrap();
    let (pctl, pack) = fifos(&perf_fifos);
    let out = dir.path().join("out.json");
    let perf_out = dir.path().join("perf.csv");
    // Busy before and after; while enabled, one loop runs between SIGCONT and
    // SIGSTOP. perf itself counts the shell (and what it starts), the loop and
    // perf over a window that holds bfperf's: the loop's count is a floor for
    // bfperf's task-clock and the sum a ceiling, in the kernel's own clock
    // (schedstat leaves out time stolen by a hypervisor; task-clock does not).
    let script = format!(
        "busy() {{ sh -c 'while :; do :; done' & b=$!; sleep 1; kill -KILL $b; wait $b 2>/dev/null; }}; \
         stopped() {{ local l; while :; do read -r l < /proc/$1/stat; l=${{l##*) }}; [ \"${{l%% *}}\" = T ] && return; sleep 0.001; done; }}; \
         ctl() {{ echo $1 > $2; read a < $3; }}; \
         busy; sh -c 'kill -STOP $$; while :; do :; done' & p=$!; \
         ( exec perf stat --per-thread -x, -e task-clock -p $$,$p,$BASHPID -D -1 --control fifo:{pctl},{pack} -o {perf_out} 2>/dev/null ) & q=$!; \
         ctl enable {pctl} {pack}; ctl enable {ctl} {ack}; \
         kill -CONT $p; sleep 1; kill -STOP $p; stopped $p; \
         ctl disable {ctl} {ack}; ctl disable {pctl} {pack}; \
         kill -INT $q; wait $q; kill -KILL $p; wait $p 2>/dev/null; busy; true",
        perf_out = perf_out.display()
    );
    gated(&["--per-process", "-e", "task-clock"], &out, &f, &script);
    let recs = records(&out);
    let Some(tc) = recs
        .iter()
        .find(|r| r["record"] == "total" && r["event"] == "task-clock")
        .and_then(|r| r["value"].as_f64())
    else {
        // No perf events here (perf_event_paranoid, or emulation): marked, not wrong.
        assert!(recs
            .iter()
            .any(|r| r["event"] == "task-clock" && r["value"].is_null()));
        return;
    };
    // `comm-pid,msec,msec,task-clock,...`, a line a task; the loop is `sh`.
    let perf = std::fs::read_to_string(&perf_out).expect("perf stat's output");
    let tasks: Vec<(&str, f64)> = perf
        .lines()
        .filter(|l| l.contains(",task-clock,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0], f[1].parse::<f64>().unwrap() * 1e6)
        })
        .collect();
    assert_eq!(tasks.len(), 3, "{perf}");
    let busy = tasks
        .iter()
        .find(|t| t.0.starts_with("sh-"))
        .expect("the loop's line")
        .1;
    let all: f64 = tasks.iter().map(|t| t.1).sum();
    // perf prints milliseconds to two places: 5 us either way a line.
    let shown = 5e3;
    // The loop ran while enabled: on a loaded machine it gets what share of the
    // second it can (0.43 s with both cores busy); the bounds below scale with it.
    assert!(busy > 0.1e9, "the loop ran {busy} ns of the enabled second");
    assert!(
        tc >= busy - shown && tc <= all + 3.0 * shown,
        "task-clock {tc} ns while enabled; perf counted the loop {busy} ns of {all} ns:\n{perf}"
    );
}

#[test]
fn a_client_of_the_exporter_is_counted_for_its_enabled_time() {
    let Some((m, dir, _e, _port)) = crate::support::default_exporter() else {
        return;
    };
    let (ctl, ack) = fifos(dir.path());
    let out = dir.path().join("out.json");
    let times = dir.path().join("times");
    let script = format!(
        "ctl() {{ echo $1 > {ctl}; read a < {ack}; }}; {}",
        phases(&times)
    );
    let st = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(dir.path().join("lock"))
        // Reads every 10 ms: the owner answers a read closer than that to the
        // previous one with the previous values, never at a control word's boundary.
        .args(["stat", "-A", "-M", "ddr,llc", "-I", "10", "--json", "-o"])
        .arg(&out)
        .args([
            "-D",
            "-1",
            "--control",
            &format!("fifo:{ctl},{ack}"),
            "--",
            "bash",
            "-c",
            &script,
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let on = check_counts(&records(&out), "beside the exporter");
    assert_enabled(on, &times);
}

#[test]
fn bad_control_input_is_refused_before_anything_is_written() {
    let c = Copy::of("bf3");
    let before = c.contents();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "").unwrap();
    let missing = dir.path().join("missing");
    for (args, says) in [
        (
            vec!["--control".to_string(), "pipe:x".into()],
            "fifo:CTL-FIFO[,ACK-FIFO] or fd:CTL-FD[,ACK-FD]".to_string(),
        ),
        (
            vec!["--control".into(), format!("fifo:{}", missing.display())],
            format!("cannot open the control FIFO {}", missing.display()),
        ),
        (
            vec!["--control".into(), format!("fifo:{}", plain.display())],
            format!("{} is not a FIFO", plain.display()),
        ),
        (
            vec!["--control".into(), "fd:97".into()],
            "descriptor 97 is not open".into(),
        ),
        (vec!["-D".into(), "-2".into()], "not -2".into()),
        (vec!["-D".into(), "-1".into()], "give --control".into()),
    ] {
        c.cmd()
            .args(["stat", "-e", "llt0/GDC_BANK0_RD_REQ/"])
            .args(&args)
            .args(["--", "true"])
            .assert()
            .code(1)
            .stderr(predicates::str::contains(says));
        assert_eq!(before, c.contents(), "{args:?} changed the device");
    }
}

#[test]
fn the_control_examples_run_as_readme_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    // README's lines (with -A and NDJSON to check them), in a scratch directory, on
    // the simulated BlueField-3.
    let script = format!(
        "set -e; cd {dir}; mkfifo ctl ack && cc -O2 -o phase {root}/examples/control/phase.c\n\
         {bin} --sim bf3 stat -M ddr,llc -A --json -o c.json -D -1 --control fifo:ctl,ack -- ./phase ctl ack\n\
         exec 3<>ctl 4<>ack\n\
         {bin} --sim bf3 stat -M ddr,llc -A --json -o sh.json -D -1 --control fd:3,4 -- sh {root}/examples/control/phase.sh\n",
        dir = dir.path().display(),
        root = root.display(),
        bin = bin.display()
    );
    let st = Process::new("bash").args(["-c", &script]).status().unwrap();
    assert!(st.success(), "README's control lines failed");
    for (file, phase) in [("c.json", None), ("sh.json", Some(1.0))] {
        let recs = records(&dir.path().join(file));
        let on = check_counts(&recs, file);
        let end = recs.iter().find(|r| r["record"] == "end").unwrap();
        assert!(
            on < end["elapsed_s"].as_f64().unwrap(),
            "{file}: counted all of it"
        );
        if let Some(p) = phase {
            assert!(
                (p..p + 0.1).contains(&on),
                "{file}: {on} s counted of a {p} s phase"
            );
        }
    }
}

/// `bash -c SCRIPT` with `BIN` set to bfperf and `ROOT` to the copy's sysfs root.
fn bash_with(c: &dyn Tree, script: &str) -> Process {
    let mut cmd = Process::new("bash");
    cmd.env("BIN", assert_cmd::cargo::cargo_bin!("bfperf"))
        .env("ROOT", c.root())
        .env("BFPERF_PAGE_SIZE", "4096")
        .args(["-c", script]);
    cmd
}

/// Waits (30 s at most) until the FIFO `path` holds as many bytes as its pipe can,
/// while `child` runs; opened read-write so that the open never blocks, and never
/// read from.
fn wait_until_full(path: &str, child: &mut std::process::Child) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap();
    // SAFETY: F_GETPIPE_SZ takes no argument.
    let size = unsafe { libc::fcntl(fifo.as_raw_fd(), libc::F_GETPIPE_SZ) };
    assert!(size > 0, "{}", std::io::Error::last_os_error());
    let held = || {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int, alive across the call.
        unsafe { libc::ioctl(fifo.as_raw_fd(), libc::FIONREAD, &mut n) };
        n
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // A full pipe: the kernel takes no more once its last page is begun (it held
    // 61,444 of 65,536 bytes so), so at least all but a page of it.
    // SAFETY: sysconf reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as libc::c_int;
    while held() < size - page {
        assert!(
            child.try_wait().unwrap().is_none(),
            "stat ended before its ack pipe was full"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the ack pipe holds {} of {size} bytes after 30 s",
            held()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Waits for `child` at most `limit`; kills it (and fails) if it is still running.
fn ended_within(child: &mut std::process::Child, limit: std::time::Duration, what: &str) -> i32 {
    let began = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A workload that writes 20,000 `ping`s and never reads its acks: stat drops the
/// acks it cannot write (once said), ends with the command, and restores the device;
/// while such a workload runs on, SIGTERM ends stat at once, the device restored.
#[test]
fn an_ack_pipe_nobody_reads_never_holds_stat() {
    use std::io::Read;
    let Some(c) = Mount::start("3", "6.16") else {
        return;
    };
    let before = c.config("llt0");
    let dir = tempfile::tempdir().unwrap();
    let (ctl, ack) = fifos(dir.path());
    let stat = format!(
        "exec 3<>{ctl} 4<>{ack}; exec \"$BIN\" --sysfs-root \"$ROOT\" stat -e llt0/GDC_BANK0_RD_REQ/ \
         --control fd:3,4 -o /dev/null -- bash -c 'for i in $(seq 20000); do echo ping; done >&3; exec 3>&-; %s'"
    );
    let mut child = bash_with(&c, &stat.replace("%s", "true"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let code = ended_within(&mut child, std::time::Duration::from_secs(60), "stat");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err.matches("dropped").count(),
        1,
        "the dropped acks are said once: {err}"
    );
    assert_eq!(c.config("llt0"), before, "stat left llt0 programmed");

    let mut child = bash_with(&c, &stat.replace("%s", "sleep 60"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The pings take a moment to write; the ack pipe is full after 16,384 of them
    // (64 KiB): looked at, never read, through a descriptor of the test's own.
    wait_until_full(&ack, &mut child);
    // SAFETY: signals our own child (bash exec'd into stat).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let code = ended_within(
        &mut child,
        std::time::Duration::from_secs(10),
        "stat after SIGTERM",
    );
    assert_eq!(code, 128 + libc::SIGTERM, "stat's exit after SIGTERM");
    assert_eq!(c.config("llt0"), before, "SIGTERM left llt0 programmed");
}

/// 100,000 words bfperf does not know are one note, with a few of them, not 100,000.
#[test]
fn unknown_control_words_are_counted_in_one_note() {
    let c = Copy::of("bf3");
    let dir = tempfile::tempdir().unwrap();
    let (ctl, _) = fifos(dir.path());
    let script = format!(
        "exec 3<>{ctl}; exec \"$BIN\" --sysfs-root \"$ROOT\" stat -e llt0/GDC_BANK0_RD_REQ/ \
         --control fd:3 -o /dev/null -- bash -c 'seq -f w%g 100000 >&3'"
    );
    let mut child = bash_with(&c, &script)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let code = ended_within(&mut child, std::time::Duration::from_secs(120), "stat");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, 0, "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("--control")).collect();
    assert_eq!(
        notes,
        ["bfperf: --control: 100000 lines were no word bfperf knows (enable, disable, ping); ignored, and not shown"],
        "{err}"
    );
}

/// `-D` longer than 64 bits of nanoseconds waits, it does not spin. The same stat is
/// run for 0.1 s and for 2 s: the 1.9 s more of waiting cost a few ms of CPU (a
/// spinning wait took 1.3-1.9 s when the deadline overflowed). The difference is
/// what is compared, so a start that is slow (under an emulator, 0.5 s of CPU) is
/// counted in both runs and out of the result.
#[test]
fn a_huge_delay_sleeps() {
    let c = Copy::of("bf3");
    let run = "\"$BIN\" --sysfs-root \"$ROOT\" stat -e llt0/GDC_BANK0_RD_REQ/ -D 18446744073709 \
               -o /dev/null --duration";
    let out = bash_with(&c, &format!("{run} 0.1s && times && {run} 2s && times"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `times`: the shell's own user and system time, then its children's (so far).
    let text = String::from_utf8_lossy(&out.stdout);
    let children = |line: usize| -> f64 {
        let line = text.lines().nth(line).expect("times' children line");
        line.split_whitespace()
            .map(|t| {
                let (m, s) = t.trim_end_matches('s').split_once('m').unwrap();
                m.parse::<f64>().unwrap() * 60.0 + s.replace(',', ".").parse::<f64>().unwrap()
            })
            .sum()
    };
    let (short, long) = (children(1), children(3) - children(1));
    assert!(
        long - short < 0.25,
        "waiting 1.9 s more used {:.3} s more of CPU (0.1 s run: {short:.3} s, 2 s run: {long:.3} s): {text}",
        long - short
    );
}

/// `fifo:` in another user's directory: a link to root's own FIFO is refused (never
/// written or drained), as is that user's FIFO, a regular file and a device; nothing
/// is opened for reading or writing through them and the device is unchanged.
#[test]
fn control_fifos_are_never_reached_through_another_users_links() {
    use std::io::Read;
    use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
    if not_root("chown to another user") {
        return;
    }
    let c = Copy::of("bf3");
    let before = c.contents();
    let rootonly = tempfile::tempdir().unwrap();
    let daemon = rootonly.path().join("daemon.cmd");
    assert!(Process::new("mkfifo")
        .arg(&daemon)
        .status()
        .unwrap()
        .success());
    // The daemon's FIFO holds a word for its reader; bfperf must not take it.
    let mut held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&daemon)
        .unwrap();
    std::io::Write::write_all(&mut held, b"keep\n").unwrap();
    let member = tempfile::tempdir().unwrap();
    let m = member.path();
    let chown = |p: &Path| std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
    chown(m);
    let (own_ctl, own_ack) = fifos(rootonly.path());
    let link = m.join("link");
    symlink(&daemon, &link).unwrap();
    chown(&link);
    let theirs = m.join("theirs");
    assert!(Process::new("mkfifo")
        .arg(&theirs)
        .status()
        .unwrap()
        .success());
    chown(&theirs);
    let plain = m.join("plain");
    std::fs::write(&plain, "").unwrap();
    let ptmx = m.join("ptmx");
    symlink("/dev/ptmx", &ptmx).unwrap();
    chown(&ptmx);
    // A member's link to root's directory, in the member's directory and in a
    // sticky one (where protected_symlinks=0 lets root follow it): the directory
    // is never reached through it, whatever the last component is.
    let dirlink = m.join("dirlink");
    symlink(rootonly.path(), &dirlink).unwrap();
    chown(&dirlink);
    let sticky = tempfile::tempdir().unwrap();
    std::fs::set_permissions(sticky.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let sticky_link = sticky.path().join("to-root");
    symlink(rootonly.path(), &sticky_link).unwrap();
    chown(&sticky_link);
    // A link to root's FIFO in a directory of root's: the last name is no link.
    let rootlink = rootonly.path().join("link");
    symlink(&daemon, &rootlink).unwrap();
    let member_dir = "is in the directory";
    let through = "is reached through the symbolic link";
    let d = |p: &Path| p.display().to_string();
    for (spec, says) in [
        (format!("fifo:{own_ctl},{}", d(&link)), member_dir),
        (format!("fifo:{},{own_ack}", d(&link)), member_dir),
        (format!("fifo:{}", d(&ptmx)), member_dir),
        (format!("fifo:{}", d(&theirs)), member_dir),
        (format!("fifo:{}", d(&plain)), member_dir),
        (format!("fifo:{}/daemon.cmd", d(&dirlink)), member_dir),
        (format!("fifo:{}/daemon.cmd", d(&sticky_link)), through),
        (
            format!("fifo:{own_ctl},{}/daemon.cmd", d(&sticky_link)),
            through,
        ),
        (format!("fifo:{}", d(&rootlink)), "is a symbolic link"),
        ("fifo:/dev/ptmx".to_string(), "is not a FIFO"),
    ] {
        c.cmd()
            .args(["stat", "-e", "llt0/GDC_BANK0_RD_REQ/", "--control", &spec])
            .args(["--", "true"])
            .timeout(std::time::Duration::from_secs(30))
            .assert()
            .code(1)
            .stderr(predicates::str::contains(says));
        assert_eq!(before, c.contents(), "{spec} changed the device");
    }
    let mut word = [0u8; 64];
    let n = held.read(&mut word).unwrap_or(0);
    assert_eq!(
        &word[..n],
        b"keep\n",
        "the daemon's FIFO was drained or written"
    );
    std::fs::remove_dir_all(m).ok();
}
