//! Tables for people: columns separated by spaces, numbers grouped and right-aligned
//! (never split), names kept whole, text escaped, long prose wrapped inside its
//! column to fit the terminal.

use std::io::{self, Write};

use comfy_table::{presets, CellAlignment, ColumnConstraint, ContentArrangement};

use crate::cli::output::text::{escape, group, group_f};
use crate::cli::output::{Cell, Part, Renderer, Report, Table};

/// The longest name a table keeps whole when the terminal is narrow.
const MAX_NAME: usize = 40;

pub(super) struct TableRenderer {
    pub width: Option<u16>,
}

fn shown(cell: &Cell) -> String {
    match cell {
        Cell::Text(s) => escape(s).into_owned(),
        Cell::Int(n) => group(*n),
        Cell::Plain(n) => n.to_string(),
        Cell::Hex(n) => format!("0x{n:x}"),
        Cell::Float(x) => group_f(*x),
        Cell::None => "-".to_string(),
    }
}

/// A name: no spaces, not very long.
fn is_name(s: &str) -> bool {
    !s.contains(char::is_whitespace) && s.chars().count() <= MAX_NAME
}

impl TableRenderer {
    fn table(&self, t: &Table, out: &mut dyn Write) -> io::Result<()> {
        let mut ct = comfy_table::Table::new();
        ct.load_preset(presets::NOTHING);
        ct.set_header(t.header.clone());
        for r in &t.rows {
            ct.add_row(r.iter().map(shown).collect::<Vec<_>>());
        }
        let columns = t.header.len();
        for i in 0..columns {
            let numeric = t.rows.iter().any(|r| r.get(i).is_some_and(Cell::numeric));
            // Numbers are never split, and neither are names (a column whose cells
            // have no spaces: metrics, events, blocks) unless one is very long: only
            // prose wraps.
            let fixed = t.rows.iter().all(|r| {
                r.get(i).is_none_or(|c| match c {
                    Cell::Text(s) => is_name(s),
                    _ => true,
                })
            });
            if let Some(c) = ct.column_mut(i) {
                if numeric {
                    c.set_cell_alignment(CellAlignment::Right);
                }
                if fixed {
                    c.set_constraint(ColumnConstraint::ContentWidth);
                }
            }
        }
        if let Some(w) = self.width {
            ct.set_width(w);
            ct.set_content_arrangement(ContentArrangement::Dynamic);
        }
        for line in ct.lines() {
            let l = line.trim_end();
            writeln!(out, "{}", l.strip_prefix(' ').unwrap_or(l))?;
        }
        Ok(())
    }
}

impl Renderer for TableRenderer {
    fn render(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        for part in report.document_at(self.width).parts {
            match part {
                Part::Table(t) => self.table(&t, out)?,
                Part::Fields(fields) => {
                    let w = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
                    for (k, v) in &fields {
                        writeln!(out, "{k:<w$}  {}", shown(v))?;
                    }
                }
                Part::Line(l) => writeln!(out, "{}", escape(&l))?,
            }
        }
        Ok(())
    }
}
