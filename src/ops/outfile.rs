//! One rule for every output file (`-o` of every command, the exporter's
//! `--textfile`): a regular file — or the regular file a symlink the user gave names
//! — is replaced atomically (a temporary file beside it, fsync, rename), keeping its
//! mode and owner, or created; a character device, FIFO or socket (`/dev/null`,
//! `/dev/stdout`, `-o >(gzip > s.gz)`) is written in place, never replaced; a
//! directory or block device is refused, and so is a file with several hard links
//! (replacing it would split them). The temporary file is removed on every error;
//! [`replace`] also holds the terminating signals until it is gone.

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
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a device node"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// What `-o PATH` names, once links are followed.
enum Resolved {
    /// A regular file to replace, or a new one.
    Regular(Target),
    /// A character device, FIFO or socket, written in place.
    Stream(PathBuf, fs::FileType),
}

fn resolve(path: &Path) -> Result<Resolved> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let md = match fs::symlink_metadata(&current) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Resolved::Regular(Target {
                    path: current,
                    keep: None,
                }))
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
        if ft.is_char_device() || ft.is_fifo() || ft.is_socket() {
            return Ok(Resolved::Stream(current, ft));
        }
        if !ft.is_file() {
            return Err(refuse(
                &current,
                format!(
                    "it is {}; bfperf writes regular files (replaced), character devices, FIFOs and sockets (written in place)",
                    kind_name(&ft)
                ),
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
        return Ok(Resolved::Regular(Target {
            path: current,
            keep: Some((md.permissions().mode() & 0o7777, md.uid(), md.gid())),
        }));
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

/// An open output: a temporary file that becomes the target on [`Sink::finish`], or
/// a stream written in place.
pub enum Sink {
    /// A regular file, replaced atomically on finish.
    Atomic {
        /// The temporary file in the target's directory.
        tmp: tempfile::NamedTempFile,
        /// The file it replaces.
        target: PathBuf,
    },
    /// A device, FIFO or socket, written in place.
    Stream(fs::File),
}

/// Opens `path` for output by the rule above. Nothing is replaced until `finish`.
pub fn open(path: &Path) -> Result<Sink> {
    let target = match resolve(path)? {
        Resolved::Regular(t) => t,
        Resolved::Stream(p, ft) => return open_stream(&p, ft),
    };
    let dir = match target.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_err = |what: &'static str| {
        let path = target.path.clone();
        move |source| Error::File { what, path, source }
    };
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
    Ok(Sink::Atomic {
        tmp,
        target: target.path,
    })
}

/// A character device, FIFO or socket, opened for writing in place: never created,
/// never truncated. A FIFO nobody reads is an error, not a hang.
fn open_stream(path: &Path, ft: fs::FileType) -> Result<Sink> {
    use std::os::unix::fs::OpenOptionsExt;
    let nonblocking = if ft.is_fifo() { libc::O_NONBLOCK } else { 0 };
    let file = fs::OpenOptions::new()
        .write(true)
        .custom_flags(nonblocking | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            let source = if e.raw_os_error() == Some(libc::ENXIO) {
                io::Error::new(io::ErrorKind::BrokenPipe, "no process reads this FIFO")
            } else {
                e
            };
            Error::File {
                what: "cannot write to",
                path: path.to_path_buf(),
                source,
            }
        })?;
    if nonblocking != 0 {
        // Opened: from now on writes wait for the reader as usual.
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_GETFL);
            libc::fcntl(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::F_SETFL,
                flags & !libc::O_NONBLOCK,
            );
        }
    }
    Ok(Sink::Stream(file))
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Atomic { tmp, .. } => tmp.as_file().write(buf),
            Sink::Stream(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Atomic { tmp, .. } => tmp.as_file().flush(),
            Sink::Stream(f) => f.flush(),
        }
    }
}

impl Sink {
    /// Puts the output in place: fsync and rename a temporary file; nothing more for
    /// a stream. Dropping a sink instead removes its temporary file.
    pub fn finish(self) -> Result<()> {
        match self {
            Sink::Stream(_) => Ok(()),
            Sink::Atomic { tmp, target } => {
                let err = |what: &'static str, source| Error::File {
                    what,
                    path: target.clone(),
                    source,
                };
                tmp.as_file()
                    .sync_all()
                    .map_err(|e| err("cannot write", e))?;
                tmp.persist(&target)
                    .map_err(|e| err("cannot rename the new file into", e.error))?;
                Ok(())
            }
        }
    }
}

/// Writes what `fill` writes to `path` by the rule above, holding SIGINT, SIGTERM and
/// SIGHUP until a temporary file is renamed or removed.
pub fn replace(path: &Path, fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    // Declared first, dropped last: signals wait until the temporary file is gone.
    let _hold = HoldSignals::new();
    let mut sink = open(path)?;
    {
        let mut w = BufWriter::new(&mut sink);
        fill(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::File {
                what: "cannot write",
                path: path.to_path_buf(),
                source: e,
            })?;
    }
    sink.finish()
}
