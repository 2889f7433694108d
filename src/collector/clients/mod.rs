//! The owner's side of sharing the device (`measure::owner::protocol`): a client's events are
//! counted beside the exporter's own, never instead of them. An event the exporter
//! already counts on a block is read from its own counter; another one goes on a
//! counter the exporter leaves free (taking turns with the client's other events
//! there when they are more than the free counters), by a sampler of the client's,
//! which puts the counters back when the client ends. The exporter's series are never
//! touched: same counters, same coverage, same labels.

use std::collections::HashMap;

use crate::block::{Block, Mechanism};
use crate::error::{Error, Result};
use crate::measure::owner::journal;
use crate::measure::owner::protocol::{GrantedBlock, MAX_CLIENTS, MAX_ITEMS, READ_EVERY_NS};
use crate::measure::plan::{place_on_free, BlockPlan};
use crate::measure::sampler::{Acc, Foreign, Sampler};
use crate::measure::session::{self, Saved};
use crate::spec::BlockRequest;

use super::Collector;

mod lend;
mod share;

/// Where one item of a client's is counted.
#[derive(Debug, Clone, Copy)]
enum Origin {
    /// The exporter's own item (plan, item), from its accumulator at the grant.
    Owner(usize, usize, Acc),
    /// The client's sampler's (plan, item).
    Own(usize, usize),
}

/// Measurements one user other than root may hold at once.
pub(crate) const PER_USER: usize = 4;

/// One client's request, granted.
pub(crate) struct Client<'d> {
    id: u64,
    /// The user it counts for (None: the kernel did not say).
    uid: Option<u32>,
    /// Per block of the request, per item.
    from: Vec<Vec<Origin>>,
    sampler: Option<Sampler<'d>>,
    saved: Vec<Saved>,
    /// Its last answer to a read: the time of its values and the values.
    last_read: Option<(u64, Vec<Vec<Acc>>)>,
    /// Its counters were taken back for root's measurement: what it had counted
    /// then, marked, answered to every read from then on.
    revoked: Option<Vec<Vec<Acc>>>,
}

/// A counter of one of the exporter's all-at-once blocks lent to clients: the item
/// its sampler counts there for them.
pub(crate) struct Lent {
    plan: usize,
    item: usize,
    /// Clients counting it; at 0 it waits for the block's next window to be put back.
    users: usize,
    /// What the counter held before.
    pub(crate) saved: Saved,
}

/// Where one item of a request is counted, decided before anything is written.
enum Place {
    /// By the exporter's sampler (its own item or one lent): (plan, item).
    Owner(usize, usize),
    /// On a counter the exporter's sampler lends, from its next window: (plan,
    /// item, counter).
    Lend(usize, crate::spec::Item, u32),
    /// By the client's own sampler.
    Own,
}

impl<'d> Collector<'d> {
    /// Counts `specs` for a new client of user `uid` beside the exporter's own
    /// events: returns the client's id and where each item is counted, or refuses
    /// (nothing programmed; see [`Collector::admit`]).
    pub(crate) fn grant(
        &mut self,
        specs: &[String],
        uid: Option<u32>,
        now: u64,
    ) -> Result<(u64, Vec<GrantedBlock>)> {
        let resolved = self.admit(specs, uid)?;
        let mut placed = self.place(&resolved);
        // Root's measurement comes first: where it would not fit, or take turns,
        // members holding counters of those blocks give them back (their counts
        // marked), and it is placed again.
        if uid == Some(0) {
            let crowded: Vec<&str> = match &placed {
                Err(_) => resolved
                    .blocks
                    .iter()
                    .map(|r| r.block.name.as_str())
                    .collect(),
                Ok((_, plans, _)) => plans
                    .iter()
                    .filter(|p| p.multiplexed())
                    .map(|p| p.block.name.as_str())
                    .collect(),
            };
            if !crowded.is_empty() && self.revoke_members_on(&crowded, now)? > 0 {
                placed = self.place(&resolved);
            }
        }
        let (mut rows, plans, names) = placed?;
        if uid != Some(0) {
            self.check_share(uid, &rows, &plans)?;
        }
        let (sampler, saved) = self.start_own(plans, now)?;
        // Until the client is listed, its own counters' prior state is journalled
        // as pending with every write made for it.
        let lent_and_ticked = self.lend(&mut rows, &saved).and_then(|()| {
            // Brings the exporter's accumulators to now, a window boundary where the
            // counters lent join: a shared item counts from here.
            self.sampler.tick(now)
        });
        if let Err(e) = lent_and_ticked {
            drop(sampler);
            let put_back = session::restore(self.device, &saved);
            if put_back.is_ok() {
                let _ = self.journal_clients(&[]);
            }
            return Err(match put_back {
                Ok(()) => e,
                Err(r) => crate::error::with_context(e, &r.to_string()),
            });
        }
        self.log_detections();
        let owner_totals = self.sampler.totals();
        let from: Vec<Vec<Option<Origin>>> = rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|place| match place {
                        Place::Owner(p, i) => Some(Origin::Owner(p, i, owner_totals[p][i])),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let own_plans = sampler.as_ref().map_or(&[][..], |s| &s.plans[..]);
        let (from, granted) = granted(from, names, &self.sampler.plans, own_plans);
        self.next_client += 1;
        let id = self.next_client;
        self.clients.push(Client {
            id,
            uid,
            from,
            sampler,
            saved,
            last_read: None,
            revoked: None,
        });
        Ok((id, granted))
    }

    /// Where each item of `resolved` would be counted on the counters free now:
    /// per block, its places; the plans of the client's own counters; the blocks'
    /// names. Nothing is written.
    #[allow(clippy::type_complexity)]
    fn place(
        &self,
        resolved: &crate::spec::Resolved<'d>,
    ) -> Result<(Vec<Vec<Place>>, Vec<BlockPlan<'d>>, Vec<String>)> {
        let taken = self.taken();
        let mut rows: Vec<Vec<Place>> = Vec::new();
        let mut own: Vec<BlockRequest<'d>> = Vec::new();
        let mut names = Vec::new();
        for r in resolved.blocks.iter().cloned() {
            names.push(r.block.name.clone());
            let (mut row, rest) = self.split_shared(r);
            match rest.map(|rest| (self.lender(rest.block), rest)) {
                Some((Some(pi), rest)) => self.to_lend(pi, rest, &taken, &mut row)?,
                Some((None, rest)) => own.push(rest),
                None => {}
            }
            rows.push(row);
        }
        let plans = place_on_free(
            own,
            |b| free_counters(b, &taken),
            |b| no_counter_free(b, &taken, 0),
        )?;
        Ok((rows, plans, names))
    }

    /// The counters of `block` the exporter's own plan leaves free: what users share.
    fn free_of_own(&self, block: &Block) -> usize {
        let used: Vec<u32> = self
            .own
            .iter()
            .filter(|p| p.block.name == block.name)
            .flat_map(
                |p| match p.block.mechanism == Mechanism::AllAtOnce && p.multiplexed() {
                    true => p.block.counters.clone(),
                    false => p.groups.iter().flatten().map(|s| s.counter).collect(),
                },
            )
            .collect();
        block.counters.iter().filter(|c| !used.contains(c)).count()
    }

    /// The items of the exporter's sampler a client's `from` counts that are lent
    /// (beyond the exporter's own), as (plan, item).
    fn lent_items<'a>(
        &'a self,
        from: &'a [Vec<Origin>],
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        from.iter().flatten().filter_map(|o| match *o {
            Origin::Owner(p, i, _) if i >= self.own[p].items.len() => Some((p, i)),
            _ => None,
        })
    }

    /// Whether user `uid` may have a measurement of `specs`, checked before the work
    /// they ask for: the slots (one user other than root holds at most
    /// [`PER_USER`], and the last of the [`MAX_CLIENTS`] is root's), the specs
    /// counted, then resolved one by one only while what they name stays within
    /// [`MAX_ITEMS`], so that no request stalls the exporter's loop; and its groups
    /// as stat checks them. The specs resolved, or the refusal.
    fn admit(&self, specs: &[String], uid: Option<u32>) -> Result<crate::spec::Resolved<'d>> {
        let root = uid == Some(0);
        let limit = if root { MAX_CLIENTS } else { MAX_CLIENTS - 1 };
        if self.clients.len() >= limit {
            return Err(refusal(format!(
                "it serves {} measurements at once already{}; try again when one ends",
                self.clients.len(),
                if root {
                    ""
                } else {
                    " (the last is kept for root)"
                }
            )));
        }
        let theirs = self.clients.iter().filter(|c| c.uid == uid).count();
        if !root && theirs >= PER_USER {
            return Err(refusal(format!(
                "this user has {theirs} measurements already, {PER_USER} at most; end one first"
            )));
        }
        let too_many = |n: usize| {
            refusal(format!(
                "{n} or more events asked, {MAX_ITEMS} at most per measurement"
            ))
        };
        if specs.len() > MAX_ITEMS {
            return Err(too_many(specs.len()));
        }
        let mut named = 0;
        for spec in specs {
            let one = crate::spec::resolve(self.device, std::slice::from_ref(spec))?;
            named += one.blocks.iter().map(|b| b.items.len()).sum::<usize>();
            if named > MAX_ITEMS {
                return Err(too_many(named));
            }
        }
        let resolved = crate::spec::resolve(self.device, specs)?;
        for r in &resolved.blocks {
            crate::measure::plan::check_group_sizes(r)?;
        }
        Ok(resolved)
    }

    /// The items of `r` the exporter's sampler counts already (its own, or lent to
    /// another client), marked in the row, and a request of the others (None when
    /// there are none).
    fn split_shared(&self, r: BlockRequest<'d>) -> (Vec<Place>, Option<BlockRequest<'d>>) {
        let owner = self
            .sampler
            .plans
            .iter()
            .position(|p| p.block.name == r.block.name);
        let mut row = Vec::new();
        let mut rest: Vec<crate::spec::Item> = Vec::new();
        for item in &r.items {
            let shared = owner.and_then(|pi| {
                let p = &self.sampler.plans[pi];
                let own = self.own[pi].items.len();
                let counted = |i: &usize| {
                    *i < own
                        || self
                            .lent
                            .iter()
                            .any(|l| (l.plan, l.item, l.users > 0) == (pi, *i, true))
                };
                let ii = (0..p.items.len()).find(|i| p.items[*i] == *item && counted(i))?;
                Some(Place::Owner(pi, ii))
            });
            match shared {
                Some(place) => row.push(place),
                None => {
                    rest.push(item.clone());
                    row.push(Place::Own);
                }
            }
        }
        let rest = (!rest.is_empty()).then(|| BlockRequest::of_items(r.block, rest));
        (row, rest)
    }

    /// Counters in use, by block: the exporter's and every client's. A block whose
    /// counters count together (all at once) is taken whole by a client's own
    /// sampler, and by the exporter's where its events take turns; otherwise the
    /// exporter's sampler takes the counters it counts on (lent ones too).
    fn taken(&self) -> HashMap<String, Vec<u32>> {
        let mut taken: HashMap<String, Vec<u32>> = HashMap::new();
        for (pi, p) in self.sampler.plans.iter().enumerate() {
            let used = taken.entry(p.block.name.clone()).or_default();
            // Taking turns all at once, its events leave no counter to lend.
            if p.block.mechanism == Mechanism::AllAtOnce && p.multiplexed() {
                used.extend(&p.block.counters);
            } else {
                used.extend(self.sampler.counters_in_use(pi));
            }
        }
        let clients = self.clients.iter().filter_map(|c| c.sampler.as_ref());
        for p in clients.flat_map(|s| &s.plans) {
            let used = taken.entry(p.block.name.clone()).or_default();
            match p.block.mechanism {
                Mechanism::AllAtOnce => used.extend(&p.block.counters),
                _ => used.extend(p.groups.iter().flatten().map(|s| s.counter)),
            }
        }
        taken
    }

    /// Programs and starts the client's own counters (the prior state recorded).
    fn start_own(
        &mut self,
        plans: Vec<BlockPlan<'d>>,
        now: u64,
    ) -> Result<(Option<Sampler<'d>>, Vec<Saved>)> {
        if plans.is_empty() {
            return Ok((None, Vec::new()));
        }
        let saved = session::save(self.device, &plans)?;
        // Recorded before the first write, as the exporter's own programming is.
        self.journal_clients(&saved)?;
        let masks = session::clock_masks(&saved);
        let started =
            Sampler::open(self.device, plans, &masks, self.sampler.stamp()).and_then(|mut s| {
                s.start(now)?;
                Ok(s)
            });
        match started {
            Ok(s) => Ok((Some(s), saved)),
            Err(e) => Err(match session::restore(self.device, &saved) {
                Ok(()) => {
                    let _ = self.journal_clients(&[]);
                    e
                }
                Err(r) => crate::error::with_context(e, &r.to_string()),
            }),
        }
    }

    /// Records in the device's journal what the clients' measurements (and `pending`,
    /// about to be programmed) changed beside the exporter's own programming, so that
    /// if the exporter is killed, `bfperf restore` (or the next writer) puts back all
    /// of it: the clients' counters first, then the exporter's, as they were before.
    fn journal_clients(&mut self, pending: &[Saved]) -> Result<()> {
        if self.journal.is_none() {
            return Ok(());
        }
        let mut saved = pending.to_vec();
        saved.extend(self.recorded());
        self.journal = Some(journal::write(self.device, &saved)?);
        Ok(())
    }

    /// What the journal records, in its order: the clients' counters, the lent
    /// ones, then the exporter's own, each as it was before.
    pub(crate) fn recorded(&self) -> Vec<Saved> {
        let mut saved: Vec<Saved> = self
            .clients
            .iter()
            .flat_map(|c| c.saved.iter().cloned())
            .collect();
        saved.extend(self.lent.iter().map(|l| l.saved.clone()));
        saved.extend(self.saved.iter().cloned());
        saved
    }

    /// Every item of client `id` since its grant, per block, and the time they were
    /// read: at `now`, or at the client's previous read if that was less than
    /// [`READ_EVERY_NS`] ago.
    pub(crate) fn client_totals(&mut self, id: u64, now: u64) -> Result<(u64, Vec<Vec<Acc>>)> {
        let recent = self.clients.iter().find(|c| c.id == id).and_then(|c| {
            let (at, totals) = c.last_read.as_ref()?;
            (now.saturating_sub(*at) < READ_EVERY_NS).then(|| (*at, totals.clone()))
        });
        if let Some(answer) = recent {
            return Ok(answer);
        }
        // Taken back: what it had counted, marked anew at every read, so that
        // every span from then on carries the reason.
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == id) {
            if let Some(revoked) = c.revoked.as_mut() {
                revoked.iter_mut().flatten().for_each(|a| a.foreign += 1);
                return Ok((now, revoked.clone()));
            }
        }
        self.sampler.tick(now)?;
        self.log_detections();
        let owner = self.sampler.totals();
        let Some(c) = self.clients.iter_mut().find(|c| c.id == id) else {
            return Err(refusal("no such measurement".into()));
        };
        if let Some(s) = &mut c.sampler {
            s.tick(now)?;
        }
        let own = c.sampler.as_ref().map(Sampler::totals).unwrap_or_default();
        let totals: Vec<Vec<Acc>> = c
            .from
            .iter()
            .map(|row| {
                row.iter()
                    .map(|f| match *f {
                        Origin::Owner(p, i, at_grant) => owner[p][i].since(&at_grant),
                        Origin::Own(p, i) => own[p][i],
                    })
                    .collect()
            })
            .collect();
        c.last_read = Some((now, totals.clone()));
        Ok((now, totals))
    }

    /// Turns and checks for the clients' own counters (between sweeps).
    pub(crate) fn tick_clients(&mut self, now: u64) {
        for c in &mut self.clients {
            if let Some(s) = &mut c.sampler {
                let _ = s.tick(now);
                s.take_log();
            }
        }
    }

    /// Ends client `id`'s measurement: its counters are put back as they were; a
    /// counter lent to it and no other client, at the block's next window, made now.
    pub(crate) fn release(&mut self, id: u64) -> Result<()> {
        let Some(at) = self.clients.iter().position(|c| c.id == id) else {
            return Ok(());
        };
        let c = self.clients.remove(at);
        drop(c.sampler);
        let restored = session::restore(self.device, &c.saved);
        let given = self.give_back_lent(&c.from);
        restored?;
        given?;
        if c.saved.is_empty() {
            return Ok(());
        }
        self.journal_clients(&[])
    }

    /// Forgets the lent counters put back (their window came), and the journal with
    /// them.
    pub(crate) fn forget_returned(&mut self) -> Result<()> {
        let before = self.lent.len();
        let sampler = &self.sampler;
        self.lent
            .retain(|l| l.users > 0 || sampler.pending(l.plan, l.item));
        if self.lent.len() == before {
            return Ok(());
        }
        self.journal_clients(&[])
    }

    /// Ends every client's measurement (the exporter stops or reloads).
    pub(crate) fn release_all(&mut self) -> Result<()> {
        let ids: Vec<u64> = self.clients.iter().map(|c| c.id).collect();
        let mut result = Ok(());
        for id in ids {
            result = result.and(self.release(id));
        }
        result
    }
}

/// The counters of `b` nobody uses.
fn free_counters(b: &Block, taken: &HashMap<String, Vec<u32>>) -> Vec<u32> {
    let used = taken.get(&b.name);
    b.counters
        .iter()
        .copied()
        .filter(|c| used.is_none_or(|u| !u.contains(c)))
        .collect()
}

/// Why `b` cannot count `asked` more events (0: any), with how many of its
/// counters are free.
fn no_counter_free(b: &Block, taken: &HashMap<String, Vec<u32>>, asked: usize) -> String {
    let free = free_counters(b, taken).len();
    let used = b.counters.len() - free;
    let (head, how) = match (free, b.mechanism) {
        (0, Mechanism::AllAtOnce) => (
            format!("{} has no counter free", b.name),
            "its counters count together, and another measurement counts on the block whole, or the exporter's events take turns on it",
        ),
        (0, _) => (
            format!("{} has no counter free", b.name),
            "every counter counts the exporter's events or another measurement's",
        ),
        (n, _) => (
            format!("{} has {n} counter{} free, {asked} asked", b.name, if n == 1 { "" } else { "s" }),
            "the others count the exporter's events or another measurement's",
        ),
    };
    format!(
        "{head} ({how}; {used} of {} in use): ask for events the exporter already counts there, fewer at once, add yours to its config, or stop it",
        b.counters.len()
    )
}

/// Where each item is counted: the exporter's item or the client's, and for the
/// client, the counter (null where it takes turns).
fn granted(
    rows: Vec<Vec<Option<Origin>>>,
    names: Vec<String>,
    owner: &[BlockPlan],
    own: &[BlockPlan],
) -> (Vec<Vec<Origin>>, Vec<GrantedBlock>) {
    let mut own_plan = 0;
    let mut from = Vec::new();
    let mut blocks = Vec::new();
    for (row, block) in rows.into_iter().zip(names) {
        let has_own = row.iter().any(Option::is_none);
        let mut own_item = 0;
        let resolved: Vec<Origin> = row
            .into_iter()
            .map(|f| {
                f.unwrap_or_else(|| {
                    own_item += 1;
                    Origin::Own(own_plan, own_item - 1)
                })
            })
            .collect();
        own_plan += usize::from(has_own);
        let counters = resolved
            .iter()
            .map(|f| match *f {
                Origin::Owner(p, i, _) => owner[p].counter_of(i),
                Origin::Own(p, i) => own[p].counter_of(i),
            })
            .collect();
        from.push(resolved);
        blocks.push(GrantedBlock { block, counters });
    }
    (from, blocks)
}

fn refusal(reason: String) -> Error {
    Error::BadOption { problem: reason }
}

/// The exporter is the owner the sharing protocol's connections talk to.
impl crate::measure::owner::protocol::Owner for Collector<'_> {
    fn serves(&self) -> crate::measure::owner::protocol::Serves {
        crate::measure::owner::protocol::Serves::of(self.device)
    }

    fn grant(
        &mut self,
        specs: &[String],
        uid: Option<u32>,
        now: u64,
    ) -> Result<(u64, Vec<GrantedBlock>)> {
        Collector::grant(self, specs, uid, now)
    }

    fn totals(&mut self, id: u64, now: u64) -> Result<(u64, Vec<Vec<Acc>>)> {
        self.client_totals(id, now)
    }

    fn release(&mut self, id: u64) -> Result<()> {
        Collector::release(self, id)
    }

    fn turn(&mut self, now: u64) {
        self.tick_clients(now)
    }
}
