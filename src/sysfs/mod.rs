//! The sysfs access layer: read, write and list files by paths relative to the device
//! directory. Every file name of the driver's interface is spelled here and only here,
//! so that a simulated device can stand in for the real one.

use std::ffi::{CStr, CString};
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) mod files;
mod firmware;
mod identity;
pub(crate) mod procfs;

pub(crate) use files::{check_config, read_config, read_regular};
pub(crate) use firmware::pmc_firmware;
pub(crate) use identity::tree_identity;
pub(crate) use procfs::kernel_page_size;
pub use procfs::{process_figures, ProcessFigures};

/// What a directory entry is. Symlinks are reported as such and never followed when
/// listing, because the driver's `device` and `subsystem` links lead in circles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (or what reads as one).
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// An entry whose name is not UTF-8 (`name` shows it lossily): no driver file is
    /// named so, and it cannot be addressed by name.
    NotUtf8,
}

/// An entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
}

/// Access to one bfperf device. Paths are relative to the device (`tile2/event3`;
/// `""` is the device directory itself).
pub trait Sysfs: Send + Sync {
    /// Reads a whole file.
    fn read(&self, rel: &str) -> io::Result<String>;
    /// Writes `data` to a file in one write call (as `echo -n` would). Never creates
    /// files. Refused when the device is no longer the one opened ([`Sysfs::still_here`]).
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        self.still_here()?;
        self.write_here(rel, data)
    }

    /// [`Sysfs::write`] without asking [`Sysfs::still_here`] first: for a caller that
    /// has just asked it before a series of writes (a plan of writes, asked once),
    /// rather than before each, which is a walk of the directory's path every time.
    fn write_here(&self, rel: &str, data: &[u8]) -> io::Result<()>;
    /// Lists a directory, in the order its filesystem gives (the kernel's is not by
    /// name): a caller that shows the entries sorts them.
    fn list(&self, rel: &str) -> io::Result<Vec<Entry>>;
    /// Reads a symbolic link's target.
    fn read_link(&self, rel: &str) -> io::Result<String>;
    /// Where the device is, for people (a path).
    fn location(&self) -> String;

    /// One name per device however its path was spelled (the resolved real path of
    /// a directory): what locks and journals are keyed on.
    fn canonical_location(&self) -> String {
        self.location()
    }

    /// What the device is, however it is reached (a bind mount, another path) and
    /// wherever it comes back (a driver loaded again): the writer lock, the
    /// owner's socket and the journal are keyed on it. The canonical location
    /// unless the files have a better identity.
    fn identity(&self) -> String {
        self.canonical_location()
    }

    /// Whether the files are still the ones opened (Err, saying why, when the
    /// directory was replaced or is gone): nothing is written through a handle
    /// whose directory changed.
    fn still_here(&self) -> io::Result<()> {
        Ok(())
    }

    /// A name of the device that outlasts a probe: the platform device it belongs
    /// to (`/sys/devices/platform/MLNXBFD2:00`), where its `device` link leads,
    /// rather than the `hwmonN` the kernel numbers anew at each probe. The
    /// canonical location where there is no such link.
    fn lasting_location(&self) -> String {
        self.canonical_location()
    }

    /// Whether this process may write the file (the driver's files are root's).
    fn writable(&self, rel: &str) -> bool {
        let _ = rel;
        true
    }

    /// The page size of the kernel serving the files: the most one `show` prints, so
    /// what a cut `event_list` is measured against. The running kernel's by default.
    fn page_size(&self) -> usize {
        kernel_page_size()
    }

    /// Keeps these files open, one descriptor each, read and written in place
    /// until [`Sysfs::release`]: a measurement saves, programs, reads back and
    /// restores the same `event<N>` files, and each open walks the path again.
    /// Best effort: a file that cannot be opened for reading and writing (not
    /// there, not writable) is left to its path. Holds of one file nest.
    fn hold(&self, rels: &[String]) {
        let _ = rels;
    }

    /// Lets go of files [`Sysfs::hold`] kept open.
    fn release(&self, rels: &[String]) {
        let _ = rels;
    }

    /// Opens a file for repeated reads (sampling). The real filesystem opens it once
    /// and reads it with one `pread` at offset 0 each time, which makes sysfs
    /// generate the value afresh; the default reads the whole file each time.
    fn open_value(&self, rel: &str) -> io::Result<Box<dyn ValueFile + '_>> {
        Ok(Box::new(Reread {
            fs: self,
            rel: rel.to_string(),
            text: String::new(),
        }))
    }

    /// Opens a file for repeated writes (an `enable` switched every tick): one
    /// `pwrite` each time on the real filesystem.
    fn open_control(&self, rel: &str) -> io::Result<Box<dyn ControlFile + '_>> {
        Ok(Box::new(Rewrite {
            fs: self,
            rel: rel.to_string(),
        }))
    }
}

/// A file opened for sampling.
pub trait ValueFile: Send {
    /// The file's current content.
    fn read_now(&mut self) -> io::Result<&str>;

    /// The file's current content as bytes, unchecked as text (a number is parsed
    /// from them as they are).
    fn read_bytes(&mut self) -> io::Result<&[u8]> {
        self.read_now().map(str::as_bytes)
    }
}

/// A file opened for repeated writes.
pub trait ControlFile: Send {
    /// Writes `data` to the file's start in one write.
    fn write_now(&mut self, data: &[u8]) -> io::Result<()>;
}

/// Sampling by reading the whole file through the access layer each time.
struct Reread<'a, T: ?Sized> {
    fs: &'a T,
    rel: String,
    text: String,
}

impl<T: Sysfs + ?Sized> ValueFile for Reread<'_, T> {
    fn read_now(&mut self) -> io::Result<&str> {
        self.text = self.fs.read(&self.rel)?;
        Ok(&self.text)
    }
}

/// Writing through the access layer each time.
struct Rewrite<'a, T: ?Sized> {
    fs: &'a T,
    rel: String,
}

impl<T: Sysfs + ?Sized> ControlFile for Rewrite<'_, T> {
    fn write_now(&mut self, data: &[u8]) -> io::Result<()> {
        self.fs.write(&self.rel, data)
    }
}

/// A sysfs attribute kept open and written with one `pwrite` at offset 0.
pub struct PwriteFile {
    file: fs::File,
}

impl ControlFile for PwriteFile {
    fn write_now(&mut self, data: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let n = self.file.write_at(data, 0)?;
        if n != data.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        Ok(())
    }
}

/// A sysfs attribute kept open and read with one `pread` at offset 0.
pub struct PreadFile {
    file: fs::File,
    /// A counter prints at most "0x", 16 hex digits and a newline. Kept beside the
    /// descriptor: one allocation a file, and one place a read touches.
    buf: [u8; 64],
}

/// A value file's bytes as text, or the error a read of bytes that are not gives.
pub(crate) fn value_text(bytes: &[u8]) -> io::Result<&str> {
    std::str::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the value is not text"))
}

impl ValueFile for PreadFile {
    fn read_now(&mut self) -> io::Result<&str> {
        value_text(self.read_bytes()?)
    }

    fn read_bytes(&mut self) -> io::Result<&[u8]> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(&mut self.buf, 0)?;
        if n == self.buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the value is longer than a counter's",
            ));
        }
        Ok(&self.buf[..n])
    }
}

/// A shared access layer (e.g. a simulator also served over FUSE) is one too.
impl<T: Sysfs + ?Sized> Sysfs for std::sync::Arc<T> {
    fn open_value(&self, rel: &str) -> io::Result<Box<dyn ValueFile + '_>> {
        (**self).open_value(rel)
    }
    fn open_control(&self, rel: &str) -> io::Result<Box<dyn ControlFile + '_>> {
        (**self).open_control(rel)
    }
    fn read(&self, rel: &str) -> io::Result<String> {
        (**self).read(rel)
    }
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        (**self).write(rel, data)
    }
    fn write_here(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        (**self).write_here(rel, data)
    }
    fn list(&self, rel: &str) -> io::Result<Vec<Entry>> {
        (**self).list(rel)
    }
    fn read_link(&self, rel: &str) -> io::Result<String> {
        (**self).read_link(rel)
    }
    fn location(&self) -> String {
        (**self).location()
    }
    fn canonical_location(&self) -> String {
        (**self).canonical_location()
    }
    fn identity(&self) -> String {
        (**self).identity()
    }
    fn still_here(&self) -> io::Result<()> {
        (**self).still_here()
    }
    fn lasting_location(&self) -> String {
        (**self).lasting_location()
    }
    fn writable(&self, rel: &str) -> bool {
        (**self).writable(rel)
    }
    fn page_size(&self) -> usize {
        (**self).page_size()
    }
    fn hold(&self, rels: &[String]) {
        (**self).hold(rels)
    }
    fn release(&self, rels: &[String]) {
        (**self).release(rels)
    }
}

/// The smallest page size a kernel has (and the simulator's default).
pub(crate) const MIN_PAGE_SIZE: usize = 4096;
/// The largest page size accepted (arm64 and ppc64 go up to 64 KiB; hexagon 256 KiB).
pub(crate) const MAX_PAGE_SIZE: usize = 256 * 1024;

/// File names of the driver's interface.
pub(crate) mod layout {
    /// The hwmon class directory under a sysfs root.
    pub(crate) const HWMON_CLASS: &str = "class/hwmon";
    /// The file naming a hwmon device, and the name of ours.
    pub(crate) const NAME: &str = "name";
    /// The name of the driver's hwmon device.
    pub(crate) const DEVICE_NAME: &str = "bfperf";
    /// The link to the platform device (ACPI HID tells the generation).
    pub(crate) const DEVICE_LINK: &str = "device";
    /// The platform device's modalias (the ACPI HID, which tells the generation).
    pub(crate) const DEVICE_MODALIAS: &str = "device/modalias";
    /// Where the kernel lists the devices the firmware's ACPI tables describe.
    pub(crate) const ACPI_DEVICES: &str = "bus/acpi/devices";
    /// An ACPI device's link to the platform device made for it.
    pub(crate) const PHYSICAL_NODE: &str = "physical_node";
    /// A device's link to the driver bound to it.
    pub(crate) const DRIVER_LINK: &str = "driver";
    /// The mlxbf-pmc driver, present while its module is loaded.
    pub(crate) const PMC_DRIVER: &str = "bus/platform/drivers/mlxbf-pmc";
    /// Entries of the device directory that are not blocks.
    pub(crate) const NON_BLOCKS: &[&str] = &["power", "device", "subsystem", "of_node", "driver"];

    /// A block's list of events (`0x45: NAME` lines).
    pub(crate) const EVENT_LIST: &str = "event_list";
    /// An all-at-once block's start/stop switch.
    pub(crate) const ENABLE: &str = "enable";
    /// The bit mask of a BF3 block's counters that count clock cycles.
    pub(crate) const COUNT_CLOCK: &str = "count_clock";

    /// A counter's event file.
    pub(crate) fn event(block: &str, counter: u32) -> String {
        file(block, "event", itoa::Buffer::new().format(counter))
    }
    /// A counter's value file.
    pub(crate) fn counter(block: &str, counter: u32) -> String {
        file(block, "counter", itoa::Buffer::new().format(counter))
    }
    /// A block's event list.
    pub(crate) fn event_list(block: &str) -> String {
        file(block, EVENT_LIST, "")
    }
    /// A block's enable file.
    pub(crate) fn enable(block: &str) -> String {
        file(block, ENABLE, "")
    }
    /// A block's count_clock file.
    pub(crate) fn count_clock(block: &str) -> String {
        file(block, COUNT_CLOCK, "")
    }
    /// A statistics register's file.
    pub(crate) fn register(block: &str, name: &str) -> String {
        file(block, name, "")
    }

    /// `block/namesuffix` in one allocation of its size, without `core::fmt`: a
    /// snapshot names a few hundred files.
    fn file(block: &str, name: &str, suffix: &str) -> String {
        let mut out = String::with_capacity(block.len() + 1 + name.len() + suffix.len());
        out.push_str(block);
        out.push('/');
        out.push_str(name);
        out.push_str(suffix);
        out
    }

    /// `counter<N>` → N, `event<N>` → N.
    pub(crate) fn counter_index(file: &str) -> Option<u32> {
        index_of(file, "counter")
    }
    /// `event<N>` → N.
    pub(crate) fn event_index(file: &str) -> Option<u32> {
        index_of(file, "event")
    }
    fn index_of(file: &str, prefix: &str) -> Option<u32> {
        let digits = file.strip_prefix(prefix)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
}

/// The real filesystem: a hwmon directory (or a copy of one).
#[derive(Debug, Clone)]
pub struct RealFs {
    dir: PathBuf,
    /// The directory, held open since the device was opened (`O_PATH`): its files
    /// are opened below it, so that each open walks the file's own name, not the
    /// directory's whole path again, and finds the files of the directory that was
    /// opened, not of whatever is at its path now. None when it could not be
    /// opened: files are opened by their whole path then.
    root: Option<Arc<OwnedFd>>,
    page_size: Option<usize>,
    /// The directory's device and inode numbers when it was opened: nothing is
    /// written once they change (a driver loaded again, another tree put there).
    opened: Option<(u64, u64)>,
    /// Files kept open ([`Sysfs::hold`]), by their path relative to the device.
    held: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Held>>>,
}

/// A file kept open for reads and writes in place.
#[derive(Debug)]
struct Held {
    file: fs::File,
    /// A write leaves the file as long as what was written (a copy of a tree in
    /// plain files); sysfs and the simulator take each write whole, as `store` does.
    truncate: bool,
    /// How many holds keep it.
    holds: u32,
}

impl RealFs {
    /// The device at `dir` (a hwmon directory or a copy of one).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let root = open_directory(&dir).ok();
        let opened = root.as_ref().and_then(|d| identity_of(d.as_raw_fd()));
        RealFs {
            dir,
            root: root.map(Arc::new),
            page_size: None,
            opened,
            held: Default::default(),
        }
    }

    /// The page size of the kernel the files came from, when that is not the running
    /// kernel (a tree copied from a DPU with 64 KiB pages); None: the running kernel's.
    pub fn with_page_size(mut self, page_size: Option<usize>) -> Self {
        self.page_size = page_size;
        self
    }

    /// The directory's device and inode numbers, where it has them: "the same
    /// directory as a moment ago", never a name of the device (a driver loaded
    /// again gives it new ones, and they are handed out again).
    fn directory(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&self.dir).ok().map(|m| (m.dev(), m.ino()))
    }

    /// Where `rel` is opened from: below the directory held open, or, when it is
    /// not held (or `rel` is absolute), by the whole path. The device's own
    /// directory is `.` below it.
    fn at(&self, rel: &str) -> io::Result<(libc::c_int, CString)> {
        match &self.root {
            Some(root) if !rel.starts_with('/') => Ok((
                root.as_raw_fd(),
                CString::new(if rel.is_empty() { "." } else { rel })?,
            )),
            _ => Ok((libc::AT_FDCWD, path_text(&self.path(rel))?)),
        }
    }

    /// [`open_attribute_at`] of `rel`, from where [`RealFs::at`] says.
    fn open_below(
        &self,
        rel: &str,
        read: bool,
        write: bool,
        truncate: bool,
    ) -> io::Result<fs::File> {
        let (at, path) = self.at(rel)?;
        open_attribute_at(at, &path, read, write, truncate)
    }

    /// The device's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, rel: &str) -> PathBuf {
        use std::os::unix::ffi::OsStringExt;
        let dir = self.dir.as_os_str().as_bytes();
        if rel.is_empty() {
            return self.dir.clone();
        }
        if rel.starts_with('/') || dir.is_empty() || dir.ends_with(b"/") {
            return self.dir.join(rel);
        }
        // What `join` gives here, in one allocation of its size: `join` copies the
        // directory and then grows the copy for the rest, for every file read.
        let mut out = Vec::with_capacity(dir.len() + 1 + rel.len());
        out.extend_from_slice(dir);
        out.push(b'/');
        out.extend_from_slice(rel.as_bytes());
        PathBuf::from(std::ffi::OsString::from_vec(out))
    }
}

impl RealFs {
    /// `f` of the held file `rel`; None when `rel` is not held.
    fn with_held<T>(&self, rel: &str, f: impl FnOnce(&Held) -> T) -> Option<T> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(rel).map(f)
    }

    /// A held file's descriptor, duplicated for a handle of its own; None when
    /// `rel` is not held.
    fn held(&self, rel: &str) -> Option<io::Result<fs::File>> {
        self.with_held(rel, |h| h.file.try_clone())
    }

    /// Reads a held file in place: one `pread` at offset 0. None when `rel` is not
    /// held or holds more than a line (read by its path then).
    fn read_held(&self, rel: &str) -> Option<io::Result<String>> {
        use std::os::unix::fs::FileExt;
        self.with_held(rel, |h| {
            let mut line = [0u8; 64];
            match h.file.read_at(&mut line, 0) {
                Ok(n) if n < line.len() => Some(Ok(text_of(line[..n].to_vec()))),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            }
        })
        .flatten()
    }

    /// Writes a held file in place: one `pwrite` at offset 0, and the file cut to
    /// what was written where it is a plain file. None when `rel` is not held.
    fn write_held(&self, rel: &str, data: &[u8]) -> Option<io::Result<()>> {
        use std::os::unix::fs::FileExt;
        self.with_held(rel, |h| {
            let n = h.file.write_at(data, 0)?;
            if n != data.len() {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
            }
            if h.truncate {
                h.file.set_len(data.len() as u64)?;
            }
            Ok(())
        })
    }
}

/// Whether writes to `file` must cut it to their length: anywhere but sysfs and
/// FUSE (the simulator), which take each write whole as the driver's `store` does.
fn write_truncates(file: &fs::File) -> bool {
    // SAFETY: fstatfs fills the struct we own; the descriptor is open.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let fd = std::os::fd::AsRawFd::as_raw_fd(file);
    if unsafe { libc::fstatfs(fd, &mut st) } != 0 {
        return true;
    }
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    !matches!(magic, identity::SYSFS_MAGIC | identity::FUSE_SUPER_MAGIC)
}

/// A directory's path with every link resolved, as `fs::canonicalize` gives it, asked
/// of the kernel in one walk: the directory opened (`O_PATH`) and the path its
/// descriptor names read back from `/proc/self/fd`. `realpath` reads each prefix of
/// the path as a link, each a walk from the root: nine in sysfs for
/// `/sys/class/hwmon/hwmon0`. Without `/proc`, or for a directory no longer there,
/// as `fs::canonicalize` finds it.
pub(crate) fn real_path(dir: &Path) -> io::Result<PathBuf> {
    let named =
        open_directory(dir).and_then(|d| fs::read_link(format!("/proc/self/fd/{}", d.as_raw_fd())));
    match named {
        Ok(p) if p.is_absolute() && !p.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") => {
            Ok(p)
        }
        _ => fs::canonicalize(dir),
    }
}

/// The most bfperf reads of one attribute: sysfs serves at most a page, so anything
/// longer is not a driver file.
pub(crate) const MAX_ATTRIBUTE: usize = 64 * 1024;

/// What a file that is not a regular file is, for people.
pub(crate) fn kind_name(kind: &fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_char_device() {
        "a device node"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn not_regular(kind: fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "it is {}, not a sysfs attribute (bfperf reads and writes regular files only)",
            kind_name(&kind)
        ),
    )
}

/// `openat(2)`, tried again when a signal interrupts it.
fn open_retrying(dir: libc::c_int, path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: `path` is NUL-terminated and lives across the call; a descriptor
        // the call returns is ours alone.
        let fd = unsafe { libc::openat(dir, path.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: just opened, owned by nothing else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A path as the system calls take it.
fn path_text(path: &Path) -> io::Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// The device's directory held open (`O_PATH`: nothing is read through it), a
/// link to it followed as a path to it is.
fn open_directory(dir: &Path) -> io::Result<OwnedFd> {
    open_retrying(
        libc::AT_FDCWD,
        &path_text(dir)?,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
    )
}

/// A descriptor's device and inode numbers.
fn identity_of(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: `st` is written by the call on success and read only then.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// Opens an attribute without following a symlink and without blocking on a FIFO, and
/// refuses anything but a regular file.
fn open_attribute(path: &Path, write: bool, truncate: bool) -> io::Result<fs::File> {
    open_attribute_at(libc::AT_FDCWD, &path_text(path)?, !write, write, truncate)
}

/// [`open_attribute`] of `path` below the directory `dir` (`AT_FDCWD`: a path of
/// its own), opened for reading, writing or both.
fn open_attribute_at(
    dir: libc::c_int,
    path: &CStr,
    read: bool,
    write: bool,
    truncate: bool,
) -> io::Result<fs::File> {
    let access = match (read, write) {
        (true, true) => libc::O_RDWR,
        (false, true) => libc::O_WRONLY,
        _ => libc::O_RDONLY,
    };
    let truncate = if write && truncate { libc::O_TRUNC } else { 0 };
    let flags = access | truncate | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let fd = open_retrying(dir, path, flags).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is a symbolic link, not a sysfs attribute (bfperf does not follow links inside the device)",
        ),
        _ => e,
    })?;
    let file = fs::File::from(fd);
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    Ok(file)
}

/// A directory's entries in the kernel's order, "." and ".." left out; a symlink is
/// reported as one, never followed. The directory itself is opened as `read_dir`
/// opens it (a link to it followed). Read with `getdents64` into one buffer on the
/// stack: `read_dir` allocates a 32 KiB buffer for each directory and two copies of
/// each name, which cost a device scan more than the listing itself.
fn list_dir(at: libc::c_int, path: &CStr) -> io::Result<Vec<Entry>> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let dir = fs::File::from(open_retrying(at, path, flags)?);
    // A block's directory holds a few dozen names.
    let mut out = Vec::with_capacity(32);
    // Not cleared first: only what the kernel wrote is read.
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which lives
        // across the call; the descriptor is open for the call's length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                std::os::fd::AsRawFd::as_raw_fd(&dir),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        let n = match n {
            n if n < 0 => match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::Interrupted => continue,
                e => return Err(e),
            },
            0 => break,
            n => (n as usize).min(buf.len()),
        };
        // SAFETY: the call wrote the first `n` bytes of `buf`.
        let records = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
        let mut at = 0;
        while let Some(record) = records.get(at..).filter(|r| r.len() >= 20) {
            // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
            let len = usize::from(u16::from_ne_bytes([record[16], record[17]]));
            let Some(name) = record.get(19..len).filter(|_| len >= 20) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the kernel returned a directory record that does not fit",
                ));
            };
            at += len;
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match record[18] {
                libc::DT_DIR => EntryKind::Dir,
                libc::DT_LNK => EntryKind::Symlink,
                libc::DT_UNKNOWN => kind_at(&dir, name)?,
                _ => EntryKind::File,
            };
            out.push(match String::from_utf8(name.to_vec()) {
                Ok(name) => Entry { name, kind },
                Err(e) => Entry {
                    name: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                    kind: EntryKind::NotUtf8,
                },
            });
        }
    }
    Ok(out)
}

/// What `name` in `dir` is, its link not followed: for a filesystem whose listing
/// does not say (`DT_UNKNOWN`).
fn kind_at(dir: &fs::File, name: &[u8]) -> io::Result<EntryKind> {
    let c = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidData)?;
    // SAFETY: `st` is written by the call; `c` is a NUL-terminated name.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let fd = std::os::fd::AsRawFd::as_raw_fd(dir);
    if unsafe { libc::fstatat(fd, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => EntryKind::Dir,
        libc::S_IFLNK => EntryKind::Symlink,
        _ => EntryKind::File,
    })
}

/// Which CPUs are online, under a sysfs root.
pub(crate) fn cpus_online(sysfs_root: &Path) -> PathBuf {
    sysfs_root.join("devices/system/cpu/online")
}

/// Where the kernel lists its perf_event PMUs, under a sysfs root.
pub(crate) fn event_source_devices(sysfs_root: &Path) -> PathBuf {
    sysfs_root.join("bus/event_source/devices")
}

/// Reads an attribute file: at most [`MAX_ATTRIBUTE`] bytes, a regular file only, so
/// that no device content can exhaust memory or block bfperf.
pub(crate) fn read_attribute(path: &Path) -> io::Result<String> {
    read_open_attribute(open_attribute(path, false, false)?)
}

/// [`read_attribute`] of a file opened.
fn read_open_attribute(mut file: fs::File) -> io::Result<String> {
    // Open, fstat, one read, close: a read of a regular file that returns less than
    // asked for has reached its end. Nearly every attribute bfperf reads (a value, an
    // event, a name) is a line under 64 bytes; a stack buffer of that size costs
    // nothing to clear, where a page's would be cleared for every value of a
    // snapshot. A longer file (an `event_list`) is read on, bounded.
    let mut line = [0u8; 64];
    let n = read_retrying(&mut file, &mut line)?;
    if n < line.len() {
        return Ok(text_of(line[..n].to_vec()));
    }
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(&line);
    file.take((MAX_ATTRIBUTE + 1 - out.len()) as u64)
        .read_to_end(&mut out)?;
    if out.len() > MAX_ATTRIBUTE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it holds more than {} KiB; a sysfs attribute is at most one page, so this is not a driver file",
                MAX_ATTRIBUTE / 1024
            ),
        ));
    }
    Ok(text_of(out))
}

/// An attribute's bytes as text: valid UTF-8 (every driver file) as it is, without a
/// copy or the lossy form's slower pass; anything else in its lossy form.
fn text_of(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn read_retrying(file: &mut fs::File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

impl Sysfs for RealFs {
    fn read(&self, rel: &str) -> io::Result<String> {
        match self.read_held(rel) {
            Some(r) => r,
            None => read_open_attribute(self.open_below(rel, true, false, false)?),
        }
    }

    fn hold(&self, rels: &[String]) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        // The device's files are on one filesystem: asked of the first opened.
        let mut truncates = None;
        for rel in rels {
            if let Some(h) = held.get_mut(rel.as_str()) {
                h.holds += 1;
                continue;
            }
            if let Ok(file) = self.open_below(rel, true, true, false) {
                let truncate = *truncates.get_or_insert_with(|| write_truncates(&file));
                held.insert(
                    rel.clone(),
                    Held {
                        file,
                        truncate,
                        holds: 1,
                    },
                );
            }
        }
    }

    fn release(&self, rels: &[String]) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for rel in rels {
            if let Some(h) = held.get_mut(rel.as_str()) {
                h.holds -= 1;
                if h.holds == 0 {
                    held.remove(rel.as_str());
                }
            }
        }
    }

    fn writable(&self, rel: &str) -> bool {
        let Ok((at, path)) = self.at(rel) else {
            return false;
        };
        // SAFETY: faccessat reads the NUL-terminated path we own.
        unsafe { libc::faccessat(at, path.as_ptr(), libc::W_OK, 0) == 0 }
    }

    fn open_value(&self, rel: &str) -> io::Result<Box<dyn ValueFile + '_>> {
        let file = match self.held(rel) {
            Some(held) => held?,
            None => self.open_below(rel, true, false, false)?,
        };
        Ok(Box::new(PreadFile {
            file,
            buf: [0u8; 64],
        }))
    }

    fn open_control(&self, rel: &str) -> io::Result<Box<dyn ControlFile + '_>> {
        self.still_here()?;
        let file = match self.held(rel) {
            Some(held) => held?,
            None => self.open_below(rel, false, true, false)?,
        };
        Ok(Box::new(PwriteFile { file }))
    }

    fn write_here(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        // Truncate (O_TRUNC) so that plain-file copies of the tree hold exactly what was written;
        // sysfs ignores the truncation. Never create a file that is not there.
        if let Some(r) = self.write_held(rel, data) {
            return r;
        }
        let mut file = self.open_below(rel, false, true, true)?;
        let n = file.write(data)?;
        if n != data.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        Ok(())
    }

    fn list(&self, rel: &str) -> io::Result<Vec<Entry>> {
        let (at, path) = self.at(rel)?;
        list_dir(at, &path)
    }

    fn read_link(&self, rel: &str) -> io::Result<String> {
        Ok(fs::read_link(self.path(rel))?
            .to_string_lossy()
            .into_owned())
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn page_size(&self) -> usize {
        self.page_size.unwrap_or_else(kernel_page_size)
    }

    fn lasting_location(&self) -> String {
        match real_path(&self.path(layout::DEVICE_LINK)) {
            Ok(device) if device.is_dir() => device.display().to_string(),
            _ => self.canonical_location(),
        }
    }

    fn canonical_location(&self) -> String {
        real_path(&self.dir)
            .unwrap_or_else(|_| self.dir.clone())
            .display()
            .to_string()
    }

    /// What the device is, by the rules of the filesystem holding it (see
    /// `tree_identity`).
    fn identity(&self) -> String {
        tree_identity(
            &self.dir,
            self.read_link(layout::DEVICE_LINK).ok().as_deref(),
        )
    }

    /// Refuses a write when the directory is no longer the one opened: whatever is
    /// at its place now (the device loaded again, another tree) was never looked
    /// at, and is not written through this handle.
    fn still_here(&self) -> io::Result<()> {
        match self.opened {
            Some(at) if self.directory() != Some(at) => Err(io::Error::other(format!(
                "{} is no longer the directory bfperf opened (the device went away, or something else is there now); nothing was written",
                self.dir.display()
            ))),
            _ => Ok(()),
        }
    }
}

/// The most a configuration file (exporter config, workload, metric file) may hold.
pub(crate) const MAX_CONFIG: u64 = 64 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing as `read_dir` gave it: every name but "." and "..", each
    /// with its kind, a link reported as one and not followed (a link to a
    /// directory too), a name that is not UTF-8 marked; and the kind asked of the
    /// filesystem for each, as a listing without types has it asked.
    #[test]
    fn a_listing_is_what_read_dir_gave() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("tile0")).unwrap();
        fs::write(d.join("name"), "bfperf\n").unwrap();
        std::os::unix::fs::symlink("tile0", d.join("device")).unwrap();
        std::os::unix::fs::symlink("gone", d.join("dangling")).unwrap();
        fs::write(d.join(std::ffi::OsStr::from_bytes(b"bad\xff")), "").unwrap();
        // Enough names for more than one getdents64 call into the 4 KiB buffer.
        let many: Vec<String> = (0..300).map(|i| format!("counter{i:03}")).collect();
        for n in &many {
            fs::write(d.join(n), "0").unwrap();
        }
        let mut got = RealFs::new(d).list("").unwrap();
        got.sort_by(|a, b| a.name.cmp(&b.name));
        let mut want: Vec<(String, EntryKind)> = fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                match e.file_name().into_string() {
                    Err(raw) => (raw.to_string_lossy().into_owned(), EntryKind::NotUtf8),
                    Ok(n) if t.is_symlink() => (n, EntryKind::Symlink),
                    Ok(n) if t.is_dir() => (n, EntryKind::Dir),
                    Ok(n) => (n, EntryKind::File),
                }
            })
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        let got: Vec<(String, EntryKind)> = got.into_iter().map(|e| (e.name, e.kind)).collect();
        assert_eq!(got.len(), 305);
        assert_eq!(got, want);
        let dirf = fs::File::open(d).unwrap();
        for (name, kind) in [
            ("tile0", EntryKind::Dir),
            ("name", EntryKind::File),
            ("device", EntryKind::Symlink),
            ("dangling", EntryKind::Symlink),
        ] {
            assert_eq!(kind_at(&dirf, name.as_bytes()).unwrap(), kind, "{name}");
        }
        assert!(kind_at(&dirf, b"missing").is_err());
        assert!(RealFs::new(d).list("name").is_err());
        assert!(RealFs::new(d).list("missing").is_err());
    }

    /// A directory's real path is what `fs::canonicalize` gives: through links,
    /// links to links, `..`, a relative path, and a file's (found as it does); a
    /// missing one fails.
    /// A device's files are its directory's as it was opened: moved away and a
    /// stranger put at its path, reads and listings still find the device's own
    /// files, nothing is written, and once it is gone nothing is read, never the
    /// stranger's. A device opened anew finds what is there now.
    #[test]
    fn a_device_reads_the_directory_it_opened_whatever_is_at_its_path_now() {
        let t = tempfile::tempdir().unwrap();
        let dev = t.path().join("hwmon3");
        let value = |d: &Path| fs::read_to_string(d.join("tile0/counter0")).unwrap();
        fs::create_dir_all(dev.join("tile0")).unwrap();
        fs::write(dev.join("tile0/counter0"), "0x1\n").unwrap();
        let opened = RealFs::new(&dev);
        assert_eq!(opened.read("tile0/counter0").unwrap(), "0x1\n");
        let aside = t.path().join("aside");
        fs::rename(&dev, &aside).unwrap();
        fs::create_dir_all(dev.join("tile0")).unwrap();
        fs::write(dev.join("tile0/counter0"), "0x2\n").unwrap();
        fs::write(dev.join("stranger"), "").unwrap();
        assert_eq!(opened.read("tile0/counter0").unwrap(), "0x1\n");
        let names: Vec<String> = opened
            .list("")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["tile0"]);
        let refused = opened.write("tile0/counter0", b"0x0").unwrap_err();
        assert!(
            refused.to_string().contains("no longer the directory"),
            "{refused}"
        );
        assert_eq!(
            (value(&aside), value(&dev)),
            ("0x1\n".into(), "0x2\n".into())
        );
        fs::remove_dir_all(&aside).unwrap();
        assert!(opened.read("tile0/counter0").is_err());
        assert!(opened.list("").is_err());
        assert_eq!(RealFs::new(&dev).read("tile0/counter0").unwrap(), "0x2\n");
    }

    #[test]
    fn a_real_path_is_what_canonicalize_gives() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::create_dir_all(r.join("devices/platform/MLNXBFD2:00/hwmon/hwmon4")).unwrap();
        fs::create_dir_all(r.join("class/hwmon")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/platform/MLNXBFD2:00/hwmon/hwmon4",
            r.join("class/hwmon/hwmon4"),
        )
        .unwrap();
        std::os::unix::fs::symlink("class", r.join("again")).unwrap();
        fs::write(r.join("file"), "").unwrap();
        for p in [
            r.join("class/hwmon/hwmon4"),
            r.join("again/hwmon/hwmon4"),
            r.join("class/hwmon/hwmon4/../hwmon4"),
            r.join("devices"),
            r.to_path_buf(),
            r.join("again/../file"),
        ] {
            assert_eq!(
                real_path(&p).unwrap(),
                fs::canonicalize(&p).unwrap(),
                "{p:?}"
            );
        }
        assert!(real_path(&r.join("missing")).is_err());
        assert_eq!(
            real_path(Path::new(".")).unwrap(),
            fs::canonicalize(".").unwrap()
        );
    }

    /// A file's path is what `Path::join` and `format!` gave before they were
    /// written out by hand.
    #[test]
    fn paths_are_joins() {
        for dir in ["/sys/class/hwmon/hwmon4", "rel/dir", "/", "trailing/", ""] {
            let fs = RealFs::new(dir);
            for rel in ["tile0/counter3", "name", "", "/abs", "a//b"] {
                let want = match rel.is_empty() {
                    true => PathBuf::from(dir),
                    false => Path::new(dir).join(rel),
                };
                assert_eq!(fs.path(rel), want, "{dir:?} + {rel:?}");
                assert_eq!(fs.path(rel).as_os_str(), want.as_os_str());
            }
        }
        assert_eq!(layout::counter("llt0", 17), format!("llt0/counter{}", 17));
        assert_eq!(layout::event("tile3", 0), "tile3/event0");
        assert_eq!(layout::enable("l3cachehalf1"), "l3cachehalf1/enable");
        assert_eq!(layout::count_clock("llt2"), "llt2/count_clock");
        assert_eq!(layout::event_list("mss0"), "mss0/event_list");
        assert_eq!(
            layout::register("pcie0", "IN_P_BYTE_CNT"),
            "pcie0/IN_P_BYTE_CNT"
        );
    }

    #[test]
    fn the_lasting_location_is_the_platform_device_whatever_the_hwmon_number() {
        // As the kernel lays it out: the hwmon directory under its platform device,
        // the class's entry a link to it, its `device` link back up.
        let root = tempfile::tempdir().unwrap();
        let platform = root.path().join("devices/platform/MLNXBFD2:00");
        let lasting = |n: u32| {
            let hwmon = platform.join(format!("hwmon/hwmon{n}"));
            fs::create_dir_all(&hwmon).unwrap();
            std::os::unix::fs::symlink("../../../MLNXBFD2:00", hwmon.join("device")).unwrap();
            let class = root.path().join("class/hwmon");
            fs::create_dir_all(&class).unwrap();
            let entry = class.join(format!("hwmon{n}"));
            std::os::unix::fs::symlink(
                format!("../../devices/platform/MLNXBFD2:00/hwmon/hwmon{n}"),
                &entry,
            )
            .unwrap();
            let fs = RealFs::new(entry);
            assert!(fs
                .canonical_location()
                .ends_with(&format!("/hwmon/hwmon{n}")));
            fs.lasting_location()
        };
        let (four, seven) = (lasting(4), lasting(7));
        let want = fs::canonicalize(&platform).unwrap().display().to_string();
        assert_eq!((four, seven), (want.clone(), want));
        // Without a device link: the canonical location.
        let bare = root.path().join("bare");
        fs::create_dir_all(&bare).unwrap();
        let fs = RealFs::new(&bare);
        assert_eq!(fs.lasting_location(), fs.canonical_location());
    }
}
