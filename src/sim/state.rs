//! The simulated hardware: counters and registers counting with time at deterministic
//! rates, and the clocks that drive cycle counts.

use crate::block::{BlockKind, Generation, Mechanism};
use crate::catalog::{EventDef, DISABLE};
use crate::kinds::{KindDef, Role};

use std::sync::Arc;

use crate::sim::kernel::{served_table, KernelDef};
use crate::sim::layout::Spec;
use crate::sim::traffic::{drive, Drive, Workload};

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
    pub drive: Drive,
}

#[derive(Debug, Clone)]
pub(super) struct SimBlock {
    pub name: String,
    pub kind: BlockKind,
    pub mech: Mech,
    pub table: Vec<EventDef>,
    /// How each event of `table` counts, in the same order.
    pub drives: Vec<Drive>,
    pub workload: Arc<Workload>,
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
    pub(super) fn name_of(&self, number: u32) -> Option<&'static str> {
        self.table
            .iter()
            .find(|d| d.number == number)
            .map(|d| d.name)
    }

    /// How counter `i` counts with its current event and mode.
    fn drive(&self, i: usize) -> Drive {
        let c = &self.counters[i];
        if self.mech == Mech::Crspace && i < 32 && self.count_clock & (1 << i) != 0 {
            return Drive::Steady(self.clock_hz);
        }
        self.event_drive(c.event)
    }

    /// How event `number` counts in this block (never on which counter).
    pub(super) fn event_drive(&self, number: u32) -> Drive {
        match self.table.iter().position(|d| d.number == number) {
            Some(i) if self.table[i].name != DISABLE => self.drives[i],
            _ => Drive::Still,
        }
    }

    pub(super) fn counter_value(&self, i: usize, now: u64) -> u64 {
        let c = &self.counters[i];
        let mut v = c.acc;
        if c.running {
            v = v.wrapping_add(self.workload.count(&self.drive(i), c.since, now));
        }
        v & self.width_mask
    }

    /// Folds the running count into `acc`, so that the rate or state can change now.
    pub(super) fn fold(&mut self, i: usize, now: u64) {
        let v = self.counter_value(i, now);
        let c = &mut self.counters[i];
        c.acc = v;
        c.since = now;
    }

    pub(super) fn fold_all(&mut self, now: u64) {
        for i in 0..self.counters.len() {
            self.fold(i, now);
        }
    }

    pub(super) fn register_value(&self, r: &SimRegister, now: u64) -> u64 {
        let v = r
            .acc
            .wrapping_add(self.workload.count(&r.drive, r.since, now));
        v & self.width_mask
    }
}

/// The seed of the block at `index` of the layout (background rates depend on it).
pub fn block_seed(index: u64) -> u64 {
    0x5EED_0000 + index * 7919
}

/// Where a block stands in the layout: its index, and how many blocks of its kind
/// share the kind's traffic.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub index: u64,
    pub of_kind: usize,
}

pub(super) fn build_block(
    gen: Generation,
    kernel: &KernelDef,
    place: Place,
    spec: Spec,
    workload: &Arc<Workload>,
    now: u64,
) -> SimBlock {
    let kind = BlockKind::from_block_name(spec.name);
    let def = kind.def();
    let table = served_table(kernel, kind, gen);
    let mech = Mech::of(def, gen);
    let seed = block_seed(place.index);
    let drives: Vec<Drive> = table
        .iter()
        .map(|d| drive(kind, d.name, d.number, seed, place.of_kind))
        .collect();
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
            .zip(&drives)
            .map(|(d, drive)| SimRegister {
                def: *d,
                role: def.role(d.name),
                // Free-running: counting since the clock's start (the machine's
                // boot), whoever reads them.
                acc: register_start(d, drive, workload),
                since: 0,
                // Statistics registers the flows do not drive (ECC errors,
                // clock monitors) hold still.
                drive: match drive {
                    Drive::Flow { .. } => *drive,
                    _ => Drive::Still,
                },
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
        drives,
        workload: workload.clone(),
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

/// Where a register starts: PCIe statistics as after an hour of the first phase's
/// traffic, clock monitors at their PLL's count, others at 0.
fn register_start(d: &EventDef, drive: &Drive, workload: &Workload) -> u64 {
    if let Some(pll) = d.name.strip_prefix(LAST_COUNT) {
        return pll_hz(pll) / HZ_PER_COUNT;
    }
    if d.name.starts_with(WINDOW) {
        return REFERENCE_WINDOW;
    }
    match drive {
        Drive::Flow { .. } => drive.rate(workload.flows_at(0)) * 3600,
        _ => 0,
    }
}
