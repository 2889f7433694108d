//! The values the driver's files hold: numbers (`0x1a2b`), event lines (`0x45:
//! HNF_REQUESTS`), and the clock readings are stamped with.

use crate::catalog::parse_event_line;
use crate::error::{errno, io_error, Error, Result};
use crate::sysfs::{layout, Sysfs};

/// Parses a value the driver printed (`0x1a2b`, or decimal from other drivers).
pub(crate) fn parse_value(text: &str) -> Option<u64> {
    // The driver pads with ASCII only (a newline); trimming by bytes keeps the
    // sampler's parse of every value short.
    let t = text.trim_ascii();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
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
