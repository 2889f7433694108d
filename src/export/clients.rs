//! The owner's side of sharing the device (`measure::share`): a client's events are
//! counted beside the exporter's own, never instead of them. An event the exporter
//! already counts on a block is read from its own counter; another one goes on a
//! counter the exporter leaves free (taking turns with the client's other events
//! there when they are more than the free counters), by a sampler of the client's,
//! which puts the counters back when the client ends. The exporter's series are never
//! touched: same counters, same coverage, same labels.

use std::collections::HashMap;

use crate::block::{Block, Mechanism};
use crate::error::{Error, Result};
use crate::measure::journal;
use crate::measure::plan::{place_on_free, BlockPlan};
use crate::measure::sampler::{Acc, Sampler};
use crate::measure::session::{self, Saved};
use crate::measure::share::{GrantedBlock, MAX_CLIENTS, MAX_ITEMS};
use crate::spec::BlockRequest;

use super::Exporter;

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
}

/// Reads of one client closer together than this are answered with the values of
/// the first (and their time): a flood of reads never makes the device be read more
/// often than this, nor stalls the exporter's loop.
const READ_EVERY_NS: u64 = 10_000_000;

impl<'d> Exporter<'d> {
    /// Counts `specs` for a new client of user `uid` beside the exporter's own
    /// events: returns the client's id and where each item is counted, or refuses
    /// (nothing programmed; see [`Exporter::admit`]).
    pub(crate) fn grant(
        &mut self,
        specs: &[String],
        uid: Option<u32>,
        now: u64,
    ) -> Result<(u64, Vec<GrantedBlock>)> {
        let resolved = self.admit(specs, uid)?;
        // Bring the exporter's accumulators to now: a shared item counts from here.
        self.sampler.tick(now)?;
        let owner_totals = self.sampler.totals();
        let mut from: Vec<Vec<Option<Origin>>> = Vec::new();
        let mut own: Vec<BlockRequest<'d>> = Vec::new();
        let mut names = Vec::new();
        for r in resolved.blocks {
            names.push(r.block.name.clone());
            let (row, rest) = self.split_shared(r, &owner_totals);
            from.push(row);
            if let Some(rest) = rest {
                own.push(rest);
            }
        }
        let taken = self.taken();
        let plans = place_on_free(
            own,
            |b| free_counters(b, &taken),
            |b| no_counter_free(b, &taken),
        )?;
        let (sampler, saved) = self.start_own(plans, now)?;
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
        });
        Ok((id, granted))
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

    /// The items of `r` the exporter counts itself (marked in the row), and a request
    /// of the others (None when there are none).
    fn split_shared(
        &self,
        r: BlockRequest<'d>,
        owner_totals: &[Vec<Acc>],
    ) -> (Vec<Option<Origin>>, Option<BlockRequest<'d>>) {
        let owner = self
            .sampler
            .plans
            .iter()
            .position(|p| p.block.name == r.block.name);
        let mut row = Vec::new();
        let mut rest: Vec<crate::spec::Item> = Vec::new();
        for item in &r.items {
            let shared = owner.and_then(|pi| {
                let ii = self.sampler.plans[pi]
                    .items
                    .iter()
                    .position(|i| i == item)?;
                Some(Origin::Owner(pi, ii, owner_totals[pi][ii]))
            });
            if shared.is_none() {
                rest.push(item.clone());
            }
            row.push(shared);
        }
        let rest = (!rest.is_empty()).then(|| BlockRequest::of_items(r.block, rest));
        (row, rest)
    }

    /// Counters in use, by block: the exporter's and every client's; a block whose
    /// counters count together (all at once) is taken whole by whoever uses it.
    fn taken(&self) -> HashMap<String, Vec<u32>> {
        let mut taken: HashMap<String, Vec<u32>> = HashMap::new();
        let clients = self.clients.iter().filter_map(|c| c.sampler.as_ref());
        for plans in std::iter::once(&self.sampler)
            .chain(clients)
            .map(|s| &s.plans)
        {
            for p in plans {
                let used = taken.entry(p.block.name.clone()).or_default();
                match p.block.mechanism {
                    Mechanism::AllAtOnce => used.extend(&p.block.counters),
                    _ => used.extend(p.groups.iter().flatten().map(|s| s.counter)),
                }
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
        saved.extend(self.clients.iter().flat_map(|c| c.saved.iter().cloned()));
        saved.extend(self.saved.iter().cloned());
        self.journal = Some(journal::write(self.device, &saved)?);
        Ok(())
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

    /// Ends client `id`'s measurement: its counters are put back as they were.
    pub(crate) fn release(&mut self, id: u64) -> Result<()> {
        let Some(at) = self.clients.iter().position(|c| c.id == id) else {
            return Ok(());
        };
        let c = self.clients.remove(at);
        drop(c.sampler);
        session::restore(self.device, &c.saved)?;
        if c.saved.is_empty() {
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

fn no_counter_free(b: &Block, taken: &HashMap<String, Vec<u32>>) -> String {
    let how = match b.mechanism {
        Mechanism::AllAtOnce => {
            "its counters count together and the exporter (or another measurement) uses them"
        }
        _ => "every counter counts the exporter's events or another measurement's",
    };
    let used = taken.get(&b.name).map_or(0, Vec::len);
    format!(
        "{} has no counter free ({how}; {used} in use): ask for events the exporter already counts there, add yours to its config, or stop it",
        b.name
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
