//! The simulated device as a tree of files: the [`Sysfs`] view (names, links, block
//! directories) over the driver rules.

use std::io;

use crate::error::errno;
use crate::sim::{eacces, einval, enoent, root, Sim};
use crate::sysfs::{layout as files, Entry, EntryKind, Sysfs};

fn split(rel: &str) -> (&str, Option<&str>) {
    match rel.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (rel, None),
    }
}

impl Sysfs for Sim {
    fn read(&self, rel: &str) -> io::Result<String> {
        self.faults.on_read(rel)?;
        match split(rel) {
            ("name", None) => Ok(format!("{}\n", files::DEVICE_NAME)),
            ("uevent", None) => Ok(String::new()),
            ("power", Some("runtime_status")) => Ok("unsupported\n".to_string()),
            ("device", Some("modalias")) => Ok(format!(
                "acpi:{}:\n",
                self.generation.acpi_hid().unwrap_or("MLNXBFD1")
            )),
            (block, Some(file)) if !file.contains('/') => self.show(block, file),
            ("", None) => Err(io::Error::from_raw_os_error(errno::EISDIR)),
            (block, None) if Self::find(&self.lock(), block).is_some() => {
                Err(io::Error::from_raw_os_error(errno::EISDIR))
            }
            _ => Err(enoent()),
        }
    }

    fn write_here(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        self.faults.on_write(rel)?;
        match split(rel) {
            ("name", None) | ("uevent", None) => Err(eacces()),
            (block, Some(file)) if !file.contains('/') && block != "power" && block != "device" => {
                self.store(block, file, data)
            }
            _ => Err(enoent()),
        }
    }

    fn list(&self, rel: &str) -> io::Result<Vec<Entry>> {
        let file = |n: &str| Entry {
            name: n.to_string(),
            kind: EntryKind::File,
        };
        let mut out = match split(rel) {
            ("", None) => {
                let state = self.lock();
                let mut v = vec![
                    Entry {
                        name: "device".into(),
                        kind: EntryKind::Symlink,
                    },
                    file("name"),
                    Entry {
                        name: "power".into(),
                        kind: EntryKind::Dir,
                    },
                    Entry {
                        name: "subsystem".into(),
                        kind: EntryKind::Symlink,
                    },
                    file("uevent"),
                ];
                v.extend(state.blocks.iter().map(|b| Entry {
                    name: b.name.clone(),
                    kind: EntryKind::Dir,
                }));
                v
            }
            ("power", None) => vec![file("runtime_status")],
            (block, None) => {
                let state = self.lock();
                let (_, b) = Self::find(&state, block).ok_or_else(enoent)?;
                Self::block_files(b).iter().map(|n| file(n)).collect()
            }
            _ => return Err(enoent()),
        };
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn read_link(&self, rel: &str) -> io::Result<String> {
        match rel {
            "device" => Ok(self.hid_link()),
            "subsystem" => Ok(root::SUBSYSTEM_LINK.to_string()),
            _ => Err(einval()),
        }
    }

    fn location(&self) -> String {
        format!(
            "simulated {} (kernel {})",
            self.generation.label(),
            self.kernel.name
        )
    }

    fn page_size(&self) -> usize {
        self.page_size
    }
}
