//! The exposition's text encoder: Prometheus' text format 0.0.4 and OpenMetrics,
//! written directly from families of samples (no intermediate model).

use super::{Family, Labels};

/// The two exposition formats Prometheus reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// OpenMetrics 1.0: counters' TYPE names the family, `# EOF` ends it.
    OpenMetrics,
    /// Prometheus' text format 0.0.4: counters' TYPE names the `_total` series.
    Text004,
}

/// The exposition of `fams` in `format`: families sorted by name, series by their
/// labels (blocks in natural order), the same every scrape; empty families left out.
pub fn render(fams: &[Family], format: TextFormat) -> String {
    let [out] = render_each(fams, [format]);
    out
}

/// The exposition of `fams` in each of `formats`, sorted once and written in one
/// pass (the exporter serves both formats from one sweep).
pub fn render_each<const N: usize>(fams: &[Family], formats: [TextFormat; N]) -> [String; N] {
    let mut fams: Vec<&Family> = fams.iter().filter(|f| !f.samples.is_empty()).collect();
    fams.sort_by(|a, b| a.name.cmp(&b.name));
    let mut texts = formats.map(Text::new);
    let mut keys: Vec<NaturalKey> = Vec::new();
    let mut order: Vec<(usize, usize, usize)> = Vec::new();
    for f in fams {
        // Each series' key worked out once, borrowed from its labels, all of a
        // family's in one vector: (start, end) of its keys, and its index.
        keys.clear();
        order.clear();
        for (i, (labels, _)) in f.samples.iter().enumerate() {
            let at = keys.len();
            keys.extend(natural(labels));
            order.push((at, keys.len(), i));
        }
        order.sort_by(|a, b| keys[a.0..a.1].cmp(&keys[b.0..b.1]));
        let suffix = if f.counter { "_total" } else { "" };
        for t in &mut texts {
            if f.counter {
                t.counter(&f.name, &f.help);
            } else {
                t.gauge(&f.name, &f.help);
            }
            for &(_, _, i) in &order {
                let (labels, v) = &f.samples[i];
                t.sample(&f.name, suffix, labels, *v);
            }
        }
    }
    texts.map(Text::finish)
}

/// A label value as the exposition sorts it ([`crate::device::natural_key`]).
type NaturalKey<'a> = (&'a str, u64, &'a str);

/// A series' labels in the order the exposition sorts by: each value's natural key.
fn natural(labels: &Labels) -> impl Iterator<Item = NaturalKey<'_>> {
    labels.iter().map(|(_, v)| crate::device::natural_key(v))
}

/// An exposition being written: families and samples,
/// label values and HELP escaped as the formats require.
struct Text {
    out: String,
    format: TextFormat,
}

impl Text {
    fn new(format: TextFormat) -> Text {
        Text {
            out: String::with_capacity(16 * 1024),
            format,
        }
    }

    fn head(&mut self, name: &str, help: &str, kind: &str, suffix: &str) {
        let out = &mut self.out;
        out.push_str("# HELP ");
        out.push_str(name);
        out.push_str(suffix);
        out.push(' ');
        help_text(out, help);
        out.push_str("\n# TYPE ");
        out.push_str(name);
        out.push_str(suffix);
        out.push(' ');
        out.push_str(kind);
        out.push('\n');
    }

    fn gauge(&mut self, name: &str, help: &str) {
        self.head(name, help, "gauge", "");
    }

    fn counter(&mut self, name: &str, help: &str) {
        let suffix = match self.format {
            TextFormat::OpenMetrics => "",
            TextFormat::Text004 => "_total",
        };
        self.head(name, help, "counter", suffix);
    }

    fn sample(&mut self, name: &str, suffix: &str, labels: &Labels, value: f64) {
        let out = &mut self.out;
        out.push_str(name);
        out.push_str(suffix);
        if !labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push_str("=\"");
                label_value(out, v);
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        if value.fract() == 0.0 && value.abs() < 9e15 {
            out.push_str(itoa::Buffer::new().format(value as i64));
        } else {
            use std::fmt::Write;
            let _ = write!(out, "{value}");
        }
        out.push('\n');
    }

    fn finish(mut self) -> String {
        if self.format == TextFormat::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// A label value as both formats require: backslash, double quote and newline
/// escaped; a value with none of them (nearly all) copied whole.
fn label_value(out: &mut String, v: &str) {
    if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP text as the exposition formats require: backslashes and newlines escaped,
/// other control characters left out (the encoder writes HELP as it is given).
fn help_text(out: &mut String, s: &str) {
    if !s
        .bytes()
        .any(|b| b == b'\\' || b.is_ascii_control() || b >= 0x80)
    {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_in_natural_order_of_their_labels() {
        let series = |block: &str, counter: &str| {
            (
                vec![
                    ("block", block.to_string()),
                    ("counter", counter.to_string()),
                ]
                .into(),
                1.0,
            )
        };
        let fam = Family {
            name: "bfperf_x".into(),
            help: "x".into(),
            counter: false,
            samples: vec![
                series("tile10", "1"),
                series("tile2", "10"),
                series("tile2", "2"),
                series("l3cachehalf1", "0"),
                series("tile", "0"),
            ],
        };
        let text = render(&[fam], TextFormat::Text004);
        let blocks: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split('}').next().unwrap())
            .collect();
        assert_eq!(
            blocks,
            [
                "bfperf_x{block=\"l3cachehalf1\",counter=\"0\"",
                "bfperf_x{block=\"tile\",counter=\"0\"",
                "bfperf_x{block=\"tile2\",counter=\"2\"",
                "bfperf_x{block=\"tile2\",counter=\"10\"",
                "bfperf_x{block=\"tile10\",counter=\"1\"",
            ]
        );
    }

    #[test]
    fn label_values_and_help_are_escaped_both_ways_and_both_formats_agree() {
        let fam = |help: &str, value: &str| Family {
            name: "bfperf_x".into(),
            help: help.into(),
            counter: true,
            samples: vec![(vec![("event", value.to_string())].into(), 3.0)],
        };
        let plain = fam("Events counted", "HNF0_CYCLES");
        let odd = fam("a \\ b\nc\u{7}d\u{85}e \u{e9}", "a\\b\"c\nd \u{e9}");
        let [om, text] = render_each(
            &[plain, odd],
            [TextFormat::OpenMetrics, TextFormat::Text004],
        );
        assert_eq!(
            text,
            "# HELP bfperf_x_total Events counted\n# TYPE bfperf_x_total counter\n\
             bfperf_x_total{event=\"HNF0_CYCLES\"} 3\n\
             # HELP bfperf_x_total a \\\\ b\\nc\u{7}d\u{85}e \u{e9}\n# TYPE bfperf_x_total counter\n\
             bfperf_x_total{event=\"a\\\\b\\\"c\\nd \u{e9}\"} 3\n"
                .replace("\u{7}", "")
                .replace("\u{85}", "")
        );
        assert_eq!(om, text.replace("bfperf_x_total ", "bfperf_x ") + "# EOF\n");
        assert_eq!(render(&[fam("h", "v")], TextFormat::Text004), "# HELP bfperf_x_total h\n# TYPE bfperf_x_total counter\nbfperf_x_total{event=\"v\"} 3\n");
    }
}
