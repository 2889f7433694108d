//! JSON: the report's own serialization, pretty-printed, one document.

use std::io::{self, Write};

use crate::cli::output::{Renderer, Report};

pub(super) struct JsonRenderer;

impl Renderer for JsonRenderer {
    fn render(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &report.json())?;
        out.write_all(b"\n")
    }
}
