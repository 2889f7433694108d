//! Programming counters: `bfperf program tile2 3 HNF_REQUESTS`.

use serde::Serialize;

use super::plan::Plan;
use crate::block::{Block, Mechanism};
use crate::catalog::{did_you_mean, Catalog};
use crate::device::Device;
use crate::error::{io_error, with_hint, Error, Result};
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
        return Err(Error::BadAssignment {
            problem: "nothing to program: give COUNTER EVENT (e.g. `3 HNF_REQUESTS`) or COUNTER=EVENT pairs"
                .into(),
        });
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
                _ => Err(Error::BadAssignment {
                    problem: format!("'{s}' is not COUNTER=EVENT (e.g. 0=HITS_BANK0)"),
                }),
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
        [c] => Err(Error::BadAssignment {
            problem: format!(
                "no event given for counter {c}: `bfperf program BLOCK {c} EVENT` (see `bfperf events BLOCK`)"
            ),
        }),
        _ => Err(Error::BadAssignment {
            problem:
                "several counters at once take COUNTER=EVENT pairs (e.g. 0=HITS_BANK0 1=MISSES_BANK0)"
                    .into(),
        }),
    }
}

/// How many counters the kernel's `count_clock` bitmask (a u32) can name.
pub const COUNT_CLOCK_BITS: u32 = 32;

fn counter_range(block: &Block) -> String {
    match (block.counters.first(), block.counters.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "none".to_string(),
    }
}

/// A counter index typed by a user, checked against the block's files.
pub fn parse_counter(block: &Block, text: &str) -> Result<u32> {
    let range = counter_range(block);
    let bad = |problem: String| Error::BadCounter {
        block: block.name.clone(),
        problem,
        range: range.clone(),
    };
    let index: u32 = text.parse().map_err(|_| {
        bad(format!(
            "'{text}' is not a counter number of {}",
            block.name
        ))
    })?;
    if !block.has_counter(index) {
        return Err(bad(format!("{} has no counter {index}", block.name)));
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
    let bad = |problem: String| Error::BadEvent {
        block: block.name.clone(),
        problem,
    };
    if t.is_empty() {
        return Err(bad(format!("empty event name for {}", block.name)));
    }
    if t.starts_with('-') || t.starts_with('+') {
        return Err(bad(format!(
            "'{t}' is not an event: give a name or a number from 0 to 0x{:x}",
            max_event(block)
        )));
    }
    if t.as_bytes()[0].is_ascii_digit() {
        let Some(number) = parse_kernel_number(t) else {
            return Err(bad(format!(
                "'{t}' is not an event number (hex like 0x45, decimal like 69, or octal like 0105, as the kernel reads them)"
            )));
        };
        if number > max_event(block) as u64 {
            return Err(bad(format!(
                "event number {t} (0x{number:x}) is out of range for {}: its event field holds 0 to 0x{:x}",
                block.name,
                max_event(block)
            )));
        }
        let number = number as u32;
        return match catalog.by_number(number) {
            Some(e) => Ok((number, Some(e.name.clone()))),
            None if force => Ok((number, None)),
            None => Err(bad(format!(
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

/// Parses a number the way the kernel's `kstrtouint(.., 0)` does: `0x` hex, a leading
/// `0` octal, decimal otherwise. `0105` is 0x45, as `echo 0105 > event3` would write.
pub fn parse_kernel_number(text: &str) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok();
    }
    if text.len() > 1 {
        if let Some(oct) = text.strip_prefix('0') {
            return u64::from_str_radix(oct, 8).ok();
        }
    }
    text.parse().ok()
}

/// A validated request.
#[derive(Debug, Clone, Default)]
pub struct ProgramOptions {
    pub force: bool,
    pub start: bool,
    pub count_clock: bool,
}

/// One counter after programming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    /// The bytes each write used (empty until applied).
    pub written: Vec<String>,
}

/// Validates everything and builds the writes.
pub fn plan_program(
    device: &Device,
    block_name: &str,
    assignments: &[Assignment],
    opts: &ProgramOptions,
) -> Result<ProgramOutcome> {
    let block = device.block(block_name)?;
    if block.is_empty() {
        return Err(Error::EmptyBlock {
            block: block.name.clone(),
            action: "program",
        });
    }
    if !block.is_counter_block() {
        return Err(Error::NotSupported {
            block: block.name.clone(),
            problem: format!(
                "{} is a registers block ({}): its statistics run free and cannot be programmed; read them with `bfperf read {}`",
                block.name,
                block.kind.as_str(),
                block.name
            ),
        });
    }
    if opts.count_clock && !block.has_count_clock {
        return Err(Error::NotSupported {
            block: block.name.clone(),
            problem: format!(
                "{} has no count_clock file: counting clock cycles needs a BlueField-3 crspace block (llt, llt_miss, mss) on kernel 6.14 or later",
                block.name
            ),
        });
    }
    if opts.start && block.mechanism != Mechanism::AllAtOnce {
        return Err(Error::NotSupported {
            block: block.name.clone(),
            problem: format!(
                "--start is for blocks started all at once (l3cache, BF3 crspace); {} counters start when programmed",
                block.name
            ),
        });
    }
    let catalog = device.catalog(block)?;
    let mut counters = Vec::new();
    let mut plan = Plan::default();
    let mut seen = Vec::new();
    let mut notes = Vec::new();
    for a in assignments {
        let index = parse_counter(block, &a.counter)?;
        if seen.contains(&index) {
            return Err(Error::BadAssignment {
                problem: format!("counter {index} of {} is given twice", block.name),
            });
        }
        if opts.count_clock && index >= COUNT_CLOCK_BITS {
            return Err(Error::BadCounter {
                block: block.name.clone(),
                problem: format!(
                    "counter {index} of {} cannot count clock cycles: the count_clock mask has bits for counters 0 to {} only",
                    block.name,
                    COUNT_CLOCK_BITS - 1
                ),
                range: counter_range(block),
            });
        }
        seen.push(index);
        let (event, name) = match &a.event {
            Some(e) => {
                let (n, name) = resolve_event(block, &catalog, e, opts.force)?;
                let e = e.trim();
                if e.len() > 1 && e.starts_with('0') && !e[1..].starts_with(['x', 'X']) {
                    notes.push(format!(
                        "{e} is octal, as the kernel reads a leading 0: event 0x{n:x} ({n})"
                    ));
                }
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
    if block.has_count_clock {
        let rel = layout::count_clock(&block.name);
        let current = super::read::read_number(device.fs(), &rel)? as u32;
        let mut mask = current;
        for c in counters.iter().filter(|c| c.counter < COUNT_CLOCK_BITS) {
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
        written: Vec::new(),
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
    outcome.written = outcome.plan.apply(device.fs())?;
    for c in &mut outcome.counters {
        let rel = layout::event(&outcome.block, c.counter);
        c.readback = Some(match device.fs().read(&rel) {
            Ok(text) => text.trim().to_string(),
            Err(e) if e.raw_os_error() == Some(crate::error::errno::EINVAL) => {
                "(the driver cannot name the programmed event)".to_string()
            }
            Err(e) => {
                let written: Vec<String> = outcome
                    .plan
                    .writes
                    .iter()
                    .map(|w| format!("{} <- {}", w.path, w.data))
                    .collect();
                return Err(with_hint(
                    io_error("reading back", &rel, None, e),
                    &format!(
                        "the writes were made ({}), but what the counter now monitors could not be read back",
                        written.join(", ")
                    ),
                ));
            }
        });
    }
    Ok(outcome)
}
