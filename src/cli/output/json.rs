//! JSON: the report's own serialization, pretty-printed, one document.

use std::io::{self, Write};

use crate::cli::output::{Renderer, Report};

pub(super) struct JsonRenderer;

impl Renderer for JsonRenderer {
    fn render(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        report.write_json(&mut *out)?;
        out.write_all(b"\n")
    }
}
