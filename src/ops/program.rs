//! Programming counters: `bfperf program tile2 3 HNF_REQUESTS`.

use serde::Serialize;

use crate::block::Mechanism;
use crate::device::plan::Plan;
use crate::device::resolve::{counter_range, parse_counter, resolve_event, COUNT_CLOCK_BITS};
pub use crate::device::resolve::{parse_assignments, Assignment};
use crate::device::Device;
use crate::error::{io_error, with_hint, Error, Result};
use crate::kinds::STOP_EVENT;
use crate::sysfs::layout;

/// A validated request.
#[derive(Debug, Clone, Default)]
pub struct ProgramOptions {
    /// Allow what is refused by default (events outside the table, control registers).
    pub force: bool,
    /// Start an all-at-once block after programming it.
    pub start: bool,
    /// Make the counters count clock cycles (BF3 `count_clock`).
    pub count_clock: bool,
}

/// One counter after programming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Programmed {
    /// The counter's number.
    pub counter: u32,
    /// The event number written; None when it was stopped.
    pub event: Option<u32>,
    /// The event's name, when the table has it.
    pub event_name: Option<String>,
    /// It counts clock cycles instead of its event.
    pub counts_clock: bool,
    /// What `event<N>` reads back after the write (None on a dry run).
    pub readback: Option<String>,
}

/// What `program` did or would do.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramOutcome {
    /// The block.
    pub block: String,
    /// Each counter programmed.
    pub counters: Vec<Programmed>,
    /// The block was started (all-at-once).
    pub started: bool,
    /// What happened besides (other counters stopped by an L3 write...).
    pub notes: Vec<String>,
    /// Things the user must know: an event name the kernel's table lists twice.
    pub warnings: Vec<String>,
    /// The writes, in order.
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
    check_block(block, opts)?;
    let catalog = device.catalog(block)?;
    let mut out = ProgramOutcome {
        block: block.name.clone(),
        counters: Vec::new(),
        started: opts.start,
        notes: Vec::new(),
        warnings: Vec::new(),
        plan: Plan::default(),
        written: Vec::new(),
    };
    for a in assignments {
        let c = resolve_assignment(block, &catalog, a, opts, &mut out)?;
        out.counters.push(c);
    }
    plan_events(block, &mut out);
    plan_count_clock(device, block, opts, &mut out)?;
    plan_enable(block, opts, &mut out);
    Ok(out)
}

/// A block that can be programmed as `opts` ask: counters of its own, count_clock
/// when asked for, --start only where counters start together.
fn check_block(block: &crate::block::Block, opts: &ProgramOptions) -> Result<()> {
    let refuse = |problem: String| {
        Err(Error::NotSupported {
            block: block.name.clone(),
            problem,
        })
    };
    if block.is_empty() {
        return Err(Error::EmptyBlock {
            block: block.name.clone(),
            action: "program",
        });
    }
    if !block.is_counter_block() {
        return refuse(format!(
            "{} is a registers block ({}): its statistics run free and cannot be programmed; read them with `bfperf read {}`",
            block.name,
            block.kind.as_str(),
            block.name
        ));
    }
    if opts.count_clock && !block.has_count_clock {
        return refuse(format!(
            "{} has no count_clock file: counting clock cycles needs a BlueField-3 crspace block (llt, llt_miss, mss) on kernel 6.14 or later",
            block.name
        ));
    }
    if opts.start && block.mechanism != Mechanism::AllAtOnce {
        return refuse(format!(
            "--start is for blocks started all at once (l3cache, BF3 crspace); {} counters start when programmed",
            block.name
        ));
    }
    Ok(())
}

/// One `COUNTER EVENT` assignment checked and resolved; its notes and warnings go
/// into `out`.
fn resolve_assignment(
    block: &crate::block::Block,
    catalog: &crate::catalog::Catalog,
    a: &Assignment,
    opts: &ProgramOptions,
    out: &mut ProgramOutcome,
) -> Result<Programmed> {
    let index = parse_counter(block, &a.counter)?;
    if out.counters.iter().any(|c| c.counter == index) {
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
    let (event, event_name) = match &a.event {
        Some(e) => {
            let r = resolve_event(block, catalog, e, opts.force)?;
            out.warnings.extend(r.warning);
            let (n, e) = (r.number, e.trim());
            if e.len() > 1 && e.starts_with('0') && !e[1..].starts_with(['x', 'X']) {
                out.notes.push(format!(
                    "{e} is octal, as the kernel reads a leading 0: event 0x{n:x} ({n})"
                ));
            }
            (Some(n), r.name)
        }
        None => (None, None),
    };
    Ok(Programmed {
        counter: index,
        event,
        event_name,
        counts_clock: opts.count_clock,
        readback: None,
    })
}

/// The event writes, each with what the kernel's refusal would mean.
fn plan_events(block: &crate::block::Block, out: &mut ProgramOutcome) {
    for c in &out.counters {
        let Some(n) = c.event else {
            continue;
        };
        let what = c.event_name.as_deref().unwrap_or("not in the table");
        let meaning = if n == STOP_EVENT {
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
        out.plan.push(
            layout::event(&block.name, c.counter),
            format!("0x{n:x}"),
            meaning,
        );
    }
}

/// The count_clock mask with the programmed counters' bits set (--count-clock) or
/// cleared, when it changes.
fn plan_count_clock(
    device: &Device,
    block: &crate::block::Block,
    opts: &ProgramOptions,
    out: &mut ProgramOutcome,
) -> Result<()> {
    if !block.has_count_clock {
        return Ok(());
    }
    let rel = layout::count_clock(&block.name);
    let current = crate::device::values::read_number(device.fs(), &rel)? as u32;
    let mut mask = current;
    for c in out.counters.iter().filter(|c| c.counter < COUNT_CLOCK_BITS) {
        if opts.count_clock {
            mask |= 1 << c.counter;
        } else {
            mask &= !(1 << c.counter);
        }
    }
    if mask == current {
        return Ok(());
    }
    if !opts.count_clock {
        out.notes.push(format!(
            "counter(s) of {} were counting clock cycles; they count their events now",
            block.name
        ));
    }
    out.plan.push(
        rel,
        format!("0x{mask:x}"),
        "the kernel refused the count_clock mask",
    );
    Ok(())
}

/// An all-at-once block: started with --start, or a note on how to start it.
fn plan_enable(block: &crate::block::Block, opts: &ProgramOptions, out: &mut ProgramOutcome) {
    if block.mechanism != Mechanism::AllAtOnce {
        return;
    }
    let b = &block.name;
    if opts.start {
        out.plan.push(
            layout::enable(b),
            "1".to_string(),
            "the kernel refused to start the block",
        );
    } else if block.def().program_stops_all {
        out.notes.push(format!(
            "programming stopped all counters of {b} (L3 cache counters run together); start them with `bfperf start {b}` (resets them to 0), or pass --start"
        ));
    } else {
        out.notes.push(format!(
            "{b} counts only while enabled; start it with `bfperf start {b}` (clears all its counters), or pass --start"
        ));
    }
}

/// Programs counters: validates, writes, and reads back what each counter now monitors.
pub fn program(
    device: &Device,
    block_name: &str,
    assignments: &[Assignment],
    opts: &ProgramOptions,
) -> Result<ProgramOutcome> {
    apply(device, plan_program(device, block_name, assignments, opts)?)
}

/// Makes the planned writes and reads back what each counter now monitors.
pub fn apply(device: &Device, mut outcome: ProgramOutcome) -> Result<ProgramOutcome> {
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
