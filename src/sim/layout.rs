//! Block layouts of the simulated generations. Counter counts come from firmware on a
//! real DPU; these are plausible ones. BlueField-2 is the vendor documentation's listing.

use super::Flavor;
use crate::block::Generation;

#[derive(Debug, Clone, Copy)]
pub struct Spec {
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

const BF3: &[Spec] = &[
    s("gic0", 2),
    s("llt0", 8),
    s("llt1", 8),
    s("llt2", 8),
    s("llt3", 8),
    s("llt_miss0", 8),
    s("llt_miss1", 8),
    s("llt_miss2", 8),
    s("llt_miss3", 8),
    s("mss0", 8),
    s("mss1", 8),
    s("smmu0", 2),
];

pub fn blocks(gen: Generation, flavor: Flavor) -> Vec<Spec> {
    match gen {
        Generation::Bf1 => BF1.to_vec(),
        Generation::Bf3 => {
            let mut v = BF3.to_vec();
            if flavor == Flavor::New {
                v.push(s("clock_measure", 0));
            }
            v
        }
        _ => BF2.to_vec(),
    }
}
