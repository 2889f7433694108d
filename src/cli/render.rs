//! Rendering for people: tables with grouped numbers.

use comfy_table::{presets, CellAlignment, Table};

/// `1234567` → `1,234,567`.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate with grouping and two decimals.
pub fn group_f(x: f64) -> String {
    let whole = x.trunc().max(0.0) as u64;
    let frac = ((x - x.trunc()) * 100.0).round() as u64;
    if frac >= 100 {
        return format!("{}.00", group(whole + 1));
    }
    format!("{}.{frac:02}", group(whole))
}

/// A plain table: a header, columns separated by spaces, the given columns right-aligned.
pub fn table(header: &[&str], right: &[usize], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    for &i in right {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.lines()
        .map(|l| {
            l.trim_end()
                .strip_prefix(' ')
                .unwrap_or(l.trim_end())
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_digits() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group_f(1234.5), "1,234.50");
    }
}
