//! Pushing exporters: one started from a config on the simulator, and a receiver
//! that refuses what it is sent.

use super::*;
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

/// The exporter of the simulated BlueField-3 with config `cfg` (its lock beside
/// it), expected to end within 10 s.
pub(crate) fn exporter_of(cfg: &Path) -> assert_cmd::Command {
    let mut c = bfperf();
    c.args(["--sim", "bf3", "--lock-file"])
        .arg(cfg.with_extension("lock"))
        .args(["exporter", "--config"])
        .arg(cfg)
        .args(["--listen", "127.0.0.1:0"])
        .timeout(Duration::from_secs(10));
    c
}

/// A receiver that answers every request with `answer` (a status line and headers),
/// on a port it bound itself; the times requests came, until dropped.
pub(crate) struct Refuser {
    pub(crate) port: u16,
    times: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Refuser {
    pub(crate) fn start(answer: &'static str) -> Refuser {
        Refuser::answering(answer, |conn| {
            use std::io::Write;
            let _ = conn.write_all(b"Content-Length: 0\r\nConnection: close\r\n\r\n");
        })
    }

    /// Answers `head` (a status line and headers), then what `rest` writes: the
    /// last headers and a body.
    pub(crate) fn answering(head: &'static str, rest: fn(&mut std::net::TcpStream)) -> Refuser {
        use std::io::{BufRead, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let times = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (t, s) = (times.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok((conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut r = std::io::BufReader::new(conn);
                let mut length = 0;
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                let _ = r.read_exact(&mut body);
                t.lock().unwrap().push(Instant::now());
                let mut conn = r.into_inner();
                let _ = write!(conn, "{head}\r\n");
                rest(&mut conn);
            }
        });
        Refuser { port, times, stop }
    }

    /// How many requests came.
    pub(crate) fn requests(&self) -> usize {
        self.times.lock().unwrap().len()
    }

    /// The time between consecutive requests, s.
    pub(crate) fn gaps(&self) -> Vec<f64> {
        let t = self.times.lock().unwrap();
        t.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
    }
}

impl Drop for Refuser {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An exporter of the simulated BlueField-3 with config `cfg` (its lock in `sub`),
/// serving on a port found free, tried again if another took it meanwhile; it is
/// serving when this returns.
pub(crate) fn sim_exporter(sub: &Path, cfg: &Path) -> (Running, u16) {
    let mut e = Running(
        Process::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .args(["--sim", "bf3", "--lock-file"])
            .arg(sub.join("lock"))
            .args(["exporter", "--config"])
            .arg(cfg)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let port = crate::support::served_port(&mut e);
    (e, port)
}
