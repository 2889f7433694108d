//! CSV (RFC 4180, through the `csv` crate): the document's first table or field list,
//! a header row, raw values (integers ungrouped, event numbers in decimal).

use std::io::{self, Write};

use crate::cli::output::{Cell, Document, Part, Renderer, Report};

/// `escape`: control characters from the device or files are shown escaped, as a
/// terminal must never receive them (a file or a pipe gets the raw text).
pub(super) struct CsvRenderer {
    pub escape: bool,
}

fn raw(cell: &Cell, escape: bool) -> String {
    match cell {
        Cell::Text(s) if escape => crate::front::escape::escape(s).into_owned(),
        Cell::Text(s) => s.to_string(),
        Cell::Int(n) | Cell::Plain(n) => n.to_string(),
        Cell::Hex(n) => n.to_string(),
        Cell::Float(x) => x.to_string(),
        Cell::None => String::new(),
    }
}

impl Renderer for CsvRenderer {
    fn render(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        let doc = match report.records() {
            Some(t) => Document {
                parts: vec![Part::Table(t)],
            },
            None => report.document(),
        };
        let mut w = ::csv::Writer::from_writer(out);
        let to_io = |e: ::csv::Error| match e.into_kind() {
            ::csv::ErrorKind::Io(e) => e,
            other => io::Error::other(format!("{other:?}")),
        };
        for part in &doc.parts {
            match part {
                Part::Table(t) => {
                    w.write_record(&t.header).map_err(to_io)?;
                    for r in &t.rows {
                        w.write_record(r.iter().map(|c| raw(c, self.escape)))
                            .map_err(to_io)?;
                    }
                    break;
                }
                Part::Fields(f) => {
                    w.write_record(f.iter().map(|(k, _)| *k)).map_err(to_io)?;
                    w.write_record(f.iter().map(|(_, v)| raw(v, self.escape)))
                        .map_err(to_io)?;
                    break;
                }
                Part::Line(_) => {}
            }
        }
        w.flush()
    }
}
