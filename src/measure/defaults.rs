//! The default set: what `stat` without -e or -M counts and what the exporter exports
//! without a config, per generation — the events, as `stat -e` specs, and the metrics
//! computed from them.

use crate::block::Generation;

/// What the exporter counts by default on each generation, as `stat -e` specs:
/// the L3 and memory traffic on BlueField-1/-2, DDR and LLC traffic and their
/// cycles on BlueField-3 (registers and PLL frequencies are always exported). A
/// config asks for it with `events = ["default"]`; no config means it.
pub(crate) const DEFAULT_EVENTS: &[(Generation, &[&str])] = &[
    (Generation::Bf1, BF12_DEFAULT),
    (Generation::Bf2, BF12_DEFAULT),
    (
        Generation::Bf3,
        &[
            "mss/SKYLIB_DDN_TX_FLITS,SKYLIB_DDN_RX_FLITS/",
            "llt/GDC_BANK0_RD_REQ,GDC_BANK1_RD_REQ,GDC_BANK0_WR_REQ,GDC_BANK1_WR_REQ/",
            "llt_miss/GDC_MISS_MACHINE_RD_REQ,GDC_MISS_MACHINE_WR_REQ/",
            // Apart: kernels before 6.14 have no count_clock.
            "mss/cycles/",
            "llt/cycles/",
            "llt_miss/cycles/",
        ],
    ),
];

const BF12_DEFAULT: &[&str] = &[
    "l3cache/HITS_BANK0,HITS_BANK1,MISSES_BANK0,MISSES_BANK1/",
    "tile/MEMORY_READS,MEMORY_WRITES/",
];

/// The metrics the default set computes, per generation (those the generation's
/// metric files define; the default events and the registers are their inputs).
pub(crate) const DEFAULT_METRICS: &[(Generation, &[&str])] = &[
    (
        Generation::Bf1,
        &["pcie_in_bandwidth", "pcie_out_bandwidth", "l3_hit_ratio"],
    ),
    (
        Generation::Bf2,
        &[
            "pcie_in_bandwidth",
            "pcie_out_bandwidth",
            "memory_read_bandwidth",
            "memory_write_bandwidth",
            "l3_hit_ratio",
        ],
    ),
    (
        Generation::Bf3,
        &[
            "ddr_read_bandwidth",
            "ddr_write_bandwidth",
            "llc_read_bandwidth",
            "llc_write_bandwidth",
            "llc_read_miss_ratio",
        ],
    ),
];

/// A generation's default set: its event specs and the metrics computed from them.
pub(crate) fn default_set(gen: Generation) -> (Vec<String>, Vec<String>) {
    let of = |table: &[(Generation, &[&str])]| -> Vec<String> {
        table
            .iter()
            .filter(|(g, _)| *g == gen)
            .flat_map(|(_, v)| v.iter().map(|s| s.to_string()))
            .collect()
    };
    (of(DEFAULT_EVENTS), of(DEFAULT_METRICS))
}

/// The word that stands for [`DEFAULT_EVENTS`] in a config's `events`.
pub(crate) const DEFAULT: &str = "default";
