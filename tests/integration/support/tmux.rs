//! tmux: a terminal of its own per test, its screen captured and keys sent.

use super::*;
use std::process::Command as Process;
use std::time::{Duration, Instant};

pub(crate) fn tmux_available() -> bool {
    let ok = Process::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let found = ok
        .then_some(())
        .ok_or_else(|| "tmux is not installed".to_string());
    required("tmux", "the bfperf top tests", found)
}

/// A tmux server of its own (its own socket), killed on drop.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn start(cmd: &str, width: u16, height: u16) -> Tmux {
        // One server per terminal, whatever runs beside it.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = format!("bfperf-top-{}-{n}", std::process::id());
        let t = Tmux { socket };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                &width.to_string(),
                "-y",
            ])
            .arg(height.to_string())
            .arg(cmd)
            .status()
            .unwrap();
        assert!(ok.success());
        t
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Process {
        let mut p = Process::new("tmux");
        p.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        p
    }

    pub(crate) fn screen(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn keys(&self, keys: &str) {
        self.cmd(&["send-keys", "-t", "top", keys])
            .status()
            .unwrap();
    }

    pub(crate) fn display(&self, format: &str) -> String {
        let out = self
            .cmd(&["display-message", "-p", "-t", "top", format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits (15 s at most) until the command wrote its exit status to `rc`.
    pub(crate) fn wait_exit(&self, rc: &std::path::Path, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        // Whole: the shell creates the file before it writes the status and its
        // newline.
        while !std::fs::read_to_string(rc).is_ok_and(|s| s.ends_with('\n')) {
            assert!(Instant::now() < deadline, "{what}:\n{}", self.screen());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the screen satisfies `ok`, returning it.
    pub(crate) fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The value shown on the row of `metric`, in its unit (`2.00 GB/s` → 2.0).
pub(crate) fn shown(screen: &str, metric: &str) -> Option<f64> {
    let line = screen
        .lines()
        .find(|l| l.contains(&format!("│{metric} ")))?;
    let rest = line.split(metric).nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}
