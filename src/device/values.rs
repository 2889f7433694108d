//! The values the driver's files hold: numbers (`0x1a2b`), event lines (`0x45:
//! HNF_REQUESTS`), and the clock readings are stamped with.

use crate::catalog::parse_event_line;
use crate::error::{errno, io_error, Error, Result};
use crate::sysfs::{layout, Sysfs};

/// Parses a value the driver printed (`0x1a2b`, or decimal from other drivers).
pub(crate) fn parse_value(text: &str) -> Option<u64> {
    parse_number(text.as_bytes())
}

/// [`parse_value`] of the bytes a file gave, as Rust parses a `u64` (a `+` may
/// lead the digits; anything else, or too large, is no number), without checking
/// them as UTF-8 first: the sampler parses every value it reads with it.
pub(crate) fn parse_number(bytes: &[u8]) -> Option<u64> {
    // The driver pads with ASCII only (a newline).
    let t = bytes.trim_ascii();
    let (digits, radix) = match t {
        [b'0', b'x' | b'X', hex @ ..] => (hex, 16),
        _ => (t, 10),
    };
    let digits = digits.strip_prefix(b"+").unwrap_or(digits);
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' if radix == 16 => c - b'a' + 10,
            b'A'..=b'F' if radix == 16 => c - b'A' + 10,
            _ => return None,
        };
        v = match radix {
            // A hex digit more fits while the top four bits are clear.
            16 if v >> 60 == 0 => (v << 4) | u64::from(d),
            16 => return None,
            _ => v.checked_mul(10)?.checked_add(u64::from(d))?,
        };
    }
    Some(v)
}

fn read_text(fs: &dyn Sysfs, rel: &str) -> Result<String> {
    fs.read(rel).map_err(|e| io_error("reading", rel, None, e))
}

/// Reads a file holding one number (`counter<N>`, a register, `enable`, `count_clock`).
pub(crate) fn read_number(fs: &dyn Sysfs, rel: &str) -> Result<u64> {
    let text = read_text(fs, rel)?;
    parse_value(&text).ok_or_else(|| Error::BadContent {
        file: rel.to_string(),
        content: text.trim_end().chars().take(80).collect(),
        expected: "a number such as 0x1f",
    })
}

/// What the out-of-tree driver prints for an event it has no name for.
const UNNAMED: &str = "(null)";

/// Reads `event<N>`: the number and, when the file says it, the name. None when nothing
/// nameable is programmed (the driver answers EINVAL, or "No event being monitored").
/// A bare number (a plain-file copy of the tree after a write) has no name.
pub(crate) fn read_event(
    fs: &dyn Sysfs,
    block: &str,
    index: u32,
) -> Result<Option<(u32, Option<String>)>> {
    let rel = layout::event(block, index);
    match fs.read(&rel) {
        Ok(text) => Ok(parse_event(&text)),
        Err(e) if e.raw_os_error() == Some(errno::EINVAL) => Ok(None),
        Err(e) => Err(io_error("reading", &rel, None, e)),
    }
}

/// What an `event<N>` file's text says: the number and, when it says it, the name.
pub(crate) fn parse_event(text: &str) -> Option<(u32, Option<String>)> {
    let t = text.trim();
    match parse_event_line(t) {
        // The out-of-tree driver prints a number it cannot name as `(null)`.
        Some((n, name)) if name == UNNAMED => Some((n, None)),
        Some((n, name)) => Some((n, Some(name))),
        None => parse_value(t)
            .and_then(|n| u32::try_from(n).ok())
            .map(|n| (n, None)),
    }
}

/// The number an `event<N>` file's text names; None when it names nothing.
pub(crate) fn event_number(text: &str) -> Option<u32> {
    let t = text.trim_ascii();
    match crate::catalog::split_event_line(t) {
        Some((n, _)) => Some(n),
        None => parse_value(t).and_then(|n| u32::try_from(n).ok()),
    }
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC), comparable between processes on one boot.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parse as it was written with the standard library's parsers.
    fn by_std(text: &str) -> Option<u64> {
        let t = text.trim_ascii();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        }
    }

    #[test]
    fn values_parse_as_the_standard_library_parses_them() {
        let cases = [
            "0x1a2b\n",
            "0X1F",
            "0xffffffffffffffff",
            "0x10000000000000000",
            "12\n",
            " 7 ",
            "18446744073709551615",
            "18446744073709551616",
            "+7",
            "0x+f",
            "++7",
            "-1",
            "0x-1",
            "0x",
            "",
            " ",
            "+",
            "1_0",
            "ff",
            "0xfg",
            "1e3",
            "0x0",
            "00",
            "0b1",
            "é1",
            "1\u{0}",
        ];
        for c in cases {
            assert_eq!(parse_value(c), by_std(c), "{c:?}");
            assert_eq!(parse_number(c.as_bytes()), by_std(c), "{c:?}");
        }
        assert_eq!(parse_number(b"0x1\xff"), None);
    }
}
