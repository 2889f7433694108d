//! Each user's share of a block's free counters, and taking counters back from
//! members when root needs them.

use super::*;

impl<'d> Collector<'d> {
    /// The counters of `block` a client holds: its own sampler's and those lent to
    /// it (none once revoked).
    pub(super) fn held_by(&self, c: &Client<'d>, block: &str) -> usize {
        let own = c
            .sampler
            .iter()
            .flat_map(|s| &s.plans)
            .filter(|p| p.block.name == block);
        let mut counters: Vec<u32> = own
            .flat_map(|p| p.groups.iter().flatten().map(|s| s.counter))
            .collect();
        counters.sort_unstable();
        counters.dedup();
        let lent = self
            .lent_items(&c.from)
            .filter(|&(p, _)| self.sampler.plans[p].block.name == block)
            .count();
        counters.len() + lent
    }

    /// Refuses a request of a user other than root that would hold more of a
    /// block's free counters than the user's share (`user_share`), with what the
    /// user holds already: root, and the exporter's own plan, are never locked out.
    pub(super) fn check_share(
        &self,
        uid: Option<u32>,
        rows: &[Vec<Place>],
        plans: &[BlockPlan<'d>],
    ) -> Result<()> {
        // One plan a block: the counters its groups take.
        for p in plans {
            let new = p
                .groups
                .iter()
                .flatten()
                .map(|s| s.counter)
                .collect::<std::collections::BTreeSet<u32>>()
                .len();
            self.within_share(uid, p.block, new)?;
        }
        for row in rows {
            let lends = row.iter().filter_map(|p| match p {
                Place::Lend(pi, ..) => Some(*pi),
                _ => None,
            });
            let mut by_plan: HashMap<usize, usize> = HashMap::new();
            for pi in lends {
                *by_plan.entry(pi).or_default() += 1;
            }
            for (pi, new) in by_plan {
                self.within_share(uid, self.sampler.plans[pi].block, new)?;
            }
        }
        Ok(())
    }

    pub(super) fn within_share(&self, uid: Option<u32>, block: &Block, new: usize) -> Result<()> {
        let free = self.free_of_own(block);
        let share = (self.user_share * free as f64).floor() as usize;
        let limit = match self.user_share > 0.0 && free > 0 {
            true => share.max(1),
            false => 0,
        };
        let held: usize = self
            .clients
            .iter()
            .filter(|c| c.uid == uid && c.revoked.is_none())
            .map(|c| self.held_by(c, &block.name))
            .sum();
        if held + new <= limit {
            return Ok(());
        }
        Err(refusal(format!(
            "a user other than root holds at most {limit} of {}'s {free} counters the exporter leaves free (user_share {}); this user holds {held} and asks {new} more: end a measurement, or ask for fewer events of it",
            block.name, self.user_share
        )))
    }

    /// Takes back the counters members (users other than root) hold on `blocks`
    /// for root's measurement: each such measurement is ended on the device, its
    /// counts so far kept and marked with the reason, answered to its reads until
    /// it ends. How many were taken back.
    pub(super) fn revoke_members_on(&mut self, blocks: &[&str], now: u64) -> Result<usize> {
        let ids: Vec<u64> = self
            .clients
            .iter()
            .filter(|c| c.uid != Some(0) && c.revoked.is_none())
            .filter(|c| blocks.iter().any(|b| self.held_by(c, b) > 0))
            .map(|c| c.id)
            .collect();
        for &id in &ids {
            self.revoke(id, now)?;
        }
        Ok(ids.len())
    }

    pub(super) fn revoke(&mut self, id: u64, now: u64) -> Result<()> {
        let (_, totals) = self.client_totals(id, now)?;
        let Some(c) = self.clients.iter_mut().find(|c| c.id == id) else {
            return Ok(());
        };
        let marked = totals
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|a| Acc {
                        why: Some(Foreign::TakenBack),
                        ..a
                    })
                    .collect()
            })
            .collect();
        c.revoked = Some(marked);
        drop(c.sampler.take());
        let saved = std::mem::take(&mut c.saved);
        let from = std::mem::take(&mut c.from);
        let uid = c.uid;
        let restored = session::restore(self.device, &saved);
        self.events.push(format!(
            "took back the counters of uid {}'s measurement for root's (its counts end there, marked)",
            uid.map_or("?".to_string(), |u| u.to_string())
        ));
        self.give_back_lent(&from)?;
        restored?;
        self.journal_clients(&[])
    }
}
