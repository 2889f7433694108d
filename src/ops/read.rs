//! Reading counters and registers.

use schemars::JsonSchema;
use serde::Serialize;
use std::time::{Instant, SystemTime};

use super::parse_value;
use crate::block::{Block, BlockKind, Mechanism};
use crate::catalog::parse_event_line;
use crate::device::Device;
use crate::error::{errno, io_error, Error, Result};
use crate::sysfs::{layout, Sysfs};

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

fn read_text(fs: &dyn Sysfs, rel: &str) -> Result<String> {
    fs.read(rel).map_err(|e| io_error("reading", rel, None, e))
}

/// Reads a file holding one number (`counter<N>`, a register, `enable`, `count_clock`).
pub fn read_number(fs: &dyn Sysfs, rel: &str) -> Result<u64> {
    let text = read_text(fs, rel)?;
    parse_value(&text).ok_or_else(|| Error::BadContent {
        file: rel.to_string(),
        content: text.trim_end().chars().take(80).collect(),
        expected: "a number such as 0x1f",
    })
}

/// What the out-of-tree driver prints for an event it has no name for.
const UNNAMED: &str = "(null)";

/// Reads `event<N>`: the number and, when the file says it, the name. None when nothing
/// nameable is programmed (the driver answers EINVAL, or "No event being monitored").
/// A bare number (a plain-file copy of the tree after a write) has no name.
pub fn read_event(
    fs: &dyn Sysfs,
    block: &str,
    index: u32,
) -> Result<Option<(u32, Option<String>)>> {
    let rel = layout::event(block, index);
    match fs.read(&rel) {
        Ok(text) => {
            let t = text.trim();
            Ok(match parse_event_line(t) {
                // The out-of-tree driver prints a number it cannot name as `(null)`.
                Some((n, name)) if name == UNNAMED => Some((n, None)),
                Some((n, name)) => Some((n, Some(name))),
                None => parse_value(t)
                    .and_then(|n| u32::try_from(n).ok())
                    .map(|n| (n, None)),
            })
        }
        Err(e) if e.raw_os_error() == Some(errno::EINVAL) => Ok(None),
        Err(e) => Err(io_error("reading", &rel, None, e)),
    }
}

/// The number an `event<N>` file's text names; None when it names nothing.
pub fn event_number(text: &str) -> Option<u32> {
    let t = text.trim();
    match crate::catalog::split_event_line(t) {
        Some((n, _)) => Some(n),
        None => parse_value(t).and_then(|n| u32::try_from(n).ok()),
    }
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC), comparable between processes on one boot.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads the chosen blocks: first the configuration (events, enable), then all values
/// in one tight pass, so that the values are as close together in time as possible.
pub fn read_blocks(device: &Device, blocks: &[&Block]) -> Result<Readings> {
    let fs = device.fs();
    let mut out = Vec::with_capacity(blocks.len());
    for b in blocks {
        let enabled = if b.has_enable {
            Some(read_number(fs, &layout::enable(&b.name))? != 0)
        } else {
            None
        };
        let count_clock = if b.has_count_clock {
            Some(read_number(fs, &layout::count_clock(&b.name))? as u32)
        } else {
            None
        };
        let mut counters = Vec::new();
        let mut catalog = None;
        if b.mechanism != Mechanism::Registers {
            for &i in &b.counters {
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
                            .map(|e| e.name.clone())
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
        }
        let registers = b
            .registers
            .iter()
            .map(|r| RegisterReading {
                register: r.clone(),
                value: 0,
            })
            .collect();
        out.push(BlockReading {
            block: b.name.clone(),
            kind: b.kind,
            mechanism: b.mechanism,
            enabled,
            count_clock,
            width_bits: b.width_bits,
            counters,
            registers,
            unreadable: Vec::new(),
        });
    }
    let wall = SystemTime::now();
    let start_mono = monotonic_ns();
    let start = Instant::now();
    // One value that cannot be read is left out and said, not a failure of all.
    let read =
        |file: String, value: &mut u64, bad: &mut Vec<Unreadable>| match read_number(fs, &file) {
            Ok(v) => *value = v,
            Err(e) => bad.push(Unreadable {
                problem: e.to_string(),
                file,
            }),
        };
    for r in &mut out {
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
        let block = r.block.clone();
        let unread = |file: &str| bad.iter().any(|u| u.file == file);
        r.counters
            .retain(|c| !unread(&layout::counter(&block, c.counter)));
        r.registers
            .retain(|g| !unread(&layout::register(&block, &g.register)));
        r.unreadable = bad;
    }
    let window_ns = start.elapsed().as_nanos() as u64;
    Ok(Readings {
        blocks: out,
        wall,
        monotonic_ns: start_mono + window_ns / 2,
        window_ns,
    })
}
