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
        let mut samples: Vec<&(Labels, f64)> = f.samples.iter().collect();
        samples.sort_by_cached_key(|(labels, _)| {
            labels
                .iter()
                .map(|(_, v)| crate::device::natural_key(v))
                .collect::<Vec<_>>()
        });
        if f.counter {
            t.counter(&f.name, &f.help);
        } else {
            t.gauge(&f.name, &f.help);
        }
        let suffix = if f.counter { "_total" } else { "" };
        for (labels, v) in samples {
            let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            t.sample(&f.name, suffix, &l, *v);
        }
    }
    t.finish()
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
