//! Sampling during a measurement: every counter and register file is opened once and
//! read with one `pread` per tick. Per-counter blocks and registers are differenced
//! with wrap arithmetic at their width; all-at-once blocks are read in windows
//! (`enable` 0, read, `enable` 1), which also keeps 32-bit crspace counters and L3's
//! split registers from wrapping or tearing between reads. Groups of a multiplexed
//! block take turns at each tick.

use std::collections::HashMap;

use super::plan::BlockPlan;
use super::session::program_group;
use crate::block::Mechanism;
use crate::device::Device;
use crate::error::{io_error, Error, Result};
use crate::kinds::Role;
use crate::ops::parse_value;
use crate::sysfs::{layout, ControlFile, ValueFile};

/// What one item has counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acc {
    /// Events counted while its group was active.
    pub total: u64,
    /// How long its group was active, ns.
    pub active_ns: u64,
    /// A value went backwards on a 64-bit counter: someone reset it.
    pub reset: bool,
    /// A level: `total` is its latest value, not a count.
    pub level: bool,
}

struct Reader<'d> {
    rel: String,
    file: Box<dyn ValueFile + 'd>,
}

impl Reader<'_> {
    fn value(&mut self) -> Result<u64> {
        let text = self
            .file
            .read_now()
            .map_err(|e| io_error("reading", &self.rel, None, e))?;
        parse_value(text).ok_or_else(|| Error::BadContent {
            file: self.rel.clone(),
            content: text.trim_end().chars().take(80).collect(),
            expected: "a number such as 0x1f",
        })
    }
}

/// An `enable` file kept open, switched twice a tick.
struct Switch<'d> {
    rel: String,
    file: Box<dyn ControlFile + 'd>,
}

impl Switch<'_> {
    fn set(&mut self, on: bool) -> Result<()> {
        let data: &[u8] = if on { b"1" } else { b"0" };
        self.file
            .write_now(data)
            .map_err(|e| io_error("writing", &self.rel, Some(data), e))
    }
}

struct BlockState<'d> {
    group: usize,
    accs: Vec<Acc>,
    /// Last raw value, by counter number (counter blocks) or register item.
    last: Vec<u64>,
    /// Readers by counter number (counter blocks).
    counters: Vec<Option<Reader<'d>>>,
    registers: Vec<Reader<'d>>,
    /// Which registers are levels (latest value, not a count), decided once.
    levels: Vec<bool>,
    enable: Option<Switch<'d>>,
    last_ns: u64,
    width_mask: u64,
    saved_mask: u32,
}

impl<'d> BlockState<'d> {
    fn counter(&mut self, c: u32) -> Result<u64> {
        match self.counters.get_mut(c as usize).and_then(Option::as_mut) {
            Some(r) => r.value(),
            None => Ok(0),
        }
    }

    fn enable(&mut self, on: bool) -> Result<()> {
        match &mut self.enable {
            Some(s) => s.set(on),
            None => Ok(()),
        }
    }
}

/// The measurement's state: readers, accumulators, current groups.
pub struct Sampler<'d> {
    device: &'d Device,
    pub plans: Vec<BlockPlan<'d>>,
    states: Vec<BlockState<'d>>,
}

/// Adds the count between two readings: wrapped at the counter's width, or, on a
/// 64-bit counter that went backwards, counted from 0 and flagged (someone reset it).
fn accumulate(acc: &mut Acc, last: u64, v: u64, width_mask: u64, dt: u64) {
    if v < last && width_mask == u64::MAX {
        acc.total += v;
        acc.reset = true;
    } else {
        acc.total += v.wrapping_sub(last) & width_mask;
    }
    acc.active_ns += dt;
}

fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

impl<'d> Sampler<'d> {
    /// Opens every file to be sampled (nothing is written).
    pub fn open(
        device: &'d Device,
        plans: Vec<BlockPlan<'d>>,
        saved_masks: &HashMap<String, u32>,
    ) -> Result<Sampler<'d>> {
        let fs = device.fs();
        let open = |rel: String| -> Result<Reader<'d>> {
            let file = fs
                .open_value(&rel)
                .map_err(|e| io_error("opening", &rel, None, e))?;
            Ok(Reader { rel, file })
        };
        let mut states = Vec::new();
        for p in &plans {
            let b = p.block;
            let slots = b.counters.iter().max().map_or(0, |m| *m as usize + 1);
            let mut counters: Vec<Option<Reader<'d>>> = (0..slots).map(|_| None).collect();
            for s in p.groups.iter().flatten() {
                if counters[s.counter as usize].is_none() {
                    counters[s.counter as usize] = Some(open(layout::counter(&b.name, s.counter))?);
                }
            }
            let registers = if b.mechanism == Mechanism::Registers {
                p.items
                    .iter()
                    .map(|i| open(layout::register(&b.name, i.label())))
                    .collect::<Result<Vec<_>>>()?
            } else {
                Vec::new()
            };
            let levels = p
                .items
                .iter()
                .map(|i| b.def().role(i.label()) == Role::Level)
                .collect();
            let enable = if b.mechanism == Mechanism::AllAtOnce {
                let rel = layout::enable(&b.name);
                let file = fs
                    .open_control(&rel)
                    .map_err(|e| io_error("opening", &rel, None, e))?;
                Some(Switch { rel, file })
            } else {
                None
            };
            states.push(BlockState {
                group: 0,
                accs: vec![Acc::default(); p.items.len()],
                last: vec![0; slots.max(registers.len())],
                counters,
                registers,
                levels,
                enable,
                last_ns: 0,
                width_mask: mask(b.width_bits),
                saved_mask: saved_masks.get(&b.name).copied().unwrap_or(0),
            });
        }
        Ok(Sampler {
            device,
            plans,
            states,
        })
    }

    /// Programs the first group of every counter block and starts the all-at-once
    /// ones, then takes the baseline readings at `now`.
    pub fn start(&mut self, now: u64) -> Result<()> {
        for (p, st) in self.plans.iter().zip(&mut self.states) {
            if p.block.mechanism == Mechanism::Registers {
                continue;
            }
            program_group(self.device, p, 0, st.saved_mask)?;
            st.enable(true)?;
        }
        self.rebase(now)
    }

    /// New baselines at `now`, accumulators kept (a new window or a new run).
    pub fn rebase(&mut self, now: u64) -> Result<()> {
        for (p, st) in self.plans.iter().zip(&mut self.states) {
            st.last_ns = now;
            match p.block.mechanism {
                Mechanism::Registers => {
                    for i in 0..st.registers.len() {
                        st.last[i] = st.registers[i].value()?;
                    }
                }
                Mechanism::PerCounter => {
                    for s in &p.groups[st.group] {
                        st.last[s.counter as usize] = st.counter(s.counter)?;
                    }
                }
                Mechanism::AllAtOnce => {
                    st.enable(false)?;
                    st.enable(true)?;
                }
            }
        }
        Ok(())
    }

    /// Zeroes the accumulators (the start of another run).
    pub fn reset_counts(&mut self) {
        for st in &mut self.states {
            st.accs.iter_mut().for_each(|a| *a = Acc::default());
        }
    }

    /// One tick at `now`: reads every active value once, accumulates, and moves
    /// multiplexed blocks to their next group.
    pub fn tick(&mut self, now: u64) -> Result<()> {
        for (p, st) in self.plans.iter().zip(&mut self.states) {
            let dt = now.saturating_sub(st.last_ns);
            st.last_ns = now;
            match p.block.mechanism {
                Mechanism::Registers => {
                    for i in 0..st.registers.len() {
                        let v = st.registers[i].value()?;
                        let last = std::mem::replace(&mut st.last[i], v);
                        if st.levels[i] {
                            // A level (a clock monitor's count): its latest value.
                            st.accs[i].total = v;
                            st.accs[i].level = true;
                            st.accs[i].active_ns += dt;
                        } else {
                            accumulate(&mut st.accs[i], last, v, st.width_mask, dt);
                        }
                    }
                }
                Mechanism::PerCounter => {
                    for s in &p.groups[st.group] {
                        let v = st.counter(s.counter)?;
                        let last = std::mem::replace(&mut st.last[s.counter as usize], v);
                        accumulate(&mut st.accs[s.item], last, v, st.width_mask, dt);
                    }
                    if p.multiplexed() {
                        st.group = (st.group + 1) % p.groups.len();
                        program_group(self.device, p, st.group, st.saved_mask)?;
                        for s in &p.groups[st.group] {
                            st.last[s.counter as usize] = 0;
                        }
                    }
                }
                Mechanism::AllAtOnce => {
                    st.enable(false)?;
                    for s in &p.groups[st.group] {
                        // The window started at 0: the value is the count.
                        let v = st.counter(s.counter)?;
                        accumulate(&mut st.accs[s.item], 0, v, st.width_mask, dt);
                    }
                    if p.multiplexed() {
                        st.group = (st.group + 1) % p.groups.len();
                        program_group(self.device, p, st.group, st.saved_mask)?;
                    }
                    st.enable(true)?;
                }
            }
        }
        Ok(())
    }

    /// Programs block `index`'s current group again (someone else wrote its
    /// counters) and starts a new window: counts since the last tick are lost, the
    /// totals never go backwards.
    pub fn reassert(&mut self, index: usize, now: u64) -> Result<()> {
        let (p, st) = (&self.plans[index], &mut self.states[index]);
        program_group(self.device, p, st.group, st.saved_mask)?;
        st.last_ns = now;
        match p.block.mechanism {
            Mechanism::AllAtOnce => {
                st.enable(false)?;
                st.enable(true)?;
            }
            _ => {
                for s in &p.groups[st.group] {
                    st.last[s.counter as usize] = 0;
                }
            }
        }
        Ok(())
    }

    /// What every item has counted so far, by block.
    pub fn totals(&self) -> Vec<Vec<Acc>> {
        self.states.iter().map(|s| s.accs.clone()).collect()
    }

    /// The group each block is on now.
    pub fn groups(&self) -> Vec<usize> {
        self.states.iter().map(|s| s.group).collect()
    }

    pub fn device(&self) -> &'d Device {
        self.device
    }
}
