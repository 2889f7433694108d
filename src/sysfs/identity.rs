//! What a device tree is, by the rules of the filesystem that holds it: the
//! platform device on sysfs, the mount on FUSE, the directory elsewhere.

use super::*;

/// The magic numbers `statfs` gives for the kernel's sysfs and for FUSE.
pub(super) const SYSFS_MAGIC: i64 = 0x6265_6572;

pub(super) const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// What the device in the hwmon directory `dir` is, however it is reached, its
/// `device` link reading `platform` (the link's text: no path is resolved):
/// - on the kernel's sysfs, the platform device the link names (`MLNXBFD2:00`,
///   the ACPI HID and instance): a name the kernel gives one device for the whole
///   boot, which a driver loaded again keeps and no other device can take; every
///   path to it (a bind mount, a link, another `hwmonN`) reads the same link;
/// - on FUSE (the simulator), the place of the tree that holds it (the directory
///   above `class/hwmon/hwmonN`, resolved): a FUSE server's device numbers are
///   handed out again to the next mount, so they name nothing;
/// - on any other filesystem (a copy of a tree), the directory's device and inode
///   numbers, which a bind mount shares and nothing else has while it exists.
pub(crate) fn tree_identity(dir: &Path, platform: Option<&str>) -> String {
    use std::os::unix::fs::MetadataExt;
    let platform = platform
        .and_then(|t| t.rsplit('/').find(|c| !c.is_empty()))
        .map_or_else(|| "-".to_string(), escape_key);
    let place = match filesystem_magic(dir) {
        Some(SYSFS_MAGIC) => "sysfs".to_string(),
        Some(FUSE_SUPER_MAGIC) => {
            let real = real_path(dir).unwrap_or_else(|_| dir.to_path_buf());
            let root = tree_root(&real);
            format!("fuse {}", escape_key(&root.display().to_string()))
        }
        _ => match fs::metadata(dir) {
            Ok(m) => format!("directory {:x}:{}", m.dev(), m.ino()),
            Err(_) => format!("path {}", escape_key(&dir.display().to_string())),
        },
    };
    format!("{place} platform {platform}")
}

/// The root of the sysfs tree a hwmon directory is in: above `class/hwmon/hwmonN`
/// (or `hwmon/hwmonN` under a platform device), the directory itself otherwise.
fn tree_root(real: &Path) -> PathBuf {
    let parts: Vec<_> = real.components().collect();
    let n = parts.len();
    let names = |i: usize| parts[i].as_os_str().to_str().unwrap_or("");
    if n >= 3 && names(n - 2) == "hwmon" && names(n - 3) == "class" {
        return parts[..n - 3].iter().collect();
    }
    real.to_path_buf()
}

/// A name as a key spells it: no spaces or controls.
fn escape_key(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// `statfs`'s `f_type` of the filesystem holding `dir`.
fn filesystem_magic(dir: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs fills the struct we own from the NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    Some(st.f_type as i64)
}
