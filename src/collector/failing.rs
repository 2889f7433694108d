//! The device failing to be read, as the log says it: a line when it starts, a
//! count at most once a minute while it goes on, a line when it ends.

/// The device failing to be read, across sweeps, for the log and for `up`.
#[derive(Debug, Default)]
pub(super) struct Failing {
    /// Blocks that failed in the sweep under way.
    pub(super) this: std::collections::BTreeSet<String>,
    /// Blocks that failed at the last sweep (empty: it read every block).
    pub(super) now: std::collections::BTreeSet<String>,
    /// What the first failure said.
    pub(super) why: String,
    /// Since when it fails, ns, and when its count was last logged.
    pub(super) since: Option<u64>,
    pub(super) logged: u64,
    /// Sweeps failed since it started, and since the last count logged.
    pub(super) sweeps: u64,
    pub(super) unlogged: u64,
}

/// The most often a failure that goes on is counted in the log, ns.
const FAILING_EVERY_NS: u64 = 60_000_000_000;

impl Failing {
    pub(super) fn sweep_starts(&mut self) {
        self.this.clear();
    }

    pub(super) fn failed(&mut self, block: &str, why: String) {
        if self.this.is_empty() {
            self.why = why;
        }
        self.this.insert(block.to_string());
    }

    /// The sweep is over: the line to log, if any (the failure starts, goes on for
    /// another minute, or ends).
    pub(super) fn sweep_ends(&mut self, now: u64) -> Option<String> {
        self.now = std::mem::take(&mut self.this);
        let blocks = || {
            let names: Vec<&str> = self.now.iter().map(String::as_str).take(4).collect();
            let more = self.now.len().saturating_sub(names.len());
            match more {
                0 => names.join(", "),
                n => format!("{} and {n} more", names.join(", ")),
            }
        };
        match (self.since, self.now.is_empty()) {
            (None, true) => None,
            (None, false) => {
                self.since = Some(now);
                self.logged = now;
                (self.sweeps, self.unlogged) = (1, 0);
                Some(format!(
                    "warning: the device cannot be read ({}) at {}: bfperf_up is 0 and its series are left out until it reads again; sweeping on",
                    self.why,
                    blocks()
                ))
            }
            (Some(_), false) => {
                self.sweeps += 1;
                self.unlogged += 1;
                if now.saturating_sub(self.logged) < FAILING_EVERY_NS {
                    return None;
                }
                self.logged = now;
                let n = std::mem::take(&mut self.unlogged);
                Some(format!(
                    "warning: the device still cannot be read ({}): {n} more sweeps failed, at {}",
                    self.why,
                    blocks()
                ))
            }
            (Some(since), true) => {
                self.since = None;
                Some(format!(
                    "the device reads again, after {:.1} s and {} failed sweeps",
                    now.saturating_sub(since) as f64 / 1e9,
                    self.sweeps
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_failing_device_is_logged_when_it_starts_once_a_minute_and_when_it_ends() {
        let mut f = Failing::default();
        let s = 1_000_000_000u64;
        let sweep = |f: &mut Failing, at: u64, failing: &[&str]| {
            f.sweep_starts();
            for b in failing {
                f.failed(b, "ENOTCONN".into());
            }
            f.sweep_ends(at * s)
        };
        assert_eq!(sweep(&mut f, 0, &[]), None);
        let first = sweep(&mut f, 1, &["llt0", "mss0"]).unwrap();
        assert!(
            first.contains("cannot be read (ENOTCONN) at llt0, mss0"),
            "{first}"
        );
        let quiet: Vec<_> = (2..61)
            .filter_map(|t| sweep(&mut f, t, &["llt0"]))
            .collect();
        assert!(quiet.is_empty(), "{quiet:?}");
        let count = sweep(&mut f, 61, &["llt0"]).unwrap();
        assert!(count.contains("60 more sweeps failed"), "{count}");
        let back = sweep(&mut f, 70, &[]).unwrap();
        assert!(back.contains("after 69.0 s and 61 failed sweeps"), "{back}");
        assert_eq!(sweep(&mut f, 71, &[]), None);
    }
}
