//! Counts in the order `-e` named them, perf events and the blocks' events
//! interleaved as given (perf prints its events in `-e` order): each count goes
//! at the first spec that names its block (or, failing that, its kind), keeping
//! the plan's order among the counts of one spec; counts no spec names (a
//! metric's) come last.

use super::count::Name;
use crate::block::BlockKind;
use crate::measure::Count;

/// The `-e` terms, each as the blocks it names (perf events: the event).
#[derive(Debug, Clone, Default)]
pub(crate) struct SpecOrder {
    terms: Vec<Vec<String>>,
}

impl SpecOrder {
    /// The order of `specs` (as given to `-e`; a spec that does not parse names
    /// nothing).
    pub(crate) fn of(specs: &[String]) -> SpecOrder {
        let terms = specs
            .iter()
            .flat_map(|s| crate::spec::expand(s).unwrap_or_default())
            .map(|t| {
                let spec = t.spec.trim();
                match spec.split_once('/') {
                    // `BLOCKS/EVENTS/`: the blocks (a list, kind, glob or name);
                    // `PMU/EVENT/` names itself.
                    Some((blocks, _)) => std::iter::once(spec.to_string())
                        .chain(blocks.split(',').map(|b| b.trim().to_string()))
                        .collect(),
                    None => vec![spec.to_string()],
                }
            })
            .collect();
        SpecOrder { terms }
    }

    /// Where count `c` goes: the first term that names it.
    fn place(&self, c: &Count) -> usize {
        let names =
            |want: &dyn Fn(&str) -> bool| self.terms.iter().position(|t| t.iter().any(|n| want(n)));
        if c.kind == BlockKind::Perf {
            return names(&|n| n == &*c.event).unwrap_or(usize::MAX);
        }
        let kind = c.kind.as_str();
        names(&|n| n == &*c.block)
            .or_else(|| {
                names(&|n| {
                    let stem =
                        n.trim_end_matches(|ch: char| ch.is_ascii_digit() || "*?[]-".contains(ch));
                    stem == kind
                })
            })
            .or_else(|| names(&|n| n.eq_ignore_ascii_case(&c.event)))
            .unwrap_or(usize::MAX)
    }

    /// `counts` in this order (stable: the plan's order within a term), each
    /// count's place taken from `memo` when the count at its position has the same
    /// names as last time: every interval of a run has the same counts in the same
    /// order, whose places are found once (by comparing names against every term),
    /// not at every interval. Counts already in order are left as they are.
    pub(crate) fn sort_remembering(&self, counts: &mut Vec<Count>, memo: &mut PerCount<usize>) {
        if self.terms.is_empty() {
            return;
        }
        memo.truncate(counts.len());
        let mut sorted = true;
        let mut last = 0;
        for (i, c) in counts.iter().enumerate() {
            let place = *memo.of(i, c, |c| self.place(c));
            sorted &= place >= last;
            last = place;
        }
        if sorted {
            return;
        }
        // The memo follows the counts' order before sorting; the next interval's
        // counts come in that order again.
        let mut keyed: Vec<(usize, Count)> = (0..counts.len())
            .map(|i| memo.kept(i).copied().unwrap_or(usize::MAX))
            .zip(counts.drain(..))
            .collect();
        keyed.sort_by_key(|(place, _)| *place);
        counts.extend(keyed.into_iter().map(|(_, c)| c));
    }
}

/// What is made of each count of an interval, kept by the count's position with
/// the names it was made for: every interval of a run has the same counts in the
/// same order, so it is made once, and anew where another count takes a position.
#[derive(Debug)]
pub(crate) struct PerCount<T> {
    kept: Vec<Option<(BlockKind, Name, Name, T)>>,
}

impl<T> Default for PerCount<T> {
    fn default() -> Self {
        PerCount { kept: Vec::new() }
    }
}

impl<T> PerCount<T> {
    /// Forgets what was kept past the first `n` positions.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.kept.truncate(n);
    }

    /// What was kept at position `n`.
    pub(crate) fn kept(&self, n: usize) -> Option<&T> {
        self.kept.get(n)?.as_ref().map(|(_, _, _, t)| t)
    }

    /// What is kept for count `c` at position `n`, made of it when that position
    /// held another count (the same names of the same kind; shared names compare
    /// by address first) or nothing.
    pub(crate) fn of(&mut self, n: usize, c: &Count, make: impl FnOnce(&Count) -> T) -> &T {
        if self.kept.len() <= n {
            self.kept.resize_with(n + 1, || None);
        }
        let slot = &mut self.kept[n];
        let same = matches!(slot, Some((kind, block, event, _))
            if *kind == c.kind && *block == c.block && *event == c.event);
        if !same {
            *slot = None;
        }
        &slot
            .get_or_insert_with(|| (c.kind, c.block.clone(), c.event.clone(), make(c)))
            .3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(block: &str, kind: BlockKind, event: &str) -> Count {
        Count::example(block, kind, event, 1)
    }

    fn names(counts: &[Count]) -> Vec<String> {
        counts
            .iter()
            .map(|c| format!("{}/{}", c.block, c.event))
            .collect()
    }

    /// The remembered places sort every interval as the first, and a count that
    /// is not the one remembered at its position is placed anew.
    #[test]
    fn remembered_places_sort_as_the_first_interval() {
        let order = SpecOrder::of(&["pcie/IN_P_BYTE_CNT/".into(), "tile/A,B/".into()]);
        let tile = |e| count("tile", BlockKind::Tile, e);
        let pcie = |e| count("pcie", BlockKind::Pcie, e);
        let mut memo = PerCount::default();
        let want = ["pcie/IN_P_BYTE_CNT", "tile/A", "tile/B"];
        for _ in 0..3 {
            let mut counts = vec![tile("A"), tile("B"), pcie("IN_P_BYTE_CNT")];
            order.sort_remembering(&mut counts, &mut memo);
            assert_eq!(names(&counts), want);
        }
        // Other counts at the same positions: placed anew, and the memo follows.
        let mut counts = vec![pcie("IN_P_BYTE_CNT"), tile("B")];
        order.sort_remembering(&mut counts, &mut memo);
        assert_eq!(names(&counts), ["pcie/IN_P_BYTE_CNT", "tile/B"]);
        assert!(memo.kept(1).is_some() && memo.kept(2).is_none());
        let mut counts = vec![
            tile("A"),
            count("other", BlockKind::Tile, "X"),
            pcie("IN_P_BYTE_CNT"),
        ];
        order.sort_remembering(&mut counts, &mut memo);
        assert_eq!(names(&counts), ["pcie/IN_P_BYTE_CNT", "tile/A", "other/X"]);
        // No order: left as given.
        let mut counts = vec![tile("B"), pcie("IN_P_BYTE_CNT")];
        SpecOrder::default().sort_remembering(&mut counts, &mut memo);
        assert_eq!(names(&counts), ["tile/B", "pcie/IN_P_BYTE_CNT"]);
    }
}
