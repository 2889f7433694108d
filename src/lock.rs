//! One writer at a time, the mechanics: every command that writes the counters
//! holds an exclusive `flock` on a lock file for as long as it runs, with its PID
//! and command line in it, so that a second writer is refused with the holder named
//! (or waits, with `--wait`). Read commands take no lock. Which file a device's lock
//! is (keyed on what the device is) is the owner's business
//! (`measure::owner`).
//!
//! bfperf runs as root on shared machines, so the lock cannot be turned against it:
//! it lives in a directory only its owner can write (`/run/bfperf`, root's, 0755;
//! another user's own runtime directory), it is opened without following a link and
//! never truncated on open, it must be a regular file owned by the caller with one
//! link, and its holder record is read bounded.

use std::fs;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where root keeps bfperf's locks (and journals).
pub(crate) const ROOT_STATE_DIR: &str = "/run/bfperf";

/// The most of a holder record that is read.
const HOLDER_MAX: u64 = 4096;

fn euid() -> u32 {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() }
}

fn unsafe_dir(dir: &Path, problem: String) -> Error {
    Error::OutputTarget {
        path: dir.to_path_buf(),
        problem: format!(
            "{problem}; bfperf keeps its lock and journal only in a directory no one else can write"
        ),
    }
}

/// Checks that `dir` is a real directory (not a link) owned by `uid` that nobody
/// else can write.
fn check_private_dir(dir: &Path, uid: u32) -> Result<()> {
    let meta = fs::symlink_metadata(dir).map_err(|e| Error::File {
        what: "cannot use the state directory",
        path: dir.to_path_buf(),
        source: e,
    })?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(unsafe_dir(
            dir,
            "it is not a directory (or is a link)".into(),
        ));
    }
    if meta.uid() != uid {
        return Err(unsafe_dir(
            dir,
            format!("it belongs to uid {}, not {uid}", meta.uid()),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_dir(
            dir,
            format!(
                "it is writable by group or others (mode {:o})",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Creates `dir` (mode `mode`) if missing, then checks it.
fn private_dir(dir: &Path, mode: u32, uid: u32) -> Result<PathBuf> {
    if let Err(e) = fs::DirBuilder::new().mode(mode).create(dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(Error::File {
                what: "cannot create the state directory",
                path: dir.to_path_buf(),
                source: e,
            });
        }
    }
    check_private_dir(dir, uid)?;
    Ok(dir.to_path_buf())
}

/// The directory of bfperf's lock and journal files: `$BFPERF_STATE_DIR` if set;
/// `/run/bfperf` for root (created 0755); for another user `$XDG_RUNTIME_DIR/bfperf`
/// or `/tmp/bfperf-UID` (0700) — a user's locks guard only the devices that user can
/// write (simulators). Whichever it is, it must belong to the caller and be writable
/// by no one else.
pub(crate) fn state_dir() -> Result<PathBuf> {
    let uid = euid();
    if let Some(dir) = std::env::var_os("BFPERF_STATE_DIR").filter(|d| !d.is_empty()) {
        return private_dir(Path::new(&dir), 0o700, uid);
    }
    if uid == 0 {
        return private_dir(Path::new(ROOT_STATE_DIR), 0o755, 0);
    }
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|r| !r.is_empty()) {
        let run = PathBuf::from(run);
        if check_private_dir(&run, uid).is_ok() {
            return private_dir(&run.join("bfperf"), 0o700, uid);
        }
    }
    private_dir(
        &std::env::temp_dir().join(format!("bfperf-{uid}")),
        0o700,
        uid,
    )
}

/// Opens (or creates, 0600) a file bfperf keeps state in: never through a link, never
/// truncated on open; it must then be a regular file of the caller's with one link.
pub(crate) fn open_state_file(path: &Path, what: &'static str) -> Result<fs::File> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            let source = if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "it is a symbolic link, which bfperf never follows for its own files",
                )
            } else {
                e
            };
            Error::File {
                what,
                path: path.to_path_buf(),
                source,
            }
        })?;
    let meta = file.metadata().map_err(|e| Error::File {
        what,
        path: path.to_path_buf(),
        source: e,
    })?;
    let refuse = |problem: String| Error::OutputTarget {
        path: path.to_path_buf(),
        problem,
    };
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    if meta.uid() != euid() {
        return Err(refuse(format!(
            "it belongs to uid {}, not to this user ({}): someone else made it; remove it if you trust it",
            meta.uid(),
            euid()
        )));
    }
    if meta.nlink() != 1 {
        return Err(refuse(format!(
            "it has {} hard links: it may be another file under this name",
            meta.nlink()
        )));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(refuse("it is writable by group or others".into()));
    }
    Ok(file)
}

/// A held writer lock; released when dropped (or when the process ends, however).
#[derive(Debug)]
pub(crate) struct WriterLock {
    file: fs::File,
}

/// This process's command line on one line (a control character in an argument,
/// a newline above all, becomes a space), capped so the record stays readable whole.
pub(crate) fn this_command() -> String {
    // The lock, the journal and a request to the owner each record it: made once.
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        let words: Vec<String> = std::env::args_os()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        one_line(&words.join(" "))
    })
    .clone()
}

/// A command line as a record keeps it: controls as spaces, at most 1000 characters.
pub(crate) fn one_line(line: &str) -> String {
    line.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(1000)
        .collect()
}

impl WriterLock {
    /// Takes the lock at `path`. If another process holds it: waits with `wait`,
    /// otherwise fails naming the holder.
    pub(crate) fn acquire(path: &Path, wait: bool) -> Result<WriterLock> {
        let file_err = |what: &'static str| {
            let path = path.to_path_buf();
            move |source| Error::File { what, path, source }
        };
        let mut file = open_state_file(
            path,
            "cannot open the writer lock file (pass --lock-file FILE)",
        )?;
        let fd = file.as_raw_fd();
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(file_err("cannot lock")(err));
            }
            if !wait {
                let mut holder = Vec::new();
                let _ = (&mut file).take(HOLDER_MAX).read_to_end(&mut holder);
                return Err(Error::Busy {
                    holder: describe_holder(&String::from_utf8_lossy(&holder)),
                    path: path.to_path_buf(),
                });
            }
            // SAFETY: as above; blocks until the holder is gone.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
                return Err(file_err("cannot lock")(std::io::Error::last_os_error()));
            }
        }
        // Ours, regular, one link, and locked: its old record may be replaced, if it
        // is one. A file holding anything else is someone's data, never emptied.
        let mut old = Vec::new();
        (&mut file)
            .take(HOLDER_MAX)
            .read_to_end(&mut old)
            .map_err(file_err("cannot read the writer lock file"))?;
        if !is_lock_record(&old) {
            return Err(Error::OutputTarget {
                path: path.to_path_buf(),
                problem: "it holds something other than a bfperf lock record (a PID, then a command line), and bfperf never empties a file it did not make: give --lock-file a new file or one bfperf made".into(),
            });
        }
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| writeln!(file, "{}\n{}", std::process::id(), this_command()))
            .map_err(file_err("cannot write the writer lock file"))?;
        Ok(WriterLock { file })
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// An empty file, or what `acquire` writes: a PID line, then one command line.
fn is_lock_record(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let mut lines = text.split_terminator('\n');
    let pid = lines.next().unwrap_or_default();
    !pid.is_empty()
        && pid.len() <= 10
        && pid.bytes().all(|b| b.is_ascii_digit())
        && lines.next().is_some()
        && lines.next().is_none()
}

fn describe_holder(text: &str) -> String {
    let mut lines = text.lines();
    match (lines.next(), lines.next()) {
        (Some(pid), Some(cmd)) if !pid.is_empty() => {
            let clean: String = cmd.chars().filter(|c| !c.is_control()).take(200).collect();
            let pid: String = pid.chars().filter(char::is_ascii_digit).take(10).collect();
            format!("pid {pid}: {clean}")
        }
        _ => "another process".to_string(),
    }
}
