//! The simulated hardware: counters and registers counting with time at deterministic
//! rates, and the clocks that drive cycle counts.

use crate::block::{BlockKind, Generation, Mechanism};
use crate::catalog::{EventDef, DISABLE};
use crate::kinds::{KindDef, Role};

use super::kernel::{served_table, KernelDef};
use super::layout::Spec;

/// How a simulated block counts (from its kind's facts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mech {
    Counter,
    /// All-at-once, and programming stops every counter (L3).
    L3,
    /// All-at-once BF3 crspace.
    Crspace,
    Register,
}

impl Mech {
    fn of(def: &KindDef, gen: Generation) -> Mech {
        match def.mechanism.get(gen) {
            Mechanism::Registers => Mech::Register,
            Mechanism::AllAtOnce if def.program_stops_all => Mech::L3,
            Mechanism::AllAtOnce => Mech::Crspace,
            Mechanism::PerCounter => Mech::Counter,
        }
    }

    pub(super) fn all_at_once(self) -> bool {
        matches!(self, Mech::L3 | Mech::Crspace)
    }
}

#[derive(Debug, Clone)]
pub(super) struct SimCounter {
    pub event: u32,
    pub running: bool,
    pub acc: u64,
    pub since: u64,
}

#[derive(Debug, Clone)]
pub(super) struct SimRegister {
    pub def: EventDef,
    pub role: Role,
    pub acc: u64,
    pub since: u64,
    pub rate: u64,
}

#[derive(Debug, Clone)]
pub(super) struct SimBlock {
    pub name: String,
    pub kind: BlockKind,
    pub mech: Mech,
    pub table: Vec<EventDef>,
    pub seed: u64,
    pub counters: Vec<SimCounter>,
    pub registers: Vec<SimRegister>,
    pub enabled: bool,
    pub count_clock: u32,
    pub has_count_clock: bool,
    /// Cycles per second a counter in count_clock mode counts.
    pub clock_hz: u64,
    pub width_mask: u64,
}

/// Cycles per second of a block whose PLL is not known.
pub const CLOCK_HZ: u64 = 1_000_000_000;
const NS: u128 = 1_000_000_000;

/// The simulated PLL frequencies in kHz; others run at 1 GHz.
const PLL_KHZ: &[(&str, u64)] = &[
    ("PLL_T1", 2_000_000),
    ("PLL_N1", 1_600_000),
    ("REF_100_INST0", 100_000),
    ("REF_100_INST1", 100_000),
    ("REF_156", 156_250),
];

/// The clock monitors' reference window, in 156.25 MHz reference cycles.
pub const REFERENCE_WINDOW: u64 = 1000;
/// What one count of the frequency monitor over [`REFERENCE_WINDOW`] is in Hz.
const HZ_PER_COUNT: u64 = 156_250_000 / REFERENCE_WINDOW;

/// The frequency of a simulated PLL in Hz, as its `clock_measure` registers report it
/// (MHz = FMON_CLK_LAST_COUNT / REFERENCE_WINDOW_WIDTH × 156.25).
pub fn pll_hz(pll: &str) -> u64 {
    let khz = PLL_KHZ
        .iter()
        .find(|(p, _)| *p == pll)
        .map(|(_, k)| *k)
        .unwrap_or(CLOCK_HZ / 1000);
    khz * 1000
}

const LAST_COUNT: &str = "FMON_CLK_LAST_COUNT_";
const WINDOW: &str = "REFERENCE_WINDOW_WIDTH_";

impl SimBlock {
    pub fn name_of(&self, number: u32) -> Option<&'static str> {
        self.table
            .iter()
            .find(|d| d.number == number)
            .map(|d| d.name)
    }

    /// Events per second counted by counter `i` with its current event.
    fn rate(&self, i: usize) -> u64 {
        let c = &self.counters[i];
        if self.mech == Mech::Crspace && i < 32 && self.count_clock & (1 << i) != 0 {
            return self.clock_hz;
        }
        match self.name_of(c.event) {
            None => 0,
            Some(n) if n == DISABLE => 0,
            Some(_) => event_rate(self.seed, c.event, i as u64),
        }
    }

    pub fn counter_value(&self, i: usize, now: u64) -> u64 {
        let c = &self.counters[i];
        let mut v = c.acc as u128;
        if c.running {
            v += self.rate(i) as u128 * (now.saturating_sub(c.since)) as u128 / NS;
        }
        (v as u64) & self.width_mask
    }

    /// Folds the running count into `acc`, so that the rate or state can change now.
    pub fn fold(&mut self, i: usize, now: u64) {
        let v = self.counter_value(i, now);
        let c = &mut self.counters[i];
        c.acc = v;
        c.since = now;
    }

    pub fn fold_all(&mut self, now: u64) {
        for i in 0..self.counters.len() {
            self.fold(i, now);
        }
    }

    pub fn register_value(&self, r: &SimRegister, now: u64) -> u64 {
        let v = r.acc as u128 + r.rate as u128 * now.saturating_sub(r.since) as u128 / NS;
        (v as u64) & self.width_mask
    }
}

/// A deterministic, plausible rate for an event (events per second).
pub fn event_rate(seed: u64, event: u32, counter: u64) -> u64 {
    let mut x = seed ^ (event as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (counter << 17);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    100_000 + x % 9_900_000
}

/// The seed of the block at `index` of the layout (rates depend on it).
pub fn block_seed(index: u64) -> u64 {
    0x5EED_0000 + index * 7919
}

pub(super) fn build_block(
    gen: Generation,
    kernel: &KernelDef,
    index: u64,
    spec: Spec,
    now: u64,
) -> SimBlock {
    let kind = BlockKind::from_block_name(spec.name);
    let def = kind.def();
    let table = served_table(kernel, kind, gen);
    let mech = Mech::of(def, gen);
    let seed = block_seed(index);
    let counters = (0..spec.counters)
        .map(|_| SimCounter {
            event: 0,
            running: false,
            acc: 0,
            since: now,
        })
        .collect();
    let registers = if mech == Mech::Register {
        table
            .iter()
            .map(|d| SimRegister {
                def: *d,
                role: def.role(d.name),
                acc: register_start(kind, seed, d),
                since: now,
                rate: register_rate(kind, seed, d),
            })
            .collect()
    } else {
        Vec::new()
    };
    let width = def.width_bits.get(gen);
    SimBlock {
        name: spec.name.to_string(),
        kind,
        mech,
        table,
        seed,
        counters,
        registers,
        enabled: false,
        count_clock: 0,
        has_count_clock: mech == Mech::Crspace && def.count_clock && kernel.count_clock,
        clock_hz: def.clock_pll.map(pll_hz).unwrap_or(CLOCK_HZ),
        width_mask: if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        },
    }
}

/// PCIe traffic: bytes in the GB/s range, packets at bytes/256. Other registers hold
/// still.
fn register_rate(kind: BlockKind, seed: u64, d: &EventDef) -> u64 {
    if kind != BlockKind::Pcie {
        return 0;
    }
    let bytes = 200_000_000 + event_rate(seed, d.number, 0) * 100;
    if d.name.contains("PKT") {
        bytes / 256
    } else {
        bytes
    }
}

fn register_start(kind: BlockKind, seed: u64, d: &EventDef) -> u64 {
    if kind == BlockKind::Pcie {
        return register_rate(kind, seed, d) * 3600;
    }
    if let Some(pll) = d.name.strip_prefix(LAST_COUNT) {
        return pll_hz(pll) / HZ_PER_COUNT;
    }
    if d.name.starts_with(WINDOW) {
        return REFERENCE_WINDOW;
    }
    0
}
