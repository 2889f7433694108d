//! Counting enabled and disabled within a run, as perf's `--delay` and `--control`
//! do: the device is programmed once; what its counters count while disabled is
//! read at the switch (a window boundary for all-at-once blocks, a read of each
//! counter or register otherwise) and left out, with its time, so that counts,
//! rates, metrics and intervals cover the enabled time only. Several
//! enable/disable pairs add up.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::measure::sampler::Acc;

/// What the gate asks of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// Count from now on.
    Enable,
    /// Stop counting from now on.
    Disable,
    /// Nothing to change; answer (perf's `ping`).
    Ping,
}

/// When counting is enabled within a run.
pub trait Gate {
    /// Whether counting is enabled when the run starts.
    fn starts_enabled(&self) -> bool {
        true
    }

    /// What is due by `elapsed` from the run's start, in order (a delay's end, the
    /// words read from a control descriptor).
    fn due(&mut self, _elapsed: Duration) -> Vec<Switch> {
        Vec::new()
    }

    /// What is due at the run's end, when the command has exited or a signal came:
    /// as [`Gate::due`], with every word written before then (a `disable` just
    /// before the command exits counts).
    fn last(&mut self, elapsed: Duration) -> Vec<Switch> {
        self.due(elapsed)
    }

    /// When the next timed change is due, from the run's start (a delay's end).
    fn next_at(&self) -> Option<Duration> {
        None
    }

    /// A descriptor that becomes readable when a word may be waiting.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Says that a switch has been carried out (perf's `ack`).
    fn done(&mut self, _switch: Switch) {}

    /// What the user should know after the run (words it did not understand).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Counting enabled for the whole run.
pub struct Always;

impl Gate for Always {}

/// What was counted while disabled, per block and item, and for how long: left out
/// of every count and span.
#[derive(Debug, Clone, Default)]
pub(crate) struct Excluded {
    /// The sum of what every disabled stretch counted (empty before the first).
    pub totals: Vec<Vec<Acc>>,
    /// Their time, ns.
    pub ns: u64,
    /// Since when counting is disabled, and the totals then.
    pub paused: Option<(u64, Vec<Vec<Acc>>)>,
}

impl Excluded {
    /// Counting stops at `now`, the totals then being `totals`.
    pub(crate) fn pause(&mut self, now: u64, totals: Vec<Vec<Acc>>) {
        if self.paused.is_none() {
            self.paused = Some((now, totals));
        }
    }

    /// Counting resumes at `now`: what was counted since the pause is left out.
    pub(crate) fn resume(&mut self, now: u64, totals: &[Vec<Acc>]) {
        let Some((at, then)) = self.paused.take() else {
            return;
        };
        let stretch = Acc::all_since(totals, &then);
        if self.totals.is_empty() {
            self.totals = stretch
                .iter()
                .map(|b| vec![Acc::default(); b.len()])
                .collect();
        }
        self.totals = add(&self.totals, &stretch);
        self.ns += now.saturating_sub(at);
    }

    /// Whether counting is disabled now.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    /// `totals` (read at `now`) less what was counted while disabled, a pause still
    /// under way included; and the disabled time up to `now`.
    pub(crate) fn enabled(&self, now: u64, totals: Vec<Vec<Acc>>) -> (Vec<Vec<Acc>>, u64) {
        // Counting never disabled (the usual case): the totals as they are.
        if self.paused.is_none() && self.totals.is_empty() {
            return (totals, self.ns);
        }
        let mut all = self.clone();
        if all.paused.is_some() {
            all.resume(now, &totals);
        }
        let counted = match all.totals.is_empty() {
            true => totals,
            false => Acc::all_since(&totals, &all.totals),
        };
        (counted, all.ns)
    }
}

fn add(a: &[Vec<Acc>], b: &[Vec<Acc>]) -> Vec<Vec<Acc>> {
    a.iter()
        .zip(b)
        .map(|(a, b)| a.iter().zip(b).map(|(a, b)| a.plus(b)).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(total: u64, ns: u64) -> Vec<Vec<Acc>> {
        vec![vec![Acc {
            total,
            active_ns: ns,
            counted_ns: ns,
            estimate: total,
            ..Acc::default()
        }]]
    }

    #[test]
    fn what_is_counted_while_disabled_is_left_out_and_pairs_add_up() {
        let mut x = Excluded::default();
        // Enabled 0-1 s (100), disabled 1-3 s (200), enabled 3-4 s (100), disabled
        // from 4 s.
        x.pause(1_000, acc(100, 1_000));
        x.resume(3_000, &acc(300, 3_000));
        x.pause(4_000, acc(400, 4_000));
        let (counted, off) = x.enabled(6_000, acc(600, 6_000));
        assert_eq!(
            (counted[0][0].total, counted[0][0].counted_ns, off),
            (200, 2_000, 4_000)
        );
        assert!(x.is_paused());
    }

    #[test]
    fn a_delayed_first_window_counted_while_disabled_is_left_out_with_it() {
        // Disabled from the start (-D -1); the first window (0-100 ms) had bounds
        // 2 ms off; enabled from 1 s to 1.2 s, in two on-time windows.
        let at = |total: u64, ns: u64| {
            let mut a = acc(total, ns);
            a[0][0].uncertain_ns = 2_000_000;
            a
        };
        let ms = 1_000_000;
        let mut x = Excluded::default();
        x.pause(0, acc(0, 0));
        x.resume(1_000 * ms, &at(1_000, 1_000 * ms));
        let (counted, _) = x.enabled(1_200 * ms, at(1_200, 1_200 * ms));
        assert_eq!(counted[0][0].uncertain_ns, 0);
        assert_eq!(counted[0][0].unbounded(), None);
    }

    #[test]
    fn a_level_keeps_its_latest_value_and_another_programs_write_stays() {
        let level = |total: u64, foreign: u32| {
            vec![vec![Acc {
                total,
                level: true,
                foreign,
                ..Acc::default()
            }]]
        };
        let mut x = Excluded::default();
        x.pause(1_000, level(7, 0));
        x.resume(2_000, &level(9, 1));
        let (counted, _) = x.enabled(3_000, level(11, 1));
        assert_eq!((counted[0][0].total, counted[0][0].foreign), (11, 1));
    }
}
