//! Reading counters and registers.

use schemars::JsonSchema;
use serde::Serialize;
use std::time::{Instant, SystemTime};

use crate::block::{Block, BlockKind, Mechanism};
use crate::device::values::{monotonic_ns, read_event, read_number};
use crate::device::Device;
use crate::error::Result;
use crate::sysfs::layout;

/// A counter as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CounterReading {
    /// The counter's number.
    pub counter: u32,
    /// The programmed event; None when the driver cannot name it (stopped with 0xff).
    pub event: Option<u32>,
    /// The event's name, when known.
    pub event_name: Option<String>,
    /// Counts clock cycles instead of its event (BF3 `count_clock`).
    pub counts_clock: bool,
    /// Its value.
    pub value: u64,
}

/// A statistics register as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RegisterReading {
    /// The register's name.
    pub register: String,
    /// Its value.
    pub value: u64,
}

/// One block as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BlockReading {
    /// The block's name.
    pub block: String,
    /// Its kind.
    pub kind: BlockKind,
    /// How it counts.
    pub mechanism: Mechanism,
    /// For blocks started all at once: the `enable` state.
    pub enabled: Option<bool>,
    /// BF3 crspace: the `count_clock` bitmask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_clock: Option<u32>,
    /// Width of its counters or registers in bits.
    pub width_bits: u32,
    /// Its counters.
    pub counters: Vec<CounterReading>,
    /// Its statistics registers.
    pub registers: Vec<RegisterReading>,
    /// Counters and registers whose value could not be read: left out of the lists
    /// above, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<Unreadable>,
}

/// A value that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct Unreadable {
    /// The file, relative to the device directory (`tile2/counter1`).
    pub file: String,
    /// What went wrong.
    pub problem: String,
}

/// A set of readings with the time they were taken.
#[derive(Debug, Clone)]
pub struct Readings {
    /// Each block read.
    pub blocks: Vec<BlockReading>,
    /// Wall-clock time of the value reads.
    pub wall: SystemTime,
    /// Monotonic time of the value reads (ns since an arbitrary point), the middle of
    /// the window in which the values were read.
    pub monotonic_ns: u64,
    /// How long reading the values took.
    pub window_ns: u64,
}

/// Reads the chosen blocks: first the configuration (events, enable), then all values
/// in one tight pass, so that the values are as close together in time as possible.
pub fn read_blocks(device: &Device, blocks: &[&Block]) -> Result<Readings> {
    let mut out = Vec::with_capacity(blocks.len());
    for b in blocks {
        out.push(configuration(device, b)?);
    }
    let wall = SystemTime::now();
    let start_mono = monotonic_ns();
    let start = Instant::now();
    for r in &mut out {
        read_values(device.fs(), r);
    }
    let window_ns = start.elapsed().as_nanos() as u64;
    Ok(Readings {
        blocks: out,
        wall,
        monotonic_ns: start_mono + window_ns / 2,
        window_ns,
    })
}

/// A block's configuration (enable, count_clock, each counter's event), its values
/// not yet read.
fn configuration(device: &Device, b: &Block) -> Result<BlockReading> {
    let fs = device.fs();
    let enabled = match b.has_enable {
        true => Some(read_number(fs, &layout::enable(&b.name))? != 0),
        false => None,
    };
    let count_clock = match b.has_count_clock {
        true => Some(read_number(fs, &layout::count_clock(&b.name))? as u32),
        false => None,
    };
    let mut counters = Vec::new();
    let mut catalog = None;
    for &i in b
        .counters
        .iter()
        .filter(|_| b.mechanism != Mechanism::Registers)
    {
        let ev = read_event(fs, &b.name, i)?;
        let name = match &ev {
            Some((_, Some(name))) => Some(name.clone()),
            Some((n, None)) => {
                if catalog.is_none() {
                    catalog = Some(device.catalog(b)?);
                }
                catalog
                    .as_ref()
                    .and_then(|c| c.by_number(*n))
                    .map(|e| e.name.to_string())
            }
            None => None,
        };
        counters.push(CounterReading {
            counter: i,
            event: ev.as_ref().map(|e| e.0),
            event_name: name,
            counts_clock: count_clock.is_some_and(|m| i < 32 && m & (1 << i) != 0),
            value: 0,
        });
    }
    let registers = b
        .registers
        .iter()
        .map(|r| RegisterReading {
            register: r.clone(),
            value: 0,
        })
        .collect();
    Ok(BlockReading {
        block: b.name.clone(),
        kind: b.kind,
        mechanism: b.mechanism,
        enabled,
        count_clock,
        width_bits: b.width_bits,
        counters,
        registers,
        unreadable: Vec::new(),
    })
}

/// Reads a block's values; one that cannot be read is left out and said, not a
/// failure of all.
fn read_values(fs: &dyn crate::sysfs::Sysfs, r: &mut BlockReading) {
    let read =
        |file: String, value: &mut u64, bad: &mut Vec<Unreadable>| match read_number(fs, &file) {
            Ok(v) => *value = v,
            Err(e) => bad.push(Unreadable {
                problem: e.to_string(),
                file,
            }),
        };
    let mut bad = Vec::new();
    for c in &mut r.counters {
        read(layout::counter(&r.block, c.counter), &mut c.value, &mut bad);
    }
    for g in &mut r.registers {
        read(
            layout::register(&r.block, &g.register),
            &mut g.value,
            &mut bad,
        );
    }
    if bad.is_empty() {
        return;
    }
    let block = r.block.clone();
    let unread = |file: &str| bad.iter().any(|u| u.file == file);
    r.counters
        .retain(|c| !unread(&layout::counter(&block, c.counter)));
    r.registers
        .retain(|g| !unread(&layout::register(&block, &g.register)));
    r.unreadable = bad;
}
