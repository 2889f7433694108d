//! What `bfperf top` shows on each generation: its headline panels, each a title and
//! the metrics (by name, from the metric files) it holds. Adding a panel is a row.

use crate::block::Generation;

/// A headline panel: the generations it applies to, its title, its metrics.
pub(super) struct Panel {
    pub gens: &'static [Generation],
    pub title: &'static str,
    pub metrics: &'static [&'static str],
}

const BF12: &[Generation] = &[Generation::Bf1, Generation::Bf2];
const BF3: &[Generation] = &[Generation::Bf3];

/// The panels, in screen order.
pub(super) const PANELS: &[Panel] = &[
    Panel {
        gens: BF12,
        title: "PCIe",
        metrics: &["pcie_in_bandwidth", "pcie_out_bandwidth"],
    },
    Panel {
        gens: &[Generation::Bf2],
        title: "Memory (tiles)",
        metrics: &["memory_read_bandwidth", "memory_write_bandwidth"],
    },
    Panel {
        gens: BF12,
        title: "L3 cache",
        metrics: &["l3_hit_ratio"],
    },
    Panel {
        gens: BF3,
        title: "DDR",
        metrics: &["ddr_read_bandwidth", "ddr_write_bandwidth"],
    },
    Panel {
        gens: BF3,
        title: "LLC",
        metrics: &[
            "llc_read_bandwidth",
            "llc_write_bandwidth",
            "llc_read_miss_ratio",
        ],
    },
    Panel {
        gens: BF3,
        title: "PLL",
        metrics: &[
            "clock_a0_frequency",
            "clock_t1_frequency",
            "clock_n1_frequency",
        ],
    },
];

/// The panels of a generation.
pub(super) fn for_generation(gen: Generation) -> impl Iterator<Item = &'static Panel> {
    PANELS.iter().filter(move |p| p.gens.contains(&gen))
}
