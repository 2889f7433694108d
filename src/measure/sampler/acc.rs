//! What a sampler keeps of each item: its accumulator ([`Acc`]), what touched it
//! ([`Foreign`]: another program's write, a reset, a fault) and the detections
//! it logs.

use super::*;

/// What another program did to something the measurement owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Foreign {
    /// `event<N>` names another event than the one programmed.
    EventChanged {
        /// The counter.
        counter: u32,
        /// The event it holds now (None: unreadable or stopped).
        found: Option<u32>,
    },
    /// The counter went backwards: it was reset or re-programmed.
    Reset {
        /// The counter.
        counter: u32,
    },
    /// The block's `enable` was switched off.
    Stopped,
    /// The block's `count_clock` changed.
    CountClock {
        /// The mask it holds now.
        found: u32,
    },
    /// A statistics register went backwards: it was cleared.
    Cleared,
    /// A counter of an all-at-once block went backwards within a window: another
    /// program wrote it, or switched the block off and on.
    Written {
        /// The counter.
        counter: u32,
    },
    /// Reading or writing the block's files failed: the device's doing, not another
    /// program's. What it counted meanwhile is not known.
    Fault {
        /// The errno, when the failure had one.
        errno: Option<i32>,
    },
    /// The block was not read for longer than its counters take to wrap (the
    /// measurement was stalled): what they counted meanwhile is not known.
    Stalled {
        /// How long it went unread, ms.
        ms: u64,
        /// How long its counters take to wrap at their clock, ms.
        wrap_ms: u64,
    },
    /// The device's owner took its counter back for root's own measurement: a
    /// user other than root holds a block's free counters only while root does not
    /// need them. Counted up to then; what came after is not.
    TakenBack,
    /// The writes that opened and closed its first window were delayed (the
    /// machine busy) and its rate is not known to 0.5 %. Read from an owner of an
    /// earlier release only: this one carries the delay in [`Acc::uncertain_ns`],
    /// so that it marks the spans it matters to, not the whole run.
    Unbounded {
        /// How far its bounds may be off, µs.
        us: u64,
        /// The window's length, µs.
        window_us: u64,
    },
}

impl Foreign {
    /// What happened, for people.
    pub fn describe(&self) -> String {
        match self {
            Foreign::EventChanged {
                counter,
                found: Some(n),
            } => format!("another program programmed event 0x{n:x} on counter {counter}"),
            Foreign::EventChanged {
                counter,
                found: None,
            } => format!("another program stopped counter {counter}"),
            Foreign::Reset { counter } => {
                format!("counter {counter} was reset or re-programmed by another program")
            }
            Foreign::Stopped => "another program switched the block's enable off".into(),
            Foreign::CountClock { found } => {
                format!("another program set count_clock to 0x{found:x}")
            }
            Foreign::Cleared => "the register was cleared by another program".into(),
            Foreign::Written { counter } => format!(
                "counter {counter} went backwards: another program wrote it or restarted the block"
            ),
            Foreign::Fault { errno: Some(e) } => format!(
                "the device failed while it was sampled ({})",
                std::io::Error::from_raw_os_error(*e)
            ),
            Foreign::Fault { errno: None } => {
                "the device gave a value that is not a number while it was sampled".into()
            }
            Foreign::Stalled { ms, wrap_ms } => format!(
                "it went unread for {ms} ms, longer than its counters take to wrap ({wrap_ms} ms): what it counted is not known"
            ),
            Foreign::TakenBack => "the exporter took its counter back for root's own measurement (a user other than root holds free counters only while root does not need them); counted until then".into(),
            Foreign::Unbounded { us, window_us } => format!(
                "a busy machine delayed the writes that bound its first window by up to {us} µs of its {window_us} µs: its rate is not known to 0.5 %"
            ),
        }
    }

    /// Another program wrote (false: the device failed, or the sampling stalled).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            Foreign::Fault { .. }
                | Foreign::Stalled { .. }
                | Foreign::Unbounded { .. }
                | Foreign::TakenBack
        )
    }
}

/// What one item has counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acc {
    /// Events counted while its group was active.
    pub total: u64,
    /// How long its group was active, ns: its turns, less the gaps in which an
    /// all-at-once block was stopped to be read (the coverage's share of a span).
    pub active_ns: u64,
    /// How long its counter counted, ns, timed from its own bounds: the writes that
    /// started and stopped an all-at-once window, or the reads that bound a
    /// per-counter or register count. What its rate is derived from.
    #[serde(default)]
    pub counted_ns: u64,
    /// A running estimate that never goes backwards: each turn's count scaled to
    /// the time since the item's previous counted turn ended (equal to `total` for
    /// a counter read while it counts, never multiplexed nor spoiled; an
    /// all-at-once block's windows scaled over the gaps it was stopped in, those
    /// `total` leaves out for delayed bounds included; a window another program
    /// spoiled, or one stalled past a wrap, stood for by the next). What the
    /// exporter exports.
    pub estimate: u64,
    /// How many times another program touched its counter (0: the count is valid).
    pub foreign: u32,
    /// The last thing another program did to it.
    pub why: Option<Foreign>,
    /// A level: `total` is its latest value, not a count.
    pub level: bool,
    /// How far the bounds of its counting may be off, ns: a first window kept
    /// although a busy machine delayed the writes that opened and closed it. A span
    /// whose `counted_ns` this is more than 0.5 % of has no rate known to 0.5 %
    /// ([`Acc::unbounded`]); a longer span that holds it has.
    #[serde(default)]
    pub uncertain_ns: u64,
}

impl Acc {
    /// What this accumulator gathered since `earlier` (a level keeps its value).
    pub fn since(&self, earlier: &Acc) -> Acc {
        let touched = self.foreign > earlier.foreign;
        Acc {
            // Saturating: the owner's accumulators come over a socket, and a
            // broken one must not take the client down.
            total: if self.level {
                self.total
            } else {
                self.total.saturating_sub(earlier.total)
            },
            active_ns: self.active_ns.saturating_sub(earlier.active_ns),
            counted_ns: self.counted_ns.saturating_sub(earlier.counted_ns),
            estimate: if self.level {
                self.estimate
            } else {
                self.estimate.saturating_sub(earlier.estimate)
            },
            foreign: self.foreign.saturating_sub(earlier.foreign),
            why: if touched { self.why } else { None },
            level: self.level,
            uncertain_ns: self.uncertain_ns.saturating_sub(earlier.uncertain_ns),
        }
    }

    /// Why its rate is not known to 0.5 % over this span, if it is not: the bounds
    /// of a window it holds were delayed by more than that share of its counting.
    pub fn unbounded(&self) -> Option<String> {
        unknown_beyond_bound(self.uncertain_ns, self.counted_ns).then(|| self.unbounded_text())
    }

    /// [`Acc::unbounded`]'s words, apart: made rarely, kept out of the tick's code.
    #[cold]
    fn unbounded_text(&self) -> String {
        format!(
            "a busy machine delayed the writes that bound its first window by up to {} µs of the {} µs it counted: its rate is not known to 0.5 %",
            self.uncertain_ns / 1000,
            self.counted_ns / 1000
        )
    }

    /// What two stretches left out of a count add up to: their counts and times, and
    /// the uncertainty of those times (a first window counted while disabled is
    /// left out with it). What another program did is not carried (it is never left
    /// out of a count), and neither is a level's flag: [`Acc::since`] keeps a level's
    /// own value whatever is taken from it.
    pub(crate) fn plus(&self, other: &Acc) -> Acc {
        Acc {
            total: self.total.saturating_add(other.total),
            active_ns: self.active_ns.saturating_add(other.active_ns),
            counted_ns: self.counted_ns.saturating_add(other.counted_ns),
            estimate: self.estimate.saturating_add(other.estimate),
            uncertain_ns: self.uncertain_ns.saturating_add(other.uncertain_ns),
            ..Acc::default()
        }
    }

    /// Every accumulator of `now` since its counterpart in `then` (per block, per
    /// item: a sampler's or an owner's totals at two moments).
    pub(crate) fn all_since(now: &[Vec<Acc>], then: &[Vec<Acc>]) -> Vec<Vec<Acc>> {
        now.iter()
            .zip(then)
            .map(|(n, t)| n.iter().zip(t).map(|(n, t)| n.since(t)).collect())
            .collect()
    }

    pub(super) fn touched(&mut self, why: Foreign) {
        self.foreign += 1;
        self.why = Some(why);
    }
}

/// One detection of another program's write, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// The block.
    pub block: String,
    /// The events or registers touched.
    pub items: Vec<String>,
    /// What was done to them.
    pub why: Foreign,
}
