//! One rule for every output file (`-o` of every command, the exporter's
//! `--textfile`), by the kernel's own rules for links:
//! - `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` are the
//!   descriptors bfperf was given: written through them, in place (a file opened for
//!   appending is appended to, a pipe or socket written into);
//! - a symbolic link on the way that sits in a sticky, world-writable directory
//!   (`/tmp`) and belongs neither to the caller nor to the directory's owner is
//!   refused, as `fs.protected_symlinks` refuses it, and so is a link to nothing;
//! - a character device, FIFO or socket is written in place, never created or
//!   replaced (a socket is connected to);
//! - a regular file is replaced atomically (a temporary file beside it, fsync,
//!   rename), keeping its mode and owner, once the kernel has let bfperf open it for
//!   writing through the path given; a new one is created so;
//! - a directory, a block device, or a file with several hard links (replacing it
//!   would split them) is refused.
//!
//! The temporary file is removed on every error; [`replace`] also holds the
//! terminating signals until it is gone.

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

/// What `-o PATH` names, once links are followed.
enum Resolved {
    /// A regular file to replace, or a new one.
    Regular(Target),
    /// A character device, FIFO or socket, written in place.
    Stream(PathBuf, fs::FileType),
    /// A descriptor this process holds (`/dev/stdout`).
    Inherited(i32),
}

/// The descriptor a path names when it is one of this process's own.
fn inherited_fd(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => s
            .strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse().ok()),
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Refuses a link the kernel's `protected_symlinks` would not follow for us: in a
/// sticky, world-writable directory, owned neither by us nor by the directory's owner.
fn check_link(link: &Path, md: &fs::Metadata) -> Result<()> {
    let dir = match link.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(dmd) = fs::metadata(dir) else {
        return Ok(());
    };
    let mode = dmd.permissions().mode();
    if mode & 0o1000 != 0 && mode & 0o002 != 0 && md.uid() != euid() && md.uid() != dmd.uid() {
        return Err(refuse(
            link,
            format!(
                "it is a symbolic link of uid {} in {}, a directory anyone can write to; bfperf does not follow it (as fs.protected_symlinks does not): write to a path of your own",
                md.uid(),
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// The real path `path` names, every link on the way checked by [`check_link`]. The
/// last components may not exist yet.
fn walk(path: &Path) -> Result<PathBuf> {
    use std::collections::VecDeque;
    use std::path::Component;
    let mut resolved = match path.is_absolute() {
        true => PathBuf::from("/"),
        false => std::env::current_dir().map_err(|e| Error::File {
            what: "cannot find the current directory for",
            path: path.to_path_buf(),
            source: e,
        })?,
    };
    let mut pending: VecDeque<PathBuf> = path
        .components()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        match part.components().next() {
            Some(Component::RootDir) => resolved = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                resolved.pop();
            }
            Some(Component::Normal(name)) => {
                let next = resolved.join(name);
                match fs::symlink_metadata(&next) {
                    Ok(md) if md.file_type().is_symlink() => {
                        check_link(&next, &md)?;
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(refuse(path, "too many levels of symbolic links"));
                        }
                        let target = fs::read_link(&next).map_err(|e| Error::File {
                            what: "cannot read the link",
                            path: next.clone(),
                            source: e,
                        })?;
                        let mut ahead: VecDeque<PathBuf> = target
                            .components()
                            .map(|c| PathBuf::from(c.as_os_str()))
                            .collect();
                        ahead.extend(pending);
                        pending = ahead;
                    }
                    _ => resolved = next,
                }
            }
            _ => {}
        }
    }
    Ok(resolved)
}

fn resolve(path: &Path) -> Result<Resolved> {
    if let Some(fd) = inherited_fd(path) {
        return Ok(Resolved::Inherited(fd));
    }
    let real = walk(path)?;
    let md = match fs::symlink_metadata(&real) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(refuse(
                    path,
                    "it is a symbolic link to nothing; bfperf does not create the file a dangling link names",
                ));
            }
            return Ok(Resolved::Regular(Target {
                path: real,
                keep: None,
            }));
        }
        Err(e) => {
            return Err(Error::File {
                what: "cannot examine",
                path: real,
                source: e,
            })
        }
    };
    let ft = md.file_type();
    if ft.is_char_device() || ft.is_fifo() || ft.is_socket() {
        return Ok(Resolved::Stream(path.to_path_buf(), ft));
    }
    if !ft.is_file() {
        return Err(refuse(
            &real,
            format!(
                "it is {}; bfperf writes regular files (replaced), character devices, FIFOs and sockets (written in place)",
                crate::sysfs::kind_name(&ft)
            ),
        ));
    }
    if md.nlink() > 1 {
        return Err(refuse(
            &real,
            format!(
                "it has {} hard links and replacing it would split them; write to another name",
                md.nlink()
            ),
        ));
    }
    // The kernel's say, through the path as given (protected_symlinks and
    // protected_regular, permissions): it must let bfperf open the file for
    // writing. Nothing is written or truncated. Non-blocking, and what was opened is
    // checked: a FIFO swapped in since it was looked at neither blocks the open
    // (until a reader comes, deaf to signals) nor passes for the file.
    use std::os::unix::fs::OpenOptionsExt;
    let opened = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .and_then(|f| f.metadata())
        .map_err(|e| Error::File {
            what: "the kernel does not let bfperf open for writing",
            path: path.to_path_buf(),
            source: e,
        })?;
    if !opened.file_type().is_file() || opened.ino() != md.ino() || opened.dev() != md.dev() {
        return Err(refuse(
            path,
            "it changed while bfperf looked at it (another file is there now); nothing was written",
        ));
    }
    Ok(Resolved::Regular(Target {
        path: real,
        keep: Some((md.permissions().mode() & 0o7777, md.uid(), md.gid())),
    }))
}

/// The mode of a new file: 0644 less the umask. The umask is read from
/// /proc/self/status (Linux 4.7 and later), never set and set back: that would
/// change it for a moment for every thread of the process (the exporter's among
/// them). Without it, the usual 022.
fn new_file_mode() -> u32 {
    let mask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
        })
        .unwrap_or(0o022);
    0o644 & !mask
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
pub(crate) enum Sink {
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
pub(crate) fn open(path: &Path) -> Result<Sink> {
    let target = match resolve(path)? {
        Resolved::Regular(t) => t,
        Resolved::Stream(p, ft) => return open_stream(&p, ft),
        Resolved::Inherited(fd) => return open_inherited(path, fd),
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

/// Opens `path` to be appended to (perf's `--append`): a regular file is written at
/// its end in place, never truncated or replaced (a new one is created so); the
/// others as [`open`] opens them. What is opened is checked, not only what was
/// looked at: a regular file, not a link (`O_NOFOLLOW`), with one name, and a FIFO
/// swapped in meanwhile never blocks the open (`O_NONBLOCK`).
pub(crate) fn open_append(path: &Path) -> Result<Sink> {
    use std::os::unix::fs::OpenOptionsExt;
    let target = match resolve(path)? {
        Resolved::Regular(t) => t,
        Resolved::Stream(p, ft) => return open_stream(&p, ft),
        Resolved::Inherited(fd) => return open_inherited(path, fd),
    };
    let mut options = fs::OpenOptions::new();
    options
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY);
    if target.keep.is_none() {
        options.create_new(true).mode(new_file_mode());
    }
    let file = options.open(&target.path).map_err(|e| Error::File {
        what: "cannot open for appending",
        path: target.path.clone(),
        source: e,
    })?;
    let md = file.metadata().map_err(|e| Error::File {
        what: "cannot examine",
        path: target.path.clone(),
        source: e,
    })?;
    if !md.file_type().is_file() || md.nlink() > 1 {
        return Err(refuse(
            &target.path,
            "it changed while bfperf opened it (now not a regular file with one name); nothing was written",
        ));
    }
    Ok(Sink::Stream(file))
}

/// One of this process's descriptors, duplicated: the same open file (its offset,
/// its append mode), a pipe or a socket alike.
fn open_inherited(path: &Path, fd: i32) -> Result<Sink> {
    // SAFETY: fcntl on a descriptor number; F_DUPFD_CLOEXEC returns a new one we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 || flags & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(refuse(
            path,
            format!("descriptor {fd} is not open for writing in this process"),
        ));
    }
    // SAFETY: as above.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if dup == -1 {
        return Err(Error::File {
            what: "cannot use",
            path: path.to_path_buf(),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: `dup` is a new descriptor nothing else owns.
    Ok(Sink::Stream(unsafe {
        <fs::File as std::os::fd::FromRawFd>::from_raw_fd(dup)
    }))
}

/// A character device, FIFO or socket, opened for writing in place: never created,
/// never truncated. A FIFO nobody reads is an error, not a hang; a socket is
/// connected to.
fn open_stream(path: &Path, ft: fs::FileType) -> Result<Sink> {
    use std::os::unix::fs::OpenOptionsExt;
    if ft.is_socket() {
        let connect = |p: &Path| std::os::unix::net::UnixStream::connect(p);
        let stream = with_socket_path(path, connect).map_err(|e| Error::File {
            what: "cannot connect to the socket",
            path: path.to_path_buf(),
            source: e,
        })?;
        return Ok(Sink::Stream(fs::File::from(std::os::fd::OwnedFd::from(
            stream,
        ))));
    }
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
    pub(crate) fn finish(self) -> Result<()> {
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
pub(crate) fn replace(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
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

/// The longest path a Unix socket address holds (sun_path, with its final NUL).
const SUN_PATH: usize = 108;

/// Calls `f` with `path`, or — when it is too long for a socket's address — with
/// the same file through its directory opened here (`/proc/self/fd/N/NAME`), so
/// that a socket may be bound and reached however deep its directory is.
pub(crate) fn with_socket_path<T>(
    path: &Path,
    f: impl FnOnce(&Path) -> io::Result<T>,
) -> io::Result<T> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if path.as_os_str().len() < SUN_PATH {
        return f(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return f(path);
    };
    let dir = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    let short = Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    f(&short)
}
