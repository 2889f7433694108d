//! What users type, resolved against a block: counter numbers, events by name or
//! number (parsed as the kernel parses them), `COUNTER=EVENT` assignments. Shared by
//! every writing operation.

use crate::block::Block;
use crate::catalog::{did_you_mean, Catalog};
use crate::error::{Error, Result};

/// What to program: counter index (as typed) and event (name or number as typed; None
/// with `count_clock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The counter, as typed.
    pub counter: String,
    /// The event, as typed (None with `count_clock`).
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
pub(crate) const COUNT_CLOCK_BITS: u32 = 32;

/// A block's counter numbers as a range, for messages.
pub(crate) fn counter_range(block: &Block) -> String {
    match (block.counters.first(), block.counters.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "none".to_string(),
    }
}

/// A counter index typed by a user, checked against the block's files.
pub(crate) fn parse_counter(block: &Block, text: &str) -> Result<u32> {
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
    block.def().max_event
}

/// An event resolved against a block's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The event number.
    pub number: u32,
    /// None for a number outside the table (with --force).
    pub name: Option<String>,
    /// Said when the table lists the name or the number more than once.
    pub warning: Option<String>,
}

/// Resolves an event typed by a user (name, `0x45`, `69`, `0105`) in a block's catalog.
pub(crate) fn resolve_event(
    block: &Block,
    catalog: &Catalog,
    input: &str,
    force: bool,
) -> Result<Resolved> {
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
            Some(e) => Ok(Resolved {
                number,
                name: Some(e.name.to_string()),
                warning: catalog.ambiguity(block.kind, e),
            }),
            None if force => Ok(Resolved {
                number,
                name: None,
                warning: None,
            }),
            None => Err(bad(format!(
                "event 0x{number:x} is not in the {} event table of {} (see `bfperf events {}`); pass --force to write it anyway",
                block.kind.as_str(),
                block.name,
                block.name
            ))),
        };
    }
    match catalog.resolve(t) {
        Ok(e) => Ok(Resolved {
            number: e.number,
            name: Some(e.name.to_string()),
            warning: catalog.ambiguity(block.kind, e),
        }),
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
pub(crate) fn parse_kernel_number(text: &str) -> Option<u64> {
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
