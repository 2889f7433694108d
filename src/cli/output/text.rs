//! Text for people: numbers grouped, cells padded (device strings are escaped by
//! `front::escape`).

/// Appends `s` to `line` padded with spaces to `width` characters, on the left
/// (`right`-aligned) or on the right, as the formatter's `{:>w}` and `{:<w}` would;
/// the spaces go in as one run rather than a character at a time (tables and `-I`
/// lines pad every cell of every line).
pub(crate) fn pad_into(line: &mut String, s: &str, width: usize, right: bool) {
    pad_by(line, s, width.saturating_sub(s.chars().count()), right);
}

/// Appends `s` to `line` with `fill` spaces on the left (`right`-aligned) or on
/// the right: [`pad_into`] for a caller that knows the width of `s` (ASCII).
pub(crate) fn pad_by(line: &mut String, s: &str, fill: usize, right: bool) {
    if right {
        spaces(line, fill);
        line.push_str(s);
    } else {
        line.push_str(s);
        spaces(line, fill);
    }
}

/// `n` spaces, copied as slices of a run of them (`extend` with a repeated `' '`
/// pushes them one character at a time: a third of an `-I` line's cost).
fn spaces(line: &mut String, mut n: usize) {
    const RUN: &str = "                                                                ";
    while n > 0 {
        let k = n.min(RUN.len());
        line.push_str(&RUN[..k]);
        n -= k;
    }
}

/// `1234567` → `1,234,567`.
pub(crate) fn group(n: u64) -> String {
    let mut out = String::with_capacity(26);
    group_into(&mut out, n);
    out
}

/// [`group`], added to `out` (every value of every -I line goes through here).
pub(crate) fn group_into(out: &mut String, n: u64) {
    // The digits on the stack, then grouped into `out`.
    let mut digits = [0u8; 20];
    let (mut at, mut rest) = (digits.len(), n);
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let s = &digits[at..];
    for (i, &c) in s.iter().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(char::from(c));
    }
}

/// A rate with grouping and two decimals; one that two decimals would show as
/// zero with two significant digits (`0.0035`, where perf says `0.004 CPUs
/// utilized`): a value measured is never shown as nothing.
pub(crate) fn group_f(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    if let Some(small) = small(x) {
        return small;
    }
    let sign = if x < 0.0 { "-" } else { "" };
    let x = x.abs();
    let cents = (x * 100.0).round();
    let whole = (cents / 100.0).trunc() as u64;
    let frac = (cents - whole as f64 * 100.0) as u64;
    format!("{sign}{}.{frac:02}", group(whole))
}

/// `x` with three decimals, as `format!("{x:.3}")` writes it, for the time at the
/// start of every `-I` line. Written from integers: the float formatter is the
/// largest piece of code a sampling tick otherwise runs. A value within a millionth
/// of a millisecond of halfway between two, or not a plain non-negative number, is
/// left to the formatter, whose rounding of the exact value decides it.
pub(crate) fn three_decimals(x: f64) -> String {
    let mut out = String::with_capacity(24);
    three_decimals_into(&mut out, x);
    out
}

/// [`three_decimals`], added to `out`.
pub(crate) fn three_decimals_into(out: &mut String, x: f64) {
    let ms = x * 1000.0;
    let frac = ms - ms.trunc();
    if !(0.0..1e15).contains(&ms) || ms.is_sign_negative() || (frac - 0.5).abs() < 1e-6 {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(out, "{x:.3}");
        return;
    }
    let ms = ms.round() as u64;
    out.push_str(itoa::Buffer::new().format(ms / 1000));
    out.push('.');
    let rest = (ms % 1000) as u16;
    out.push(char::from(b'0' + (rest / 100) as u8));
    out.push(char::from(b'0' + (rest / 10 % 10) as u8));
    out.push(char::from(b'0' + (rest % 10) as u8));
}

/// `x` with two decimals, or with two significant digits where two decimals would
/// read zero.
pub(crate) fn two_decimals(x: f64) -> String {
    small(x).unwrap_or_else(|| format!("{x:.2}"))
}

/// A value other than zero that two decimals would show as zero, with two
/// significant digits (`0.0035`, `-0.00012`).
fn small(x: f64) -> Option<String> {
    if x == 0.0 || !x.is_finite() || (x.abs() * 100.0).round() != 0.0 {
        return None;
    }
    let places = (1 - x.abs().log10().floor() as i32).clamp(3, 17) as usize;
    let text = format!("{x:.places$}");
    // A value just under a power of ten rounds up to it (0.000999999 to 0.00100):
    // one place fewer keeps the two significant digits (0.0010).
    let significant = text.trim_start_matches(['-', '0', '.']).len();
    match significant > 2 && places > 3 {
        true => Some(format!("{x:.0$}", places - 1)),
        false => Some(text),
    }
}

/// A value with its unit as a person reads it, as perf prints rates: scaled to an
/// SI prefix where the unit takes one (`1.11 GB/s`, `11.48 M/sec`, `2.00 GHz`);
/// other units (`%`, ratios) as they are, with two decimals.
pub(crate) fn readable(x: f64, unit: &str) -> (String, String) {
    let Some((base, factor)) = scale_of(unit).filter(|_| x.is_finite()) else {
        return (group_f(x), unit.to_string());
    };
    let v = x * factor;
    let mut i = PREFIXES
        .iter()
        .rposition(|(_, f)| v.abs() >= *f)
        .unwrap_or(0);
    // Rounded as shown first: a value that rounds up to 1000 of its prefix reads
    // `1.00 GB/s`, not `1000.00 MB/s`.
    if i + 1 < PREFIXES.len() && (v.abs() / PREFIXES[i].1 * 100.0).round() >= 100_000.0 {
        i += 1;
    }
    let (p, f) = PREFIXES[i];
    (two_decimals(v / f), format!("{p}{base}"))
}

/// A coverage in percent with two decimals, rounded down: only what counted all of
/// its span reads `100.00`.
pub(crate) fn percent(coverage: f64) -> String {
    format!("{:.2}", (coverage * 10_000.0).floor() / 100.0)
}

/// `x` in `unit`, shown in `shown` (a unit [`readable`] chose for the same
/// quantity): a column keeps one unit, as perf's does. None when they do not scale
/// into each other.
pub(crate) fn readable_as(x: f64, unit: &str, shown: &str) -> Option<String> {
    let (base, factor) = scale_of(unit).filter(|_| x.is_finite())?;
    let (shown_base, shown_factor) = scale_of(shown)?;
    (base == shown_base).then(|| two_decimals(x * factor / shown_factor))
}

const PREFIXES: [(&str, f64); 5] = [("", 1.0), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)];

/// A unit's base (`B/s`) and what one of it is in that base (1e9 for `GB/s`); None
/// for a unit without prefixes (`%`, `events`).
fn scale_of(unit: &str) -> Option<(&str, f64)> {
    if unit == "/s" {
        return Some(("/sec", 1.0));
    }
    PREFIXES.iter().rev().find_map(|(p, f)| {
        let rest = unit.strip_prefix(p)?;
        ["B/s", "b/s", "Hz", "B", "/sec"]
            .contains(&rest)
            .then_some((rest, *f))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two significant digits, also where rounding carries to the next power of ten.
    #[test]
    fn small_values_keep_two_significant_digits() {
        for (x, want) in [
            (0.0035, "0.0035"),
            (-0.00012, "-0.00012"),
            (0.001, "0.0010"),
            (0.000999999, "0.0010"),
            (-0.000999999, "-0.0010"),
            (0.0000999996, "0.00010"),
            (0.0049, "0.0049"),
            (0.00995, "0.01"),
        ] {
            assert_eq!(two_decimals(x), want, "{x:e}");
        }
    }

    /// Three decimals written from integers are the formatter's, on every edge and
    /// on a sweep of the times a run's intervals take.
    #[test]
    fn three_decimals_are_the_formatters() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.0005,
            0.0015,
            0.0625,
            0.1,
            0.5,
            0.9995,
            1.0,
            1.9995,
            2.0005,
            12.3456,
            999.9995,
            1e9,
            1e11 + 0.0004,
            1e12,
            1e13,
            f64::NAN,
            f64::INFINITY,
            -1.0,
            -0.0004,
            f64::MIN_POSITIVE,
            f64::MAX,
        ];
        // Intervals as a run takes them: a little after each 100 ms, for five hours.
        let mut t = 0.0f64;
        for i in 0..200_000u64 {
            t += 0.1 + (i % 7) as f64 * 1.3e-5;
            xs.push(t);
            xs.push(i as f64 / 1000.0);
            xs.push(i as f64 / 2000.0);
        }
        for x in xs {
            assert_eq!(three_decimals(x), format!("{x:.3}"), "{x:e}");
        }
    }

    #[test]
    fn a_column_keeps_its_unit_and_coverage_never_rounds_up() {
        assert_eq!(readable_as(0.99999, "GB/s", "GB/s"), Some("1.00".into()));
        assert_eq!(readable_as(0.0023, "GB/s", "GB/s"), Some("0.0023".into()));
        assert_eq!(readable_as(2.5e9, "/s", "M/sec"), Some("2500.00".into()));
        assert_eq!(readable_as(1.0, "GB/s", "%"), None);
        assert_eq!(percent(0.99999), "99.99");
        assert_eq!(percent(1.0), "100.00");
        assert_eq!(percent(0.5), "50.00");
    }

    #[test]
    fn rates_read_like_perf() {
        assert_eq!(readable(1.11, "GB/s"), ("1.11".into(), "GB/s".into()));
        assert_eq!(readable(0.0023, "GB/s"), ("2.30".into(), "MB/s".into()));
        assert_eq!(
            readable(11_480_000.0, "/s"),
            ("11.48".into(), "M/sec".into())
        );
        assert_eq!(readable(2000.0, "MHz"), ("2.00".into(), "GHz".into()));
        assert_eq!(readable(75.0, "%"), ("75.00".into(), "%".into()));
        assert_eq!(readable(256.0, "B"), ("256.00".into(), "B".into()));
        // Rounded first, then the unit chosen (perf's habit): 0.99999769 GB/s.
        assert_eq!(readable(0.99999769, "GB/s"), ("1.00".into(), "GB/s".into()));
        assert_eq!(readable(0.999994, "GB/s"), ("999.99".into(), "MB/s".into()));
        assert_eq!(
            readable(-0.9999977, "GB/s"),
            ("-1.00".into(), "GB/s".into())
        );
    }

    #[test]
    fn groups_digits() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group_f(1234.5), "1,234.50");
        assert_eq!(group_f(0.999), "1.00");
        assert_eq!(group_f(-2.5), "-2.50");
        // Never a measured value shown as zero: two significant digits instead.
        assert_eq!(group_f(0.0035), "0.0035");
        assert_eq!(group_f(0.005), "0.01");
        assert_eq!(group_f(0.0049), "0.0049");
        assert_eq!(group_f(-0.00012345), "-0.00012");
        assert_eq!(group_f(0.0), "0.00");
        assert_eq!(readable(0.003, "B/s"), ("0.0030".into(), "B/s".into()));
    }
}
