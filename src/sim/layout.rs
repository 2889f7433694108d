//! Block layouts of the simulated generations. Counter counts come from firmware on a
//! real DPU; these are plausible ones. BlueField-2 is the vendor documentation's listing;
//! BlueField-3 has the blocks NVIDIA's bandwidth tool reads.

use crate::block::{BlockKind, Generation};
use crate::sim::kernel::KernelDef;

#[derive(Debug, Clone, Copy)]
pub(super) struct Spec {
    pub name: &'static str,
    pub counters: usize,
}

const fn s(name: &'static str, counters: usize) -> Spec {
    Spec { name, counters }
}

const BF1: &[Spec] = &[
    s("ecc", 0),
    s("gic0", 2),
    s("l3cache0half0", 5),
    s("l3cache0half1", 5),
    s("l3cache1half0", 5),
    s("l3cache1half1", 5),
    s("mss0", 4),
    s("mss1", 4),
    s("pcie0", 0),
    s("pcie1", 0),
    s("pcie2", 0),
    s("smmu0", 2),
    s("tile0", 4),
    s("tile1", 4),
    s("tile2", 4),
    s("tile3", 4),
    s("tile4", 4),
    s("tile5", 4),
    s("tile6", 4),
    s("tile7", 4),
    s("trio0", 4),
    s("trio1", 4),
    s("trio2", 4),
    s("triogen0", 1),
    s("triogen1", 1),
    s("triogen2", 1),
];

const BF2: &[Spec] = &[
    s("ecc", 0),
    s("gic0", 2),
    s("l3cachehalf0", 5),
    s("l3cachehalf1", 5),
    s("pcie0", 0),
    s("pcie1", 0),
    s("smmu0", 2),
    s("tile0", 4),
    s("tile1", 4),
    s("tile2", 4),
    s("tile3", 4),
    s("tilenet0", 4),
    s("tilenet1", 4),
    s("tilenet2", 4),
    s("tilenet3", 4),
    s("trio0", 4),
    s("trio1", 4),
    s("triogen0", 1),
    s("triogen1", 1),
];

/// BlueField-3 as NVIDIA's own tooling sees it: 8 llt, 8 llt_miss, 2 mss.
const BF3: &[Spec] = &[
    s("gic0", 2),
    s("llt0", 8),
    s("llt1", 8),
    s("llt2", 8),
    s("llt3", 8),
    s("llt4", 8),
    s("llt5", 8),
    s("llt6", 8),
    s("llt7", 8),
    s("llt_miss0", 8),
    s("llt_miss1", 8),
    s("llt_miss2", 8),
    s("llt_miss3", 8),
    s("llt_miss4", 8),
    s("llt_miss5", 8),
    s("llt_miss6", 8),
    s("llt_miss7", 8),
    s("mss0", 8),
    s("mss1", 8),
    s("smmu0", 2),
];

/// From kernels with count_clock.
const BF3_CLOCK: &[Spec] = &[s("clock_measure", 0)];

/// The April 2025 blocks: two APTs, an EMI per DDR channel pair of each MSS.
const BF3_2025: &[Spec] = &[
    s("apt0", 4),
    s("apt1", 4),
    s("emi0", 4),
    s("emi1", 4),
    s("emi2", 4),
    s("emi3", 4),
    s("gga0", 8),
    s("msn0", 4),
    s("prnf0", 4),
];

/// The blocks of a generation on a kernel. `counters` overrides the counter count of
/// every block of a kind (firmware decides it on a real DPU).
pub(super) fn blocks(
    gen: Generation,
    kernel: &KernelDef,
    counters: &[(BlockKind, usize)],
) -> Vec<Spec> {
    let mut v: Vec<Spec> = match gen {
        Generation::Bf1 => BF1.to_vec(),
        Generation::Bf3 => {
            let mut v = BF3.to_vec();
            if kernel.count_clock {
                v.extend_from_slice(BF3_CLOCK);
            }
            if kernel.blocks_2025 {
                v.extend_from_slice(BF3_2025);
            }
            v
        }
        _ => BF2
            .iter()
            .filter(|s| kernel.tilenet || BlockKind::from_block_name(s.name) != BlockKind::Tilenet)
            .copied()
            .collect(),
    };
    for spec in &mut v {
        let kind = BlockKind::from_block_name(spec.name);
        if let Some((_, n)) = counters.iter().find(|(k, _)| *k == kind) {
            spec.counters = *n;
        }
    }
    v
}
