//! The one sequence of every command that writes the device (`program`, `start`,
//! `stop`, `clear`): take the writer lock (not for a dry run), plan every block the
//! selector chooses (any refusal refuses the whole command, before the first
//! write), refuse while a killed measurement's journal is pending (it would undo
//! this write later), apply the plans in order, and report what was written.

use crate::cli::args::WriteOpts;
use crate::cli::output::{Format, Report};
use crate::cli::report::{ControlReport, OneOrMany, ProgramReport};
use crate::cli::Out;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::front::args::Global;
use crate::front::exit::{diag, Failure};
use crate::front::setup::{lock_device, open_device};
use crate::ops::{control, program};

/// A block's planned writes, which can be applied and reported.
pub(super) trait Planned: Sized {
    /// The report of one block.
    type Report: Report + serde::Serialize;
    /// Makes the writes; returns what was done.
    fn apply(self, device: &Device) -> Result<Self>;
    /// The report of what was done (or, for a dry run, would be).
    fn report(self, dry_run: bool, location: String) -> Self::Report;
    /// What the user must be told.
    fn warnings(_report: &Self::Report) -> Vec<String> {
        Vec::new()
    }
}

impl Planned for program::ProgramOutcome {
    type Report = ProgramReport;
    fn apply(self, device: &Device) -> Result<Self> {
        program::apply(device, self)
    }
    fn report(self, dry_run: bool, location: String) -> ProgramReport {
        ProgramReport::new(self, dry_run, location)
    }
    fn warnings(report: &ProgramReport) -> Vec<String> {
        report.warnings.clone()
    }
}

impl Planned for control::ControlOutcome {
    type Report = ControlReport;
    fn apply(self, device: &Device) -> Result<Self> {
        control::apply(device, self)
    }
    fn report(self, dry_run: bool, location: String) -> ControlReport {
        ControlReport::new(self, dry_run, location)
    }
}

/// Locks, plans each block `selector` chooses with `plan`, applies, reports.
pub(super) fn write_blocks<P: Planned>(
    global: &Global,
    out: &mut Out,
    selector: &str,
    w: WriteOpts,
    plan: impl Fn(&Device, &str) -> Result<P>,
) -> std::result::Result<(), Failure> {
    let device = open_device(global)?;
    let _lock = (!w.dry_run)
        .then(|| lock_device(global, &device))
        .transpose()?;
    let plans = plan_blocks(&device, selector, plan)?;
    // After the input is checked: a refused command discards no journal either.
    if global.sim.is_none() {
        pending_journal(&device, &w)?;
    }
    let mut reports: Vec<P::Report> = Vec::new();
    for p in plans {
        let done = if w.dry_run {
            p
        } else {
            p.apply(&device).map_err(|e| partly_done(e, &reports))?
        };
        reports.push(done.report(w.dry_run, device.location()));
    }
    for warning in reports.iter().flat_map(P::warnings) {
        diag(&format!("warning: {warning}"));
    }
    out.emit(w.format.or(Format::Table), &OneOrMany::of(reports))
}

/// A journal left by a killed measurement: refused (it would put back its earlier
/// programming over this write at the next `restore` or measurement), discarded with
/// --discard-journal, or for a dry run only mentioned.
fn pending_journal(device: &Device, w: &WriteOpts) -> Result<()> {
    if w.dry_run {
        if let Some((path, _)) = crate::measure::owner::journal::leftover(device)? {
            diag(&format!(
                "note: a killed measurement's journal is pending ({}); the real write will be refused until `bfperf restore` or --discard-journal",
                path.display()
            ));
        }
        return Ok(());
    }
    if let Some(note) = crate::measure::owner::journal::pending_refusal(device, w.discard_journal)?
    {
        diag(&format!("note: {note}"));
    }
    Ok(())
}

/// Plans every block the selector chooses. As perf applies a PMU glob: when the
/// selector spans several kinds (`tile*` is tile and tilenet), a kind none of whose
/// blocks the command applies to is skipped with a note, unless one of its blocks was
/// named by itself; the command fails only when no kind is left, or when some blocks
/// of a kind refuse and others accept.
fn plan_blocks<P>(
    device: &Device,
    selector: &str,
    plan: impl Fn(&Device, &str) -> Result<P>,
) -> Result<Vec<P>> {
    let chosen = device.select(&[selector.to_string()])?;
    let mut kinds: Vec<&str> = Vec::new();
    for b in &chosen {
        if !kinds.contains(&b.kind.as_str()) {
            kinds.push(b.kind.as_str());
        }
    }
    // Kinds of blocks named one by one (`tile0,pcie0`) are never skipped.
    let named: Vec<&str> = selector
        .split(',')
        .filter_map(|part| device.block(part.trim()).ok())
        .map(|b| b.kind.as_str())
        .collect();
    let mut plans = Vec::new();
    let mut skipped = Vec::new();
    let mut first_error = None;
    for kind in &kinds {
        let blocks: Vec<_> = chosen.iter().filter(|b| b.kind.as_str() == *kind).collect();
        let mut results: Vec<Result<P>> = blocks.iter().map(|b| plan(device, &b.name)).collect();
        let refused = results.iter().filter(|r| r.is_err()).count();
        if kinds.len() > 1 && refused == blocks.len() && !named.contains(kind) {
            let e = results.swap_remove(0).err().expect("every block refused");
            skipped.push((kind.to_string(), blocks.len(), e.to_string()));
            first_error.get_or_insert(e);
            continue;
        }
        for r in results {
            plans.push(r?);
        }
    }
    if let (true, Some(e)) = (plans.is_empty(), first_error) {
        // Every kind refused: the first kind's reason stands.
        return Err(e);
    }
    for (kind, n, why) in skipped {
        diag(&format!(
            "note: {selector} also matches {n} {kind} block(s), skipped: {why}"
        ));
    }
    Ok(plans)
}

/// A failure on a later block says which blocks were already written.
fn partly_done<R: Report>(e: Error, done: &[R]) -> Error {
    let writes: Vec<String> = done.iter().flat_map(|r| r.writes_made()).collect();
    if writes.is_empty() {
        return e;
    }
    crate::error::with_hint(e, &format!("(before this: {})", writes.join("; ")))
}
