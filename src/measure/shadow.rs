//! perf stat's metric beside each of its own events, as `perf stat -x` prints it
//! on the event's line (tools/perf/util/stat-shadow.c): `CPUs utilized` beside a
//! clock, `insn per cycle` beside instructions, a share of another event, or a
//! rate per second of the clock's time (`K/sec`). One row a rule; an event no
//! rule names gets the rate when a clock was counted beside it.

use crate::block::BlockKind;
use crate::measure::Count;

/// What an event's metric is taken over.
#[derive(Debug, Clone, Copy)]
enum Per {
    /// The span's wall-clock time (a clock's ns over it: CPUs utilized).
    Wall,
    /// Another event's count (any of its names), times a scale.
    Event(&'static [&'static str], f64),
    /// The clock's counted ns (cycles per ns: GHz).
    ClockNs,
}

/// A rule: the event (any of its names), what it is taken over, perf's decimals
/// and perf's text.
struct Rule {
    events: &'static [&'static str],
    per: Per,
    decimals: usize,
    unit: &'static str,
}

const CLOCKS: &[&str] = &["task-clock", "cpu-clock"];
const CYCLES: &[&str] = &["cycles"];

const RULES: &[Rule] = &[
    Rule {
        events: CLOCKS,
        per: Per::Wall,
        decimals: 3,
        unit: "CPUs utilized",
    },
    Rule {
        events: &["instructions"],
        per: Per::Event(CYCLES, 1.0),
        decimals: 2,
        unit: "insn per cycle",
    },
    Rule {
        events: &["branch-misses"],
        per: Per::Event(&["branch-instructions"], 100.0),
        decimals: 2,
        unit: "of all branches",
    },
    Rule {
        events: &["L1-dcache-load-misses"],
        per: Per::Event(&["L1-dcache-loads"], 100.0),
        decimals: 2,
        unit: "of all L1-dcache accesses",
    },
    Rule {
        events: &["L1-icache-load-misses"],
        per: Per::Event(&["L1-icache-loads"], 100.0),
        decimals: 2,
        unit: "of all L1-icache accesses",
    },
    Rule {
        events: &["dTLB-load-misses"],
        per: Per::Event(&["dTLB-loads"], 100.0),
        decimals: 2,
        unit: "of all dTLB cache accesses",
    },
    Rule {
        events: &["iTLB-load-misses"],
        per: Per::Event(&["iTLB-loads"], 100.0),
        decimals: 2,
        unit: "of all iTLB cache accesses",
    },
    Rule {
        events: &["LLC-load-misses"],
        per: Per::Event(&["LLC-loads"], 100.0),
        decimals: 2,
        unit: "of all LL-cache accesses",
    },
    Rule {
        events: &["cache-misses"],
        per: Per::Event(&["cache-references"], 100.0),
        decimals: 3,
        unit: "of all cache refs",
    },
    Rule {
        events: &["stalled-cycles-frontend"],
        per: Per::Event(CYCLES, 100.0),
        decimals: 2,
        unit: "frontend cycles idle",
    },
    Rule {
        events: &["stalled-cycles-backend"],
        per: Per::Event(CYCLES, 100.0),
        decimals: 2,
        unit: "backend cycles idle",
    },
    Rule {
        events: CYCLES,
        per: Per::ClockNs,
        decimals: 3,
        unit: "GHz",
    },
];

/// A perf event's metric: its value with perf's decimals, and perf's text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shadow {
    pub value: f64,
    pub decimals: usize,
    pub unit: String,
}

impl Shadow {
    /// The value as perf's `-x` writes it: to its decimals, the digits only.
    pub(crate) fn value_text(&self) -> String {
        format!("{:.*}", self.decimals, self.value)
    }
}

/// The event's name without perf's modifiers (`cycles:u` is cycles), by its
/// first name (`branches` is branch-instructions).
fn bare(event: &str) -> &str {
    let name = event.split(':').next().unwrap_or(event);
    crate::perf::generic_name(name).unwrap_or(name)
}

/// The metric perf shows beside perf count `c` of `counts` (the same span, over
/// `wall_ns` of wall-clock time): None where perf leaves the fields empty (the
/// event did not count, or what it is taken over was not counted or is 0).
pub(crate) fn of(c: &Count, counts: &[Count], wall_ns: u64) -> Option<Shadow> {
    if c.kind != BlockKind::Perf {
        return None;
    }
    let value = c.usable()? as f64;
    // Counted per CPU (`CPU0`): over that CPU's counts; else over all.
    let per_cpu = c.block.starts_with("CPU");
    let other = |names: &[&str]| {
        counts
            .iter()
            .filter(|o| o.kind == BlockKind::Perf && (!per_cpu || o.block == c.block))
            .find(|o| names.contains(&bare(&o.event)))
            .and_then(Count::usable)
            .map(|v| v as f64)
            .filter(|v| *v > 0.0)
    };
    let event = bare(&c.event);
    let Some(rule) = RULES.iter().find(|r| r.events.contains(&event)) else {
        // Any other event: a rate per second of the clock's time.
        let per_s = 1e9 * value / other(CLOCKS)?;
        let (scaled, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "K")]
            .into_iter()
            .find(|(at, _)| per_s > *at)
            .map_or((per_s, ""), |(at, p)| (per_s / at, p));
        return Some(Shadow {
            value: scaled,
            decimals: 3,
            unit: format!("{prefix}/sec"),
        });
    };
    let over = match rule.per {
        Per::Wall => Some(wall_ns as f64).filter(|w| *w > 0.0),
        Per::Event(names, scale) => other(names).map(|v| v / scale),
        Per::ClockNs => other(CLOCKS),
    }?;
    Some(Shadow {
        value: value / over,
        decimals: rule.decimals,
        unit: rule.unit.to_string(),
    })
}

/// The metrics perf shows as its own, by bfperf's names: `-x` shows them beside
/// their events ([`of`]), not as metrics.
pub(crate) const SHOWN_BESIDE: [&str; 2] = ["ipc", "cpus_utilized"];

#[cfg(test)]
mod tests {
    use super::*;

    fn perf(event: &str, value: u64) -> Count {
        Count::example("software", BlockKind::Perf, event, value)
    }

    /// `perf stat -x, -e task-clock,page-faults -- sleep 0.3` on perf 6.1:
    /// `1.21,msec,task-clock,1210369,100.00,0.004,CPUs utilized` and
    /// `74,,page-faults,1210369,100.00,61.138,K/sec`.
    #[test]
    fn perf_s_own_lines() {
        let counts = [perf("task-clock", 1_210_369), perf("page-faults", 74)];
        let clock = of(&counts[0], &counts, 301_000_000).unwrap();
        assert_eq!(
            (clock.value_text().as_str(), clock.unit.as_str()),
            ("0.004", "CPUs utilized")
        );
        let faults = of(&counts[1], &counts, 301_000_000).unwrap();
        assert_eq!(
            (faults.value_text().as_str(), faults.unit.as_str()),
            ("61.138", "K/sec")
        );
        // No clock counted: no rate.
        assert_eq!(of(&counts[1], &counts[1..], 301_000_000), None);
        // instructions without cycles: perf leaves it empty.
        let ins = [perf("instructions", 10), perf("cycles:u", 4)];
        assert_eq!(of(&ins[0], &ins[..1], 1), None);
        assert_eq!(of(&ins[0], &ins, 1).unwrap().value_text(), "2.50");
    }
}
