//! The sysfs-root layout around the simulated device (another hwmon device beside it,
//! the platform device with its ACPI HID, the `device`/`subsystem` links), and the
//! export of the whole tree to plain files: the fixtures are generated this way.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::Path;

use crate::block::Generation;
use crate::sim::{Kernel, ManualClock, Sim};
use crate::sysfs::{EntryKind, Sysfs};

/// The `subsystem` link of the hwmon device (it leads back to the class: a loop).
pub const SUBSYSTEM_LINK: &str = "../../../class/hwmon";

/// The `device` link of the hwmon device.
pub fn device_link(gen: Generation) -> String {
    format!(
        "../../../devices/platform/{}:00",
        gen.acpi_hid().unwrap_or("MLNXBFD1")
    )
}

/// A node of the sysfs root around the device.
#[derive(Debug, Clone)]
pub enum VNode {
    /// A directory and its entries.
    Dir(BTreeMap<String, VNode>),
    /// A file and its content.
    File(String),
    /// A symbolic link and its target.
    Link(String),
    /// The simulated device's directory.
    Device,
}

/// Where the device sits in the sysfs root.
#[derive(Debug, Clone, Copy)]
pub struct SysfsRootLayout {
    /// N of the device's `hwmonN`.
    pub hwmon_index: u32,
}

impl Default for SysfsRootLayout {
    fn default() -> Self {
        SysfsRootLayout { hwmon_index: 3 }
    }
}

fn dir(entries: Vec<(&str, VNode)>) -> VNode {
    VNode::Dir(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

impl SysfsRootLayout {
    /// The tree: `class/hwmon/hwmon{0,1,N}` and `devices/platform/<HID>:00`.
    pub fn tree(&self, gen: Generation) -> VNode {
        let hid = gen.acpi_hid().unwrap_or("MLNXBFD1");
        let other = dir(vec![
            ("name", VNode::File("acpitz\n".into())),
            ("temp1_input", VNode::File("41000\n".into())),
            ("uevent", VNode::File(String::new())),
        ]);
        let nameless = dir(vec![("uevent", VNode::File(String::new()))]);
        let mut hwmon = BTreeMap::new();
        hwmon.insert("hwmon0".to_string(), other);
        hwmon.insert("hwmon1".to_string(), nameless);
        hwmon.insert(format!("hwmon{}", self.hwmon_index), VNode::Device);
        dir(vec![
            ("class", dir(vec![("hwmon", VNode::Dir(hwmon))])),
            (
                "devices",
                dir(vec![(
                    "platform",
                    VNode::Dir(
                        [(
                            format!("{hid}:00"),
                            dir(vec![
                                ("modalias", VNode::File(format!("acpi:{hid}:\n"))),
                                ("uevent", VNode::File(format!("MODALIAS=acpi:{hid}:\n"))),
                            ]),
                        )]
                        .into_iter()
                        .collect(),
                    ),
                )]),
            ),
        ])
    }
}

/// Writes the sysfs root with the device's current state as plain files under `root`.
pub fn export_tree(sim: &Sim, layout: SysfsRootLayout, root: &Path) -> io::Result<()> {
    write_node(sim, &layout.tree(sim.generation()), root)
}

fn write_node(sim: &Sim, node: &VNode, path: &Path) -> io::Result<()> {
    match node {
        VNode::Dir(children) => {
            fs::create_dir_all(path)?;
            for (name, child) in children {
                write_node(sim, child, &path.join(name))?;
            }
            Ok(())
        }
        VNode::File(text) => fs::write(path, text),
        VNode::Link(target) => symlink(target, path),
        VNode::Device => write_device(sim, "", path),
    }
}

fn write_device(sim: &Sim, rel: &str, path: &Path) -> io::Result<()> {
    fs::create_dir_all(path)?;
    for entry in sim.list(rel)? {
        let child_rel = if rel.is_empty() {
            entry.name.clone()
        } else {
            format!("{rel}/{}", entry.name)
        };
        let child = path.join(&entry.name);
        match entry.kind {
            EntryKind::Dir => write_device(sim, &child_rel, &child)?,
            EntryKind::Symlink => symlink(sim.read_link(&child_rel)?, &child)?,
            // A file the driver refuses to show (an event it cannot name) is empty.
            EntryKind::File => match sim.read(&child_rel) {
                Ok(text) => fs::write(&child, text)?,
                Err(e) if e.raw_os_error() == Some(crate::error::errno::EINVAL) => {
                    fs::write(&child, "")?
                }
                Err(e) => return Err(e),
            },
            // The simulator names its files in UTF-8; nothing to export otherwise.
            EntryKind::NotUtf8 => {}
        }
    }
    Ok(())
}

/// The kernel a generation's fixture is generated for: the last one before numbers
/// were validated for BlueField-1 and -2, the current one for BlueField-3.
pub fn fixture_kernel(gen: Generation) -> Kernel {
    match gen {
        Generation::Bf3 => Kernel::V6_16,
        _ => Kernel::V6_7,
    }
}

/// The fixture of a generation: a device in a known state (some counters programmed,
/// L3/crspace blocks started) two seconds after boot, on [`fixture_kernel`].
pub fn fixture_sim(gen: Generation) -> Sim {
    let clock = std::sync::Arc::new(ManualClock::new(0));
    let sim = Sim::new(gen, fixture_kernel(gen), clock.clone());
    let w = |p: &str, v: &str| {
        // The scenario only uses writes the driver accepts.
        if let Err(e) = sim.write(p, v.as_bytes()) {
            panic!("fixture scenario write {p} <- {v}: {e}");
        }
    };
    match gen {
        Generation::Bf3 => {
            for (i, ev) in ["0x0", "0x57", "0x58", "0x2"].iter().enumerate() {
                w(&format!("llt0/event{i}"), ev);
            }
            w("llt0/enable", "1");
            w("llt1/count_clock", "0x1");
            w("llt1/enable", "1");
            w("mss0/event0", "0x0");
            w("mss0/event1", "0x5");
            w("mss0/enable", "1");
        }
        _ => {
            let l3 = if gen == Generation::Bf1 {
                "l3cache0half0"
            } else {
                "l3cachehalf0"
            };
            w("tile0/event0", "0x4c");
            w("tile0/event1", "0x4d");
            w("tile2/event3", "0x45");
            w("trio0/event0", "0xa0");
            w("triogen0/event0", "0xe");
            for (i, ev) in ["0x17", "0x19", "0x18", "0x1a", "0x1"].iter().enumerate() {
                w(&format!("{l3}/event{i}"), ev);
            }
            w(&format!("{l3}/enable"), "1");
        }
    }
    clock.advance_secs(2);
    sim
}
