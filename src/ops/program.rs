//! Programming counters: `bfperf program tile2 3 HNF_REQUESTS`.

use serde::Serialize;

use super::plan::Plan;
use crate::block::{Block, Mechanism};
use crate::catalog::{did_you_mean, Catalog};
use crate::device::Device;
use crate::error::{io_error, Error, Result};
use crate::sysfs::layout;

/// What to program: counter index (as typed) and event (name or number as typed; None
/// with `count_clock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub counter: String,
    pub event: Option<String>,
}

/// Parses the command line's assignments: `3 HNF_REQUESTS`, or `0=HITS_BANK0 1=...`,
/// or (with `--count-clock`) bare counter numbers.
pub fn parse_assignments(specs: &[String], count_clock: bool) -> Result<Vec<Assignment>> {
    if specs.is_empty() {
        return Err(Error::Invalid(
            "nothing to program: give COUNTER EVENT (e.g. `3 HNF_REQUESTS`) or COUNTER=EVENT pairs"
                .into(),
        ));
    }
    if specs.iter().any(|s| s.contains('=')) {
        return specs
            .iter()
            .map(|s| match s.split_once('=') {
                Some((c, e)) if !e.is_empty() => Ok(Assignment {
                    counter: c.to_string(),
                    event: Some(e.to_string()),
                }),
                _ if count_clock && !s.contains('=') => Ok(Assignment {
                    counter: s.clone(),
                    event: None,
                }),
                _ => Err(Error::Invalid(format!(
                    "'{s}' is not COUNTER=EVENT (e.g. 0=HITS_BANK0)"
                ))),
            })
            .collect();
    }
    if count_clock {
        return Ok(specs
            .iter()
            .map(|c| Assignment {
                counter: c.clone(),
                event: None,
            })
            .collect());
    }
    match specs {
        [c, e] => Ok(vec![Assignment {
            counter: c.clone(),
            event: Some(e.clone()),
        }]),
        [c] => Err(Error::Invalid(format!(
            "no event given for counter {c}: `bfperf program BLOCK {c} EVENT` (see `bfperf events BLOCK`)"
        ))),
        _ => Err(Error::Invalid(
            "several counters at once take COUNTER=EVENT pairs (e.g. 0=HITS_BANK0 1=MISSES_BANK0)"
                .into(),
        )),
    }
}

/// A counter index typed by a user, checked against the block's files.
pub fn parse_counter(block: &Block, text: &str) -> Result<u32> {
    let range = match (block.counters.first(), block.counters.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "none".to_string(),
    };
    let index: u32 = text.parse().map_err(|_| {
        Error::Invalid(format!(
            "'{text}' is not a counter number of {} (it has counters {range})",
            block.name
        ))
    })?;
    if !block.has_counter(index) {
        return Err(Error::Invalid(format!(
            "{} has no counter {index} (it has counters {range})",
            block.name
        )));
    }
    Ok(index)
}

/// The widest event number a block's event field holds.
fn max_event(block: &Block) -> u32 {
    if block.is_l3() {
        0x3f
    } else {
        0xff
    }
}

/// Resolves an event typed by a user (name, `0x45`, `69`) in a block's catalog.
pub fn resolve_event(
    block: &Block,
    catalog: &Catalog,
    input: &str,
    force: bool,
) -> Result<(u32, Option<String>)> {
    let t = input.trim();
    if t.is_empty() {
        return Err(Error::Invalid(format!(
            "empty event name for {}",
            block.name
        )));
    }
    if t.starts_with('-') || t.starts_with('+') {
        return Err(Error::Invalid(format!(
            "'{t}' is not an event: give a name or a number from 0 to 0x{:x}",
            max_event(block)
        )));
    }
    if t.as_bytes()[0].is_ascii_digit() {
        let number = if t.starts_with("0x") || t.starts_with("0X") {
            u64::from_str_radix(&t[2..], 16).ok()
        } else {
            t.parse::<u64>().ok()
        };
        let Some(number) = number else {
            return Err(Error::Invalid(format!(
                "'{t}' is not an event number (use hex like 0x45 or decimal like 69)"
            )));
        };
        if number > max_event(block) as u64 {
            return Err(Error::Invalid(format!(
                "event number {t} is out of range for {}: its event field holds 0 to 0x{:x}",
                block.name,
                max_event(block)
            )));
        }
        let number = number as u32;
        return match catalog.by_number(number) {
            Some(e) => Ok((number, Some(e.name.clone()))),
            None if force => Ok((number, None)),
            None => Err(Error::Invalid(format!(
                "event 0x{number:x} is not in the {} event table of {} (see `bfperf events {}`); pass --force to write it anyway",
                block.kind.as_str(),
                block.name,
                block.name
            ))),
        };
    }
    match catalog.resolve(t) {
        Ok(e) => Ok((e.number, Some(e.name.clone()))),
        Err(sugg) => Err(Error::UnknownEvent {
            name: t.to_string(),
            block: block.name.clone(),
            hint: if sugg.is_empty() {
                format!("; list them with `bfperf events {}`", block.name)
            } else {
                did_you_mean(&sugg)
            },
        }),
    }
}

/// A validated request.
#[derive(Debug, Clone, Default)]
pub struct ProgramOptions {
    pub force: bool,
    pub start: bool,
    pub count_clock: bool,
}

/// One counter after programming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Programmed {
    pub counter: u32,
    pub event: Option<u32>,
    pub event_name: Option<String>,
    pub counts_clock: bool,
    /// What `event<N>` reads back after the write (None on a dry run).
    pub readback: Option<String>,
}

/// What `program` did or would do.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramOutcome {
    pub block: String,
    pub counters: Vec<Programmed>,
    pub started: bool,
    pub notes: Vec<String>,
    pub plan: Plan,
}

/// Validates everything and builds the writes.
pub fn plan_program(
    device: &Device,
    block_name: &str,
    assignments: &[Assignment],
    opts: &ProgramOptions,
) -> Result<ProgramOutcome> {
    let block = device.block(block_name)?;
    if !block.is_counter_block() {
        return Err(Error::Invalid(format!(
            "{} is a registers block ({}): its statistics run free and cannot be programmed; read them with `bfperf read {}`",
            block.name,
            block.kind.as_str(),
            block.name
        )));
    }
    if opts.count_clock && !block.has_count_clock {
        return Err(Error::Invalid(format!(
            "{} has no count_clock file: counting clock cycles needs a BlueField-3 crspace block (llt, llt_miss, mss) on kernel 6.14 or later",
            block.name
        )));
    }
    if opts.start && block.mechanism != Mechanism::AllAtOnce {
        return Err(Error::Invalid(format!(
            "--start is for blocks started all at once (l3cache, BF3 crspace); {} counters start when programmed",
            block.name
        )));
    }
    let catalog = device.catalog(block)?;
    let mut counters = Vec::new();
    let mut plan = Plan::default();
    let mut seen = Vec::new();
    for a in assignments {
        let index = parse_counter(block, &a.counter)?;
        if seen.contains(&index) {
            return Err(Error::Invalid(format!(
                "counter {index} of {} is given twice",
                block.name
            )));
        }
        seen.push(index);
        let (event, name) = match &a.event {
            Some(e) => {
                let (n, name) = resolve_event(block, &catalog, e, opts.force)?;
                (Some(n), name)
            }
            None => (None, None),
        };
        counters.push(Programmed {
            counter: index,
            event,
            event_name: name,
            counts_clock: opts.count_clock,
            readback: None,
        });
    }
    for c in &counters {
        if let Some(n) = c.event {
            let what = c.event_name.as_deref().unwrap_or("not in the table");
            let meaning = if n == crate::ops::control::STOP_EVENT {
                format!(
                    "the kernel rejected event 0xff; this kernel validates event numbers: use `bfperf stop {} {}`",
                    block.name, c.counter
                )
            } else {
                format!(
                    "the kernel rejected event 0x{n:x} ({what}) on {}: kernels that validate event numbers refuse numbers outside their table",
                    block.name
                )
            };
            plan.push(
                layout::event(&block.name, c.counter),
                format!("0x{n:x}"),
                meaning,
            );
        }
    }
    let mut notes = Vec::new();
    if block.has_count_clock {
        let rel = layout::count_clock(&block.name);
        let current = super::read::read_number(device.fs(), &rel)? as u32;
        let mut mask = current;
        for c in &counters {
            if opts.count_clock {
                mask |= 1 << c.counter;
            } else {
                mask &= !(1 << c.counter);
            }
        }
        if mask != current {
            if !opts.count_clock {
                notes.push(format!(
                    "counter(s) of {} were counting clock cycles; they count their events now",
                    block.name
                ));
            }
            plan.push(
                rel,
                format!("0x{mask:x}"),
                "the kernel refused the count_clock mask",
            );
        }
    }
    let started = opts.start;
    if block.mechanism == Mechanism::AllAtOnce {
        if started {
            plan.push(
                layout::enable(&block.name),
                "1".to_string(),
                "the kernel refused to start the block",
            );
            notes.push(format!(
                "started {}: all its counters were reset to 0 and count together",
                block.name
            ));
        } else if block.is_l3() {
            notes.push(format!(
                "programming stopped all counters of {b} (L3 cache counters run together); start them with `bfperf start {b}` (resets them to 0), or pass --start",
                b = block.name
            ));
        } else {
            notes.push(format!(
                "{b} counts only while enabled; start it with `bfperf start {b}` (clears all its counters), or pass --start",
                b = block.name
            ));
        }
    }
    Ok(ProgramOutcome {
        block: block.name.clone(),
        counters,
        started,
        notes,
        plan,
    })
}

/// Programs counters: validates, writes, and reads back what each counter now monitors.
pub fn program(
    device: &Device,
    block_name: &str,
    assignments: &[Assignment],
    opts: &ProgramOptions,
) -> Result<ProgramOutcome> {
    let mut outcome = plan_program(device, block_name, assignments, opts)?;
    outcome.plan.apply(device.fs())?;
    for c in &mut outcome.counters {
        let rel = layout::event(&outcome.block, c.counter);
        c.readback = Some(match device.fs().read(&rel) {
            Ok(text) => text.trim().to_string(),
            Err(e) if e.raw_os_error() == Some(crate::error::errno::EINVAL) => {
                "(the driver cannot name the programmed event)".to_string()
            }
            Err(e) => return Err(io_error("reading", &rel, None, e)),
        });
    }
    Ok(outcome)
}
