//! Tables for people: columns separated by spaces, numbers grouped and right-aligned
//! (never split), names kept whole, text escaped, long prose wrapped inside its
//! column to fit the terminal.

use std::borrow::Cow;
use std::io::{self, Write};

use comfy_table::{presets, CellAlignment, ColumnConstraint, ContentArrangement};

use crate::cli::output::text::{group, group_f, pad_by};
use crate::cli::output::{Cell, Part, Renderer, Report, Table};
use crate::front::escape::escape;

/// The longest name a table keeps whole when the terminal is narrow.
const MAX_NAME: usize = 40;

pub(super) struct TableRenderer {
    pub width: Option<u16>,
}

/// A cell as shown; text borrowed from the table when it needs no escaping.
fn shown(cell: &Cell) -> Cow<'_, str> {
    match cell {
        Cell::Text(s) => escape(s),
        Cell::Int(n) => group(*n).into(),
        Cell::Plain(n) => n.to_string().into(),
        Cell::Hex(n) => hex(*n).into(),
        Cell::Float(x) => group_f(*x).into(),
        Cell::None => "-".into(),
    }
}

/// A table's cells as shown, row after row: text that needs no escaping borrowed
/// from the table, and what is made (numbers, escaped text) written into one
/// buffer rather than a string each (`events` shows a few hundred rows).
struct Shown<'a> {
    made: String,
    pieces: Vec<Piece<'a>>,
    /// Every cell is printable ASCII (what [`plain`] lays out), as found while
    /// looking for what to escape.
    printable: bool,
}

enum Piece<'a> {
    Borrowed(&'a str),
    Made(usize, usize),
}

impl<'a> Shown<'a> {
    fn of(t: &'a Table) -> Self {
        let mut made = String::new();
        let mut pieces = Vec::with_capacity(t.rows.iter().map(Vec::len).sum());
        let mut printable = true;
        for cell in t.rows.iter().flatten() {
            let start = made.len();
            match cell {
                // What `escape` leaves as it is, looked at once.
                Cell::Text(s) if s.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
                    pieces.push(Piece::Borrowed(s));
                    continue;
                }
                Cell::Text(s) => {
                    printable = false;
                    match escape(s) {
                        Cow::Borrowed(b) => {
                            pieces.push(Piece::Borrowed(b));
                            continue;
                        }
                        Cow::Owned(o) => made.push_str(&o),
                    }
                }
                Cell::Hex(n) => hex_into(*n, &mut made),
                Cell::None => {
                    pieces.push(Piece::Borrowed("-"));
                    continue;
                }
                other => made.push_str(&shown(other)),
            }
            pieces.push(Piece::Made(start, made.len()));
        }
        Shown {
            made,
            pieces,
            printable,
        }
    }

    /// The cells, row after row.
    fn cells(&self) -> Vec<&str> {
        let text = |p: &Piece<'a>| match *p {
            Piece::Borrowed(s) => s,
            Piece::Made(a, b) => &self.made[a..b],
        };
        self.pieces.iter().map(text).collect()
    }
}

/// `cells` (every row's, one after another) cut back into `t`'s rows.
fn rows_of<'c>(t: &'c Table, cells: &'c [&'c str]) -> impl Iterator<Item = &'c [&'c str]> {
    let mut at = 0;
    t.rows.iter().map(move |row| {
        let cut = &cells[at..at + row.len()];
        at += row.len();
        cut
    })
}

/// `0x45`: an event number as the driver writes it.
fn hex(n: u32) -> String {
    let mut out = String::new();
    hex_into(n, &mut out);
    out
}

/// [`hex`] written on, without `core::fmt` (every row of `events` has one).
fn hex_into(n: u32, out: &mut String) {
    let mut digits = [0u8; 8];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.push_str("0x");
    out.extend(digits[i..].iter().map(|&d| d as char));
}

/// A name: no spaces, not very long.
fn is_name(s: &str) -> bool {
    !s.contains(char::is_whitespace) && s.chars().count() <= MAX_NAME
}

/// Whether column `i` holds numbers (right-aligned, header included).
fn numeric(t: &Table, i: usize) -> bool {
    t.rows.iter().any(|r| r.get(i).is_some_and(Cell::numeric))
}

/// The table as comfy-table lays it out with no width to fit (not a terminal) and
/// text of one column a character: each cell padded by a space on either side to its
/// column's widest, numbers right-aligned, each line's end trimmed and its first
/// space dropped. Written straight out, row by row: comfy-table builds every cell,
/// part and line as strings of their own, most of what `events` costs on a long
/// list. None when some text is not ASCII or holds a line break, which comfy-table
/// measures and splits.
/// `cells` are the rows' cells as shown, row after row; `printable`, that each is
/// known to be printable ASCII.
fn plain(
    t: &Table,
    cells: &[&str],
    printable: bool,
    out: &mut dyn Write,
) -> Option<io::Result<()>> {
    // One pass over the bytes: `contains` with a set of characters walks each
    // cell char by char.
    let simple = |s: &str| s.bytes().all(|b| b.is_ascii() && b != b'\n' && b != b'\r');
    if !t.header.iter().all(|h| simple(h)) || !(printable || cells.iter().all(|c| simple(c))) {
        return None;
    }
    let rows: Vec<&[&str]> = rows_of(t, cells).collect();
    let columns = rows
        .iter()
        .map(|r| r.len())
        .fold(t.header.len(), usize::max);
    if columns == 0 {
        // Not a line, as comfy-table: a row is as tall as its tallest cell.
        return Some(Ok(()));
    }
    let mut widths = vec![0; columns];
    for (w, h) in widths.iter_mut().zip(&t.header) {
        *w = h.len();
    }
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(*row) {
            *w = (*w).max(c.len());
        }
    }
    let right: Vec<bool> = (0..columns)
        .map(|i| i < t.header.len() && numeric(t, i))
        .collect();
    let mut text = String::new();
    let mut line = |cells: &[&str]| -> io::Result<()> {
        text.clear();
        for (i, &width) in widths.iter().enumerate() {
            text.push(' ');
            let cell = cells.get(i).copied().unwrap_or("");
            // The last column left-aligned is not padded: the padding would be
            // trimmed off again (a description's, for every event listed).
            if i + 1 == columns && !right[i] {
                text.push_str(cell);
                break;
            }
            // ASCII: a byte a column.
            pad_by(&mut text, cell, width - cell.len(), right[i]);
            text.push(' ');
        }
        // Its end trimmed and its line break put on: one write a line.
        text.truncate(text.trim_end().len());
        text.push('\n');
        out.write_all(text.strip_prefix(' ').unwrap_or(&text).as_bytes())
    };
    let written = (|| {
        line(&t.header)?;
        for row in rows {
            line(row)?;
        }
        Ok(())
    })();
    Some(written)
}

impl TableRenderer {
    fn table(&self, t: &Table, out: &mut dyn Write) -> io::Result<()> {
        let shown = Shown::of(t);
        let cells = shown.cells();
        if self.width.is_none() {
            if let Some(written) = plain(t, &cells, shown.printable, out) {
                return written;
            }
        }
        self.comfy(t, &cells, out)
    }

    /// `cells` are the rows' cells as shown, row after row.
    fn comfy(&self, t: &Table, cells: &[&str], out: &mut dyn Write) -> io::Result<()> {
        let mut ct = comfy_table::Table::new();
        ct.load_preset(presets::NOTHING);
        ct.set_header(t.header.clone());
        for row in rows_of(t, cells) {
            ct.add_row(row);
        }
        let columns = t.header.len();
        for i in 0..columns {
            let numeric = numeric(t, i);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_core_fmts() {
        for n in [
            0,
            1,
            0xf,
            0x10,
            0x45,
            0xabc,
            0xffff_ffff,
            0x8000_0000,
            0x1234_5678,
        ] {
            assert_eq!(hex(n), format!("0x{n:x}"));
        }
    }

    /// The direct layout writes what comfy-table writes, byte for byte.
    #[test]
    fn the_plain_layout_is_comfy_tables() {
        let text = |s: &str| Cell::text(s);
        let tables = [
            Table {
                header: vec!["NAME", "NUMBER", "DESCRIPTION"],
                rows: vec![
                    vec![
                        text("HNF_REQUESTS"),
                        Cell::Hex(0x45),
                        text("requests to the home node"),
                    ],
                    vec![text("A"), Cell::Int(1_234_567), text("")],
                    vec![text("esc\u{1b}[0m"), Cell::Hex(0), text("tab\there")],
                    vec![text("ragged")],
                    vec![
                        text("wider"),
                        Cell::None,
                        text("x"),
                        text("an extra column"),
                    ],
                ],
            },
            Table {
                header: vec!["BLOCK", "VALUE"],
                rows: vec![
                    vec![text("tile0"), Cell::Float(2.5)],
                    vec![text(""), Cell::Plain(7)],
                ],
            },
            Table {
                header: vec!["ONLY"],
                rows: vec![],
            },
            Table {
                header: vec!["A", "B"],
                rows: vec![vec![], vec![text("x")]],
            },
            Table {
                header: vec![],
                rows: vec![],
            },
            Table {
                header: vec![],
                rows: vec![vec![text("no header"), Cell::Int(3)]],
            },
            Table {
                header: vec!["  lead", "trail  "],
                rows: vec![vec![text(" a "), text("b ")]],
            },
        ];
        for t in &tables {
            let shown = Shown::of(t);
            let cells = shown.cells();
            let mut fast = Vec::new();
            plain(t, &cells, shown.printable, &mut fast)
                .expect("ASCII")
                .unwrap();
            if !shown.printable {
                let mut checked = Vec::new();
                plain(t, &cells, false, &mut checked).unwrap().unwrap();
                assert_eq!(checked, fast);
            }
            let mut comfy = Vec::new();
            TableRenderer { width: None }
                .comfy(t, &cells, &mut comfy)
                .unwrap();
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(comfy).unwrap()
            );
        }
        let t = Table {
            header: vec!["µs"],
            rows: vec![],
        };
        assert!(
            plain(&t, &[], true, &mut Vec::new()).is_none(),
            "not ASCII: comfy-table measures it"
        );
    }
}
