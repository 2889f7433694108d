//! Which counter counts what: the items asked of each block placed on its counters,
//! in groups that take turns (multiplexing) when there are more items than counters.

use crate::block::{Block, Mechanism};
use crate::device::resolve::COUNT_CLOCK_BITS;
use crate::error::{Error, Result};
use crate::spec::{BlockRequest, Item};

/// One counter and the item it counts in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The counter.
    pub counter: u32,
    /// Index into the block plan's items.
    pub item: usize,
}

/// The plan of one block.
#[derive(Debug, Clone)]
pub struct BlockPlan<'d> {
    /// The block.
    pub block: &'d Block,
    /// What it counts.
    pub items: Vec<Item>,
    /// Counter blocks: the groups that take turns (one group when all fit).
    pub groups: Vec<Vec<Slot>>,
    /// The block's name and its items' labels, as every interval's counts share
    /// them.
    pub names: Names,
}

/// A plan's names, made once.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// The block's.
    pub block: crate::measure::Name,
    /// Each item's label, by item.
    pub items: Vec<crate::measure::Name>,
}

impl Names {
    /// The names of `block`'s `items`.
    pub fn of(block: &Block, items: &[Item]) -> Names {
        Names {
            block: block.name.as_str().into(),
            items: items.iter().map(|i| i.label().into()).collect(),
        }
    }
}

impl<'d> BlockPlan<'d> {
    /// The plan of `block`: its `items` on `groups` of counters.
    pub fn new(block: &'d Block, items: Vec<Item>, groups: Vec<Vec<Slot>>) -> BlockPlan<'d> {
        let names = Names::of(block, &items);
        BlockPlan {
            block,
            items,
            groups,
            names,
        }
    }

    /// Adds an item (to be placed by the caller), with its name.
    pub(crate) fn push_item(&mut self, item: Item) {
        self.names.items.push(item.label().into());
        self.items.push(item);
    }

    /// Puts `item` in the place of item `k`, with its name.
    pub(crate) fn set_item(&mut self, k: usize, item: Item) {
        self.names.items[k] = item.label().into();
        self.items[k] = item;
    }

    /// Its items take turns (more than its counters).
    pub fn multiplexed(&self) -> bool {
        self.groups.len() > 1
    }

    /// The counter `item` is counted on, when it never takes turns (None for a
    /// multiplexed block and for registers).
    pub fn counter_of(&self, item: usize) -> Option<u32> {
        if self.multiplexed() {
            return None;
        }
        self.groups
            .first()?
            .iter()
            .find(|s| s.item == item)
            .map(|s| s.counter)
    }

    /// The `count_clock` mask of a group: bits of the counters counting cycles.
    pub fn clock_mask(&self, group: usize) -> u32 {
        self.groups[group]
            .iter()
            .filter(|s| self.items[s.item] == Item::Cycles)
            .fold(0, |m, s| m | (1 << s.counter))
    }

    /// What `count_clock` holds while `group` counts: the bits of counters the
    /// measurement does not use as they were (`saved_mask`), its own as the group
    /// wants them. Written when the group is programmed, and expected when read back.
    pub fn count_clock_while(&self, group: usize, saved_mask: u32) -> u32 {
        let ours = self
            .groups
            .iter()
            .flatten()
            .fold(0u32, |m, s| m | (1 << s.counter));
        (saved_mask & !ours) | self.clock_mask(group)
    }
}

/// Sets that share an item are one set: it is counted once, in one turn.
fn merged_sets(items: usize, sets: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut owner: Vec<usize> = (0..items).collect();
    fn root(owner: &mut [usize], mut i: usize) -> usize {
        while owner[i] != i {
            owner[i] = owner[owner[i]];
            i = owner[i];
        }
        i
    }
    for set in sets {
        for w in set.windows(2) {
            let (a, b) = (root(&mut owner, w[0]), root(&mut owner, w[1]));
            owner[b] = a;
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut index_of: Vec<Option<usize>> = vec![None; items];
    for i in 0..items {
        let r = root(&mut owner, i);
        match index_of[r] {
            Some(k) => out[k].push(i),
            None => {
                index_of[r] = Some(out.len());
                out.push(vec![i]);
            }
        }
    }
    out
}

/// Packs units (sets of items) into turns of at most `n` items: largest first, each
/// into the first turn with room.
fn pack(mut units: Vec<Vec<usize>>, n: usize) -> Vec<Vec<usize>> {
    units.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut turns: Vec<Vec<usize>> = Vec::new();
    for unit in units {
        match turns.iter_mut().find(|g| g.len() + unit.len() <= n) {
            Some(g) => g.extend(unit),
            None => turns.push(unit),
        }
    }
    turns
}

/// Turns of at most `n` items that take turns on the counters. A `{...}` group (with
/// the groups it shares items with) is always one turn; each set is whole in one turn
/// where it fits, and a set larger than `n` is cut between its groups and items.
/// The caller has checked that every group fits.
fn turns(items: usize, sets: &[Vec<usize>], groups: &[Vec<usize>], n: usize) -> Vec<Vec<usize>> {
    let strict = merged_sets(items, groups);
    let all: Vec<Vec<usize>> = sets.iter().chain(groups).cloned().collect();
    let mut units = Vec::new();
    for set in merged_sets(items, &all) {
        if set.len() <= n {
            units.push(set);
            continue;
        }
        // Too large for one turn: its groups stay whole, its other items fill in.
        let parts: Vec<Vec<usize>> = strict
            .iter()
            .filter(|g| set.contains(&g[0]))
            .cloned()
            .collect();
        units.extend(pack(parts, n));
    }
    let mut turns = pack(units, n);
    for g in &mut turns {
        g.sort_unstable();
    }
    turns
}

/// Refuses a group that cannot be counted in one turn on this block.
fn check_groups(r: &BlockRequest<'_>, n: usize) -> Result<()> {
    for g in merged_sets(r.items.len(), &r.groups) {
        if g.len() > n && r.groups.iter().any(|x| x.contains(&g[0])) {
            let names: Vec<&str> = g.iter().map(|&i| r.items[i].label()).collect();
            return Err(Error::NotSupported {
                block: r.block.name.clone(),
                problem: format!(
                    "the group {{{}}} needs {} counters on {} and it has {n}; a group is always counted at once, so split it into smaller groups or drop the braces to let its events take turns",
                    names.join(","),
                    g.len(),
                    r.block.name
                ),
            });
        }
    }
    Ok(())
}

/// Refuses a `{...}` group larger than its block's counters, as [`place`] does: the
/// one rule for a measurement, whoever programs it (the exporter for a client too).
pub(crate) fn check_group_sizes(r: &BlockRequest<'_>) -> Result<()> {
    match r.block.mechanism {
        Mechanism::Registers => Ok(()),
        _ => check_groups(r, r.block.counters.len()),
    }
}

/// Places items on counters. Cycles items go first in each group, on the lowest
/// counters (the count_clock mask names counters 0 to 31).
pub fn place<'d>(
    requests: Vec<BlockRequest<'d>>,
    allow_multiplex: bool,
) -> Result<Vec<BlockPlan<'d>>> {
    requests
        .into_iter()
        .map(|r| {
            let counters = r.block.counters.clone();
            place_block(r, allow_multiplex, counters)
        })
        .collect()
}

/// Places items on the counters `free` leaves each block (another measurement
/// counts on the rest); a block with none free is refused, saying `why_none`.
pub(crate) fn place_on_free<'d>(
    requests: Vec<BlockRequest<'d>>,
    free: impl Fn(&Block) -> Vec<u32>,
    why_none: impl Fn(&Block) -> String,
) -> Result<Vec<BlockPlan<'d>>> {
    requests
        .into_iter()
        .map(|r| {
            let counters = free(r.block);
            if counters.is_empty() && r.block.mechanism != Mechanism::Registers {
                return Err(Error::NotSupported {
                    block: r.block.name.clone(),
                    problem: why_none(r.block),
                });
            }
            place_block(r, true, counters)
        })
        .collect()
}

fn place_block(
    r: BlockRequest<'_>,
    allow_multiplex: bool,
    counters: Vec<u32>,
) -> Result<BlockPlan<'_>> {
    let block = r.block;
    if block.mechanism == Mechanism::Registers {
        return Ok(BlockPlan::new(block, r.items, Vec::new()));
    }
    let n = counters.len();
    check_groups(&r, n)?;
    let groups: Vec<Vec<Slot>> = turns(r.items.len(), &r.sets, &r.groups, n.max(1))
        .into_iter()
        .map(|mut g| {
            g.sort_by_key(|&i| r.items[i] != Item::Cycles);
            g.iter()
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
    let plan = BlockPlan::new(block, r.items, groups);
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

#[cfg(test)]
mod tests {
    use super::turns;

    #[test]
    fn sets_stay_in_one_turn_where_they_fit() {
        // L3's metrics: hit and miss rates need 0..4, evictions 4 and 5; 5 counters.
        let sets = vec![vec![0, 1, 2, 3], vec![0, 1, 2, 3], vec![4, 5]];
        assert_eq!(turns(6, &sets, &[], 5), vec![vec![0, 1, 2, 3], vec![4, 5]]);
        // Sets sharing an item are merged; one too large is cut in chunks.
        assert_eq!(
            turns(5, &[vec![0, 1], vec![1, 2], vec![3, 4]], &[], 3),
            vec![vec![0, 1, 2], vec![3, 4]]
        );
        assert_eq!(
            turns(6, &[(0..6).collect()], &[], 4),
            vec![vec![0, 1, 2, 3], vec![4, 5]]
        );
        // Everything fits: one group.
        assert_eq!(
            turns(3, &[vec![0], vec![1, 2]], &[], 4),
            vec![vec![0, 1, 2]]
        );
    }

    #[test]
    fn a_group_is_never_split() {
        // Five items in one set on four counters, items 3 and 4 a group: they share a
        // turn, where plain chunking would have cut them apart.
        let t = turns(5, &[(0..5).collect()], &[vec![3, 4]], 4);
        assert_eq!(t.len(), 2);
        assert!(t.iter().any(|g| g.contains(&3) && g.contains(&4)), "{t:?}");
        // Groups sharing an item are one group.
        let t = turns(5, &[], &[vec![0, 1], vec![1, 2]], 3);
        assert!(t.iter().any(|g| g == &vec![0, 1, 2]), "{t:?}");
    }
}
