//! Which counter counts what: the items asked of each block placed on its counters,
//! in groups that take turns (multiplexing) when there are more items than counters.

use super::spec::{BlockRequest, Item};
use crate::block::{Block, Mechanism};
use crate::error::{Error, Result};
use crate::ops::resolve::COUNT_CLOCK_BITS;

/// One counter and the item it counts in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub counter: u32,
    /// Index into the block plan's items.
    pub item: usize,
}

/// The plan of one block.
#[derive(Debug, Clone)]
pub struct BlockPlan<'d> {
    pub block: &'d Block,
    pub items: Vec<Item>,
    /// Counter blocks: the groups that take turns (one group when all fit).
    pub groups: Vec<Vec<Slot>>,
}

impl BlockPlan<'_> {
    pub fn multiplexed(&self) -> bool {
        self.groups.len() > 1
    }

    /// The `count_clock` mask of a group: bits of the counters counting cycles.
    pub fn clock_mask(&self, group: usize) -> u32 {
        self.groups[group]
            .iter()
            .filter(|s| self.items[s.item] == Item::Cycles)
            .fold(0, |m, s| m | (1 << s.counter))
    }
}

/// Places items on counters. Cycles items go first, on the lowest counters (the
/// count_clock mask names counters 0 to 31).
pub fn place<'d>(
    requests: Vec<BlockRequest<'d>>,
    allow_multiplex: bool,
) -> Result<Vec<BlockPlan<'d>>> {
    requests
        .into_iter()
        .map(|r| place_block(r, allow_multiplex))
        .collect()
}

fn place_block(r: BlockRequest<'_>, allow_multiplex: bool) -> Result<BlockPlan<'_>> {
    let block = r.block;
    if block.mechanism == Mechanism::Registers {
        return Ok(BlockPlan {
            block,
            items: r.items,
            groups: Vec::new(),
        });
    }
    let counters: Vec<u32> = block.counters.clone();
    let n = counters.len();
    let mut order: Vec<usize> = (0..r.items.len()).collect();
    order.sort_by_key(|&i| r.items[i] != Item::Cycles);
    let groups: Vec<Vec<Slot>> = order
        .chunks(n.max(1))
        .map(|chunk| {
            chunk
                .iter()
                .zip(&counters)
                .map(|(&item, &counter)| Slot { counter, item })
                .collect()
        })
        .collect();
    if groups.len() > 1 && !allow_multiplex {
        return Err(Error::NotSupported {
            block: block.name.clone(),
            problem: format!(
                "{} events on {} need {} counters and it has {n}; drop events, or leave out --no-multiplex to let them take turns",
                r.items.len(),
                block.name,
                r.items.len()
            ),
        });
    }
    let plan = BlockPlan {
        block,
        items: r.items,
        groups,
    };
    for g in 0..plan.groups.len() {
        if plan.groups[g]
            .iter()
            .any(|s| plan.items[s.item] == Item::Cycles && s.counter >= COUNT_CLOCK_BITS)
        {
            return Err(Error::BadSpec {
                spec: block.name.clone(),
                problem:
                    "too many cycles counters: the count_clock mask names counters 0 to 31 only"
                        .into(),
            });
        }
    }
    Ok(plan)
}
