//! `stat`'s tables: the `-I` lines as they come, and the summary after a run.

use std::io::{self, Write};

use super::Ending;
use crate::cli::output::{group_into, pad_into, Cell, Document, Report, Table};
use crate::front::escape::escape;
use crate::measure::order::PerCount;
use crate::measure::repeat::spread_of;
use crate::measure::Count;
use crate::metrics::MetricValue;

/// A count's coverage; nothing for one the kernel refused (perf's `<not supported>`
/// has no share of time to speak of).
pub(super) fn coverage_text(c: &Count) -> String {
    match c.supported {
        true => format!("{}%", crate::cli::output::percent(c.coverage)),
        false => String::new(),
    }
}

/// A count's value as a table or perf's CSV shows it.
pub(super) enum Shown {
    Count(u64),
    /// perf's time events (task-clock, cpu-clock) count nanoseconds; perf shows
    /// them in milliseconds.
    Msec(f64),
    Missing(&'static str),
}

/// What a table or perf's CSV shows of a count: the value, and its unit.
pub(super) fn shown(c: &Count) -> (Shown, &'static str) {
    let value = match c.value {
        None => Shown::Missing(c.missing_text()),
        Some(v) if c.unit == "ns" => Shown::Msec(v as f64 / 1e6),
        Some(v) => Shown::Count(v),
    };
    (value, if c.unit == "ns" { "msec" } else { c.unit })
}

/// The header line of an `-I` table.
pub(super) const INTERVAL_HEADER: [&str; 6] = [
    "# TIME",
    "BLOCK",
    "EVENT OR METRIC",
    "VALUE",
    "UNIT",
    "NOTE",
];

/// One line of an `-I` table: time, block, event or metric, value, unit, note, in
/// the columns the header names (block and name escaped for the terminal).
pub(super) fn interval_line(w: &mut dyn Write, fields: [&str; 6]) -> io::Result<()> {
    let mut line = String::with_capacity(128 + fields[5].len());
    push_interval_line(&mut line, fields);
    w.write_all(line.as_bytes())
}

/// [`interval_line`], added to `line` (an interval's lines are written at once).
pub(super) fn push_interval_line(
    line: &mut String,
    [time, block, name, value, unit, note]: [&str; 6],
) {
    let line_start = line.len();
    pad_into(line, time, 10, true);
    push_names(line, block, name);
    push_after_names(line, line_start, [value, unit, note]);
}

/// [`push_interval_line`] with the block and event columns laid out already
/// ([`name_columns`]).
pub(super) fn push_interval_line_named(
    line: &mut String,
    [time, names, value, unit, note]: [&str; 5],
) {
    let line_start = line.len();
    pad_into(line, time, 10, true);
    line.push_str(names);
    push_after_names(line, line_start, [value, unit, note]);
}

/// The block and event columns of a line, with the spaces that part them from the
/// columns either side.
fn push_names(line: &mut String, block: &str, name: &str) {
    line.push_str("  ");
    pad_into(line, &escape(block), 14, false);
    line.push(' ');
    pad_into(line, &escape(name), 34, false);
    line.push(' ');
}

/// The value, unit and note of the line begun at `line_start`, its end trimmed.
/// Padded in runs: the formatter's padding writes one character at a time, on
/// every line of every interval.
fn push_after_names(line: &mut String, line_start: usize, [value, unit, note]: [&str; 3]) {
    pad_into(line, value, 18, true);
    line.push(' ');
    pad_into(line, unit, 8, false);
    line.push(' ');
    line.push_str(note);
    let end = line_start + line[line_start..].trim_end().len();
    line.truncate(end);
    line.push('\n');
}

/// The block and event columns of line `n` of an interval table for count `c`,
/// escaped and padded once: the counts of every interval are the same, in the
/// same order, so only their values are laid out anew.
pub(super) fn name_columns<'k>(kept: &'k mut PerCount<String>, n: usize, c: &Count) -> &'k str {
    kept.of(n, c, |c| {
        let mut text = String::with_capacity(64);
        push_names(&mut text, &c.block, &c.event);
        text
    })
}

/// What a table shows for a count's value, added to `out`: perf's `<not counted>` when
/// it never got a turn.
pub(super) fn value_text_into(out: &mut String, c: &Count, big_num: bool) {
    match shown(c).0 {
        Shown::Count(v) if big_num => group_into(out, v),
        Shown::Count(v) => out.push_str(itoa::Buffer::new().format(v)),
        Shown::Msec(ms) => out.push_str(&crate::cli::output::group_f(ms)),
        Shown::Missing(text) => out.push_str(text),
    }
}

/// The note of a count: why it is invalid, or that it is an estimate.
pub(super) fn note_text(c: &Count) -> String {
    if !c.supported {
        return c.invalid.clone().unwrap_or_default();
    }
    if !c.valid {
        return format!(
            "invalid: {}",
            c.invalid.as_deref().unwrap_or("touched by another program")
        );
    }
    if let (false, Some(why)) = (c.counted, &c.invalid) {
        return format!("not counted: {why}");
    }
    if !c.counted {
        return "not counted in this span: its turn never came, or a busy machine left its window's bounds unknown; count longer, or fewer events".into();
    }
    let mut note = match c.coverage < 1.0 {
        true => format!("estimate: counted {}", coverage_text(c)),
        false => String::new(),
    };
    // A span partly enabled (--delay, --control) says how much of it counted.
    if let Some(why) = &c.invalid {
        note = match note.is_empty() {
            true => why.clone(),
            false => format!("{note}; {why}"),
        };
    }
    note
}

pub(super) struct SummaryTable<'a> {
    pub(super) mean: &'a [(Count, Option<f64>)],
    /// Counts with thousands' separators (unless --no-big-num).
    pub(super) big_num: bool,
    pub(super) metrics: &'a [MetricValue],
    /// Each run's length, seconds.
    pub(super) elapsed: Vec<f64>,
    /// How long each run counted (less than its length with --delay, --control).
    pub(super) enabled: Vec<f64>,
    pub(super) ending: &'a Ending,
}

impl SummaryTable<'_> {
    /// The first line: what was measured, for how long, and where perf events were
    /// counted (perf's "for 'system wide'").
    fn heading(&self) -> String {
        let e = self.ending;
        let what = match &e.command {
            Some(c) => format!("'{c}'"),
            None => "the period".to_string(),
        };
        let runs = match self.elapsed.len() {
            n if n > 1 => format!(" ({n} runs)"),
            _ => String::new(),
        };
        let perf = match (e.perf_scope, e.perf_cpus) {
            (Some("process"), _) => "; perf events of the process measured and its children".into(),
            (Some(_), Some(1)) => "; perf events system-wide, 1 CPU".into(),
            (Some(_), Some(n)) => format!("; perf events system-wide, {n} CPUs"),
            _ => String::new(),
        };
        let (mean, _) = spread_of(&self.elapsed);
        let (on, _) = spread_of(&self.enabled);
        let counted = match self.gated() {
            true => format!("{on:.3} s counted of "),
            false => String::new(),
        };
        format!("counts for {what}{runs}, {counted}{mean:.3} s{perf}:")
    }

    /// Whether counting was enabled for less than the runs lasted.
    fn gated(&self) -> bool {
        self.enabled != self.elapsed
    }

    /// After a command, as perf stat: the time elapsed (with its spread over -r
    /// runs) and, with --delay or --control, how long it was counted; then the
    /// command's user and system time (one run).
    fn times(&self, d: &mut Document) {
        let e = self.ending;
        if e.command.is_none() {
            return;
        }
        let (mean, sd) = spread_of(&self.elapsed);
        let spread = sd.map_or_else(String::new, |sd| format!(" ( +- {sd:.2}% )"));
        d.line(String::new());
        d.line(format!("{mean:>14.9} seconds time elapsed{spread}"));
        if self.gated() {
            let (on, _) = spread_of(&self.enabled);
            d.line(format!("{on:>14.9} seconds counted (enabled)"));
        }
        if let (Some(user), Some(sys), 1) = (e.user_s, e.sys_s, self.elapsed.len()) {
            d.line(String::new());
            d.line(format!("{user:>14.9} seconds user"));
            d.line(format!("{sys:>14.9} seconds sys"));
        }
    }
}

impl Report for SummaryTable<'_> {
    fn json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn document(&self) -> Document {
        let mut d = Document::default();
        d.line(self.heading());
        let spread = self.elapsed.len() > 1;
        let mut header = vec!["BLOCK", "EVENT", "VALUE", "UNIT", "COVERAGE"];
        if spread {
            header.push("+-");
        }
        header.push("NOTE");
        let mut t = Table::new(&header);
        for (c, sd) in self.mean {
            let (value, unit) = shown(c);
            let mut row = vec![
                Cell::text(if c.blocks > 1 {
                    format!("{} ({} blocks)", c.block, c.blocks)
                } else {
                    c.block.to_string()
                }),
                Cell::text(&*c.event),
                match value {
                    Shown::Count(v) if self.big_num => Cell::Int(v),
                    Shown::Count(v) => Cell::Plain(v),
                    Shown::Msec(ms) => Cell::Float(ms),
                    Shown::Missing(text) => Cell::text(text),
                },
                Cell::text(unit),
                Cell::text(coverage_text(c)),
            ];
            if spread {
                row.push(Cell::text(
                    sd.map(|s| format!("{s:.2}%")).unwrap_or_default(),
                ));
            }
            row.push(Cell::text(note_text(c)));
            t.row(row);
        }
        // --metric-only leaves no counts.
        if !self.mean.is_empty() {
            d.table(t);
        }
        if !self.metrics.is_empty() {
            d.table(crate::cli::report::metric_table(self.metrics));
        }
        // An invalid count says why in its note; this is about turns.
        if self.mean.iter().any(|(c, _)| c.coverage < 1.0 && c.valid) {
            d.line("coverage below 100%: more events than counters took turns, or a block that is stopped to be read (L3, crspace) was stopped for that share of the time; values are scaled estimates, and <not counted> never got a turn");
        }
        if let Some(sig) = &self.ending.interrupted_by {
            d.line(format!(
                "interrupted by {sig}: the counts cover the time until then"
            ));
        }
        if !self.ending.restored {
            d.line("the counters were left programmed (--no-restore)");
        }
        self.times(&mut d);
        d
    }
}

#[cfg(test)]
mod tests {
    /// The padding by slices lays a line out as the formatter's padding would.
    #[test]
    fn interval_lines_are_padded_as_the_formatter_pads() {
        let fields = [
            ["1.000", "tile", "MEMORY_READS", "1,234", "events", ""],
            super::INTERVAL_HEADER,
            [
                "12.5",
                "llt_miss12",
                "a µ name wider than thirty-four characters",
                "<not counted>",
                "",
                "why",
            ],
            ["", "", "", "", "", ""],
            [
                "0.1",
                "mss0",
                "ddr_read_bandwidth",
                "2.00",
                "GB/s",
                "estimate: counted 50%",
            ],
        ];
        for [time, block, name, value, unit, note] in fields {
            let mut got = Vec::new();
            super::interval_line(&mut got, [time, block, name, value, unit, note]).unwrap();
            let want = format!("{time:>10}  {block:<14} {name:<34} {value:>18} {unit:<8} {note}");
            assert_eq!(
                String::from_utf8(got).unwrap(),
                format!("{}\n", want.trim_end())
            );
        }
    }

    /// An interval's lines laid out with the names kept from the interval before
    /// are the lines laid out whole, and a line whose count changed is laid out
    /// anew.
    #[test]
    fn kept_name_columns_lay_out_the_same_lines() {
        let count = |block: &str, event: &str| {
            crate::measure::Count::example(block, crate::block::BlockKind::Tile, event, 1)
        };
        let mut names = crate::measure::order::PerCount::default();
        let first = [count("tile", "MEMORY_READS"), count("tile\u{1b}", "A")];
        let second = [
            count("tile", "MEMORY_READS"),
            count("tile2", "MEMORY_WRITES"),
        ];
        for counts in [&first, &first, &second, &first] {
            for (n, c) in counts.iter().enumerate() {
                let mut kept = String::new();
                let columns = super::name_columns(&mut names, n, c).to_string();
                super::push_interval_line_named(&mut kept, ["1.000", &columns, "7", "events", ""]);
                let mut whole = String::new();
                super::push_interval_line(
                    &mut whole,
                    ["1.000", &c.block, &c.event, "7", "events", ""],
                );
                assert_eq!(kept, whole);
            }
        }
        assert!(super::name_columns(&mut names, 1, &first[1]).contains("tile\\x1b"));
        // A line not laid out before the one asked for is no panic.
        let mut fresh = crate::measure::order::PerCount::default();
        assert!(super::name_columns(&mut fresh, 3, &first[0]).contains("MEMORY_READS"));
    }
}
