//! The kernel's perf_event PMUs as sysfs describes them
//! (`/sys/bus/event_source/devices/PMU/`: `type`, `events/NAME` aliases such as
//! `event=0x11,umask=0x2`, `format/FIELD` bit ranges such as `config:0-7,32-35`), and
//! the encoding of an event's terms into `perf_event_attr` configs as perf does it.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One PMU: its name, `type` for perf_event_open, its formats and named events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pmu {
    /// The directory's name (`armv8_pmuv3_0`, `cpu`, `software`).
    pub name: String,
    /// The `type` file: perf_event_attr.type.
    pub type_: u32,
    /// Each format field and where its bits go.
    pub formats: BTreeMap<String, Field>,
    /// Each event alias and its terms (`event=0x11`).
    pub events: BTreeMap<String, String>,
    /// The CPUs an uncore PMU counts on (its `cpumask`); None: every CPU.
    pub cpus: Option<Vec<usize>>,
}

/// Where a format field's bits go: which config word, and bit ranges (low bits first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// 0 for `config`, 1 for `config1`, 2 for `config2`, 3 for `config3`.
    pub word: usize,
    /// Inclusive bit ranges, filled from the value's low bits up.
    pub ranges: Vec<(u32, u32)>,
}

/// The configs an event's terms encode to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Configs(pub [u64; 4]);

fn bad(pmu: &str, problem: impl std::fmt::Display) -> Error {
    Error::BadSpec {
        spec: pmu.to_string(),
        problem: problem.to_string(),
    }
}

/// Parses a format file: `config:0-7,32-35`, `config1:0`, `config2:3-5`.
pub(super) fn parse_format(text: &str) -> Option<Field> {
    let (word, bits) = text.trim().split_once(':')?;
    let word = match word {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        "config3" => 3,
        _ => return None,
    };
    let mut ranges = Vec::new();
    for part in bits.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim().parse().ok()?, hi.trim().parse().ok()?),
            None => {
                let b = part.trim().parse().ok()?;
                (b, b)
            }
        };
        if lo > hi || hi > 63 {
            return None;
        }
        ranges.push((lo, hi));
    }
    Some(Field { word, ranges })
}

/// Parses a CPU list: `0-3,8,10-11`.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// Parses terms: `event=0x11,umask=0x2,edge` (a term without a value is 1).
pub(super) fn parse_terms(text: &str) -> Option<Vec<(String, u64)>> {
    text.trim()
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            let (k, v) = t.split_once('=').unwrap_or((t, "1"));
            Some((k.trim().to_string(), crate::device::values::parse_value(v)?))
        })
        .collect()
}

impl Pmu {
    /// Reads one PMU directory; None if it has no readable `type`.
    pub fn read(dir: &Path) -> Option<Pmu> {
        let name = dir.file_name()?.to_string_lossy().into_owned();
        let type_ = crate::sysfs::read_attribute(&dir.join("type"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let mut formats = BTreeMap::new();
        for (field, text) in files(&dir.join("format")) {
            if let Some(f) = parse_format(&text) {
                formats.insert(field, f);
            }
        }
        let mut events = BTreeMap::new();
        for (event, text) in files(&dir.join("events")) {
            // `.scale`, `.unit`, `.snapshot`, `.per-pkg` describe an alias.
            if !event.contains('.') {
                events.insert(event, text.trim().to_string());
            }
        }
        let cpus = crate::sysfs::read_attribute(&dir.join("cpumask"))
            .ok()
            .and_then(|t| parse_cpu_list(&t));
        Some(Pmu {
            name,
            type_,
            formats,
            events,
            cpus,
        })
    }

    /// Encodes terms by this PMU's formats, as perf does: each value's bits are laid
    /// into the field's ranges from the low bit up; a value too wide is refused.
    pub fn encode(&self, terms: &[(String, u64)]) -> Result<Configs> {
        let mut c = Configs::default();
        for (name, value) in terms {
            let Some(field) = self.formats.get(name) else {
                let known: Vec<&str> = self.formats.keys().map(String::as_str).collect();
                return Err(bad(
                    &self.name,
                    format!(
                        "{} has no format term '{name}'; it has {}",
                        self.name,
                        known.join(", ")
                    ),
                ));
            };
            let width: u32 = field.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum();
            if width < 64 && *value >> width != 0 {
                return Err(bad(
                    &self.name,
                    format!("{name}=0x{value:x} does not fit {name}'s {width} bits"),
                ));
            }
            let mut rest = *value;
            for &(lo, hi) in &field.ranges {
                let n = hi - lo + 1;
                let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
                c.0[field.word] |= (rest & mask) << lo;
                rest = if n == 64 { 0 } else { rest >> n };
            }
        }
        Ok(c)
    }

    /// The configs of a named event alias, or of terms given directly.
    pub fn resolve(&self, event: &str) -> Result<Configs> {
        if let Some(terms) = self.alias(event) {
            let parsed = parse_terms(terms)
                .ok_or_else(|| bad(&self.name, format!("its alias {event} reads '{terms}'")))?;
            return self.encode(&parsed);
        }
        if event.contains('=') {
            let parsed = parse_terms(event).ok_or_else(|| {
                bad(
                    &self.name,
                    format!("'{event}' is not TERM=VALUE[,TERM=VALUE...]"),
                )
            })?;
            return self.encode(&parsed);
        }
        let names: Vec<&str> = self.events.keys().map(String::as_str).collect();
        Err(bad(
            &self.name,
            format!(
                "{} has no event '{event}'{}",
                self.name,
                crate::catalog::did_you_mean(&crate::catalog::suggest(event, names.into_iter()))
            ),
        ))
    }

    /// An alias by name, any case.
    fn alias(&self, event: &str) -> Option<&str> {
        self.events
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(event))
            .map(|(_, t)| t.as_str())
    }
}

/// A directory's regular files and their contents (bounded reads), sorted by name.
fn files(dir: &Path) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let text = crate::sysfs::read_attribute(&e.path()).ok()?;
            Some((name, text))
        })
        .collect();
    out.sort();
    out
}

/// Every PMU under the sysfs root, sorted by name.
pub fn discover(sysfs_root: &Path) -> Vec<Pmu> {
    Pmus::at(sysfs_root).all().cloned().collect()
}

/// The PMUs under the sysfs root, each read when a spec first names it. Reading them
/// all costs a file a named event (an Arm core's PMU has dozens, an x86 server's
/// uncore PMUs hundreds), which a run that names none must not pay.
#[derive(Debug, Default)]
pub struct Pmus {
    /// Name, directory, and the PMU once read (None: no readable `type`).
    entries: Vec<(String, PathBuf, OnceCell<Option<Pmu>>)>,
}

impl Pmus {
    /// The PMUs under the sysfs root, by name, sorted; nothing in them read yet.
    pub fn at(sysfs_root: &Path) -> Pmus {
        let dir = crate::sysfs::event_source_devices(sysfs_root);
        let Ok(listed) = std::fs::read_dir(&dir) else {
            return Pmus::default();
        };
        let mut entries: Vec<_> = listed
            .filter_map(|e| e.ok())
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, e.path(), OnceCell::new())
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Pmus { entries }
    }

    /// The PMU of that name, read on first use; None if there is none, or it has no
    /// readable `type`.
    pub fn get(&self, name: &str) -> Option<&Pmu> {
        let (_, dir, pmu) = self.entries.iter().find(|(n, ..)| n == name)?;
        pmu.get_or_init(|| Pmu::read(dir)).as_ref()
    }

    /// Every PMU with a readable `type`, each read now, sorted by name.
    pub fn all(&self) -> impl Iterator<Item = &Pmu> {
        self.entries.iter().filter_map(|(n, ..)| self.get(n))
    }
}

impl From<Vec<Pmu>> for Pmus {
    /// PMUs already read (tests, and a caller that has them).
    fn from(pmus: Vec<Pmu>) -> Pmus {
        let mut entries: Vec<_> = pmus
            .into_iter()
            .map(|p| (p.name.clone(), PathBuf::new(), OnceCell::from(Some(p))))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Pmus { entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_lay_bits_from_the_low_end() {
        let f = parse_format("config:0-7,32-35").unwrap();
        assert_eq!(f.ranges, vec![(0, 7), (32, 35)]);
        let pmu = Pmu {
            name: "x".into(),
            type_: 9,
            formats: [
                ("event".to_string(), f),
                ("umask".to_string(), parse_format("config:8-15").unwrap()),
            ]
            .into_iter()
            .collect(),
            events: BTreeMap::new(),
            cpus: None,
        };
        // 0xabc: the low 8 bits (0xbc) at 0-7, the next 4 (0xa) at 32-35.
        let c = pmu
            .encode(&[("event".into(), 0xabc), ("umask".into(), 2)])
            .unwrap();
        assert_eq!(c.0[0], 0xbc | (2 << 8) | (0xa << 32));
        assert!(pmu.encode(&[("event".into(), 0x1000)]).is_err());
        assert!(pmu.encode(&[("nope".into(), 1)]).is_err());
    }
}
