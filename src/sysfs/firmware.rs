//! The ACPI firmware's devices of the PMC (`/sys/bus/acpi/devices`), for a device
//! the kernel should have bound but did not.

use super::*;

/// A device the firmware's ACPI tables describe, and whether a driver took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FirmwareDevice {
    /// The ACPI device's name (`MLNXBFD1:00`): its HID and instance.
    pub(crate) name: String,
    /// A driver is bound to its platform device.
    pub(crate) bound: bool,
}

/// What the system says of the PMC when no hwmon device is named bfperf: the
/// devices the firmware describes with one of `hids` (None where the sysfs root has
/// no ACPI bus: not an ACPI system, or a copied tree), and whether the mlxbf-pmc
/// driver is loaded.
pub(crate) fn pmc_firmware(root: &Path, hids: &[&str]) -> (Option<Vec<FirmwareDevice>>, bool) {
    let loaded = root.join(layout::PMC_DRIVER).is_dir();
    let Ok(entries) = std::fs::read_dir(root.join(layout::ACPI_DEVICES)) else {
        return (None, loaded);
    };
    let mut found: Vec<FirmwareDevice> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hid = name.split(':').next()?;
            hids.contains(&hid).then(|| FirmwareDevice {
                bound: e
                    .path()
                    .join(layout::PHYSICAL_NODE)
                    .join(layout::DRIVER_LINK)
                    .exists(),
                name,
            })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    (Some(found), loaded)
}
