//! Counts in the order `-e` named them, perf events and the blocks' events
//! interleaved as given (perf prints its events in `-e` order): each count goes
//! at the first spec that names its block (or, failing that, its kind), keeping
//! the plan's order among the counts of one spec; counts no spec names (a
//! metric's) come last.

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

    /// `counts` in this order (stable: the plan's order within a term).
    pub(crate) fn sort(&self, counts: &mut [Count]) {
        if self.terms.is_empty() {
            return;
        }
        counts.sort_by_key(|c| self.place(c));
    }
}
