//! Snapshots: every selected value read once, with wall-clock and monotonic time, as
//! one JSON document (schema in docs/snapshot-schema.md).

use std::io::Read;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::block::{BlockKind, Mechanism};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kinds::Role;
use crate::ops::read::read_blocks;

/// The `schema` field of every snapshot.
pub const SCHEMA: &str = "bfperf-snapshot";
/// The current schema version. Version 1 (which named blocks `name` and counters
/// `index`) is still read.
pub const SCHEMA_VERSION: u32 = 2;
/// The oldest version `load` reads.
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

// The fields of this and of the types it holds are in the order of their names: the
// snapshot is written straight from them, in the order a JSON tree's sorted keys
// always gave, and a unit test (`typed_serialization_is_the_trees`) holds the two
// the same.
/// Every selected value read once, at one moment, with where and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Snapshot {
    /// Each block read.
    pub blocks: Vec<SnapshotBlock>,
    /// The device's location (its hwmon directory).
    pub device: String,
    /// The device's generation (`BlueField-3`).
    pub generation: String,
    /// The host that read it.
    pub hostname: String,
    /// CLOCK_MONOTONIC at the middle of the reads, ns.
    pub monotonic_ns: u64,
    /// How long reading all values took, ns.
    pub read_window_ns: u64,
    /// `bfperf-snapshot`: what the file is.
    pub schema: String,
    /// The format's version (`SCHEMA_VERSION`).
    pub schema_version: u32,
    /// Wall-clock time of the reads, RFC 3339 UTC.
    pub timestamp: String,
    /// Wall-clock time of the reads, ns since the Unix epoch.
    pub timestamp_unix_ns: u64,
}

/// One block's values in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotBlock {
    /// The block's name.
    #[serde(alias = "name")]
    pub block: String,
    /// Its counters.
    pub counters: Vec<SnapshotCounter>,
    /// `enable` state of L3/crspace blocks; null for others.
    pub enabled: Option<bool>,
    /// Its kind.
    pub kind: BlockKind,
    /// How it counts.
    pub mechanism: Mechanism,
    /// Its statistics registers.
    pub registers: Vec<SnapshotRegister>,
    /// Counters and registers whose value could not be read: left out, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<crate::ops::read::Unreadable>,
}

/// One counter's programming and value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotCounter {
    /// The counter's number.
    #[serde(alias = "index")]
    pub counter: u32,
    /// It counted clock cycles (`count_clock`), not its event.
    #[serde(default)]
    pub counts_clock: bool,
    /// Its event number; null when it reads as not programmed.
    pub event: Option<u32>,
    /// Its event's name, when known.
    pub event_name: Option<String>,
    /// Its value.
    pub value: u64,
    /// Its width in bits (it wraps at 2^width).
    pub width_bits: u32,
}

/// One statistics register's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotRegister {
    /// The register's name.
    #[serde(alias = "name")]
    pub register: String,
    /// `count` (deltas make sense), `control` or `level` (shown, not differenced).
    /// Version 1 snapshots have none: counts.
    #[serde(default = "count_role")]
    pub role: Role,
    /// Its value.
    pub value: u64,
    /// Its width in bits.
    pub width_bits: u32,
}

fn count_role() -> Role {
    Role::Count
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
            return Err(Error::NoBlocksOfKind {
                kind: "pcie".into(),
                generation: device.generation().label().to_string(),
                kinds: format!(
                    "{}; choose blocks to snapshot, e.g. `bfperf snapshot all`",
                    device.kinds().join(", ")
                ),
            });
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
                block: b.block,
                kind: b.kind,
                mechanism: b.mechanism,
                enabled: b.enabled,
                counters: b
                    .counters
                    .into_iter()
                    .map(|c| SnapshotCounter {
                        counter: c.counter,
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
                        role: b.kind.def().role(&r.register),
                        register: r.register,
                        value: r.value,
                        width_bits: b.width_bits,
                    })
                    .collect(),
                unreadable: b.unreadable,
            })
            .collect(),
    })
}

/// Writes a snapshot to `path` as JSON, by bfperf's rule for output files: a regular
/// file is replaced atomically (its mode and owner kept), links are followed as the
/// kernel's `fs.protected_symlinks` allows, a pipe or character device is written in
/// place.
pub fn write_atomic(snapshot: &Snapshot, path: &Path) -> Result<()> {
    crate::outfile::replace(path, &mut |w| {
        serde_json::to_writer_pretty(&mut *w, snapshot)?;
        w.write_all(b"\n")
    })
}

/// The most bytes of a snapshot file `load` reads (a snapshot of every block of a
/// large device is well under this).
const MAX_SNAPSHOT: u64 = 256 * 1024 * 1024;

fn bad(path: &Path, problem: String) -> Error {
    Error::BadSnapshot {
        path: path.to_path_buf(),
        problem,
    }
}

/// Reads a snapshot file, and checks that each value fits its recorded width.
pub fn load(path: &Path) -> Result<Snapshot> {
    let file = std::fs::File::open(path).map_err(|e| Error::File {
        what: "cannot read snapshot",
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut text = String::new();
    std::io::Read::take(file, MAX_SNAPSHOT)
        .read_to_string(&mut text)
        .map_err(|e| Error::File {
            what: "cannot read snapshot",
            path: path.to_path_buf(),
            source: e,
        })?;
    let head: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(path, format!("is not a bfperf snapshot (not JSON: {e})")))?;
    let schema = head.get("schema").and_then(|s| s.as_str());
    let version = head.get("schema_version").and_then(|v| v.as_u64());
    match (schema, version) {
        (Some(SCHEMA), Some(v))
            if (OLDEST_SCHEMA_VERSION as u64..=SCHEMA_VERSION as u64).contains(&v) => {}
        _ => {
            return Err(bad(
                path,
                format!(
                    "is not a bfperf snapshot this bfperf reads: schema {}, version {}; it reads {SCHEMA} versions {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}",
                    schema.unwrap_or("(none)"),
                    version.map(|v| v.to_string()).unwrap_or_else(|| "(none)".into())
                ),
            ))
        }
    }
    let snap: Snapshot = serde_json::from_value(head)
        .map_err(|e| bad(path, format!("is not a usable bfperf snapshot: {e}")))?;
    check_widths(&snap).map_err(|p| bad(path, p))?;
    check_unique(&snap).map_err(|p| bad(path, p))?;
    Ok(snap)
}

/// A block, counter or register recorded twice cannot be told apart: refused.
fn check_unique(snap: &Snapshot) -> std::result::Result<(), String> {
    let mut blocks = std::collections::HashSet::new();
    for b in &snap.blocks {
        if !blocks.insert(b.block.as_str()) {
            return Err(format!(
                "block {} is recorded twice: the file was altered or is corrupt",
                b.block
            ));
        }
        let mut counters = std::collections::HashSet::new();
        if let Some(c) = b.counters.iter().find(|c| !counters.insert(c.counter)) {
            return Err(format!(
                "{} counter{} is recorded twice: the file was altered or is corrupt",
                b.block, c.counter
            ));
        }
        let mut registers = std::collections::HashSet::new();
        if let Some(r) = b
            .registers
            .iter()
            .find(|r| !registers.insert(r.register.as_str()))
        {
            return Err(format!(
                "{} {} is recorded twice: the file was altered or is corrupt",
                b.block, r.register
            ));
        }
    }
    Ok(())
}

fn fits(value: u64, width: u32) -> bool {
    width >= 64 || value >> width == 0
}

/// A counter or register is 1 to 64 bits wide.
fn plausible_width(width: u32) -> bool {
    (1..=64).contains(&width)
}

/// Every value must fit the width its counter or register was recorded with.
fn check_widths(snap: &Snapshot) -> std::result::Result<(), String> {
    for b in &snap.blocks {
        let widths = b
            .counters
            .iter()
            .map(|c| (format!("counter{}", c.counter), c.width_bits))
            .chain(
                b.registers
                    .iter()
                    .map(|r| (r.register.clone(), r.width_bits)),
            );
        for (what, w) in widths {
            if !plausible_width(w) {
                return Err(format!(
                    "{} {what} has width_bits {w}; a counter is 1 to 64 bits wide",
                    b.block
                ));
            }
        }
        if let Some(c) = b.counters.iter().find(|c| !fits(c.value, c.width_bits)) {
            return Err(format!(
                "{} counter{} holds {}, wider than its {} bits: the file was altered or is corrupt",
                b.block, c.counter, c.value, c.width_bits
            ));
        }
        if let Some(r) = b.registers.iter().find(|r| !fits(r.value, r.width_bits)) {
            return Err(format!(
                "{} {} holds {}, wider than its {} bits: the file was altered or is corrupt",
                b.block, r.register, r.value, r.width_bits
            ));
        }
    }
    Ok(())
}

/// The host's name.
pub(crate) fn hostname() -> String {
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
pub(crate) fn rfc3339(t: SystemTime) -> String {
    rfc3339_to(t, 9)
}

/// RFC 3339 UTC with `digits` (1 to 9) of the second's fraction, e.g. 3:
/// `2026-11-21T18:03:00.123Z`.
pub(crate) fn rfc3339_to(t: SystemTime, digits: u32) -> String {
    let digits = digits.clamp(1, 9);
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:0width$}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_nanos() / 10u32.pow(9 - digits),
        width = digits as usize
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
        assert_eq!(rfc3339_to(t, 3), "2026-11-18T11:06:40.000Z");
    }

    /// A snapshot is written straight from its types (`SnapshotReport::write_json`):
    /// their fields must stay in the order of their names, the order in which a JSON
    /// tree has always written them. Every field and every variant that serializes
    /// is present here, so that a field moved or added out of order fails.
    #[test]
    fn typed_serialization_is_the_trees() {
        let counter = |counter, event: Option<u32>, name: Option<&str>, clock| SnapshotCounter {
            counter,
            counts_clock: clock,
            event,
            event_name: name.map(String::from),
            value: u64::MAX,
            width_bits: 64,
        };
        let snap = Snapshot {
            blocks: vec![
                SnapshotBlock {
                    block: "llt0".into(),
                    counters: vec![
                        counter(0, Some(0x2c), Some("GDC_MISS_MACHINE_RD"), false),
                        counter(1, None, None, true),
                    ],
                    enabled: Some(true),
                    kind: BlockKind::Llt,
                    mechanism: Mechanism::AllAtOnce,
                    registers: vec![],
                    unreadable: vec![crate::ops::read::Unreadable {
                        file: "llt0/counter2".into(),
                        problem: "Input/output error \"quoted\"".into(),
                    }],
                },
                SnapshotBlock {
                    block: "pcie0".into(),
                    counters: vec![],
                    enabled: None,
                    kind: BlockKind::Pcie,
                    mechanism: Mechanism::Registers,
                    registers: vec![SnapshotRegister {
                        register: "IN_P_BYTE_CNT".into(),
                        role: Role::Count,
                        value: 7,
                        width_bits: 32,
                    }],
                    unreadable: vec![],
                },
            ],
            device: "/sys/class/hwmon/hwmon4".into(),
            generation: "BlueField-3".into(),
            hostname: "dpu\u{e9}".into(),
            monotonic_ns: 1,
            read_window_ns: 2,
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            timestamp: "2026-11-18T11:06:40.000000005Z".into(),
            timestamp_unix_ns: 3,
        };
        let straight = serde_json::to_string_pretty(&snap).unwrap();
        let tree = serde_json::to_string_pretty(&serde_json::to_value(&snap).unwrap()).unwrap();
        assert_eq!(straight, tree);
    }
}
