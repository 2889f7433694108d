//! `bfperf plot`.
use super::args::PlotArgs;
use crate::error::Result;

/// Draws the runs.
pub fn run(_a: PlotArgs) -> Result<()> {
    Ok(())
}
