//! FUSE serving of the simulator.
use super::Sim;
use crate::error::Result;
use std::path::Path;
use std::sync::Arc;
pub fn serve(_sim: Arc<Sim>, _dir: &Path) -> Result<()> {
    Ok(())
}
