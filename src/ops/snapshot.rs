//! Snapshots: every selected value read once, with wall-clock and monotonic time, as
//! one JSON document (schema in docs/snapshot-schema.md).

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::read::read_blocks;
use crate::block::BlockKind;
use crate::device::Device;
use crate::error::{Error, Result};

/// The `schema` field of every snapshot.
pub const SCHEMA: &str = "bfperf-snapshot";
/// The current schema version. Readers accept this version only.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub schema: String,
    pub schema_version: u32,
    /// Wall-clock time of the reads, RFC 3339 UTC.
    pub timestamp: String,
    /// Wall-clock time of the reads, ns since the Unix epoch.
    pub timestamp_unix_ns: u64,
    /// CLOCK_MONOTONIC at the middle of the reads, ns.
    pub monotonic_ns: u64,
    /// How long reading all values took, ns.
    pub read_window_ns: u64,
    pub hostname: String,
    pub device: String,
    pub generation: String,
    pub blocks: Vec<SnapshotBlock>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotBlock {
    pub name: String,
    pub kind: String,
    pub mechanism: String,
    /// `enable` state of L3/crspace blocks; null for others.
    pub enabled: Option<bool>,
    pub counters: Vec<SnapshotCounter>,
    pub registers: Vec<SnapshotRegister>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotCounter {
    pub index: u32,
    pub event: Option<u32>,
    pub event_name: Option<String>,
    #[serde(default)]
    pub counts_clock: bool,
    pub value: u64,
    pub width_bits: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRegister {
    pub name: String,
    pub value: u64,
    pub width_bits: u32,
}

/// Takes a snapshot. No selector: the PCIe TLR statistics (`pcie` blocks).
pub fn take(device: &Device, selectors: &[String]) -> Result<Snapshot> {
    let blocks = if selectors.is_empty() {
        let pcie: Vec<_> = device
            .blocks()
            .iter()
            .filter(|b| b.kind == BlockKind::Pcie)
            .collect();
        if pcie.is_empty() {
            return Err(Error::Invalid(format!(
                "this device ({}) has no pcie blocks; choose blocks to snapshot, e.g. `bfperf snapshot all`",
                device.generation().label()
            )));
        }
        pcie
    } else {
        device.select(selectors)?
    };
    let readings = read_blocks(device, &blocks)?;
    let unix_ns = readings
        .wall
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    Ok(Snapshot {
        schema: SCHEMA.to_string(),
        schema_version: SCHEMA_VERSION,
        timestamp: rfc3339(readings.wall),
        timestamp_unix_ns: unix_ns,
        monotonic_ns: readings.monotonic_ns,
        read_window_ns: readings.window_ns,
        hostname: hostname(),
        device: device.location(),
        generation: device.generation().label().to_string(),
        blocks: readings
            .blocks
            .into_iter()
            .map(|b| SnapshotBlock {
                name: b.block,
                kind: b.kind.as_str().to_string(),
                mechanism: b.mechanism.as_str().to_string(),
                enabled: b.enabled,
                counters: b
                    .counters
                    .into_iter()
                    .map(|c| SnapshotCounter {
                        index: c.index,
                        event: c.event,
                        event_name: c.event_name,
                        counts_clock: c.counts_clock,
                        value: c.value,
                        width_bits: b.width_bits,
                    })
                    .collect(),
                registers: b
                    .registers
                    .into_iter()
                    .map(|r| SnapshotRegister {
                        name: r.name,
                        value: r.value,
                        width_bits: b.width_bits,
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// Writes a snapshot to `path` atomically: a temporary file in the same directory,
/// flushed, then renamed over `path`. On any error the temporary file is removed and
/// `path` is left as it was.
pub fn write_atomic(snapshot: &Snapshot, path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_err = |what: &'static str, source| Error::File {
        what,
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".bfperf-snapshot-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| file_err("cannot create a temporary file beside", e))?;
    let text = serde_json::to_string_pretty(snapshot).expect("snapshot serializes");
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.write_all(b"\n"))
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| file_err("cannot write", e))?;
    tmp.persist(path)
        .map_err(|e| file_err("cannot rename the snapshot into", e.error))?;
    Ok(())
}

/// Reads a snapshot file.
pub fn load(path: &Path) -> Result<Snapshot> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::File {
        what: "cannot read snapshot",
        path: path.to_path_buf(),
        source: e,
    })?;
    let snap: Snapshot = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{} is not a bfperf snapshot: {e}", path.display())))?;
    if snap.schema != SCHEMA || snap.schema_version != SCHEMA_VERSION {
        return Err(Error::Invalid(format!(
            "{} has schema {} version {}; this bfperf reads {SCHEMA} version {SCHEMA_VERSION}",
            path.display(),
            snap.schema,
            snap.schema_version
        )));
    }
    Ok(snap)
}

/// The host's name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::from("unknown");
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// RFC 3339 UTC with nanoseconds, e.g. `2026-11-21T18:03:00.123456789Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_rfc3339() {
        let t = UNIX_EPOCH + Duration::new(1_795_000_000, 5);
        assert_eq!(rfc3339(t), "2026-11-18T11:06:40.000000005Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
    }
}
