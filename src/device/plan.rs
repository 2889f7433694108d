//! Every write bfperf makes to the device: planned before it is made, printed by
//! `--dry-run`, applied in order otherwise, with the driver's refusals explained.
//! A [`Switch`] is the same for the one file a measurement writes every tick (an
//! all-at-once block's `enable`), kept open.

use serde::Serialize;

use crate::error::{errno, io_error, with_hint, Error, Result};
use crate::sysfs::{ControlFile, Sysfs};

/// One write: the file (relative to the device) and the exact bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PlannedWrite {
    /// The file, relative to the device.
    pub path: String,
    /// The exact bytes.
    pub data: String,
    /// Written instead when the driver refuses `data` with EINVAL (a stop on kernels
    /// that validate event numbers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// What the driver's EINVAL means for this write.
    #[serde(skip)]
    pub on_einval: String,
    /// The driver may refuse it (EINVAL, after the fallback): the write is then
    /// left undone, not a failure.
    #[serde(skip)]
    pub may_be_refused: bool,
}

/// Writes to make, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Plan {
    /// The writes, in order.
    pub writes: Vec<PlannedWrite>,
}

impl Plan {
    /// Adds a write; `on_einval` says what the driver refusing it means.
    pub fn push(&mut self, path: String, data: String, on_einval: impl Into<String>) {
        self.writes.push(PlannedWrite {
            path,
            data,
            fallback: None,
            on_einval: on_einval.into(),
            may_be_refused: false,
        });
    }

    /// Adds a write the driver may refuse (EINVAL) without that being a failure: a
    /// best effort where nothing better can be written.
    pub(crate) fn push_if_taken(&mut self, path: String, data: String) {
        self.writes.push(PlannedWrite {
            path,
            data,
            fallback: None,
            on_einval: String::new(),
            may_be_refused: true,
        });
    }

    /// Adds a write with the bytes to write instead if the driver refuses them.
    pub fn push_with_fallback(
        &mut self,
        path: String,
        data: String,
        fallback: String,
        on_einval: impl Into<String>,
    ) {
        self.writes.push(PlannedWrite {
            path,
            data,
            fallback: Some(fallback),
            on_einval: on_einval.into(),
            may_be_refused: false,
        });
    }

    /// What `--dry-run` prints: one line per write, with the device location.
    pub fn describe(&self, location: &str) -> Vec<String> {
        self.writes
            .iter()
            .map(|w| {
                let mut line = format!("write {location}/{}: {:?}", w.path, w.data);
                if let Some(f) = &w.fallback {
                    line.push_str(&format!(" (if refused: {f:?})"));
                }
                line
            })
            .collect()
    }

    /// Makes the writes in order. Returns, per write, the bytes that were accepted.
    /// The device is asked once, before the first, whether it is still the one
    /// opened ([`Sysfs::still_here`]); nothing is written if not.
    pub fn apply(&self, fs: &dyn Sysfs) -> Result<Vec<String>> {
        if let (Some(w), Err(e)) = (self.writes.first(), fs.still_here()) {
            return Err(self.failure(w, &w.data, e, 0));
        }
        self.apply_here(fs)
    }

    /// [`Plan::apply`], the device already asked.
    fn apply_here(&self, fs: &dyn Sysfs) -> Result<Vec<String>> {
        let mut done = Vec::new();
        for w in &self.writes {
            match write_one(fs, &w.path, &w.data) {
                Ok(()) => done.push(w.data.clone()),
                Err(first)
                    if first.raw_os_error() == Some(errno::EINVAL) && w.fallback.is_some() =>
                {
                    let fb = w.fallback.as_deref().unwrap_or_default();
                    match write_one(fs, &w.path, fb) {
                        Ok(()) => done.push(fb.to_string()),
                        Err(e) => return Err(self.failure(w, fb, e, done.len())),
                    }
                }
                Err(e) if e.raw_os_error() == Some(errno::EINVAL) && w.may_be_refused => {}
                Err(e) => return Err(self.failure(w, &w.data, e, done.len())),
            }
        }
        Ok(done)
    }

    /// Makes every write, whatever the others do (a restore puts back all it can);
    /// returns the failures, each explained as [`Plan::apply`] explains one.
    pub fn apply_all(&self, fs: &dyn Sysfs) -> Vec<Error> {
        // Asked once; when the device is gone, each write asks again to say so.
        let here = fs.still_here().is_ok();
        let mut failures = Vec::new();
        for w in &self.writes {
            let one = Plan {
                writes: vec![w.clone()],
            };
            let done = match here {
                true => one.apply_here(fs),
                false => one.apply(fs),
            };
            if let Err(e) = done {
                failures.push(e);
            }
        }
        failures
    }

    fn failure(&self, w: &PlannedWrite, data: &str, e: std::io::Error, applied: usize) -> Error {
        let einval = e.raw_os_error() == Some(errno::EINVAL);
        let mut err = io_error("writing", &w.path, Some(data.as_bytes()), e);
        if einval && !w.on_einval.is_empty() {
            err = with_hint(err, &w.on_einval);
        }
        if applied > 0 {
            let list: Vec<String> = self.writes[..applied]
                .iter()
                .map(|w| format!("{} <- {}", w.path, w.data))
                .collect();
            err = with_hint(err, &format!("(already written: {})", list.join(", ")));
        }
        err
    }
}

/// A file written again and again with one of two values (an all-at-once block's
/// `enable`, switched off and on around every read): opened once, written with one
/// `pwrite` each time, and explained as [`Plan::apply`] explains a write.
pub(crate) struct Switch<'d> {
    rel: String,
    file: Box<dyn ControlFile + 'd>,
    on_einval: &'static str,
}

impl<'d> Switch<'d> {
    /// Opens `rel` for switching; nothing is written.
    pub(crate) fn open(fs: &'d dyn Sysfs, rel: String, on_einval: &'static str) -> Result<Self> {
        let file = fs
            .open_control(&rel)
            .map_err(|e| io_error("opening", &rel, None, e))?;
        Ok(Switch {
            rel,
            file,
            on_einval,
        })
    }

    /// Writes `1` or `0`.
    pub(crate) fn set(&mut self, on: bool) -> Result<()> {
        let data: &[u8] = if on { b"1" } else { b"0" };
        self.file.write_now(data).map_err(|e| {
            let einval = e.raw_os_error() == Some(errno::EINVAL);
            let err = io_error("writing", &self.rel, Some(data), e);
            match einval {
                true => with_hint(err, self.on_einval),
                false => err,
            }
        })
    }
}

/// One write of a plan whose device was asked ([`Plan::apply`]).
fn write_one(fs: &dyn Sysfs, path: &str, data: &str) -> std::io::Result<()> {
    fs.write_here(path, data.as_bytes())
}
