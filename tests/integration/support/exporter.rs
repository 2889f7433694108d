//! The exporter as a process: started on a device, its port, what it said, scrapes
//! of it, and asking it to count over its socket.

use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An exporter on a mount with a config, serving on the port it bound (port 0) and
/// said.
pub(crate) fn serve(m: &Mount, dir: &Path, config: &Path) -> (Running, u16) {
    serve_with(m, dir, config, &[])
}

/// As [`serve`], with more of the exporter's arguments.
pub(crate) fn serve_with(m: &Mount, dir: &Path, config: &Path, more: &[&str]) -> (Running, u16) {
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(more);
    let mut e = exporter(m, &dir.join("lock"), &args);
    let port = served_port(&mut e);
    (e, port)
}

/// A connection to `port` on loopback, retried while it is refused (a server not
/// yet listening on a busy machine), for 30 s at most; its reads time out after 20 s.
pub(crate) fn connect(port: u16) -> TcpStream {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("connecting to 127.0.0.1:{port}: {e}"),
        }
    }
}

/// A plain HTTP/1.0 GET on loopback; returns (status line, body).
pub(crate) fn get(port: u16, path: &str, accept: &str) -> (String, String) {
    let (head, body) = get_with(port, path, &format!("Accept: {accept}"));
    (
        head.lines().next().unwrap_or("").to_string(),
        String::from_utf8(body).unwrap(),
    )
}

/// A plain HTTP/1.0 GET on loopback with one more `header` line; returns the
/// response's head (status line and headers) and its body's bytes.
pub(crate) fn get_with(port: u16, path: &str, header: &str) -> (String, Vec<u8>) {
    let mut s = connect(port);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{header}\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n");
    let (head, body) = at.map_or((&all[..], &[][..]), |at| (&all[..at], &all[at + 4..]));
    (String::from_utf8_lossy(head).into_owned(), body.to_vec())
}

/// How soon the exporter answers when nothing holds it up: a second, five under
/// user-mode emulation, where every process runs about ten times slower (a bound on
/// latency, never on a figure; what holds it up takes tens of seconds).
pub(crate) fn prompt() -> Duration {
    match emulated() {
        true => Duration::from_secs(5),
        false => Duration::from_secs(1),
    }
}

pub(crate) struct Running(pub(crate) Child);

/// What a server's standard error said, kept by the thread that reads it, by pid
/// ([`announced`]), for [`said`] and for its drop to show.
pub(crate) struct Tee {
    said: Arc<std::sync::Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

pub(crate) static TEES: std::sync::Mutex<std::collections::BTreeMap<u32, Tee>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The address exporter `e` serves on, as its `serving http://ADDRESS/metrics`
/// line says (it binds port 0 itself: no port is chosen here and released).
pub(crate) fn served_at(e: &mut Running) -> Result<String, String> {
    announced(e, "the exporter", |line| {
        line.split_once("serving http")
            .and_then(|(_, r)| r.split_once("://"))
            .and_then(|(_, r)| r.split_once("/metrics"))
            .map(|(a, _)| a.to_string())
    })
}

/// The port exporter `e` serves on ([`served_at`]); panics with what it said when
/// it never serves.
pub(crate) fn served_port(e: &mut Running) -> u16 {
    port_of(&served_at(e).unwrap_or_else(|why| panic!("{why}")))
}

/// The port of `ADDRESS:PORT`.
pub(crate) fn port_of(at: &str) -> u16 {
    at.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {at}"))
}

/// What server `e` (`who`) says is its address on a line of its standard error
/// (`find` picks it out), within a minute; the reason, with what it said, when it
/// says nothing of it first. Its standard error (a pipe) is read on by a thread of
/// its own from then on, and kept ([`Tee`]).
pub(crate) fn announced(
    e: &mut Running,
    who: &str,
    find: fn(&str) -> Option<String>,
) -> Result<String, String> {
    let stderr =
        e.0.stderr
            .take()
            .ok_or(format!("{who}'s stderr is not a pipe"))?;
    let said = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let keep = said.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            keep.lock()
                .unwrap()
                .extend_from_slice(format!("{line}\n").as_bytes());
            if let Some(at) = find(&line) {
                let _ = tx.send(at);
            }
        }
    });
    let tee = Tee {
        said: said.clone(),
        reader: Some(reader),
    };
    TEES.lock().unwrap().insert(e.0.id(), tee);
    rx.recv_timeout(Duration::from_secs(60)).map_err(|_| {
        format!(
            "{who} never said where it listens: {}",
            String::from_utf8_lossy(&said.lock().unwrap())
        )
    })
}

/// Everything server `e`, which has ended, said on its standard error.
pub(crate) fn said_to_end(e: &Running) -> String {
    let reader = TEES
        .lock()
        .unwrap()
        .get_mut(&e.0.id())
        .and_then(|t| t.reader.take());
    if let Some(r) = reader {
        let _ = r.join();
    }
    said(e)
}

/// What server `e` has said on its standard error since [`announced`] took it.
pub(crate) fn said(e: &Running) -> String {
    TEES.lock()
        .unwrap()
        .get(&e.0.id())
        .map(|t| String::from_utf8_lossy(&t.said.lock().unwrap()).into_owned())
        .unwrap_or_default()
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(10);
        let mut ended = false;
        while !ended && Instant::now() < end {
            ended = matches!(self.0.try_wait(), Ok(Some(_)));
            if !ended {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if !ended {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        // A failing test shows what its exporter said (the last 16 KiB of it).
        let kept = TEES
            .lock()
            .map(|mut m| m.remove(&self.0.id()))
            .ok()
            .flatten();
        if std::thread::panicking() {
            let said = match (self.0.stderr.take(), kept) {
                (Some(mut stderr), _) => {
                    let mut said = Vec::new();
                    let _ = stderr.read_to_end(&mut said);
                    Some(said)
                }
                (None, Some(t)) => t.said.lock().ok().map(|v| v.clone()),
                (None, None) => None,
            };
            if let Some(said) = said {
                let tail = &said[said.len().saturating_sub(16 * 1024)..];
                eprintln!(
                    "--- the exporter's standard error (pid {}) ---\n{}",
                    self.0.id(),
                    String::from_utf8_lossy(tail)
                );
            }
        }
    }
}

pub(crate) fn exporter(m: &Mount, lock: &Path, args: &[&str]) -> Running {
    exporter_on(m.root(), lock, args)
}

/// An exporter on the sysfs tree at `root`.
pub(crate) fn exporter_on(root: &Path, lock: &Path, args: &[&str]) -> Running {
    Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(root)
            .arg("--lock-file")
            .arg(lock)
            .arg("exporter")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

pub(crate) fn config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("exporter.toml");
    std::fs::write(&p, text).unwrap();
    p
}

pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
}

/// The exporter's resident memory, KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A scrape's status and how long it took.
pub(crate) fn timed_scrape(port: u16) -> (String, Duration) {
    let t = Instant::now();
    let (status, _) = get(port, "/metrics", "text/plain");
    (status, t.elapsed())
}

/// Raises this process's descriptor limit as far as allowed; returns it.
pub(crate) fn raise_nofile() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit fill and read the struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max.min(20_000);
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
    }
    l.rlim_cur
}

/// Writes raw bytes on a new connection and returns the first response line (empty
/// when the server closed it).
pub(crate) fn raw(port: u16, bytes: &[u8]) -> String {
    let mut s = connect(port);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// curl's status code for a URL, with extra arguments; -k: the test's certificate is
/// self-signed.
pub(crate) fn curl_status(url: &str, extra: &[&str]) -> String {
    let out = Process::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl is installed (.ci/run installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One HTTP/1.1 keep-alive request on `s` with basic credentials; the status code
/// and whether the server said it closes the connection. None when the connection
/// was closed (or failed) before an answer.
pub(crate) fn keep_alive_get(s: &mut TcpStream, user_pass: &str) -> Option<(u16, bool)> {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(user_pass);
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {auth}\r\n\r\n"
    )
    .ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).ok()?;
    Some((status, head.contains("connection: close")))
}

/// A connection from another client: 127.0.0.2 (any 127/8 address is this machine).
pub(crate) fn connect_from_another_client(port: u16) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(
        &"127.0.0.2:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    s.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// One refused request on a new connection.
pub(crate) fn refused(port: u16, user_pass: &str) {
    let mut s = connect(port);
    let (status, _) = keep_alive_get(&mut s, user_pass).unwrap();
    assert_eq!(status, 401);
}

/// The processor time process `pid` has used (its threads', ended ones too): what
/// its work costs, whatever else the machine runs, which only ever adds waiting.
/// The kernel keeps it to the nanosecond and shows it in clock ticks.
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's name (in parentheses): state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(") ").unwrap().1;
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Duration::from_secs_f64((fields[0] + fields[1]) as f64 / hz)
}

/// `bfperf stat` on `m` with the exporter's lock file; its output, unchecked.
pub(crate) fn stat_beside(m: &Mount, lock: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Process::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    cmd.arg("--sysfs-root")
        .arg(m.root())
        .arg("--lock-file")
        .arg(lock)
        .args(["stat", "-o", "-"])
        .args(args);
    run_within(cmd, Duration::from_secs(30))
}

/// `stat_beside`, which must succeed and say the exporter counted for it.
pub(crate) fn counted_beside(m: &Mount, lock: &Path, args: &[&str]) -> std::process::Output {
    let out = stat_beside(m, lock, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("owned by the exporter"), "{err}");
    out
}

/// Runs a command, killing it (and failing) if it has not ended within `limit`.
pub(crate) fn run_within(mut cmd: Process, limit: Duration) -> std::process::Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(limit);
        // SAFETY: signals the child by its pid; at worst it has ended already.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    assert!(
        !watchdog.is_finished(),
        "a command hung for {limit:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The exporter's series, without their values.
pub(crate) fn series(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_string()))
        .collect()
}

/// Runs the binary copied to `bin` (so that any user can run it) as nobody, with
/// the supplementary `groups` (none: `--clear-groups`).
pub(crate) fn as_nobody(
    bin: &Path,
    groups: &[u32],
    args: &[&std::ffi::OsStr],
) -> std::process::Output {
    let mut cmd = Process::new("setpriv");
    cmd.args(["--reuid", "65534", "--regid", "65534"]);
    match groups.is_empty() {
        true => cmd.arg("--clear-groups"),
        false => cmd.arg("--groups").arg(
            groups
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    };
    cmd.arg(bin).args(args).output().unwrap()
}

/// A BlueField-3 simulator with an exporter of the default set serving it: the
/// mount, the exporter's directory (its lock, socket and config), the exporter and
/// its port. None where FUSE cannot be used (said).
pub(crate) fn default_exporter() -> Option<(Mount, tempfile::TempDir, Running, u16)> {
    let m = Mount::start("3", "6.16")?;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "events = [\"default\"]\n");
    let (e, port) = serve(&m, dir.path(), &cfg);
    Some((m, dir, e, port))
}

/// Connects to the exporter's socket in `dir` as a client speaking the protocol
/// itself, asks it to count `specs`, and returns the connection and the answer.
pub(crate) fn ask_to_count(dir: &Path, specs: &[&str]) -> (std::os::unix::net::UnixStream, String) {
    let mut client = std::os::unix::net::UnixStream::connect(dir.join("lock.sock")).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let ask = serde_json::json!({"bfperf": 2, "count": {"specs": specs, "command": "a test"}});
    // The exporter may refuse (and close) before a long request is all written: the
    // answer it sent is what counts.
    let sent = writeln!(client, "{ask}");
    let mut answer = String::new();
    let mut reader = std::io::BufReader::new(&client);
    let read = std::io::BufRead::read_line(&mut reader, &mut answer);
    assert!(
        !answer.is_empty(),
        "no answer: sent {sent:?}, read {read:?}"
    );
    (client, answer)
}

/// The simulated BlueField-3 with an exporter of its default set whose socket is
/// given to nobody's group (65534), in a directory anyone may enter (its lock is
/// `lock` there), for a test `why` that runs a member beside root; None (said)
/// where the test is not root, or FUSE is missing.
pub(crate) fn exporter_for_members(why: &str) -> Option<(Mount, tempfile::TempDir, Running, u16)> {
    if not_root(why) {
        return None;
    }
    let m = Mount::start("3", "6.16")?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let cfg = config(
        dir.path(),
        "events = [\"default\"]\nsocket_group = \"65534\"\n",
    );
    let (e, port) = serve(&m, dir.path(), &cfg);
    Some((m, dir, e, port))
}

/// bfperf and bfperf-exporter copied into `dir`, side by side as the package
/// installs them (where another user can run them); the path of bfperf.
pub(crate) fn installed(dir: &Path) -> PathBuf {
    let exporter = assert_cmd::cargo::cargo_bin!("bfperf-exporter");
    crate::support::copy_program(exporter, &dir.join("bfperf-exporter"));
    let bin = dir.join("bfperf");
    crate::support::copy_program(assert_cmd::cargo::cargo_bin!("bfperf"), &bin);
    bin
}

/// Writes `text` as the config of exporter `e`, served from `dir` ([`config`]),
/// tells it to reload (SIGHUP) and waits until it says how the reload went. The
/// file is replaced whole (written beside it, then renamed), as configuration
/// management does: a reload never reads it half written. Waiting is what keeps
/// the next change from racing this reload: a scrape cannot tell a reload that
/// changed nothing from one not yet made.
pub(crate) fn reload_with(e: &Running, dir: &Path, text: &str) {
    let outcomes = |e: &Running| {
        said(e)
            .lines()
            .filter(|l| {
                ["configuration reloaded", "reload refused", "reload failed"]
                    .iter()
                    .any(|o| l.contains(o))
            })
            .count()
    };
    let before = outcomes(e);
    let next = dir.join(".exporter.toml.next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, dir.join("exporter.toml")).unwrap();
    // SAFETY: signals our own child.
    unsafe { libc::kill(e.0.id() as i32, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(60);
    while outcomes(e) == before {
        assert!(
            Instant::now() < deadline,
            "the exporter never said how the reload to {text:?} went: {}",
            said(e)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scrape of `/metrics`, and when its values were read: no earlier than the
/// request's start plus the lag the exposition says, no later than the answer.
pub(crate) fn read_window(port: u16) -> (String, Instant, Instant) {
    let asked = Instant::now();
    let (_, body) = get(port, "/metrics", "text/plain");
    let done = Instant::now();
    let lag = sample(&body, "bfperf_scrape_lag_seconds", &[]);
    let earliest = asked + Duration::from_secs_f64(lag);
    (body, earliest.min(done), done)
}
