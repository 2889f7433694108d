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
    let mut fams: Vec<&Family> = fams.iter().filter(|f| !f.samples.is_empty()).collect();
    fams.sort_by(|a, b| a.name.cmp(&b.name));
    let mut t = Text::new(format);
    for f in fams {
        // Each series' key worked out once, borrowed from its labels.
        let mut samples: Vec<(Vec<NaturalKey>, &(Labels, f64))> = f
            .samples
            .iter()
            .map(|s| (natural(&s.0).collect(), s))
            .collect();
        samples.sort_by(|a, b| a.0.cmp(&b.0));
        if f.counter {
            t.counter(&f.name, &f.help);
        } else {
            t.gauge(&f.name, &f.help);
        }
        let suffix = if f.counter { "_total" } else { "" };
        for (_, (labels, v)) in samples {
            let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            t.sample(&f.name, suffix, &l, *v);
        }
    }
    t.finish()
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
        use std::fmt::Write;
        let _ = write!(
            self.out,
            "# HELP {name}{suffix} {}\n# TYPE {name}{suffix} {kind}\n",
            help_text(help)
        );
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

    fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], value: f64) {
        use std::fmt::Write;
        let _ = write!(self.out, "{name}{suffix}");
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"");
                for c in v.chars() {
                    match c {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        if value.fract() == 0.0 && value.abs() < 9e15 {
            let _ = writeln!(self.out, " {}", value as i64);
        } else {
            let _ = writeln!(self.out, " {value}");
        }
    }

    fn finish(mut self) -> String {
        if self.format == TextFormat::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// HELP text as the exposition formats require: backslashes and newlines escaped,
/// other control characters left out (the encoder writes HELP as it is given).
fn help_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
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
                ],
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
}
