//! The output layer. Commands build typed reports; a renderer, one module per format,
//! writes a report to any `Write`. Nothing else in bfperf prints.
//!
//! A report gives its JSON form (its serde serialization) and a [`Document`] for people
//! and spreadsheets: tables of typed cells and lines of text. The table renderer groups
//! numbers, escapes control characters and fits the terminal; the CSV renderer writes
//! the document's first table with raw values. A new format is one new module with a
//! [`Renderer`].

mod csv;
mod json;
mod table;
mod text;

use std::io::{self, Write};

use clap::ValueEnum;

pub(crate) use text::{
    group, group_f, group_into, pad_into, percent, readable, readable_as, three_decimals,
    three_decimals_into, two_decimals,
};

/// The output formats every data-printing command takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for people: numbers grouped, fitted to the terminal
    #[default]
    Table,
    /// One JSON document (raw integers); schemas in docs/schema/
    Json,
    /// RFC 4180 CSV with a header row (raw integers)
    Csv,
}

/// One value of a table. Device strings are `Text` and are escaped for people.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    /// Text: borrowed where it lives as long as the program (an event table's names
    /// and descriptions, hundreds a list), so that a table does not copy it.
    Text(std::borrow::Cow<'static, str>),
    /// A count: grouped in tables, raw in CSV.
    Int(u64),
    /// A count never grouped (perf's --no-big-num).
    Plain(u64),
    /// An event number: `0x45` in tables, raw in CSV.
    Hex(u32),
    /// A rate or ratio: two decimals, grouped in tables.
    Float(f64),
    /// No value: `-` in tables, empty in CSV.
    None,
}

impl Cell {
    pub(crate) fn text(s: impl Into<String>) -> Cell {
        Cell::Text(std::borrow::Cow::Owned(s.into()))
    }

    /// Text that lives as long as the program, or a copy: not copied again.
    pub(crate) fn lasting(s: impl Into<std::borrow::Cow<'static, str>>) -> Cell {
        Cell::Text(s.into())
    }

    pub(crate) fn opt_text(s: Option<impl Into<String>>) -> Cell {
        s.map(Cell::text).unwrap_or(Cell::None)
    }

    pub(crate) fn opt_int(n: Option<u64>) -> Cell {
        n.map(Cell::Int).unwrap_or(Cell::None)
    }

    pub(crate) fn opt_hex(n: Option<u32>) -> Cell {
        n.map(Cell::Hex).unwrap_or(Cell::None)
    }

    pub(crate) fn opt_float(x: Option<f64>) -> Cell {
        x.filter(|x| x.is_finite())
            .map(Cell::Float)
            .unwrap_or(Cell::None)
    }

    fn numeric(&self) -> bool {
        matches!(self, Cell::Int(_) | Cell::Plain(_) | Cell::Float(_))
    }
}

/// A table: column headers and rows of cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub(crate) fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }
}

/// A piece of a document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    Table(Table),
    /// `name  value` lines for people; one header row and one row in CSV.
    Fields(Vec<(&'static str, Cell)>),
    /// A line of text for people (tables only).
    Line(String),
}

/// What a report shows people: its parts in order. CSV takes the first table.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Document {
    pub parts: Vec<Part>,
}

impl Document {
    pub(crate) fn table(&mut self, t: Table) {
        self.parts.push(Part::Table(t));
    }

    pub(crate) fn fields(&mut self, f: Vec<(&'static str, Cell)>) {
        self.parts.push(Part::Fields(f));
    }

    pub(crate) fn line(&mut self, s: impl Into<String>) {
        self.parts.push(Part::Line(s.into()));
    }

    pub(crate) fn note(&mut self, s: impl AsRef<str>) {
        self.line(format!("note: {}", s.as_ref()));
    }
}

/// The result of a command, ready to be rendered in any format.
pub(crate) trait Report {
    /// The JSON form (the documented, schema-checked vocabulary).
    fn json(&self) -> serde_json::Value;
    /// Writes the JSON form, pretty-printed. By default through [`Report::json`]'s
    /// tree; a large report whose own serialization is the same document (its keys in
    /// the same, sorted, order) writes it straight, without building and dropping one.
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &self.json())
    }
    /// The form for people.
    fn document(&self) -> Document;
    /// The form for people on a terminal `width` columns wide (None: no limit), for
    /// a report that lays itself out differently when narrow.
    fn document_at(&self, _width: Option<u16>) -> Document {
        self.document()
    }
    /// The rows for machines (CSV): raw values in stable snake_case columns. None: the
    /// document's first table or field list.
    fn records(&self) -> Option<Table> {
        None
    }
    /// What the command wrote to the device, for stderr when the report cannot be
    /// printed. Empty for commands that write nothing.
    fn writes_made(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Serializes any `Serialize` value as a report's JSON form.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    // Serializing our own plain data types cannot fail; Null is never reached.
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// A renderer of one format.
pub(crate) trait Renderer {
    fn render(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()>;
}

/// The renderer of a format. `width` is the terminal's width, if any.
/// The renderer of a format. `width`: the terminal's, for tables; `terminal`: the
/// output is a terminal (CSV then escapes control characters, as tables always do).
pub(crate) fn renderer(format: Format, width: Option<u16>, terminal: bool) -> Box<dyn Renderer> {
    match format {
        Format::Table => Box::new(table::TableRenderer { width }),
        Format::Json => Box::new(json::JsonRenderer),
        // A terminal never receives raw control characters; files and pipes do.
        Format::Csv => Box::new(csv::CsvRenderer { escape: terminal }),
    }
}

/// The width tables are fitted to: the terminal standard output is, else `COLUMNS`
/// when set, else none (no wrapping in pipes and files).
pub(crate) fn terminal_width() -> Option<u16> {
    terminal_width_of(std::io::stdout())
}

/// The width tables written to `stream` are fitted to, by the same rule.
pub(crate) fn terminal_width_of(stream: impl std::os::fd::AsFd) -> Option<u16> {
    if let Some((terminal_size::Width(w), _)) = terminal_size::terminal_size_of(stream) {
        return Some(w);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&w: &u16| w >= 20)
}
