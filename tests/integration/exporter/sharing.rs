//! Sharing the device: `stat` and `top` counted by the exporter over its socket, free
//! counters lent, members of its socket group and their limits.

use std::io::Write;
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use predicates::prelude::*;

/// While the exporter owns a BlueField-3, `stat -M ddr,llc -- sleep 1` is counted
/// by it: the simulator's rates (LLC reads 8 GB/s, writes 4 GB/s, a quarter of
/// them missing to DDR), the exporter's counters untouched and its series valid;
/// events it does not count go on counters it leaves free and are put back when
/// the client ends, or when it is killed; clients beyond what fits are refused,
/// never left hanging.
#[test]
fn stat_beside_the_exporter_is_counted_by_it() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let owned = ["mss0", "llt0", "llt_miss7"];
    let free = ["apt0", "gic0"];
    let before: Vec<_> = owned.iter().chain(&free).map(|b| m.config(b)).collect();
    let (e, port) = serve(&m, dir.path(), &cfg);
    // Compared without `enable`: the exporter's sweeps switch it off and on.
    let programmed: Vec<_> = owned.iter().map(|b| m.programming(b)).collect();

    let out = counted_beside(&m, &lock, &["-M", "ddr,llc", "--json", "--", "sleep", "1"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = |metric: &str| {
        ndjson(&stdout)
            .into_iter()
            .find(|r| r["record"] == "metric" && r["metric"] == metric)
            .and_then(|r| r["value"].as_f64())
            .unwrap_or_else(|| panic!("no {metric} in\n{stdout}"))
    };
    // An all-at-once block does not count while it is stopped to be read (a FUSE
    // round trip of emulated system calls under qemu-user): that time is not
    // counted, and the values are scaled over it.
    for (metric, truth) in [
        ("llc_read_bandwidth", 8.0),
        ("llc_write_bandwidth", 4.0),
        ("ddr_read_bandwidth", 2.0),
        ("ddr_write_bandwidth", 1.0),
        ("llc_read_miss_ratio", 25.0),
    ] {
        assert_rate(value(metric), truth, metric);
    }
    // The exporter's programming is as it was; nothing counted as re-programmed.
    assert_eq!(
        owned.iter().map(|b| m.programming(b)).collect::<Vec<_>>(),
        programmed
    );
    let (_, text) = get(port, "/metrics", "text/plain");
    assert_eq!(sample(&text, "bfperf_up", &[]), 1.0);
    assert_eq!(
        sample(&text, "bfperf_reprogrammed_total", &[]),
        0.0,
        "{text}"
    );

    // Events the exporter does not count: on free counters, put back afterwards.
    let out = stat_beside(
        &m,
        &lock,
        &[
            "-e",
            "apt0/APT_DATA_0/",
            "-e",
            "gic0/AW_BEATS/",
            "-x,",
            "--",
            "sleep",
            "0.3",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("APT_DATA_0") && text.contains("AW_BEATS"),
        "{text}"
    );
    assert_eq!(
        free.iter().map(|b| m.config(b)).collect::<Vec<_>>(),
        before[3..]
    );

    // A client killed mid-measurement: its counters are put back all the same.
    let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    cmd.arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(&lock);
    cmd.args([
        "stat",
        "-e",
        "apt0/APT_DATA_0/",
        "-e",
        "gic0/AW_BEATS/",
        "--duration",
        "20s",
    ]);
    let mut client = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let programmed_by_client = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        m.config("gic0") != before[4]
    });
    assert!(
        programmed_by_client,
        "the client's event never reached gic0"
    );
    client.kill().unwrap();
    client.wait().unwrap();
    let put_back = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        free.iter().map(|b| m.config(b)).collect::<Vec<_>>() == before[3..]
    });
    assert!(
        put_back,
        "{:?}",
        free.iter().map(|b| m.config(b)).collect::<Vec<_>>()
    );

    // Eight at once, each wanting one of gic0's two counters: two are counted, the
    // others refused with the reason; none hangs.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (root, lock) = (m.root().to_path_buf(), lock.clone());
            std::thread::spawn(move || {
                let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
                cmd.arg("--sysfs-root")
                    .arg(root)
                    .arg("--lock-file")
                    .arg(lock);
                cmd.args([
                    "stat",
                    "-o",
                    "-",
                    "-e",
                    "gic0/AW_BEATS/",
                    "-e",
                    "mss0/SKYLIB_DDN_TX_FLITS/",
                    "--",
                    "sleep",
                    "3",
                ]);
                run_within(cmd, Duration::from_secs(30))
            })
        })
        .collect();
    let outs: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let served = outs.iter().filter(|o| o.status.success()).count();
    for o in outs.iter().filter(|o| !o.status.success()) {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("gic0 has no counter free"), "{err}");
    }
    assert!((1..=2).contains(&served), "{served} served");
    drop(e);
    // The exporter stopped: everything as before it started.
    assert_eq!(
        owned
            .iter()
            .chain(&free)
            .map(|b| m.config(b))
            .collect::<Vec<_>>(),
        before
    );
}

/// On BlueField-3 the blocks profiled most count all at once (crspace): beside the
/// exporter's default set, the counters it leaves free on llt0 are lent to a
/// client's events from its next window on — counted right against the
/// simulator, shared by clients asking the same event, put back when the last
/// ends or is killed — while the exporter's counters, series and
/// reprogrammed count stay as they were; asking more than are free is refused
/// saying how many are, with nothing written.
#[test]
fn free_counters_of_an_all_at_once_block_are_lent_beside_the_exporter() {
    let Some((m, dir, e, port)) = default_exporter() else {
        return;
    };
    let lock = dir.path().join("lock");
    let programmed = m.programming("llt0");
    let (_, text) = get(port, "/metrics", "text/plain");
    let own_series = series(&text);

    let out = counted_beside(
        &m,
        &lock,
        &["-e", "llt0/GDC_BANK0_HIT/", "--json", "--", "sleep", "1"],
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let total = ndjson(&stdout)
        .into_iter()
        .find(|r| r["record"] == "total" && r["event"] == "GDC_BANK0_HIT")
        .unwrap_or_else(|| panic!("no GDC_BANK0_HIT in\n{stdout}"));
    // Right within 1 %, or marked: a busy machine that delayed the first window's
    // bounds by more than 0.5 % of the second.
    if total["valid"] == true {
        let rate = total["value"].as_f64().unwrap() / total["time_s"].as_f64().unwrap();
        assert_rate(
            rate,
            bf3_event_rate("llt0", "GDC_BANK0_HIT"),
            "llt0 GDC_BANK0_HIT",
        );
    } else {
        assert!(busy_marked(&total["invalid"]), "{total}");
    }
    assert_eq!(
        m.programming("llt0"),
        programmed,
        "the lent counter is not put back"
    );

    // Two clients of the same event share the counter lent to the first; it is
    // put back when the last ends, killed or not.
    let spawn = |secs: &str| {
        let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
        cmd.arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(&lock);
        cmd.args(["stat", "-e", "llt0/GDC_BANK0_HIT/", "--duration", secs]);
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut first = spawn("20s");
    let lent = |m: &Mount| {
        let now = m.programming("llt0");
        let changed: Vec<_> = now
            .iter()
            .filter(|c| !programmed.contains(c))
            .cloned()
            .collect();
        changed
    };
    let waited = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !lent(&m).is_empty()
    });
    assert!(waited, "no counter of llt0 was lent");
    let changed = lent(&m);
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(changed[0].1.contains("GDC_BANK0_HIT"), "{changed:?}");
    let second = stat_beside(
        &m,
        &lock,
        &["-e", "llt0/GDC_BANK0_HIT/", "--", "sleep", "0.3"],
    );
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(
        lent(&m),
        changed,
        "the second client's event took another counter"
    );

    // Three counters are free: four events are refused, saying so, nothing written.
    let during = m.programming("llt0");
    let refused = stat_beside(
        &m,
        &lock,
        &[
            "-e",
            "llt0/GDC_BANK1_HIT,GDC_BANK0_MISS,GDC_BANK1_MISS,HNF0_CYCLES/",
            "--",
            "true",
        ],
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("llt0 has 2 counters free, 4 asked"), "{err}");
    assert_eq!(m.programming("llt0"), during);

    let (_, text) = get(port, "/metrics", "text/plain");
    assert_eq!(series(&text), own_series, "the exporter's series changed");
    assert_eq!(
        sample(&text, "bfperf_reprogrammed_total", &[]),
        0.0,
        "{text}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let put_back = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        m.programming("llt0") == programmed
    });
    assert!(put_back, "{:?}", lent(&m));
    drop(e);
}

#[test]
fn a_socket_group_lets_its_members_ask_and_no_one_else() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if not_root("switching users") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    open(dir.path()).unwrap();
    let bin = installed(dir.path());
    let c = Copy::of("bf2");
    open(c.root()).unwrap();
    let lock = dir.path().join("lock");
    let cfg = config(
        dir.path(),
        "events = [\"default\"]\nsocket_group = \"4242\"\n",
    );
    let mut _e = exporter_on(
        c.root(),
        &lock,
        &["--config", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    // Serving: the socket is there too.
    served_port(&mut _e);
    let socket = std::fs::metadata(dir.path().join("lock.sock")).unwrap();
    assert_eq!((socket.mode() & 0o777, socket.gid()), (0o660, 4242));
    let stat = [
        "--sysfs-root",
        c.root().to_str().unwrap(),
        "--lock-file",
        lock.to_str().unwrap(),
        "stat",
        "-o",
        "-",
        "-e",
        "tile0/MEMORY_READS/",
        "-x,",
        "--",
        "true",
    ]
    .map(std::ffi::OsStr::new);
    // A member of the group is counted by the exporter.
    let out = as_nobody(&bin, &[4242], &stat);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("owned by the exporter"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("MEMORY_READS"));
    // Anyone else is told why not, and what to do.
    let out = as_nobody(&bin, &[], &stat);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("permission denied") && err.contains("socket_group"),
        "{err}"
    );
}

/// A user's own state directory squatted by another user (`$TMPDIR/bfperf-UID`
/// made first, not theirs) does not keep them from root's exporter: their `stat`
/// still asks its socket in /run/bfperf (here a tmpfs of a mount namespace of the
/// test's own, so the machine's /run is never touched).
#[test]
fn a_squatted_state_directory_still_reaches_roots_exporter() {
    use std::os::unix::fs::PermissionsExt;
    if not_root("switching users and mounting a private /run") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let open = |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
    open(dir.path(), 0o755).unwrap();
    let bin = installed(dir.path());
    let c = Copy::of("bf2");
    open(c.root(), 0o755).unwrap();
    let tmp = dir.path().join("tmp");
    let squatted = tmp.join("bfperf-65534");
    std::fs::create_dir_all(&squatted).unwrap();
    open(&tmp, 0o1777).unwrap();
    open(&squatted, 0o777).unwrap();
    std::os::unix::fs::chown(&squatted, Some(1234), Some(1234)).unwrap();
    let cfg = config(
        dir.path(),
        "events = [\"default\"]\nsocket_group = \"4242\"\n",
    );
    // Port 0: the test speaks to it through its socket only.
    let port = "0".to_string();
    // In a mount namespace of its own with /run a new tmpfs: root's exporter with
    // its default lock, then the member's stat with nothing but TMPDIR set.
    let script = r#"
        set -e
        mount -t tmpfs -o mode=0755 bfperf-test /run
        "$1" --sysfs-root "$2" exporter --config "$3" --listen "127.0.0.1:$4" 2>"$6" &
        exporter=$!
        trap 'kill $exporter; wait $exporter' EXIT
        for _ in $(seq 600); do
            ls /run/bfperf/*.sock >/dev/null 2>&1 && break
            sleep 0.05
        done
        env TMPDIR="$5" setpriv --reuid 65534 --regid 65534 --groups 4242 \
            "$1" --sysfs-root "$2" stat -o - -e tile0/MEMORY_READS/ -x, -- true
    "#;
    let log = dir.path().join("exporter.log");
    let out = Process::new("timeout")
        .arg("60")
        .args(["unshare", "--mount", "sh", "-c", script, "sh"])
        .arg(&bin)
        .arg(c.root())
        .arg(&cfg)
        .arg(&port)
        .arg(&tmp)
        .arg(&log)
        .env_remove("BFPERF_STATE_DIR")
        .env_remove("BFPERF_LOCK_FILE")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.status.success(), "{err}\nexporter: {logged}");
    assert!(err.contains("owned by the exporter"), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("MEMORY_READS"),
        "{err}"
    );
    assert!(logged.contains("counting for uid 65534, pid "), "{logged}");
}

#[test]
fn a_socket_of_another_user_is_never_asked() {
    if not_root("giving a socket away") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777),
    )
    .unwrap();
    let c = Copy::of("bf2");
    let lock = dir.path().join("lock");
    let socket = dir.path().join("lock.sock");
    // Another user listens there; the kernel names it whatever the path's owner says
    // (the socket is even given to root, as a squatter cannot but a race could).
    let listen = "use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), \
                  Local => $ARGV[0], Listen => 8) or die $!; sleep 30";
    let mut squatter = Running(
        Process::new("setpriv")
            .args([
                "--reuid=1234",
                "--regid=1234",
                "--clear-groups",
                "perl",
                "-e",
            ])
            .arg(listen)
            .arg(&socket)
            .spawn()
            .unwrap(),
    );
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::os::unix::fs::lchown(&socket, Some(0), None).unwrap();
    let before = c.contents();
    bfperf()
        .arg("--sysfs-root")
        .arg(c.root())
        .arg("--lock-file")
        .arg(&lock)
        .args(["stat", "-o", "-", "-e", "tile0/MEMORY_READS/", "--", "true"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("uid 1234, neither root nor you"));
    assert_eq!(c.contents(), before);
    let _ = squatter.0.kill();
}

/// A lock in a directory too deep for a socket's address (108 bytes): the exporter
/// still listens beside it and stat still asks it.
#[test]
fn a_deep_state_directory_still_shares_the_device() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let top = tempfile::tempdir().unwrap();
    let deep = top
        .path()
        .join("a-directory-name-of-forty-characters-each")
        .join("another-directory-name-of-forty-characters");
    std::fs::create_dir_all(&deep).unwrap();
    assert!(deep.join("lock.sock").as_os_str().len() > 108);
    let cfg = config(&deep, "events = [\"default\"]\n");
    let (_e, _port) = serve(&m, &deep, &cfg);
    counted_beside(
        &m,
        &deep.join("lock"),
        &["-e", "gic0/AW_BEATS/", "--duration", "200ms"],
    );
}

/// A member's worst request, one line of 10,000 `*/*` specs, is refused before
/// any is resolved: the exporter spends on it what reading the line costs (its
/// processor time, which a loaded machine does not stretch as it stretches a
/// wall-clock wait; resolving them would take seconds), and a scrape meanwhile is
/// answered.
#[test]
fn a_request_of_ten_thousand_specs_is_refused_at_once() {
    let Some((_m, dir, e, port)) = default_exporter() else {
        return;
    };
    let scraped = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        get(port, "/metrics", "text/plain").0
    });
    let before = cpu_time(e.0.id());
    let (_client, answer) = ask_to_count(dir.path(), &vec!["*/*"; 10_000]);
    let spent = cpu_time(e.0.id()) - before;
    assert!(
        answer.contains("refused") && answer.contains("at most"),
        "{answer}"
    );
    // Sweeps and scrapes go on meanwhile (a few ms each); under emulation every
    // instruction costs about ten.
    let most = match emulated() {
        true => Duration::from_millis(2500),
        false => Duration::from_millis(250),
    };
    assert!(spent < most, "refusing took {spent:?} of processor time");
    let status = scraped.join().unwrap();
    assert!(status.contains("200"), "{status}");
}

/// Connections a member opens and never asks on are limited (two waiting per user)
/// and closed after 5 s, and root keeps room beyond them: twelve idle connections of
/// another user never lock root's stat out of the exporter.
#[test]
fn idle_connections_of_a_member_never_lock_root_out() {
    let Some((m, dir, _e, _port)) = exporter_for_members("a member's connections beside root's")
    else {
        return;
    };
    let lock = dir.path().join("lock");
    let socket = dir.path().join("lock.sock");
    let squat = "use IO::Socket::UNIX; my @c; for (1..12) { my $s = IO::Socket::UNIX->new(\
                 Type => SOCK_STREAM(), Peer => $ARGV[0]); push @c, $s if $s } \
                 $| = 1; print scalar(@c), \"\\n\"; sleep 20";
    let mut squatter = Running(
        Process::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "perl",
                "-e",
            ])
            .arg(squat)
            .arg(&socket)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // It says how many connections it holds once it holds them.
    let mut held = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(squatter.0.stdout.take().unwrap())
        .read_line(&mut held)
        .unwrap();
    assert!(held.trim().parse::<u32>().is_ok_and(|n| n > 0), "{held:?}");
    counted_beside(&m, &lock, &["-e", "gic0/AW_BEATS/", "--", "true"]);
}

/// One rule for groups whoever programs the counters: a `{...}` group larger than a
/// block's counters is refused by the exporter as stat alone refuses it, never
/// granted to take turns (asked over the protocol directly, as any client may).
#[test]
fn a_group_larger_than_a_block_is_refused_beside_the_exporter_too() {
    let Some((_m, dir, _e, _port)) = default_exporter() else {
        return;
    };
    let group = "{llt0/HNF0_REQS_RECEIVED,HNF0_REQS_PROCESSED,HNF0_DIR_HIT,HNF0_DIR_MISS,\
                 HNF0_DIR_RD_ALLOC,HNF0_DIR_WR_ALLOC,HNF0_DIR_VICTIM,HNF0_CL_HAZARD,HNF0_ALL_HAZARD/}";
    let (_client, answer) = ask_to_count(dir.path(), &[group]);
    assert!(answer.contains("refused"), "{answer}");
    assert!(
        answer.contains("a group is always counted at once"),
        "{answer}"
    );
}

/// A burst of reads (500 of them in one write) is answered from one reading of the
/// device per 10 ms at most: it never stalls the exporter's loop, and a scrape
/// meanwhile answers promptly.
#[test]
fn a_burst_of_reads_never_stalls_a_scrape() {
    let Some((_m, dir, _e, port)) = default_exporter() else {
        return;
    };
    let (mut client, answer) = ask_to_count(dir.path(), &["mss0/SKYLIB_DDN_TX_FLITS/"]);
    assert!(answer.contains("granted"), "{answer}");
    let reader = std::io::BufReader::new(client.try_clone().unwrap());
    let read = "{\"bfperf\":2,\"read\":null}\n";
    // As many as their answers fit in a socket's buffer: a client that asks faster
    // than it reads is cut off, not waited for.
    let n = 500;
    // The answers, read as they come: the time of each one's values.
    let answers = std::thread::spawn(move || {
        let mut times = Vec::new();
        for line in std::io::BufRead::lines(reader).take(n) {
            let Ok(line) = line else { break };
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            times.push(v["totals"]["at_ns"].as_u64().unwrap_or(0));
        }
        times
    });
    let t = Instant::now();
    client.write_all(read.repeat(n).as_bytes()).unwrap();
    let (status, _) = get(port, "/metrics", "text/plain");
    let scrape = t.elapsed();
    let times = answers.join().unwrap();
    let took = t.elapsed();
    assert!(status.contains("200"), "{status}");
    assert!(scrape < prompt(), "a scrape took {scrape:?}");
    assert_eq!(times.len(), n, "every read is answered");
    let mut distinct = times.clone();
    distinct.dedup();
    // One reading per 10 ms at most, by the readings' own stamps: each new one at
    // least 10 ms after the one before.
    assert!(!distinct.is_empty() && distinct[0] > 0, "{times:?}");
    for w in distinct.windows(2) {
        assert!(
            w[1] >= w[0] + 10_000_000,
            "readings at {} and {} ns, {} in all for {n} reads in {took:?}",
            w[0],
            w[1],
            distinct.len()
        );
    }
}

/// A member's requests that cost most to resolve: one glob of 20,000 `*` (it held
/// the exporter for 17-64 s), and 256 specs of the longest pattern that is let
/// through. Each is answered within 2 s; scrapes meanwhile are answered within 1 s,
/// and root's own stat beside the exporter is counted as ever.
#[test]
fn a_members_costliest_globs_never_hold_the_exporter() {
    let Some((m, dir, _e, port)) = exporter_for_members("a member's requests") else {
        return;
    };
    let lock = dir.path().join("lock");
    let ask = |specs: Vec<String>| {
        serde_json::json!({"bfperf": 2, "count": {"specs": specs, "command": "hostile"}})
            .to_string()
    };
    let longest = format!("*/{}*/", "*Q".repeat(63));
    let matching = format!("*/{}*/", "*_".repeat(63));
    let asks = [
        ask(vec![format!("*/{}Q/", "*".repeat(20_000))]),
        ask(vec![longest; 256]),
        ask(vec![matching; 256]),
        ask((0..256).map(|i| format!("*/*{i}*/")).collect()),
    ];
    let file = dir.path().join("asks");
    std::fs::write(&file, asks.join("\n") + "\n").unwrap();
    let script = "use IO::Socket::UNIX; use Time::HiRes qw(time); $| = 1; \
        open(my $f, '<', $ARGV[1]) or die; \
        while (my $a = <$f>) { \
            my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die \"connect: $!\"; \
            my $t = time; print $s $a; my $l = <$s>; \
            printf \"%.3f %s\", time - $t, defined $l ? $l : \"(no answer)\\n\"; }";
    let member = Process::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "perl",
            "-e",
        ])
        .arg(script)
        .arg(dir.path().join("lock.sock"))
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut member = Running(member);
    let mut slowest = Duration::ZERO;
    let mut scrapes = 0;
    while member.0.try_wait().unwrap().is_none() {
        let began = Instant::now();
        let (_, body) = get(port, "/metrics", "text/plain");
        assert!(body.contains("bfperf_up"), "{body}");
        slowest = slowest.max(began.elapsed());
        scrapes += 1;
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut member.0.stdout.take().unwrap(), &mut out).unwrap();
    let answers: Vec<&str> = out.lines().collect();
    assert_eq!(answers.len(), asks.len(), "{out}");
    for a in &answers {
        let (secs, line) = a.split_once(' ').unwrap();
        let secs: f64 = secs.parse().unwrap();
        assert!(line.contains("\"refused\""), "{a}");
        assert!(secs < 2.0, "answered after {secs} s: {a}");
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a scrape took {slowest:?} (of {scrapes}) while the member asked"
    );
    counted_beside(&m, &lock, &["-e", "gic0/AW_BEATS/", "--", "true"]);
}

/// A member of socket_group holds at most its share of a block's free counters
/// (half: one of gic0's two), and root's own measurement takes them back when it
/// needs them: root is counted, and the member's counts end marked with the reason
/// (a member asking every free counter locked root out for as long as it stayed).
#[test]
fn a_member_holds_its_share_and_root_takes_it_back() {
    let Some((m, dir, _e, _port)) = exporter_for_members("a member beside root") else {
        return;
    };
    let bin = installed(dir.path());
    let lock = dir.path().join("lock");
    let member_stat = |events: &str, secs: &str| {
        let mut cmd = Process::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--groups=65534"])
            .arg(&bin)
            .arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(&lock)
            .args(["stat", "-o", "-", "-e", events, "--duration", secs]);
        cmd
    };
    // Both of gic0's free counters: more than the member's share.
    let out = member_stat("gic0/AW_REQ,AW_BEATS/", "1s").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds at most 1 of gic0's 2 counters"),
        "{err}"
    );
    // One, held; a second measurement of the same user would exceed the share.
    let before = m.config("gic0");
    let held = Running(
        member_stat("gic0/AW_RESP/", "8s")
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while m.config("gic0") == before {
        assert!(
            Instant::now() < deadline,
            "the member's event was never programmed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = member_stat("gic0/AW_BEATS/", "1s").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("this user holds 1 and asks 1 more"), "{err}");
    // Root needs both: it takes the member's back and is counted.
    let out = counted_beside(
        &m,
        &lock,
        &["-x,", "-e", "gic0/AW_TRANS,AW_BEATS/", "--", "sleep", "1"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for event in ["AW_TRANS", "AW_BEATS"] {
        let line = text
            .lines()
            .find(|l| l.contains(event))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(!line.contains("<not counted>"), "{line}");
    }
    let mut held = held;
    let status = held.0.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut held.0.stdout.take().unwrap(), &mut out).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut held.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let total = ndjson(&out)
        .into_iter()
        .find(|r| r["record"] == "total" && r["event"] == "AW_RESP")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(total["valid"], false, "{total}");
    assert!(
        total["invalid"]
            .as_str()
            .is_some_and(|w| w.contains("for root's own measurement")),
        "the member's count is not marked: {total}"
    );
}

/// A member's words reach the log escaped as the text path escapes them: the
/// command a client says it runs, with bidirectional overrides and isolates and
/// the line and paragraph separators in it, is one line in logfmt and in JSON,
/// every such character written as `\uXXXX` (they were written raw).
#[test]
fn a_clients_words_reach_the_structured_log_escaped() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let hostile =
        "stat \u{202e}gnirts\u{202c} \u{2066}x\u{2069}\u{2028}level=error msg=forged\u{2029}end";
    for format in ["logfmt", "json"] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), "events = [\"default\"]\n");
        let (e, _) = serve_with(&m, dir.path(), &cfg, &["--log.format", format]);
        let mut client =
            std::os::unix::net::UnixStream::connect(dir.path().join("lock.sock")).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let ask = serde_json::json!({"bfperf": 2, "count": {"specs": ["llt0/HNF0_DIR_HIT/"], "command": hostile}});
        writeln!(client, "{ask}").unwrap();
        let mut answer = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&client), &mut answer).unwrap();
        assert!(answer.contains("granted"), "{answer}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !said(&e).contains("gnirts") {
            assert!(Instant::now() < deadline, "{}", said(&e));
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = said(&e);
        let line = log.lines().find(|l| l.contains("gnirts")).unwrap();
        for c in [
            '\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\u{2028}', '\u{2029}',
        ] {
            assert!(
                !log.contains(c),
                "{format}: U+{:04X} raw in {line}",
                c as u32
            );
            assert!(
                line.contains(&format!("\\u{:04x}", c as u32)),
                "{format}: U+{:04X} not escaped in {line}",
                c as u32
            );
        }
        assert!(
            !log.lines().any(|l| l.starts_with("level=error msg=forged")),
            "{log}"
        );
        if format == "json" {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["msg"].as_str().unwrap().contains(hostile), "{line}");
        }
    }
}
