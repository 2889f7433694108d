//! `stat -x SEP` as perf stat writes it, field by field, so that a script written
//! for `perf stat -x,` reads bfperf unchanged: `[time,][location,]value,unit,event,
//! [variance,]run_time_ns,percentage_running,metric_value,metric_unit`; the time
//! as perf's `%6lu.%09lu`; `<not counted>` for a count that did not run (or was
//! invalidated), `<not supported>` for one the kernel refused; perf's own metric
//! beside each of its events; `--metric-only` as a header of metric names and a
//! line of values.

use std::borrow::Cow;
use std::io::{self, Write};

use crate::block::BlockKind;
use crate::front::escape::escape;
use crate::measure::{shadow, Count};
use crate::metrics::MetricValue;

/// A field of a line: borrowed from the counts where it is their text as it is.
pub(super) type Field<'a> = Cow<'a, str>;

/// How the lines are written.
pub(super) struct PerfCsv {
    pub sep: u8,
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
    let ns = (t.max(0.0) * 1e9).round() as u64;
    format!("{:6}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// perf's percentage of a count's time it ran: 100 unless it ran less than it
/// was enabled.
fn percent_running(c: &Count) -> Field<'static> {
    match c.running_ns != c.enabled_ns && c.enabled_ns > 0 {
        true => format!("{:.2}", 100.0 * c.running_ns as f64 / c.enabled_ns as f64).into(),
        // Most lines, every interval: without formatting a float.
        false => "100.00".into(),
    }
}

impl PerfCsv {
    /// `s` as a field: escaped when the output is a terminal, borrowed when
    /// nothing needs escaping.
    fn text<'a>(&self, s: &'a str) -> Field<'a> {
        match self.escape {
            true => escape(s),
            false => Cow::Borrowed(s),
        }
    }

    /// [`PerfCsv::text`] of a string made for the line, kept as it is when nothing
    /// needs escaping.
    fn owned_text(&self, s: String) -> Field<'static> {
        match self.escape {
            true => escape(&s).into_owned().into(),
            false => s.into(),
        }
    }

    /// The lines of a span (`time`: an interval's end; None for the total) over
    /// `wall_ns`. A perf event's line carries perf's metric for it; a metric of
    /// bfperf's goes on the line of the first of its block's counts its formula
    /// names (on a line of its own after a perf event's, or when a count already
    /// has one, or none of its counts is shown), as perf puts a metric on its
    /// leader's line.
    ///
    /// `time` is the interval's end as [`time_text`] writes it.
    pub(super) fn rows<'a>(
        &self,
        time: Option<&'a str>,
        wall_ns: u64,
        counts: &'a [Count],
        variance: Option<&[Option<f64>]>,
        metrics: &'a [MetricValue],
    ) -> Vec<Vec<Field<'a>>> {
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
        let mut rows: Vec<Vec<Field>> = Vec::with_capacity(counts.len() + metrics.len());
        for (i, c) in counts.iter().enumerate() {
            let mut r = self.count(time, c, variance.and_then(|v| v.get(i).copied().flatten()));
            let mut mine = metrics
                .iter()
                .zip(&leaders)
                .filter(|(_, l)| **l == Some(i))
                .map(|(v, _)| *v)
                .peekable();
            match (c.kind, mine.peek()) {
                (BlockKind::Perf, _) => r.extend(match shadow::of(c, counts, wall_ns) {
                    Some(s) => [s.value_text().into(), s.unit.into()],
                    None => [Field::Borrowed(""), Field::Borrowed("")],
                }),
                (_, Some(v)) => {
                    r.extend(self.metric_fields(v));
                    mine.next();
                }
                (_, None) => r.extend([Field::Borrowed(""), Field::Borrowed("")]),
            }
            rows.push(r);
            rows.extend(mine.map(|v| self.metric_line(time, v)));
        }
        for (v, _) in metrics.iter().zip(&leaders).filter(|(_, l)| l.is_none()) {
            rows.push(self.metric_line(time, v));
        }
        rows
    }

    /// A count's fields, up to the metric's.
    fn count<'a>(
        &self,
        time: Option<&'a str>,
        c: &'a Count,
        variance: Option<f64>,
    ) -> Vec<Field<'a>> {
        // Every field of a line, the metric's two included.
        let mut r: Vec<Field> = Vec::with_capacity(11);
        r.extend(time.map(Field::Borrowed));
        // -A: where it was counted, as perf's `CPU0`.
        if !self.aggregate {
            r.push(self.text(&c.block));
        }
        r.push(match (c.supported, c.value.filter(|_| c.valid)) {
            (false, _) => "<not supported>".into(),
            // perf's CSV has no place for a reason: a count another program (or
            // the owner) invalidated is not given as a number.
            (true, None) => "<not counted>".into(),
            (true, Some(v)) if c.unit == "ns" => format!("{:.2}", v as f64 / 1e6).into(),
            (true, Some(v)) => v.to_string().into(),
        });
        // perf names a unit only where there is one: `msec` for its clocks (the
        // device's blocks say what else they count, `bytes`, `cycles`).
        r.push(Field::Borrowed(match (c.kind, c.unit) {
            (_, "ns") => "msec",
            (BlockKind::Perf, _) | (_, "events" | "count") => "",
            (_, other) => other,
        }));
        r.push(match c.kind {
            BlockKind::Perf => self.text(&c.event),
            _ => self.owned_text(format!("{}/{}/", c.block, c.event)),
        });
        if self.repeated {
            r.push(variance.map_or(Field::Borrowed(""), |sd| format!("{sd:.2}%").into()));
        }
        r.push(c.running_ns.to_string().into());
        r.push(percent_running(c));
        r
    }

    /// A metric's two fields: its value (empty when it has none) and `unit name
    /// block`.
    fn metric_fields(&self, v: &MetricValue) -> [Field<'static>; 2] {
        [
            v.value
                .map(|x| format!("{x:.6}"))
                .unwrap_or_default()
                .into(),
            self.owned_text(format!("{} {} {}", v.unit, v.metric, v.block)),
        ]
    }

    /// A metric on a line of its own: the count fields empty (value, unit, event,
    /// run time and percentage, with -A the location and with -r the variance).
    fn metric_line<'a>(&self, time: Option<&'a str>, v: &MetricValue) -> Vec<Field<'a>> {
        let mut r: Vec<Field> = time.map(Field::Borrowed).into_iter().collect();
        let fields = 5 + usize::from(!self.aggregate) + usize::from(self.repeated);
        r.extend(std::iter::repeat_n(Field::Borrowed(""), fields));
        r.extend(self.metric_fields(v));
        r
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

    pub(super) fn write(&self, w: &mut dyn Write, rows: &[Vec<Field>]) -> io::Result<()> {
        // A line of one empty field is an empty line, as perf's (not `""`).
        let empty = |r: &Vec<Field>| r.len() == 1 && r[0].is_empty();
        let mut text = Vec::with_capacity(128 * rows.len());
        // One writer for each run of lines between empty ones, its buffer as small
        // as a few lines: a writer's buffer is zeroed when made (8 KiB by
        // default), which cost more than an interval's lines written through it.
        for run in rows.split_inclusive(empty) {
            let (lines, blank) = match run.split_last() {
                Some((last, lines)) if empty(last) => (lines, true),
                _ => (run, false),
            };
            if !lines.is_empty() {
                let mut out = ::csv::WriterBuilder::new()
                    .delimiter(self.sep)
                    .has_headers(false)
                    .flexible(true)
                    .buffer_capacity(1024)
                    .from_writer(&mut text);
                for r in lines {
                    out.write_record(r.iter().map(|f| f.as_bytes()))
                        .map_err(|e| io::Error::other(e.to_string()))?;
                }
                out.flush()?;
            }
            if blank {
                text.push(b'\n');
            }
        }
        w.write_all(&text)
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
        let csv = PerfCsv {
            sep: b',',
            aggregate: true,
            repeated: false,
            escape: false,
        };
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
        for (rows, want) in cases {
            let mut out = Vec::new();
            csv.write(&mut out, &rows).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
        let mut out = Vec::new();
        PerfCsv { sep: b';', ..csv }
            .write(&mut out, &[row(&["a;b", "c"])])
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "\"a;b\";c\n");
    }
}
