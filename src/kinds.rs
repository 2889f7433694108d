//! Everything bfperf knows about each kind of block, in one table: how the driver
//! names it, how it counts, how wide its counters are, its event table per generation,
//! how a counter is stopped, and what its registers are. Operations, completion,
//! snapshots, diffs and the simulator read these facts; none of them spells a kind.
//!
//! Adding a kind: a variant of [`BlockKind`], one [`KindDef`] in `KINDS` (at the place
//! the driver tests its name) and its event table in `catalog/tables.rs`.

use crate::block::{Block, BlockKind, Generation, Mechanism};
use crate::catalog::tables;
use crate::catalog::EventDef;

/// The event number written to stop a counter whose table has no DISABLE event (the
/// vendor's documented way; kernels that validate numbers refuse it).
pub(crate) const STOP_EVENT: u32 = 0xff;

/// A fact that differs between BlueField-1/-2 and BlueField-3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByGen<T> {
    /// The value on BlueField-1 and -2.
    pub bf12: T,
    /// The value on BlueField-3.
    pub bf3: T,
}

impl<T: Copy> ByGen<T> {
    /// The same value on every generation.
    pub const fn same(v: T) -> ByGen<T> {
        ByGen { bf12: v, bf3: v }
    }

    /// The value on `gen` (BlueField-3's, or the others').
    pub fn get(&self, gen: Generation) -> T {
        match gen {
            Generation::Bf3 => self.bf3,
            _ => self.bf12,
        }
    }
}

/// How a counter of the kind is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Re-programmed with the table's DISABLE event, or 0xff where it has none.
    Reprogram,
    /// The whole block stops with `enable` 0 (values kept).
    Enable,
    /// Free-running registers: they cannot be stopped.
    FreeRunning,
}

/// What a statistics register holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A running count: deltas make sense; `clear` zeroes it.
    Count,
    /// A control (error injection, a disable switch): bulk operations never touch it;
    /// it is written only when named, with --force.
    Control,
    /// A level (a measurement such as a clock monitor's last count): shown, not
    /// differenced, never cleared.
    Level,
}

/// The facts of one block kind.
#[derive(Debug, Clone, Copy)]
pub struct KindDef {
    /// The kind.
    pub kind: BlockKind,
    /// The name as users type it; the driver picks a block's kind by this substring of
    /// its directory name, testing kinds in table order.
    pub name: &'static str,
    /// What its blocks are, for people.
    pub about: &'static str,
    /// How its blocks count, per generation.
    pub mechanism: ByGen<Mechanism>,
    /// Width of its counters (or registers) in bits.
    pub width_bits: ByGen<u32>,
    /// The widest event number its event field holds.
    pub max_event: u32,
    /// Its event table on a generation.
    pub events: fn(Generation) -> &'static [EventDef],
    /// How a counter is stopped, per generation.
    pub stop: ByGen<Stop>,
    /// Counters can be reset one by one by writing 0 (not on L3, where only
    /// `enable` 1 resets them).
    pub clear_counters: bool,
    /// Programming any counter stops every counter of the block (L3).
    pub program_stops_all: bool,
    /// `count_clock` applies (BF3 crspace blocks on kernels that have it).
    pub count_clock: bool,
    /// The PLL whose `clock_measure` frequency clocks its `count_clock` cycles.
    pub clock_pll: Option<&'static str>,
    /// Registers with a role other than `default_role`.
    pub register_roles: &'static [(&'static str, Role)],
    /// The role of registers not in `register_roles`.
    pub default_role: Role,
    /// Its registers take any value written (ecc); others only 0.
    pub registers_take_any_value: bool,
    /// Its level registers measure clock frequencies in pairs (clock_measure).
    pub frequencies: Option<Frequencies>,
    /// One block per device whose values describe the whole device (clock_measure's
    /// frequencies): a per-block metric may use them for any block, where another
    /// kind's events must come from the paired block (see `PairBlocks` in metrics).
    pub one_per_device: bool,
}

/// Clock monitors read as pairs of level registers: `COUNT_PREFIX<PLL>` counts the
/// PLL's cycles during a window of `WINDOW_PREFIX<PLL>` reference cycles, so the
/// PLL runs at count / window × the reference frequency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frequencies {
    /// The name prefix of a pair's count register.
    pub count_prefix: &'static str,
    /// The name prefix of a pair's window register.
    pub window_prefix: &'static str,
    /// The reference clock's frequency, hertz.
    pub reference_hz: f64,
}

impl Frequencies {
    /// The PLL a register measures, and whether it is the pair's count (else its
    /// window); None when the register is not one of a pair.
    pub fn pll_of<'a>(&self, register: &'a str) -> Option<(&'a str, bool)> {
        let r = register.trim_end();
        if let Some(pll) = r.strip_prefix(self.count_prefix) {
            return Some((pll, true));
        }
        r.strip_prefix(self.window_prefix).map(|pll| (pll, false))
    }

    /// The frequency in hertz of a count over a window.
    pub fn hertz(&self, count: u64, window: u64) -> Option<f64> {
        (window > 0).then(|| count as f64 / window as f64 * self.reference_hz)
    }
}

impl KindDef {
    /// The role of a register of this kind.
    pub fn role(&self, register: &str) -> Role {
        self.register_roles
            .iter()
            .find(|(n, _)| *n == register.trim_end())
            .map(|(_, r)| *r)
            .unwrap_or(self.default_role)
    }
}

const PER_COUNTER: ByGen<Mechanism> = ByGen::same(Mechanism::PerCounter);
const ALL_AT_ONCE: ByGen<Mechanism> = ByGen::same(Mechanism::AllAtOnce);
const REGISTERS: ByGen<Mechanism> = ByGen::same(Mechanism::Registers);
const REPROGRAM: ByGen<Stop> = ByGen::same(Stop::Reprogram);
const ENABLE: ByGen<Stop> = ByGen::same(Stop::Enable);
const FREE: ByGen<Stop> = ByGen::same(Stop::FreeRunning);

const fn counter_kind(
    kind: BlockKind,
    name: &'static str,
    about: &'static str,
    events: fn(Generation) -> &'static [EventDef],
) -> KindDef {
    KindDef {
        kind,
        name,
        about,
        mechanism: PER_COUNTER,
        width_bits: ByGen::same(64),
        max_event: 0xff,
        events,
        stop: REPROGRAM,
        clear_counters: true,
        program_stops_all: false,
        count_clock: false,
        clock_pll: None,
        register_roles: &[],
        default_role: Role::Count,
        registers_take_any_value: false,
        frequencies: None,
        one_per_device: false,
    }
}

/// A BlueField-3 crspace kind: 32-bit counters started and stopped together.
const fn crspace_kind(
    kind: BlockKind,
    name: &'static str,
    about: &'static str,
    events: fn(Generation) -> &'static [EventDef],
    clock_pll: Option<&'static str>,
) -> KindDef {
    KindDef {
        mechanism: ALL_AT_ONCE,
        width_bits: ByGen::same(32),
        stop: ENABLE,
        count_clock: true,
        clock_pll,
        ..counter_kind(kind, name, about, events)
    }
}

const fn registers_kind(
    kind: BlockKind,
    name: &'static str,
    about: &'static str,
    events: fn(Generation) -> &'static [EventDef],
    width: u32,
) -> KindDef {
    KindDef {
        mechanism: REGISTERS,
        width_bits: ByGen::same(width),
        stop: FREE,
        clear_counters: false,
        ..counter_kind(kind, name, about, events)
    }
}

/// Every kind, in the order the driver tests block names (`tilenet` before `tile`,
/// `llt_miss` before `llt`).
pub(crate) static KINDS: &[KindDef] = &[
    counter_kind(
        BlockKind::Tilenet,
        "tilenet",
        "mesh network diagnostics of a tile (HNF_NET)",
        |_| tables::HNFNET,
    ),
    counter_kind(
        BlockKind::Tile,
        "tile",
        "a tile's L3 home node (HNF): requests, memory reads and writes",
        |_| tables::HNF,
    ),
    counter_kind(
        BlockKind::Triogen,
        "triogen",
        "a TRIO's generic AXI monitor (SMGEN)",
        |_| tables::SMGEN,
    ),
    counter_kind(
        BlockKind::Trio,
        "trio",
        "a TRIO (PCIe/Arm interface) block",
        |g| match g {
            Generation::Bf1 => tables::TRIO_BF1,
            Generation::Bf3 => &[],
            _ => tables::TRIO_BF2,
        },
    ),
    KindDef {
        mechanism: ByGen {
            bf12: Mechanism::PerCounter,
            bf3: Mechanism::AllAtOnce,
        },
        width_bits: ByGen { bf12: 64, bf3: 32 },
        stop: ByGen {
            bf12: Stop::Reprogram,
            bf3: Stop::Enable,
        },
        count_clock: true,
        clock_pll: Some("PLL_N1"),
        ..counter_kind(
            BlockKind::Mss,
            "mss",
            "a memory subsystem (DDR controller side)",
            |g| match g {
                Generation::Bf3 => tables::MSS_BF3,
                _ => tables::MSS_BF1,
            },
        )
    },
    KindDef {
        register_roles: &[
            ("DISABLE", Role::Control),
            ("SERR_INJ", Role::Control),
            ("DERR_INJ", Role::Control),
            ("DRAM_ECC_INJECT", Role::Control),
        ],
        registers_take_any_value: true,
        frequencies: None,
        ..registers_kind(
            BlockKind::Ecc,
            "ecc",
            "memory ECC error counts and error injection",
            |_| tables::ECC,
            32,
        )
    },
    registers_kind(
        BlockKind::Pcie,
        "pcie",
        "PCIe TLR statistics: packets and bytes in and out",
        |_| tables::PCIE,
        64,
    ),
    KindDef {
        mechanism: ALL_AT_ONCE,
        width_bits: ByGen::same(57),
        max_event: 0x3f,
        stop: ENABLE,
        clear_counters: false,
        program_stops_all: true,
        ..counter_kind(
            BlockKind::L3cache,
            "l3cache",
            "an L3 cache half: hits, misses, evictions",
            |_| tables::L3C,
        )
    },
    counter_kind(
        BlockKind::Gic,
        "gic",
        "the interrupt controller's AXI monitor (SMGEN)",
        |_| tables::SMGEN,
    ),
    counter_kind(
        BlockKind::Smmu,
        "smmu",
        "the SMMU's AXI monitor (SMGEN)",
        |_| tables::SMGEN,
    ),
    crspace_kind(
        BlockKind::LltMiss,
        "llt_miss",
        "BF3 last-level cache miss machine",
        |_| tables::LLT_MISS,
        Some("PLL_T1"),
    ),
    crspace_kind(
        BlockKind::Llt,
        "llt",
        "BF3 last-level cache (LLT) tile",
        |_| tables::LLT,
        Some("PLL_T1"),
    ),
    KindDef {
        default_role: Role::Level,
        one_per_device: true,
        // The monitors' reference clock is 156.25 MHz.
        frequencies: Some(Frequencies {
            count_prefix: "FMON_CLK_LAST_COUNT_",
            window_prefix: "REFERENCE_WINDOW_WIDTH_",
            reference_hz: 156.25e6,
        }),
        ..registers_kind(
            BlockKind::ClockMeasure,
            "clock_measure",
            "BF3 clock frequency monitors (read-only)",
            |_| tables::CLOCK_MEASURE,
            32,
        )
    },
    crspace_kind(
        BlockKind::Gga,
        "gga",
        "BF3 Global Generic Accelerator",
        |_| tables::GGA,
        None,
    ),
    crspace_kind(
        BlockKind::Apt,
        "apt",
        "BF3 Arm Processor Tile",
        |_| tables::APT,
        None,
    ),
    crspace_kind(
        BlockKind::Emi,
        "emi",
        "BF3 External Memory Interface",
        |_| tables::EMI,
        None,
    ),
    crspace_kind(
        BlockKind::Prnf,
        "prnf",
        "BF3 PCIe Request Node",
        |_| tables::PRNF,
        None,
    ),
    crspace_kind(
        BlockKind::Msn,
        "msn",
        "BF3 Memory Stasher and Navigator",
        |_| tables::MSN,
        None,
    ),
];

/// What bfperf assumes of a block whose name matches no kind: counters of 64 bits,
/// no event table; it is still listed, read and programmed by number (--force).
pub(crate) static UNKNOWN: KindDef = counter_kind(
    BlockKind::Unknown,
    "unknown",
    "a block this bfperf does not know",
    |_| &[],
);

/// The kernel's perf_event PMUs, counted beside the blocks; never a block's kind.
pub(crate) static PERF: KindDef = counter_kind(
    BlockKind::Perf,
    "perf",
    "a perf_event PMU of the kernel (Arm cores, software events)",
    |_| &[],
);

/// The facts of a kind.
pub fn def(kind: BlockKind) -> &'static KindDef {
    match kind {
        BlockKind::Perf => &PERF,
        _ => KINDS.iter().find(|d| d.kind == kind).unwrap_or(&UNKNOWN),
    }
}

/// The kind of a block directory, as the driver decides it.
pub fn of_block_name(name: &str) -> &'static KindDef {
    KINDS
        .iter()
        .find(|d| name.contains(d.name))
        .unwrap_or(&UNKNOWN)
}

/// The unit of a statistics register's count, by the end of its name.
const REGISTER_UNITS: &[(&str, &str)] = &[("_BYTE_CNT", "bytes"), ("_PKT_CNT", "packets")];

/// The unit a register counts in (`count` where its name does not say).
pub(crate) fn register_unit(name: &str) -> &'static str {
    REGISTER_UNITS
        .iter()
        .find(|(suffix, _)| name.ends_with(suffix))
        .map(|(_, u)| *u)
        .unwrap_or("count")
}

// The lookups of kinds and blocks that read the table live beside it, so that
// `block` holds types only.
impl BlockKind {
    /// Every known kind, in the driver's matching order.
    pub fn all() -> impl Iterator<Item = BlockKind> {
        KINDS.iter().map(|d| d.kind)
    }

    /// The kind of a block directory, as the driver decides it from its name.
    pub fn from_block_name(name: &str) -> BlockKind {
        of_block_name(name).kind
    }

    /// The facts of this kind.
    pub fn def(self) -> &'static KindDef {
        def(self)
    }

    /// The kind's name as users type it (`l3cache`, `llt_miss`).
    pub fn as_str(self) -> &'static str {
        self.def().name
    }

    /// Kinds whose blocks hold free-running statistics registers.
    pub fn is_registers_kind(self) -> bool {
        self.def().mechanism.bf12 == Mechanism::Registers
    }

    /// Parses a kind name as typed by a user (`l3cache`, `llt_miss`).
    pub fn parse(text: &str) -> Option<BlockKind> {
        let lower = text.to_ascii_lowercase();
        BlockKind::all().find(|k| k.as_str() == lower)
    }
}

impl Block {
    /// Builds a block of a generation from the names of the files in its directory.
    /// The files decide the mechanism (the device is the authority); a block with no
    /// files gets its kind's.
    pub fn from_files(name: &str, files: &[String], gen: Generation) -> Block {
        let mut counters: Vec<u32> = files
            .iter()
            .filter_map(|f| crate::sysfs::layout::counter_index(f))
            .collect();
        counters.sort_unstable();
        let has = |n: &str| files.iter().any(|f| f == n);
        let has_enable = has(crate::sysfs::layout::ENABLE);
        let has_event_list = has(crate::sysfs::layout::EVENT_LIST);
        let kind = BlockKind::from_block_name(name);
        let mut registers: Vec<String> = if has_enable || !counters.is_empty() {
            Vec::new()
        } else {
            files
                .iter()
                .filter(|f| f.as_str() != crate::sysfs::layout::EVENT_LIST)
                .cloned()
                .collect()
        };
        registers.sort();
        // A block with neither counters nor registers is an empty block of its kind.
        let mechanism = if has_enable {
            Mechanism::AllAtOnce
        } else if !counters.is_empty() {
            Mechanism::PerCounter
        } else if !registers.is_empty() {
            Mechanism::Registers
        } else {
            kind.def().mechanism.get(gen)
        };
        Block {
            name: name.to_string(),
            kind,
            mechanism,
            counters,
            registers,
            has_enable,
            has_count_clock: has(crate::sysfs::layout::COUNT_CLOCK),
            has_event_list,
            width_bits: kind.def().width_bits.get(gen),
        }
    }

    /// The facts of its kind.
    pub fn def(&self) -> &'static KindDef {
        self.kind.def()
    }
}
