//! The sysfs access layer: read, write and list files by paths relative to the device
//! directory. Every file name of the driver's interface is spelled here and only here,
//! so that a simulated device can stand in for the real one.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What a directory entry is. Symlinks are reported as such and never followed when
/// listing, because the driver's `device` and `subsystem` links lead in circles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: EntryKind,
}

/// Access to one bfperf device. Paths are relative to the device (`tile2/event3`;
/// `""` is the device directory itself).
pub trait Sysfs: Send + Sync {
    /// Reads a whole file.
    fn read(&self, rel: &str) -> io::Result<String>;
    /// Writes `data` to a file in one write call (as `echo -n` would). Never creates files.
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()>;
    /// Lists a directory, sorted by name.
    fn list(&self, rel: &str) -> io::Result<Vec<Entry>>;
    /// Reads a symbolic link's target.
    fn read_link(&self, rel: &str) -> io::Result<String>;
    /// Where the device is, for people (a path).
    fn location(&self) -> String;
}

/// A shared access layer (e.g. a simulator also served over FUSE) is one too.
impl<T: Sysfs + ?Sized> Sysfs for std::sync::Arc<T> {
    fn read(&self, rel: &str) -> io::Result<String> {
        (**self).read(rel)
    }
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        (**self).write(rel, data)
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
}

/// File names of the driver's interface.
pub mod layout {
    /// The hwmon class directory under a sysfs root.
    pub const HWMON_CLASS: &str = "class/hwmon";
    /// The file naming a hwmon device, and the name of ours.
    pub const NAME: &str = "name";
    pub const DEVICE_NAME: &str = "bfperf";
    /// The link to the platform device (ACPI HID tells the generation).
    pub const DEVICE_LINK: &str = "device";
    pub const DEVICE_MODALIAS: &str = "device/modalias";
    /// Entries of the device directory that are not blocks.
    pub const NON_BLOCKS: &[&str] = &["power", "device", "subsystem", "of_node", "driver"];

    pub const EVENT_LIST: &str = "event_list";
    pub const ENABLE: &str = "enable";
    pub const COUNT_CLOCK: &str = "count_clock";

    pub fn event(block: &str, counter: u32) -> String {
        format!("{block}/event{counter}")
    }
    pub fn counter(block: &str, counter: u32) -> String {
        format!("{block}/counter{counter}")
    }
    pub fn event_list(block: &str) -> String {
        format!("{block}/{EVENT_LIST}")
    }
    pub fn enable(block: &str) -> String {
        format!("{block}/{ENABLE}")
    }
    pub fn count_clock(block: &str) -> String {
        format!("{block}/{COUNT_CLOCK}")
    }
    pub fn register(block: &str, name: &str) -> String {
        format!("{block}/{name}")
    }

    /// `counter<N>` → N, `event<N>` → N.
    pub fn counter_index(file: &str) -> Option<u32> {
        index_of(file, "counter")
    }
    pub fn event_index(file: &str) -> Option<u32> {
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
}

impl RealFs {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RealFs { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.dir.clone()
        } else {
            self.dir.join(rel)
        }
    }
}

impl Sysfs for RealFs {
    fn read(&self, rel: &str) -> io::Result<String> {
        // open + read + close, no stat: a sysfs attribute (at most a page) comes in one
        // read, and a read shorter than the buffer means the end of the file.
        let mut file = fs::File::open(self.path(rel))?;
        let mut buf = [0u8; 8192];
        let mut out = Vec::new();
        loop {
            let n = file.read(&mut buf)?;
            out.extend_from_slice(&buf[..n]);
            if n < buf.len() {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        // Truncate so that plain-file copies of the tree hold exactly what was written;
        // sysfs ignores the truncation. Never create a file that is not there.
        let mut file = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path(rel))?;
        let n = file.write(data)?;
        if n != data.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        Ok(())
    }

    fn list(&self, rel: &str) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.path(rel))? {
            let entry = entry?;
            let ft = entry.file_type()?;
            let kind = if ft.is_symlink() {
                EntryKind::Symlink
            } else if ft.is_dir() {
                EntryKind::Dir
            } else {
                EntryKind::File
            };
            out.push(Entry {
                name: entry.file_name().to_string_lossy().into_owned(),
                kind,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn read_link(&self, rel: &str) -> io::Result<String> {
        Ok(fs::read_link(self.path(rel))?
            .to_string_lossy()
            .into_owned())
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }
}
