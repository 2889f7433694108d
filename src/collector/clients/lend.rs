//! Counters of the exporter's all-at-once blocks lent to clients: which block
//! lends, what to lend, and giving them back.

use super::*;

impl<'d> Collector<'d> {
    /// Counters lent to a client that ended: each used by no other client is put
    /// back at its block's next window (read now), then forgotten.
    pub(super) fn give_back_lent(&mut self, from: &[Vec<Origin>]) -> Result<()> {
        let lent: Vec<(usize, usize)> = self.lent_items(from).collect();
        let mut returned = false;
        for (pi, item) in lent {
            let Some(l) = self
                .lent
                .iter_mut()
                .find(|l| (l.plan, l.item) == (pi, item))
            else {
                continue;
            };
            l.users = l.users.saturating_sub(1);
            if l.users == 0 {
                let put_back = session::restore_plan(std::slice::from_ref(&l.saved));
                self.sampler.leave(pi, item, put_back);
                returned = true;
            }
        }
        if returned {
            let now = (self.sampler.stamp())();
            self.sampler.tick(now)?;
            self.log_detections();
        }
        self.forget_returned()
    }

    /// The exporter's plan of `b` when it counts `b` all at once in one group: its
    /// unused counters can be lent.
    pub(super) fn lender(&self, b: &Block) -> Option<usize> {
        let pi = self
            .sampler
            .plans
            .iter()
            .position(|p| p.block.name == b.name)?;
        let p = &self.sampler.plans[pi];
        (p.block.mechanism == Mechanism::AllAtOnce && !p.multiplexed()).then_some(pi)
    }

    /// Places the items of `rest` on the counters plan `pi`'s block does not use
    /// (marked taken as they are), or refuses saying how many are free.
    pub(super) fn to_lend(
        &self,
        pi: usize,
        rest: BlockRequest<'d>,
        taken: &HashMap<String, Vec<u32>>,
        row: &mut [Place],
    ) -> Result<()> {
        let b = rest.block;
        let free = free_counters(b, taken);
        if rest.items.len() > free.len() {
            return Err(refusal(no_counter_free(b, taken, rest.items.len())));
        }
        let mut free = free.into_iter();
        let mut items = rest.items.into_iter();
        for place in row.iter_mut().filter(|p| matches!(p, Place::Own)) {
            if let (Some(item), Some(counter)) = (items.next(), free.next()) {
                *place = Place::Lend(pi, item, counter);
            }
        }
        Ok(())
    }

    /// Lends the counters `rows` place items on (their prior events recorded in the
    /// journal first, with `pending`, the client's own counters programmed already),
    /// each item then counted by the exporter's sampler from the block's next
    /// window: the places become the sampler's items, and every lent item the client
    /// uses (lent now or shared) counts it among its users.
    pub(super) fn lend(&mut self, rows: &mut [Vec<Place>], pending: &[Saved]) -> Result<()> {
        let mut lends = Vec::new();
        for place in rows.iter_mut().flatten() {
            if let Place::Lend(pi, item, counter) = place {
                let what = (*pi, item.clone(), *counter);
                let b = self.sampler.plans[what.0].block;
                let saved = session::save_lent(self.device, b, what.2)?;
                lends.push((place, what, saved));
            }
        }
        if !lends.is_empty() {
            let mut saved: Vec<Saved> = pending.to_vec();
            saved.extend(lends.iter().map(|(_, _, s)| s.clone()));
            self.journal_clients(&saved)?;
        }
        let mut joined: Vec<(usize, usize)> = Vec::new();
        for (place, (pi, item, counter), saved) in lends {
            match self.sampler.join(pi, item, counter) {
                Ok(k) => {
                    self.lent.push(Lent {
                        plan: pi,
                        item: k,
                        users: 0,
                        saved,
                    });
                    joined.push((pi, k));
                    *place = Place::Owner(pi, k);
                }
                Err(e) => {
                    for (pi, k) in joined {
                        self.sampler.unjoin(pi, k);
                        self.lent.retain(|l| (l.plan, l.item) != (pi, k));
                    }
                    let _ = self.journal_clients(pending);
                    return Err(e);
                }
            }
        }
        for place in rows.iter().flatten() {
            if let Place::Owner(p, i) = *place {
                if let Some(l) = self.lent.iter_mut().find(|l| (l.plan, l.item) == (p, i)) {
                    l.users += 1;
                }
            }
        }
        Ok(())
    }
}
