//! `bfperf events`: the event table of a block, or of the kinds of several.

use clap::Args as ClapArgs;

use crate::cli::args::FormatOpts;
use crate::cli::output::Format;
use crate::cli::report::{EventsReport, ListReport};
use crate::cli::Out;
use crate::device::Device;
use crate::error::Result;
use crate::front::args::Global;
use crate::front::exit::{diag, Failure};
use crate::front::setup::open_device_for;
use crate::metrics::MetricSet;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf events tile2\n  bfperf events tile2 read\n  bfperf events 'llt*' GDC_BANK0\n  bfperf events all --json"
)]
pub(crate) struct Args {
    /// The block (tile2), or blocks: a kind (tile), a glob ('llt*'), a list or all
    block: String,
    /// Show only events whose name or description contains this (any case)
    pattern: Option<String>,
    #[command(flatten)]
    format: FormatOpts,
}

/// Prints the events.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> std::result::Result<(), Failure> {
    let device = open_device_for(global, std::slice::from_ref(&a.block))?;
    let format = a.format.or(Format::Table);
    if device.block(&a.block).is_err() {
        // A kind, a glob, a list or `all`: the events of every kind chosen.
        let chosen = device.select(std::slice::from_ref(&a.block))?;
        let patterns: Vec<String> = a.pattern.into_iter().collect();
        let listing = crate::ops::list::list_blocks(
            &device,
            &chosen,
            &MetricSet::default(),
            &patterns,
            false,
        )?;
        return out.emit(
            format,
            &ListReport {
                listing,
                patterns,
                every_generation: false,
            },
        );
    }
    let r = events(&device, &a.block, a.pattern)?;
    if r.events.is_empty() {
        diag(&format!(
            "no event of {} matches '{}'",
            r.block,
            r.pattern.as_deref().unwrap_or_default()
        ));
    }
    out.emit(format, &r)
}

fn events(device: &Device, block: &str, pattern: Option<String>) -> Result<EventsReport> {
    let b = device.block(block)?;
    let catalog = device.catalog(b)?;
    let events = match &pattern {
        Some(p) => catalog.filter(p).into_iter().cloned().collect(),
        None => catalog.events.clone(),
    };
    Ok(EventsReport {
        block: b.name.clone(),
        kind: b.kind,
        mechanism: b.mechanism,
        truncated_event_list: catalog.truncated,
        events,
        pattern,
    })
}
