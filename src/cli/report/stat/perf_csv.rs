//! `stat -x SEP` as perf stat writes it, field by field, so that a script written
//! for `perf stat -x,` reads bfperf unchanged: `[time,][location,]value,unit,event,
//! [variance,]run_time_ns,percentage_running,metric_value,metric_unit`; the time
//! as perf's `%6lu.%09lu`; `<not counted>` for a count that did not run (or was
//! invalidated), `<not supported>` for one the kernel refused; perf's own metric
//! beside each of its events; `--metric-only` as a header of metric names and a
//! line of values.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

use crate::block::BlockKind;
use crate::front::escape::escape;
use crate::measure::{shadow, Count};
use crate::metrics::MetricValue;

/// A field of a line: borrowed from the counts where it is their text as it is.
pub(super) type Field<'a> = Cow<'a, str>;

/// How the lines are written.
pub(super) struct PerfCsv {
    /// Counts summed per kind (no location field), as perf aggregates.
    pub aggregate: bool,
    /// `-r`: every count line has a variance field.
    pub repeated: bool,
    /// Control characters in text escaped (the output is a terminal).
    pub escape: bool,
}

/// A time as perf prints an interval's: seconds right-aligned in six places, then
/// nanoseconds.
pub(super) fn time_text(t: f64) -> String {
    let mut out = String::with_capacity(20);
    time_into(&mut out, t);
    out
}

/// [`time_text`] appended to `out`, without `core::fmt` (every line of every
/// interval has one).
fn time_into(out: &mut String, t: f64) {
    let ns = (t.max(0.0) * 1e9).round() as u64;
    let mut digits = itoa::Buffer::new();
    let secs = digits.format(ns / 1_000_000_000);
    out.extend(std::iter::repeat_n(' ', 6usize.saturating_sub(secs.len())));
    out.push_str(secs);
    out.push('.');
    let frac = digits.format(ns % 1_000_000_000);
    out.extend(std::iter::repeat_n('0', 9 - frac.len()));
    out.push_str(frac);
}

/// perf's percentage of a count's time it ran: 100 unless it ran less than it
/// was enabled.
fn percent_running(c: &Count) -> Option<f64> {
    (c.running_ns != c.enabled_ns && c.enabled_ns > 0)
        .then(|| 100.0 * c.running_ns as f64 / c.enabled_ns as f64)
}

/// Lines as they are written: each line's fields gathered in one record kept from
/// line to line and handed to a csv writer kept for the run (its buffer made once:
/// a writer's buffer is zeroed when made, which cost more than an interval's
/// lines), which writes a whole record at once; numbers formatted without
/// `core::fmt`. Once the room is made, the lines of the device's counts allocate
/// nothing (a perf event's own metric is still a string of its own).
pub(super) struct Lines {
    csv: ::csv::Writer<Made>,
    /// The line's fields so far.
    record: ::csv::ByteRecord,
    /// Room for a field made for the line (a number with decimals, `block/event/`).
    scratch: String,
    /// Room for the interval's time, which every line has.
    time: String,
}

/// What the csv writer made, taken out between intervals (the writer lends only
/// a shared reference to what it writes to).
#[derive(Default)]
struct Made(std::cell::RefCell<Vec<u8>>);

impl Write for Made {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.get_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Lines {
    pub(super) fn new(sep: u8) -> Lines {
        Lines {
            csv: ::csv::WriterBuilder::new()
                .delimiter(sep)
                .has_headers(false)
                .flexible(true)
                .buffer_capacity(1024)
                .from_writer(Made::default()),
            record: ::csv::ByteRecord::new(),
            scratch: String::new(),
            time: String::new(),
        }
    }

    fn field(&mut self, f: &[u8]) {
        self.record.push_field(f);
    }

    /// A field of text: escaped when the output is a terminal.
    fn text(&mut self, s: &str, escaping: bool) {
        match escaping {
            true => self.field(escape(s).as_bytes()),
            false => self.field(s.as_bytes()),
        }
    }

    fn number(&mut self, n: u64) {
        self.field(itoa::Buffer::new().format(n).as_bytes());
    }

    /// A field formatted into the scratch room (escaped when asked).
    fn made(&mut self, escaping: bool, make: impl FnOnce(&mut String)) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        make(&mut scratch);
        self.text(&scratch, escaping);
        self.scratch = scratch;
    }

    /// Ends the line. A line of one empty field is an empty line, as perf's (the
    /// csv crate writes it `""`).
    fn end(&mut self) -> io::Result<()> {
        let written = match self.record.len() == 1 && self.record[0].is_empty() {
            true => self
                .csv
                .flush()
                .map(|()| self.csv.get_ref().0.borrow_mut().push(b'\n')),
            false => self
                .csv
                .write_byte_record(&self.record)
                .map_err(|e| io::Error::other(e.to_string())),
        };
        self.record.clear();
        written
    }

    /// Lines made of `rows`' fields.
    pub(super) fn rows(&mut self, rows: &[Vec<Field>]) -> io::Result<()> {
        for r in rows {
            for f in r {
                self.field(f.as_bytes());
            }
            self.end()?;
        }
        Ok(())
    }

    /// Writes the lines made so far to `w` in one write, and empties them.
    pub(super) fn out(&mut self, w: &mut dyn Write) -> io::Result<()> {
        self.csv.flush()?;
        let mut text = self.csv.get_ref().0.borrow_mut();
        let written = w.write_all(&text);
        text.clear();
        written
    }
}

impl PerfCsv {
    /// A string made for a field, escaped when the output is a terminal, kept as
    /// it is when nothing needs escaping.
    fn owned_text(&self, s: String) -> Field<'static> {
        match self.escape {
            true => escape(&s).into_owned().into(),
            false => s.into(),
        }
    }

    /// The lines of a span (`time`: an interval's end; None for the total) over
    /// `wall_ns`, added to `out`. A perf event's line carries perf's metric for
    /// it; a metric of bfperf's goes on the line of the first of its block's
    /// counts its formula names (on a line of its own after a perf event's, or
    /// when a count already has one, or none of its counts is shown), as perf puts
    /// a metric on its leader's line.
    pub(super) fn lines(
        &self,
        out: &mut Lines,
        time: Option<f64>,
        wall_ns: u64,
        counts: &[Count],
        variance: Option<&[Option<f64>]>,
        metrics: &[MetricValue],
    ) -> io::Result<()> {
        // Every line of an interval has its time, made once into room kept.
        let mut time_room = std::mem::take(&mut out.time);
        time_room.clear();
        let time = time.map(|t| {
            time_into(&mut time_room, t);
            &*time_room
        });
        let written = self.lines_at(out, time, wall_ns, counts, variance, metrics);
        out.time = time_room;
        written
    }

    fn lines_at(
        &self,
        out: &mut Lines,
        time: Option<&str>,
        wall_ns: u64,
        counts: &[Count],
        variance: Option<&[Option<f64>]>,
        metrics: &[MetricValue],
    ) -> io::Result<()> {
        let metrics: Vec<&MetricValue> = metrics
            .iter()
            .filter(|v| !(v.kind == BlockKind::Perf && shadow::SHOWN_BESIDE.contains(&&*v.metric)))
            .collect();
        let leader = |v: &MetricValue| {
            v.leads.iter().find_map(|e| {
                counts.iter().position(|c| {
                    // perf's events are counted per PMU (`software`), their
                    // metrics are of the kind.
                    let of = *c.block == *v.block
                        || c.kind == BlockKind::Perf && v.kind == BlockKind::Perf;
                    of && c.event.eq_ignore_ascii_case(e)
                })
            })
        };
        let leaders: Vec<Option<usize>> = metrics.iter().map(|v| leader(v)).collect();
        for (i, c) in counts.iter().enumerate() {
            self.count(
                out,
                time,
                c,
                variance.and_then(|v| v.get(i).copied().flatten()),
            );
            let mut mine = metrics
                .iter()
                .zip(&leaders)
                .filter(|(_, l)| **l == Some(i))
                .map(|(v, _)| *v)
                .peekable();
            match (c.kind, mine.peek()) {
                (BlockKind::Perf, _) => match shadow::of(c, counts, wall_ns) {
                    Some(s) => {
                        out.field(s.value_text().as_bytes());
                        out.field(s.unit.as_bytes());
                    }
                    None => {
                        out.field(b"");
                        out.field(b"");
                    }
                },
                (_, Some(v)) => {
                    self.metric_fields(out, v);
                    mine.next();
                }
                (_, None) => {
                    out.field(b"");
                    out.field(b"");
                }
            }
            out.end()?;
            for v in mine {
                self.metric_line(out, time, v)?;
            }
        }
        for (v, _) in metrics.iter().zip(&leaders).filter(|(_, l)| l.is_none()) {
            self.metric_line(out, time, v)?;
        }
        Ok(())
    }

    /// A count's fields, up to the metric's.
    fn count(&self, out: &mut Lines, time: Option<&str>, c: &Count, variance: Option<f64>) {
        if let Some(t) = time {
            out.field(t.as_bytes());
        }
        // -A: where it was counted, as perf's `CPU0`.
        if !self.aggregate {
            out.text(&c.block, self.escape);
        }
        match (c.supported, c.value.filter(|_| c.valid)) {
            (false, _) => out.field(b"<not supported>"),
            // perf's CSV has no place for a reason: a count another program (or
            // the owner) invalidated is not given as a number.
            (true, None) => out.field(b"<not counted>"),
            (true, Some(v)) if c.unit == "ns" => {
                out.made(false, |s| write!(s, "{:.2}", v as f64 / 1e6).unwrap_or(()))
            }
            (true, Some(v)) => out.number(v),
        }
        // perf names a unit only where there is one: `msec` for its clocks (the
        // device's blocks say what else they count, `bytes`, `cycles`).
        out.field(match (c.kind, c.unit) {
            (_, "ns") => b"msec",
            (BlockKind::Perf, _) | (_, "events" | "count") => b"",
            (_, other) => other.as_bytes(),
        });
        match c.kind {
            BlockKind::Perf => out.text(&c.event, self.escape),
            _ => out.made(self.escape, |s| {
                s.push_str(&c.block);
                s.push('/');
                s.push_str(&c.event);
                s.push('/');
            }),
        }
        if self.repeated {
            match variance {
                Some(sd) => out.made(false, |s| write!(s, "{sd:.2}%").unwrap_or(())),
                None => out.field(b""),
            }
        }
        out.number(c.running_ns);
        match percent_running(c) {
            Some(p) => out.made(false, |s| write!(s, "{p:.2}").unwrap_or(())),
            // Most lines, every interval: without formatting a float.
            None => out.field(b"100.00"),
        }
    }

    /// A metric's two fields: its value (empty when it has none) and `unit name
    /// block`.
    fn metric_fields(&self, out: &mut Lines, v: &MetricValue) {
        match v.value {
            Some(x) => out.made(false, |s| write!(s, "{x:.6}").unwrap_or(())),
            None => out.field(b""),
        }
        out.made(self.escape, |s| {
            write!(s, "{} {} {}", v.unit, v.metric, v.block).unwrap_or(())
        });
    }

    /// A metric on a line of its own: the count fields empty (value, unit, event,
    /// run time and percentage, with -A the location and with -r the variance).
    fn metric_line(&self, out: &mut Lines, time: Option<&str>, v: &MetricValue) -> io::Result<()> {
        if let Some(t) = time {
            out.field(t.as_bytes());
        }
        let fields = 5 + usize::from(!self.aggregate) + usize::from(self.repeated);
        for _ in 0..fields {
            out.field(b"");
        }
        self.metric_fields(out, v);
        out.end()
    }

    /// `--metric-only`: perf's header (` time` with -I, then each metric's unit
    /// and name), each field closed by the separator; then a line of values.
    pub(super) fn metric_columns(
        &self,
        header: bool,
        time: Option<f64>,
        values: &[MetricValue],
    ) -> Vec<Vec<Field<'static>>> {
        let name = |v: &MetricValue| match v.of_kind {
            true => v.metric.clone(),
            false => format!("{}:{}", v.block, v.metric),
        };
        let mut rows = Vec::new();
        if header {
            let mut head: Vec<Field> = time.map(|_| " time".into()).into_iter().collect();
            head.extend(values.iter().map(|v| match v.unit.is_empty() {
                true => self.owned_text(name(v)),
                false => self.owned_text(format!("{}  {}", v.unit, name(v))),
            }));
            head.push("".into());
            rows.push(head);
        }
        let mut row: Vec<Field> = time.map(|t| time_text(t).into()).into_iter().collect();
        row.extend(values.iter().map(|v| {
            v.value
                .map(|x| format!("{x:.6}"))
                .unwrap_or_default()
                .into()
        }));
        row.push("".into());
        rows.push(row);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_perf_prints_them() {
        assert_eq!(time_text(0.500308965), "     0.500308965");
        assert_eq!(time_text(1234567.25), "1234567.250000000");
    }

    /// Lines are written as the csv crate quotes them, a line of one empty field
    /// as an empty line, whatever comes before or after it.
    #[test]
    fn lines_and_empty_lines_are_written_as_perf_writes_them() {
        let row = |fields: &[&'static str]| {
            fields
                .iter()
                .map(|&f| Field::Borrowed(f))
                .collect::<Vec<_>>()
        };
        let cases: [(Vec<Vec<Field>>, &str); 4] = [
            (vec![row(&["a", "b"]), row(&["c,d", ""])], "a,b\n\"c,d\",\n"),
            (vec![row(&[""]), row(&["a"])], "\na\n"),
            (
                vec![row(&["a"]), row(&[""]), row(&[""]), row(&["b", "c"])],
                "a\n\n\nb,c\n",
            ),
            (vec![row(&["a"]), row(&[""])], "a\n\n"),
        ];
        let mut lines = Lines::new(b',');
        for (rows, want) in cases {
            let mut out = Vec::new();
            lines.rows(&rows).unwrap();
            lines.out(&mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
        let mut out = Vec::new();
        let mut lines = Lines::new(b';');
        lines.rows(&[row(&["a;b", "c"])]).unwrap();
        lines.out(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "\"a;b\";c\n");
    }
}
