//! A journal so that a killed writer never loses the device's prior programming:
//! before its first write, a measurement (`stat`, the exporter) records what it will
//! change in a file beside the device's lock (fsync'd, replaced atomically), and
//! removes it once it has put the device back. A journal left behind means its
//! writer died (SIGKILL, OOM, power loss): `bfperf restore` puts the device back from
//! it, and the next measurement does so before it records anything itself, so a
//! leftover programming is never taken for the prior state. A one-shot write
//! (`program`, `start`, `stop`, `clear`) with a journal pending is refused until
//! `restore` or `--discard-journal` ([`pending_refusal`]): the journal would
//! otherwise undo it later without a word.
//!
//! A journal is keyed, like the lock, on what the device is (every path to it shares
//! one), and trusted no further than it checks out: every block it names must be one
//! of this device's blocks and every counter one that block has, before anything is
//! written back.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::lock::open_state_file;
use crate::measure::session::{self, Saved};

/// The most a journal may hold.
const MAX_JOURNAL: u64 = 4 * 1024 * 1024;

/// What a journal records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The device's canonical path (for people).
    pub device: String,
    /// What the device is ([`Device::identity`]); empty in journals of older
    /// releases, which were keyed on the canonical path.
    #[serde(default)]
    pub identity: String,
    /// The writer that made it.
    pub pid: u32,
    /// Its command line.
    pub command: String,
    /// Every block the writer changes, as it was before.
    pub saved: Vec<Saved>,
}

/// A journal on disk, removed when its writer has restored the device.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::File {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Records `saved` for `device`: a temporary file written and fsync'd, renamed over
/// the journal, and the directory fsync'd.
pub(crate) fn write(device: &Device, saved: &[Saved]) -> Result<Journal> {
    let path = super::journal_of(device)?;
    let tmp = path.with_extension("journal.tmp");
    let record = Record {
        device: device.canonical_location(),
        identity: device.identity(),
        pid: std::process::id(),
        command: crate::lock::this_command(),
        saved: saved.to_vec(),
    };
    let text = serde_json::to_vec_pretty(&record).map_err(|e| Error::BadConfig {
        path: path.clone(),
        problem: e.to_string(),
    })?;
    let mut file = open_state_file(&tmp, "cannot write the journal")?;
    file.set_len(0)
        .and_then(|_| file.write_all(&text))
        .and_then(|_| file.sync_all())
        .map_err(io("cannot write the journal", &tmp))?;
    fs::rename(&tmp, &path).map_err(io("cannot put the journal in place", &path))?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(Journal { path })
}

impl Journal {
    /// The device is as it was: the journal goes.
    pub(crate) fn remove(self) -> Result<()> {
        fs::remove_file(&self.path).map_err(io("cannot remove the journal", &self.path))
    }

    /// The journal file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Puts the device back as `saved` recorded it; then the journal goes. When the
/// device refuses, the journal stays for `bfperf restore`, and the error says so.
pub(crate) fn put_back(device: &Device, saved: &[Saved], journal: Option<Journal>) -> Result<()> {
    // A device gone from its place (or replaced there) is not written at all.
    let restored = device
        .fs()
        .still_here()
        .map_err(|source| Error::File {
            what: "cannot put the device back at",
            path: device.location().into(),
            source,
        })
        .and_then(|()| session::restore(device, saved));
    match (restored, journal) {
        (Ok(()), Some(j)) => j.remove(),
        (Ok(()), None) => Ok(()),
        (Err(e), None) => Err(e),
        (Err(e), Some(j)) => Err(crate::error::with_context(
            e,
            &format!(
                "the journal {} keeps the earlier programming; `bfperf restore` puts it back (where the device is then)",
                j.path().display()
            ),
        )),
    }
}

/// Whether a journal may be in place for `device` (a live writer's or a dead
/// one's), not read: it may name any of the device's blocks, so a command that
/// would put it back opens the whole device. True when that cannot be told.
pub(crate) fn may_be_in_place(device: &Device) -> bool {
    super::journal_of(device).map_or(true, |path| match fs::symlink_metadata(path) {
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        Ok(_) => true,
    })
}

/// The journal a dead writer left for `device`, if any. Call with the device's
/// writer lock held (a live writer's journal is its own business).
pub(crate) fn leftover(device: &Device) -> Result<Option<(PathBuf, Record)>> {
    let path = super::journal_of(device)?;
    match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("cannot read the journal", &path)(e)),
        Ok(_) => {}
    }
    let file = open_state_file(&path, "cannot read the journal")?;
    let mut text = Vec::new();
    file.take(MAX_JOURNAL + 1)
        .read_to_end(&mut text)
        .map_err(io("cannot read the journal", &path))?;
    if text.len() as u64 > MAX_JOURNAL {
        return Err(Error::BadConfig {
            path,
            problem: "the journal is larger than bfperf ever writes one".into(),
        });
    }
    let record: Record = serde_json::from_slice(&text).map_err(|e| Error::BadConfig {
        path: path.clone(),
        problem: format!("not a bfperf journal: {e}"),
    })?;
    let same = match record.identity.is_empty() {
        true => record.device == device.canonical_location(),
        false => record.identity == device.identity(),
    };
    if !same {
        return Err(Error::BadConfig {
            path,
            problem: format!(
                "it is the journal of {}, not of {}",
                record.device,
                device.canonical_location()
            ),
        });
    }
    let unopened = |s: &Saved| device.block(&s.block).is_err();
    if device.is_partial() && record.saved.iter().any(unopened) {
        // Another writer died as this command started: its journal is sound.
        return Err(Error::BadConfig {
            path,
            problem: "a writer that died as this command started left it, for blocks this command did not open; `bfperf restore` puts them back, then run the command again".into(),
        });
    }
    if let Err(problem) = check_blocks(device, &record) {
        return Err(Error::BadConfig {
            path,
            problem: format!(
                "{problem}: bfperf did not write this journal, and writes nothing from it; look at it, then remove it"
            ),
        });
    }
    Ok(Some((path, record)))
}

/// Every block a journal names is a plain name of one of this device's blocks, and
/// every counter one that block has: nothing is written outside the device.
fn check_blocks(device: &Device, record: &Record) -> std::result::Result<(), String> {
    for s in &record.saved {
        let block = device.block(&s.block).map_err(|_| {
            format!(
                "it names a block '{}' this device does not have",
                s.block.escape_debug()
            )
        })?;
        if let Some((c, _)) = s.events.iter().find(|(c, _)| !block.counters.contains(c)) {
            return Err(format!(
                "it names a counter {c} that {} does not have",
                s.block
            ));
        }
        if s.enable.is_some() && !block.has_enable
            || s.count_clock.is_some() && !block.has_count_clock
        {
            return Err(format!("it records a setting {} does not have", s.block));
        }
    }
    Ok(())
}

/// The error a one-shot write gets while `device` has a journal pending (its
/// writer died), or None. With the lock held. With `discard`, the journal is
/// removed instead, and the line saying so returned as a note.
pub(crate) fn pending_refusal(device: &Device, discard: bool) -> Result<Option<String>> {
    let Some((path, record)) = leftover(device)? else {
        return Ok(None);
    };
    let blocks = blocks_of(&record);
    if discard {
        fs::remove_file(&path).map_err(io("cannot remove the journal", &path))?;
        return Ok(Some(format!(
            "discarded the journal {} of pid {} ({}): {blocks} keep the programming they have now",
            path.display(),
            record.pid,
            record.command
        )));
    }
    Err(Error::PendingJournal {
        path,
        pid: record.pid,
        command: record.command,
        blocks,
    })
}

fn blocks_of(record: &Record) -> String {
    let blocks: Vec<&str> = record.saved.iter().map(|s| s.block.as_str()).collect();
    blocks.join(", ")
}

/// What a restore from a leftover journal did.
#[derive(Debug, Clone)]
pub(crate) struct Restored {
    /// The journal it came from.
    pub path: PathBuf,
    /// What it recorded, now written back.
    pub record: Record,
}

impl Restored {
    /// One line for people.
    pub(crate) fn describe(&self) -> String {
        format!(
            "put back {} as they were before pid {} ({}) was stopped without restoring them (journal {})",
            blocks_of(&self.record),
            self.record.pid,
            self.record.command,
            self.path.display()
        )
    }
}

/// Puts the device back from a leftover journal and removes it. With the lock held.
pub(crate) fn restore_leftover(device: &Device) -> Result<Option<Restored>> {
    let Some((path, record)) = leftover(device)? else {
        return Ok(None);
    };
    session::restore(device, &record.saved)?;
    fs::remove_file(&path).map_err(io("cannot remove the journal", &path))?;
    Ok(Some(Restored { path, record }))
}
