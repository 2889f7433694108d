//! One writer at a time: every command that writes the counters holds an exclusive
//! `flock` on a lock file for as long as it runs, with its PID and command line in it,
//! so that a second writer is refused with the holder named (or waits, with `--wait`).
//! Read commands take no lock.

use std::fs;
use std::io::{Read, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where locks live by default.
const LOCK_DIR: &str = "/run/lock";

/// The default lock file of a device: one per device, under /run/lock (or the
/// temporary directory where that does not exist).
pub fn default_path(device_location: &str) -> PathBuf {
    // FNV-1a of the device path: stable, and distinct for distinct devices.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in device_location.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let dir = if Path::new(LOCK_DIR).is_dir() {
        PathBuf::from(LOCK_DIR)
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("bfperf-{h:016x}.lock"))
}

/// A held writer lock; released when dropped (or when the process ends, however).
#[derive(Debug)]
pub struct WriterLock {
    file: fs::File,
    path: PathBuf,
}

fn this_command() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

impl WriterLock {
    /// Takes the lock at `path`. If another process holds it: waits with `wait`,
    /// otherwise fails naming the holder.
    pub fn acquire(path: &Path, wait: bool) -> Result<WriterLock> {
        let file_err = |what: &'static str| {
            let path = path.to_path_buf();
            move |source| Error::File { what, path, source }
        };
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(file_err(
                "cannot open the writer lock file (pass --lock-file FILE)",
            ))?;
        let fd = file.as_raw_fd();
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(file_err("cannot lock")(err));
            }
            if !wait {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(Error::Busy {
                    holder: describe_holder(&holder),
                    path: path.to_path_buf(),
                });
            }
            // SAFETY: as above; blocks until the holder is gone.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
                return Err(file_err("cannot lock")(std::io::Error::last_os_error()));
            }
        }
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| writeln!(file, "{}\n{}", std::process::id(), this_command()))
            .map_err(file_err("cannot write the writer lock file"))?;
        Ok(WriterLock {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

fn describe_holder(text: &str) -> String {
    let mut lines = text.lines();
    match (lines.next(), lines.next()) {
        (Some(pid), Some(cmd)) if !pid.is_empty() => format!("pid {pid}: {cmd}"),
        _ => "another process".to_string(),
    }
}
