//! Counters of an all-at-once block lent to other measurements: the sampler that
//! opens and closes the block's windows counts their events too. Such a block
//! counts only between `enable` writes, and programming an L3 event stops all of its
//! counters, so an event joins, and a lent counter is put back, only while the block
//! is stopped between two windows — at the sampler's next window boundary. The
//! sampler's other items keep their counters and their windows.

use crate::device::plan::Plan;
use crate::error::Result;
use crate::measure::plan::Slot;
use crate::spec::Item;
use crate::sysfs::layout;

use super::{reader, Acc, Sampler};

/// What changes on one block at its next window boundary.
#[derive(Default)]
pub(super) struct Lending {
    /// Items that start counting on their counters.
    joining: Vec<Slot>,
    /// Items whose counters are put back: the writes that do it.
    leaving: Vec<(usize, Plan)>,
    /// Item indices free for the next item lent (their counters put back).
    retired: Vec<usize>,
}

impl<'d> Sampler<'d> {
    /// Counts `item` on `counter` of all-at-once block `i` (counting in one group;
    /// the counter unused) from the block's next window on: the item's index. Its
    /// `event<N>` is written then, with the block stopped.
    pub(crate) fn join(&mut self, i: usize, item: Item, counter: u32) -> Result<usize> {
        let (p, st) = (&mut self.plans[i], &mut self.states[i]);
        let c = counter as usize;
        if st.counters[c].is_none() {
            st.counters[c] = Some(reader(
                self.device,
                layout::counter(&p.block.name, counter),
            )?);
        }
        if matches!(item, Item::Event { .. }) && st.events[c].is_none() {
            st.events[c] = Some(reader(self.device, layout::event(&p.block.name, counter))?);
        }
        let k = match st.lending.retired.pop() {
            Some(k) => {
                p.set_item(k, item);
                st.accs[k] = Acc::default();
                k
            }
            None => {
                p.push_item(item);
                st.accs.push(Acc::default());
                st.turn_end.push(0);
                st.levels.push(false);
                p.items.len() - 1
            }
        };
        st.lending.joining.push(Slot { counter, item: k });
        Ok(k)
    }

    /// Undoes a [`Sampler::join`] not yet applied (nothing was written for it).
    pub(crate) fn unjoin(&mut self, i: usize, item: usize) {
        let lending = &mut self.states[i].lending;
        let before = lending.joining.len();
        lending.joining.retain(|s| s.item != item);
        if lending.joining.len() < before {
            lending.retired.push(item);
        }
    }

    /// Stops counting lent `item` of block `i` at its next window boundary, and
    /// then makes `put_back` (the writes that give its counter back what it held).
    pub(crate) fn leave(&mut self, i: usize, item: usize, put_back: Plan) {
        self.states[i].lending.leaving.push((item, put_back));
    }

    /// Whether `item` of block `i` still waits for a window boundary to join or leave.
    pub(crate) fn pending(&self, i: usize, item: usize) -> bool {
        let l = &self.states[i].lending;
        l.joining.iter().any(|s| s.item == item) || l.leaving.iter().any(|(k, _)| *k == item)
    }

    /// The counters of block `i` in use: in any of its groups or about to join.
    pub(crate) fn counters_in_use(&self, i: usize) -> Vec<u32> {
        let joining = self.states[i].lending.joining.iter();
        self.plans[i]
            .groups
            .iter()
            .flatten()
            .chain(joining)
            .map(|s| s.counter)
            .collect()
    }

    /// At block `i`'s window boundary (the block stopped, at `now`): lent counters
    /// leave (put back as they were) and join. Whether its groups changed (the
    /// caller programs the group). A counter the kernel would not put back is said
    /// in the log of detections' place: the restore's error, for the owner to tell.
    pub(super) fn regroup(&mut self, i: usize, now: u64) -> bool {
        let (p, st) = (&mut self.plans[i], &mut self.states[i]);
        let l = &mut st.lending;
        if l.joining.is_empty() && l.leaving.is_empty() {
            return false;
        }
        for (item, put_back) in std::mem::take(&mut l.leaving) {
            p.groups[0].retain(|s| s.item != item);
            self.put_back_failures.extend(
                put_back
                    .apply_all(self.device.fs())
                    .iter()
                    .map(|e| format!("{}: putting a lent counter back failed: {e}", p.block.name)),
            );
            l.retired.push(item);
        }
        for s in std::mem::take(&mut l.joining) {
            st.turn_end[s.item] = now;
            p.groups[0].push(s);
        }
        true
    }

    /// Lent counters the kernel would not put back since the last call, said.
    pub(crate) fn take_put_back_failures(&mut self) -> Vec<String> {
        std::mem::take(&mut self.put_back_failures)
    }
}
