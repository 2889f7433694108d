//! What a measurement changes on the device, and putting it back: the configuration
//! recorded before the first write, programming a group of events, the check that no
//! one else re-programmed the counters, and the restore.

use std::collections::HashMap;

use crate::block::{Block, Mechanism};
use crate::device::plan::Plan;
use crate::device::values::{read_event, read_number};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kinds::STOP_EVENT;
use crate::measure::plan::BlockPlan;
use crate::spec::Item;
use crate::sysfs::layout;

/// A block's configuration before the measurement.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    /// The block.
    pub block: String,
    /// Each counter the measurement uses, and the event it had (None: unnamed).
    pub events: Vec<(u32, Option<u32>)>,
    /// Its `enable` state (all-at-once blocks).
    pub enable: Option<bool>,
    /// Its `count_clock` mask (BF3 blocks that have it).
    pub count_clock: Option<u32>,
    /// The number that un-programs a counter of this block on this kernel.
    stop_number: u32,
}

impl Saved {
    /// Whether `other` records the same counters of its block.
    pub fn same_counters(&self, other: &Saved) -> bool {
        self.events.len() == other.events.len()
            && self
                .events
                .iter()
                .zip(&other.events)
                .all(|(a, b)| a.0 == b.0)
    }
}

/// The `count_clock` mask each block had, for [`Sampler::open`]: the bits of
/// counters a measurement does not use are kept as they were.
///
/// [`Sampler::open`]: crate::measure::sampler::Sampler::open
pub(crate) fn clock_masks(saved: &[Saved]) -> HashMap<String, u32> {
    saved
        .iter()
        .filter_map(|s| Some((s.block.clone(), s.count_clock?)))
        .collect()
}

/// The files a measurement saves, programs, reads back and restores (each counter's
/// `event<N>`, and a block's `enable` and `count_clock`), kept open from before it
/// saves them until it has put them back ([`Sysfs::hold`]): one open each, not one
/// for each of those steps.
///
/// [`Sysfs::hold`]: crate::sysfs::Sysfs::hold
pub(crate) struct Held<'d> {
    device: &'d Device,
    files: Vec<String>,
}

impl<'d> Held<'d> {
    /// Holds the files `plans` change.
    pub(crate) fn open(device: &'d Device, plans: &[BlockPlan]) -> Self {
        let mut files = Vec::new();
        for p in plans
            .iter()
            .filter(|p| p.block.mechanism != Mechanism::Registers)
        {
            let b = p.block;
            files.extend(
                counters_of(p)
                    .into_iter()
                    .map(|c| layout::event(&b.name, c)),
            );
            if b.has_enable {
                files.push(layout::enable(&b.name));
            }
            if b.has_count_clock {
                files.push(layout::count_clock(&b.name));
            }
        }
        device.fs().hold(&files);
        Held { device, files }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.device.fs().release(&self.files);
    }
}

/// The counters a block's plan uses, each once, in order.
fn counters_of(p: &BlockPlan) -> Vec<u32> {
    let mut counters: Vec<u32> = p.groups.iter().flatten().map(|s| s.counter).collect();
    counters.sort_unstable();
    counters.dedup();
    counters
}

/// Records everything the measurement will change.
pub(crate) fn save(device: &Device, plans: &[BlockPlan]) -> Result<Vec<Saved>> {
    let fs = device.fs();
    let mut out = Vec::new();
    for p in plans
        .iter()
        .filter(|p| p.block.mechanism != Mechanism::Registers)
    {
        let b = p.block;
        let mut events = Vec::new();
        for c in counters_of(p) {
            events.push((c, read_event(fs, &b.name, c)?.map(|(n, _)| n)));
        }
        out.push(Saved {
            stop_number: stop_number(device, b)?,
            block: b.name.clone(),
            events,
            enable: if b.has_enable {
                Some(read_number(fs, &layout::enable(&b.name))? != 0)
            } else {
                None
            },
            count_clock: if b.has_count_clock {
                Some(read_number(fs, &layout::count_clock(&b.name))? as u32)
            } else {
                None
            },
        });
    }
    Ok(out)
}

/// The number that un-programs a counter of `b` on this kernel.
fn stop_number(device: &Device, b: &Block) -> Result<u32> {
    Ok(device.catalog(b)?.disable_number().unwrap_or(STOP_EVENT))
}

/// Records what `counter` of `b` holds before it is lent to another measurement:
/// its event only (the block's `enable` and `count_clock` are its owner's).
pub(crate) fn save_lent(device: &Device, b: &Block, counter: u32) -> Result<Saved> {
    Ok(Saved {
        block: b.name.clone(),
        events: vec![(
            counter,
            read_event(device.fs(), &b.name, counter)?.map(|(n, _)| n),
        )],
        enable: None,
        count_clock: None,
        stop_number: stop_number(device, b)?,
    })
}

/// Programs group `g` of a counter block (not its `enable`), through a [`Plan`]
/// like every write to the device.
pub(crate) fn program_group(
    device: &Device,
    plan: &BlockPlan,
    g: usize,
    saved_mask: u32,
) -> Result<()> {
    group_plan(plan, g, saved_mask).apply(device.fs()).map(drop)
}

/// The writes that program group `g`: its events, and the count_clock mask with the
/// group's bits as it wants them and the bits of counters not ours as they were.
fn group_plan(plan: &BlockPlan, g: usize, saved_mask: u32) -> Plan {
    let b = plan.block;
    let mut writes = Plan::default();
    for s in &plan.groups[g] {
        if let Item::Event { number, .. } = plan.items[s.item] {
            writes.push(
                layout::event(&b.name, s.counter),
                format!("0x{number:x}"),
                format!("the kernel refused event 0x{number:x} on {}", b.name),
            );
        }
    }
    if b.has_count_clock {
        let mask = plan.count_clock_while(g, saved_mask);
        writes.push(
            layout::count_clock(&b.name),
            format!("0x{mask:x}"),
            "the kernel refused the count_clock mask",
        );
    }
    writes
}

/// Puts every block back as it was: events, count_clock, then enable (which, on an
/// all-at-once block, restarts its counters from 0). Tries every write, through one
/// [`Plan`]; fails with all the refusals at once.
pub(crate) fn restore(device: &Device, saved: &[Saved]) -> Result<()> {
    let refused: Vec<String> = restore_plan(saved)
        .apply_all(device.fs())
        .iter()
        .map(ToString::to_string)
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Error::RestoreFailed {
            problems: refused.join("; "),
        })
    }
}

/// The writes that put `saved` back, in order (see [`restore`]).
pub(crate) fn restore_plan(saved: &[Saved]) -> Plan {
    let mut writes = Plan::default();
    for s in saved {
        for (c, ev) in &s.events {
            let path = layout::event(&s.block, *c);
            let why = "the kernel refused the event the counter had";
            match ev {
                Some(n) => writes.push(path, format!("0x{n:x}"), why),
                // A counter of a stopped block whose event the kernel named as
                // nothing (BlueField-3's msn at boot holds 0, in no table) on a
                // kernel that takes neither that number nor 0xff back: nothing can
                // be written that it held, and nothing it holds counts while the
                // block is stopped, as its enable is put back below.
                None if s.enable == Some(false) && s.stop_number == STOP_EVENT => {
                    writes.push_if_taken(path, format!("0x{STOP_EVENT:x}"))
                }
                // A number with no name cannot be read back; most likely it is the
                // vendor's 0xff stop, which the kernel takes again where it took it
                // before (and then reads as before). Where it refuses 0xff, the
                // block's own stop.
                None if s.stop_number != STOP_EVENT => writes.push_with_fallback(
                    path,
                    format!("0x{STOP_EVENT:x}"),
                    format!("0x{:x}", s.stop_number),
                    why,
                ),
                None => writes.push(path, format!("0x{STOP_EVENT:x}"), why),
            }
        }
        if let Some(mask) = s.count_clock {
            writes.push(
                layout::count_clock(&s.block),
                format!("0x{mask:x}"),
                "the kernel refused the count_clock mask the block had",
            );
        }
        if let Some(on) = s.enable {
            let on = if on { "1" } else { "0" };
            writes.push(layout::enable(&s.block), on.to_string(), "");
        }
    }
    writes
}
