//! Writing an output file (a snapshot, a report) safely: only a regular file is
//! replaced (or a new one created), atomically, keeping its mode and owner; a device
//! node, directory, FIFO or socket is refused, and so is a symlink unless followed; a
//! file with several hard links is refused rather than split. The temporary file is
//! removed on every error and the terminating signals wait until it is gone.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How many symlinks `--follow` goes through before giving up (as the kernel does).
const MAX_LINKS: usize = 40;

/// What will be replaced: the final path, and the mode and owner to keep.
struct Target {
    path: PathBuf,
    keep: Option<(u32, u32, u32)>,
}

fn refuse(path: &Path, problem: impl Into<String>) -> Error {
    Error::OutputTarget {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

fn kind_name(ft: &fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device node"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn resolve(path: &Path, follow: bool) -> Result<Target> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let md = match fs::symlink_metadata(&current) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Target {
                    path: current,
                    keep: None,
                })
            }
            Err(e) => {
                return Err(Error::File {
                    what: "cannot examine",
                    path: current,
                    source: e,
                })
            }
        };
        let ft = md.file_type();
        if ft.is_symlink() {
            if !follow {
                return Err(refuse(
                    &current,
                    "it is a symbolic link; pass --follow to replace the file it points to",
                ));
            }
            let link = fs::read_link(&current).map_err(|e| Error::File {
                what: "cannot read the link",
                path: current.clone(),
                source: e,
            })?;
            current = match current.parent() {
                Some(dir) if link.is_relative() => dir.join(link),
                _ => link,
            };
            continue;
        }
        if !ft.is_file() {
            return Err(refuse(
                &current,
                format!("it is {}; bfperf writes regular files only", kind_name(&ft)),
            ));
        }
        if md.nlink() > 1 {
            return Err(refuse(
                &current,
                format!(
                    "it has {} hard links and replacing it would split them; write to another name",
                    md.nlink()
                ),
            ));
        }
        return Ok(Target {
            path: current,
            keep: Some((md.permissions().mode() & 0o7777, md.uid(), md.gid())),
        });
    }
    Err(refuse(path, "too many levels of symbolic links"))
}

/// The mode of a new file: 0644 less the umask.
fn new_file_mode() -> u32 {
    // SAFETY: umask only swaps the process's mask; it is restored at once.
    let mask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    0o644 & !(mask as u32)
}

/// Blocks SIGINT, SIGTERM and SIGHUP while alive, so that a temporary file is always
/// renamed or removed before such a signal ends the process.
struct HoldSignals {
    old: libc::sigset_t,
}

impl HoldSignals {
    fn new() -> HoldSignals {
        // SAFETY: the sets are initialised by sigemptyset before use; pthread_sigmask
        // only changes this thread's mask, restored on drop.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            HoldSignals { old }
        }
    }
}

impl Drop for HoldSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in new().
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Replaces (or creates) the regular file `path` with what `fill` writes, atomically.
/// With `follow`, a symlink's target is replaced; without, a symlink is refused.
pub fn replace(
    path: &Path,
    follow: bool,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let target = resolve(path, follow)?;
    let dir = match target.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_err = |what: &'static str| {
        let path = target.path.clone();
        move |source| Error::File { what, path, source }
    };
    // Declared first, dropped last: signals wait until the temporary file is gone.
    let _hold = HoldSignals::new();
    let tmp = tempfile::Builder::new()
        .prefix(".bfperf-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(file_err("cannot create a temporary file beside"))?;
    let (mode, owner) = match target.keep {
        Some((mode, uid, gid)) => (mode, Some((uid, gid))),
        None => (new_file_mode(), None),
    };
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .map_err(file_err("cannot set the mode of the file replacing"))?;
    if let Some((uid, gid)) = owner {
        // Keeps the old owner where we may (as root); elsewhere the file is ours.
        let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(uid), Some(gid));
    }
    {
        let mut w = BufWriter::new(tmp.as_file());
        fill(&mut w)
            .and_then(|_| w.flush())
            .map_err(file_err("cannot write"))?;
    }
    tmp.as_file().sync_all().map_err(file_err("cannot write"))?;
    tmp.persist(&target.path)
        .map_err(|e| file_err("cannot rename the new file into")(e.error))?;
    Ok(())
}
