//! Blocks of the device: their kind (by the driver's naming rules), their counting
//! mechanism (by the files they have) and the generation of the chip.

use serde::{Deserialize, Serialize};

/// The BlueField generation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
pub enum Generation {
    /// BlueField-1.
    #[serde(rename = "BlueField-1")]
    Bf1,
    /// BlueField-2.
    #[serde(rename = "BlueField-2")]
    Bf2,
    /// BlueField-3.
    #[serde(rename = "BlueField-3")]
    Bf3,
    /// A generation the device's identity and blocks do not tell.
    #[serde(rename = "unknown")]
    Unknown,
}

impl Generation {
    /// Its name as NVIDIA writes it (`BlueField-3`).
    pub fn label(self) -> &'static str {
        match self {
            Generation::Bf1 => "BlueField-1",
            Generation::Bf2 => "BlueField-2",
            Generation::Bf3 => "BlueField-3",
            Generation::Unknown => "unknown",
        }
    }

    /// The generation a label names (`BlueField-2`).
    pub fn from_label(label: &str) -> Generation {
        [Generation::Bf1, Generation::Bf2, Generation::Bf3]
            .into_iter()
            .find(|g| g.label() == label)
            .unwrap_or(Generation::Unknown)
    }

    /// The ACPI HID of the PMC platform device of this generation.
    pub fn acpi_hid(self) -> Option<&'static str> {
        match self {
            Generation::Bf1 => Some("MLNXBFD0"),
            Generation::Bf2 => Some("MLNXBFD1"),
            Generation::Bf3 => Some("MLNXBFD2"),
            Generation::Unknown => None,
        }
    }

    /// Finds an ACPI HID in a text (a link target, a modalias).
    pub fn from_acpi_text(text: &str) -> Option<Generation> {
        [Generation::Bf1, Generation::Bf2, Generation::Bf3]
            .into_iter()
            .find(|g| text.contains(g.acpi_hid().unwrap_or("-")))
    }

    /// Guesses the generation from the block names alone.
    pub fn from_block_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Generation {
        let mut gen = Generation::Unknown;
        for name in names {
            if name.starts_with("llt") || name.starts_with("clock_measure") {
                return Generation::Bf3;
            }
            if let Some(rest) = name.strip_prefix("l3cache") {
                gen = if rest.starts_with("half") {
                    Generation::Bf2
                } else {
                    Generation::Bf1
                };
            }
        }
        gen
    }
}

/// The kind of a block, chosen like the driver does: by substring of the name, in the
/// driver's order (so `tilenet0` is a tilenet, not a tile). The facts of each kind are
/// in the kinds table ([`crate::kinds::def`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Hash,
    PartialOrd,
    Ord,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// BF1/BF2 tile network.
    Tilenet,
    /// BF1/BF2 tile (HNF: the L2 home node and its memory traffic).
    Tile,
    /// BF1/BF2 TRIO generic counters.
    Triogen,
    /// BF1/BF2 TRIO (PCIe and network I/O).
    Trio,
    /// Memory subsystem (DDR controller).
    Mss,
    /// ECC error statistics registers.
    Ecc,
    /// PCIe TLR statistics registers (bytes and packets in and out).
    Pcie,
    /// L3 cache half (BF1/BF2).
    L3cache,
    /// Generic interrupt controller.
    Gic,
    /// System MMU.
    Smmu,
    /// BF3 last-level cache miss machine.
    LltMiss,
    /// BF3 last-level cache tile.
    Llt,
    /// BF3 clock frequency monitors.
    ClockMeasure,
    /// BF3 Global Generic Accelerator.
    Gga,
    /// BF3 Arm Processor Tile.
    Apt,
    /// BF3 External Memory Interface.
    Emi,
    /// BF3 PCIe Request Node.
    Prnf,
    /// BF3 Memory Stasher and Navigator.
    Msn,
    /// A perf_event PMU of the kernel (the Arm cores, software events): not a block of
    /// the hwmon device, counted beside them by `stat`.
    Perf,
    /// A name no kind matches (or, in a snapshot, a kind this bfperf does not know).
    #[serde(other)]
    #[default]
    Unknown,
}

/// How a block counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Mechanism {
    /// `event<N>`/`counter<N>` pairs, each started by programming it.
    #[serde(rename = "per-counter")]
    PerCounter,
    /// Counters started and stopped together through `enable` (L3 cache, BF3 crspace).
    #[serde(rename = "all-at-once")]
    AllAtOnce,
    /// Free-running statistics registers named after the event (pcie, ecc, clock_measure).
    #[serde(rename = "registers")]
    Registers,
}

impl Mechanism {
    /// Its name as users and the driver's reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::PerCounter => "per-counter",
            Mechanism::AllAtOnce => "all-at-once",
            Mechanism::Registers => "registers",
        }
    }
}

/// One block as found on the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Block {
    /// Its directory's name (`tile2`).
    pub name: String,
    /// Its kind.
    pub kind: BlockKind,
    /// How it counts.
    pub mechanism: Mechanism,
    /// Indices of the `counter<N>` files present, ascending.
    pub counters: Vec<u32>,
    /// Register files (registers blocks), by name, sorted.
    pub registers: Vec<String>,
    /// It has an `enable` file (all-at-once).
    pub has_enable: bool,
    /// It has a `count_clock` file (BF3 crspace, kernel 6.14 or later).
    pub has_count_clock: bool,
    /// It has an `event_list` file.
    pub has_event_list: bool,
    /// Width of its counters or registers in bits (from its kind and the generation).
    pub width_bits: u32,
}

impl Block {
    /// No counter, register or enable file: nothing to read or write.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.registers.is_empty() && !self.has_enable
    }

    /// It counts with programmed counters (not free-running registers).
    pub fn is_counter_block(&self) -> bool {
        self.mechanism != Mechanism::Registers
    }

    /// It has the counter `counter<index>`.
    pub fn has_counter(&self, index: u32) -> bool {
        self.counters.contains(&index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_driver_order() {
        assert_eq!(BlockKind::from_block_name("tilenet3"), BlockKind::Tilenet);
        assert_eq!(BlockKind::from_block_name("tile3"), BlockKind::Tile);
        assert_eq!(BlockKind::from_block_name("triogen1"), BlockKind::Triogen);
        assert_eq!(BlockKind::from_block_name("llt_miss0"), BlockKind::LltMiss);
        assert_eq!(BlockKind::from_block_name("llt0"), BlockKind::Llt);
        assert_eq!(
            BlockKind::from_block_name("l3cache1half0"),
            BlockKind::L3cache
        );
        assert_eq!(BlockKind::from_block_name("apt0"), BlockKind::Apt);
        assert_eq!(BlockKind::from_block_name("emi3"), BlockKind::Emi);
        assert_eq!(BlockKind::from_block_name("foo0"), BlockKind::Unknown);
    }

    #[test]
    fn generation_from_names() {
        assert_eq!(
            Generation::from_block_names(["tile0", "l3cachehalf1"]),
            Generation::Bf2
        );
        assert_eq!(
            Generation::from_block_names(["l3cache0half1"]),
            Generation::Bf1
        );
        assert_eq!(
            Generation::from_block_names(["mss0", "llt_miss0"]),
            Generation::Bf3
        );
        assert_eq!(
            Generation::from_acpi_text("acpi:MLNXBFD2:"),
            Some(Generation::Bf3)
        );
    }
}
