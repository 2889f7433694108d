//! Finding the bfperf hwmon device and mapping its blocks.

pub(crate) mod plan;
pub(crate) mod resolve;
pub(crate) mod values;

use std::fs;
use std::path::{Path, PathBuf};

use crate::block::{Block, BlockKind, Generation, Mechanism};
use crate::catalog::{did_you_mean, suggest, Catalog};
use crate::error::{io_error, Error, Result};
use crate::sysfs::{layout, read_attribute, EntryKind, RealFs, Sysfs};

/// Finds the hwmon directory whose `name` reads `bfperf` under `sysfs_root`.
/// Does not depend on the hwmon number; never walks into the `device`/`subsystem` links.
pub fn discover(sysfs_root: &Path) -> Result<PathBuf> {
    let class = sysfs_root.join(layout::HWMON_CLASS);
    let entries = fs::read_dir(&class).map_err(|_| Error::NoHwmon {
        root: sysfs_root.to_path_buf(),
    })?;
    let mut found_names = Vec::new();
    let mut matches = Vec::new();
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let label = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match read_attribute(&dir.join(layout::NAME)) {
            Ok(name) if name.trim_end() == layout::DEVICE_NAME => matches.push(dir),
            Ok(name) => found_names.push(format!("{label} ({})", name.trim_end().escape_debug())),
            Err(_) => found_names.push(format!("{label} (no name file)")),
        }
    }
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(Error::NoDevice {
            why: why_no_device(sysfs_root),
            dir: class,
            found: if found_names.is_empty() {
                "none".to_string()
            } else {
                found_names.join(", ")
            },
        }),
        _ => Err(Error::ManyDevices { list: matches }),
    }
}

/// Every hwmon directory under `sysfs_root` whose `name` reads `bfperf`, in order
/// (none when the class cannot be listed): where a device that went away may be
/// found again.
pub(crate) fn candidates(sysfs_root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(sysfs_root.join(layout::HWMON_CLASS)) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    dirs.sort();
    dirs.retain(|d| {
        read_attribute(&d.join(layout::NAME)).is_ok_and(|n| n.trim_end() == layout::DEVICE_NAME)
    });
    dirs
}

/// Why no hwmon device is named bfperf, from what the firmware describes and
/// whether the driver took it, and what to do.
fn why_no_device(sysfs_root: &Path) -> String {
    let simulated = "not on a DPU? try a simulated one: --sim bf3";
    let hids: Vec<&str> = [Generation::Bf1, Generation::Bf2, Generation::Bf3]
        .iter()
        .filter_map(|g| g.acpi_hid())
        .collect();
    let (firmware, loaded) = crate::sysfs::pmc_firmware(sysfs_root, &hids);
    let Some(firmware) = firmware else {
        return format!(
            "the mlxbf-pmc driver may not be loaded: try `modprobe mlxbf-pmc` ({simulated})"
        );
    };
    let Some(pmc) = firmware.iter().find(|p| !p.bound).or(firmware.first()) else {
        return format!(
            "the firmware's ACPI tables describe no BlueField PMC (no {} or {} device under {}): {simulated}",
            hids[..hids.len() - 1].join(", "),
            hids[hids.len() - 1],
            sysfs_root.join(crate::sysfs::layout::ACPI_DEVICES).display()
        );
    };
    let generation = Generation::from_acpi_text(&pmc.name).unwrap_or(Generation::Unknown);
    let described = format!(
        "the firmware describes a {} PMC ({})",
        generation.label(),
        pmc.name
    );
    if !loaded {
        format!("{described}, but the mlxbf-pmc driver is not loaded: try `modprobe mlxbf-pmc`")
    } else if !pmc.bound {
        format!("{described} and the mlxbf-pmc driver is loaded, but the driver did not take it: its probe failed, and `dmesg | grep -i mlxbf` says why. A kernel older than the firmware's block list refuses the whole device (6.1 one that lists tilenet blocks; kernels before 6.16 one that lists BlueField-3's apt, gga, msn, emi or prnf blocks): a newer kernel takes it")
    } else {
        format!("{described} and the mlxbf-pmc driver took it, but made no hwmon device named bfperf: see `dmesg | grep -i mlxbf`")
    }
}

/// A bfperf device: its access layer, generation and blocks.
pub struct Device {
    fs: Box<dyn Sysfs>,
    generation: Generation,
    blocks: Vec<Block>,
    /// Opened with some of its blocks only ([`Device::open_of`]).
    partial: bool,
    warnings: Vec<String>,
    /// A digest of the names of every block directory (whether opened or not).
    inventory: String,
    /// What it is ([`Device::identity`]), as it was when first asked (a writer
    /// asks before its first write): the same however the files fail later. One-
    /// shot reads never ask, and never pay for it.
    identity: std::sync::OnceLock<String>,
    /// Catalogs of counter blocks by kind: the driver prints one table per kind, so
    /// one block's `event_list` is read and parsed for all of its kind.
    /// Register blocks and blocks with no list have theirs by block.
    catalogs: std::sync::Mutex<Catalogs>,
}

/// The catalogs a device has made ([`Device::catalog`]).
#[derive(Default)]
struct Catalogs {
    by_kind: std::collections::HashMap<BlockKind, std::sync::Arc<Catalog>>,
    by_block: std::collections::HashMap<String, std::sync::Arc<Catalog>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("location", &self.fs.location())
            .field("generation", &self.generation)
            .field("blocks", &self.blocks.len())
            .finish()
    }
}

impl Device {
    /// Opens the device in a hwmon directory on the real filesystem.
    pub fn open_dir(dir: &Path) -> Result<Device> {
        Device::open_tree(RealFs::new(dir))
    }

    /// Opens the device in a hwmon directory (or a copy of one) as `fs` reaches it.
    pub fn open_tree(fs: RealFs) -> Result<Device> {
        Device::open_tree_of(fs, None)
    }

    /// As [`Device::open_tree`], with only the blocks named in `only` (when given),
    /// the others' directories not listed: for a command about some blocks named
    /// in full. Blocks it names that are not there are simply absent.
    pub fn open_tree_of(fs: RealFs, only: Option<Keep<'_>>) -> Result<Device> {
        let dir = fs.dir();
        match read_attribute(&dir.join(layout::NAME)) {
            Ok(name) if name.trim_end() == layout::DEVICE_NAME => {}
            Ok(name) => {
                return Err(Error::NotADevice {
                    path: dir.to_path_buf(),
                    reason: format!("its name file reads '{}', not 'bfperf'", name.trim_end()),
                })
            }
            Err(e) => {
                return Err(Error::NotADevice {
                    path: dir.to_path_buf(),
                    reason: format!("cannot read its name file ({e})"),
                })
            }
        }
        Device::open_of(Box::new(fs), only)
    }

    /// The page size of the kernel serving the files (see [`Sysfs::page_size`]).
    pub fn page_size(&self) -> usize {
        self.fs.page_size()
    }

    /// Finds and opens the device under a sysfs root.
    pub fn discover(sysfs_root: &Path) -> Result<Device> {
        Device::open_dir(&discover(sysfs_root)?)
    }

    /// Opens a device through any access layer (the real one or the simulator).
    pub fn open(fs: Box<dyn Sysfs>) -> Result<Device> {
        Device::open_of(fs, None)
    }

    /// As [`Device::open`], with only the blocks whose names `only` keeps (when
    /// given). The generation is still told from every entry of the device directory.
    pub fn open_of(fs: Box<dyn Sysfs>, only: Option<Keep<'_>>) -> Result<Device> {
        let mut top = fs.list("").map_err(|e| io_error("listing", "", None, e))?;
        // By name, so that what is skipped is said in that order. A block's own
        // files are taken in any order (`Block::from_files` sorts what it keeps).
        top.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let mut listed: Vec<(String, Vec<String>)> = Vec::new();
        let mut warnings = Vec::new();
        for entry in &top {
            if layout::NON_BLOCKS.contains(&entry.name.as_str()) {
                continue;
            }
            match entry.kind {
                EntryKind::Dir => {}
                EntryKind::NotUtf8 => {
                    warnings.push(format!(
                        "skipped the entry {:?} of the device directory: its name is not UTF-8, so it is no block of the driver",
                        entry.name
                    ));
                    continue;
                }
                EntryKind::File | EntryKind::Symlink => continue,
            }
            if only.is_some_and(|keep| !keep(&entry.name)) {
                continue;
            }
            match fs.list(&entry.name) {
                Ok(list) => {
                    let files: Vec<String> = list
                        .into_iter()
                        // A link among a block's files is kept, so that reading it
                        // says what is wrong rather than the counter vanishing.
                        .filter(|e| matches!(e.kind, EntryKind::File | EntryKind::Symlink))
                        .map(|e| e.name)
                        .collect();
                    listed.push((entry.name.clone(), files));
                }
                Err(e) => warnings.push(format!(
                    "skipped block {}: {}",
                    entry.name,
                    io_error("listing", &entry.name, None, e)
                )),
            }
        }
        let generation = match only {
            None => detect_generation(fs.as_ref(), listed.iter().map(|(n, _)| n.as_str())),
            // From every block directory's name, listed or not.
            Some(_) => detect_generation(fs.as_ref(), block_dirs(&top)),
        };
        let inventory = inventory_of(block_dirs(&top));
        let mut blocks: Vec<Block> = listed
            .iter()
            .map(|(name, files)| Block::from_files(name, files, generation))
            .collect();
        blocks.sort_by(|a, b| natural_key(&a.name).cmp(&natural_key(&b.name)));
        // Registers in the driver's table order (by offset); unknown ones last.
        for b in &mut blocks {
            let table = crate::catalog::builtin(b.kind, generation);
            b.registers.sort_by_cached_key(|r| {
                (
                    table
                        .iter()
                        .position(|d| d.name.trim_end() == r)
                        .unwrap_or(usize::MAX),
                    r.clone(),
                )
            });
        }
        Ok(Device {
            fs,
            generation,
            blocks,
            partial: only.is_some(),
            warnings,
            inventory,
            identity: std::sync::OnceLock::new(),
            catalogs: Default::default(),
        })
    }

    /// Whether it was opened with some of its blocks only: a block it lacks may
    /// still be on the device.
    pub fn is_partial(&self) -> bool {
        self.partial
    }

    /// The device's files.
    pub fn fs(&self) -> &dyn Sysfs {
        self.fs.as_ref()
    }

    /// Where it is: its hwmon directory, or what the simulator says it is.
    pub fn location(&self) -> String {
        self.fs.location()
    }

    /// The device's one name however its path was spelled (journals).
    pub fn canonical_location(&self) -> String {
        self.fs.canonical_location()
    }

    /// The device's name that outlasts a probe: the platform device its hwmon
    /// directory belongs to, not the hwmon number the kernel gives it anew (what
    /// identifies it to a fleet).
    pub fn lasting_location(&self) -> String {
        self.fs.lasting_location()
    }

    /// What the device is however it is reached, a bind mount included, and
    /// wherever it comes back: what the kernel says it is (see
    /// [`Sysfs::identity`]) and its generation. The writer lock, the owner's
    /// socket and the journal are keyed on it.
    pub fn identity(&self) -> String {
        self.identity
            .get_or_init(|| format!("{} {}", self.fs.identity(), self.generation.label()))
            .clone()
    }

    /// A digest of its block inventory: the names of every block directory.
    pub fn inventory(&self) -> &str {
        &self.inventory
    }

    /// Whether `other` is this device: the same identity (the kernel's name for it
    /// and its generation) and the same blocks. What a device found again must be
    /// before anything is written to it; the reason when it is not.
    pub fn same_device(&self, other: &Device) -> std::result::Result<(), String> {
        if self.identity() != other.identity() {
            return Err(format!(
                "it is {}, not {}",
                other.identity(),
                self.identity()
            ));
        }
        if self.inventory != other.inventory {
            return Err(format!(
                "its blocks differ (inventory {}, not {})",
                other.inventory, self.inventory
            ));
        }
        Ok(())
    }

    /// Its generation.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Entries of the device directory that were skipped, and why (one line each).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Its blocks, in natural order (tile2 before tile10).
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// A block by name; unknown names get suggestions. Names are checked before any
    /// path is built from them.
    pub fn block(&self, name: &str) -> Result<&Block> {
        if name.is_empty() || name.contains('/') || name.contains('\0') || name.starts_with('.') {
            return Err(Error::UnknownBlock {
                name: name.to_string(),
                hint: ": a block name is one directory name such as tile2 (no '/' or '..')"
                    .to_string(),
            });
        }
        self.find_block(name)
            .ok_or_else(|| self.unknown_block(name, false))
    }

    fn find_block(&self, name: &str) -> Option<&Block> {
        self.blocks.iter().find(|b| b.name == name).or_else(|| {
            self.blocks
                .iter()
                .find(|b| b.name.eq_ignore_ascii_case(name))
        })
    }

    /// An unknown block name, with suggestions; `selector` mentions kinds and globs.
    fn unknown_block(&self, name: &str, selector: bool) -> Error {
        let kinds = self.kinds();
        let names = self.blocks.iter().map(|b| b.name.as_str());
        // A selector may be a kind too: the kinds win unless a block name is closer
        // (`tiel` suggests tile, `tlie2` tile2).
        let blocks = suggest(name, names);
        let sugg = match selector {
            true => {
                let k = suggest(name, kinds.iter().copied());
                let d = |s: &[String]| {
                    s.first().map(|c| {
                        crate::catalog::edit_distance(
                            &name.to_ascii_lowercase(),
                            &c.to_ascii_lowercase(),
                        )
                    })
                };
                match (d(&k), d(&blocks)) {
                    (Some(a), Some(b)) if b < a => blocks,
                    (Some(_), _) => k,
                    _ => blocks,
                }
            }
            false => blocks,
        };
        let hint = if !sugg.is_empty() {
            did_you_mean(&sugg)
        } else if selector {
            format!(
                "; give a block name, a kind ({}), a pattern such as tile* or all",
                self.kinds().join(", ")
            )
        } else {
            format!(
                "; this device has {}",
                self.blocks
                    .iter()
                    .map(|b| b.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        };
        Error::UnknownBlock {
            name: name.to_string(),
            hint,
        }
    }

    /// Blocks chosen by selectors, each a comma list of block names, kinds (`tile`,
    /// `pcie`, `l3cache`), globs over block names (`tile[0-3]`, `llt*`) or `all`. No
    /// selector: every block. Every part must choose at least one block.
    pub fn select(&self, selectors: &[String]) -> Result<Vec<&Block>> {
        if selectors.is_empty() {
            return Ok(self.blocks.iter().collect());
        }
        let mut out: Vec<&Block> = Vec::new();
        for part in selectors.iter().flat_map(|s| s.split(',')) {
            for b in self.select_one(part.trim())? {
                if !out.iter().any(|o| o.name == b.name) {
                    out.push(b);
                }
            }
        }
        Ok(out)
    }

    fn select_one(&self, sel: &str) -> Result<Vec<&Block>> {
        if sel == "all" {
            return Ok(self.blocks.iter().collect());
        }
        if let Some(kind) = BlockKind::parse(sel) {
            let of_kind: Vec<&Block> = self.blocks.iter().filter(|b| b.kind == kind).collect();
            if of_kind.is_empty() {
                return Err(Error::NoBlocksOfKind {
                    kind: kind.as_str().to_string(),
                    generation: self.generation.label().to_string(),
                    kinds: self.kinds().join(", "),
                });
            }
            return Ok(of_kind);
        }
        if is_pattern(sel) {
            let pattern = crate::catalog::Glob::new(sel).map_err(|e| Error::UnknownBlock {
                name: sel.chars().take(crate::catalog::MAX_PART).collect(),
                hint: format!(": {e}"),
            })?;
            let matched: Vec<&Block> = self
                .blocks
                .iter()
                .filter(|b| pattern.matches(&b.name))
                .collect();
            if matched.is_empty() {
                return Err(Error::UnknownBlock {
                    name: sel.to_string(),
                    hint: format!(
                        ": the pattern matches no block; this device has {}",
                        self.kinds().join(", ")
                    ),
                });
            }
            return Ok(matched);
        }
        if !may_be_a_name(sel) {
            return self.block(sel).map(|b| vec![b]);
        }
        match self.find_block(sel) {
            Some(b) => Ok(vec![b]),
            None => Err(self.unknown_block(sel, true)),
        }
    }

    /// Kinds present on this device.
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut k: Vec<&'static str> = self.blocks.iter().map(|b| b.kind.as_str()).collect();
        k.sort_unstable();
        k.dedup();
        k
    }

    /// The event catalog of a block: the device's list merged with the built-in table.
    ///
    /// Each is made once: a block's registers or the built-in table per block
    /// (names, numbers and help are copied in, and a command resolves its specs
    /// more than once), a device's list per kind.
    pub fn catalog(&self, block: &Block) -> Result<std::sync::Arc<Catalog>> {
        let mut catalogs = self.catalogs.lock().unwrap_or_else(|p| p.into_inner());
        if block.mechanism == Mechanism::Registers || !block.has_event_list {
            let made = &mut catalogs.by_block;
            if let Some(c) = made.get(&block.name) {
                return Ok(c.clone());
            }
            let c = std::sync::Arc::new(match block.mechanism {
                Mechanism::Registers => {
                    Catalog::registers(block.kind, self.generation, &block.registers)
                }
                _ => Catalog::builtin(block.kind, self.generation),
            });
            made.insert(block.name.clone(), c.clone());
            return Ok(c);
        }
        // A kind the driver does not know is not cached: its blocks may differ.
        let cache = block.kind != BlockKind::Unknown;
        if let Some(c) = catalogs.by_kind.get(&block.kind).filter(|_| cache) {
            return Ok(c.clone());
        }
        let c = std::sync::Arc::new(self.parse_catalog(block)?);
        if cache {
            catalogs.by_kind.insert(block.kind, c.clone());
        }
        Ok(c)
    }

    fn parse_catalog(&self, block: &Block) -> Result<Catalog> {
        let rel = layout::event_list(&block.name);
        match self.fs.read(&rel) {
            Ok(text) => Ok(Catalog::merge(
                block.kind,
                self.generation,
                &text,
                self.fs.page_size(),
            )),
            // The driver refuses the list of a block it has no table for.
            Err(e) if e.raw_os_error() == Some(crate::error::errno::EINVAL) => {
                Ok(Catalog::builtin(block.kind, self.generation))
            }
            Err(e) => Err(io_error("reading", &rel, None, e)),
        }
    }
}

fn detect_generation<'a>(fs: &dyn Sysfs, names: impl Iterator<Item = &'a str>) -> Generation {
    if let Ok(target) = fs.read_link(layout::DEVICE_LINK) {
        if let Some(g) = Generation::from_acpi_text(&target) {
            return g;
        }
    }
    if let Ok(text) = fs.read(layout::DEVICE_MODALIAS) {
        if let Some(g) = Generation::from_acpi_text(&text) {
            return g;
        }
    }
    Generation::from_block_names(names)
}

/// The names of the block directories among a device directory's entries.
fn block_dirs(top: &[crate::sysfs::Entry]) -> impl Iterator<Item = &str> {
    top.iter()
        .filter(|e| e.kind == EntryKind::Dir && !layout::NON_BLOCKS.contains(&e.name.as_str()))
        .map(|e| e.name.as_str())
}

/// A digest of block directory names, in any order: FNV-1a of the sorted names.
fn inventory_of<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    let h = fnv1a(names.iter().flat_map(|n| n.bytes().chain([b'\n'])));
    format!("{}:{h:016x}", names.len())
}

/// FNV-1a of `bytes`: a short stable digest (not a guard against forgery) for
/// names of files and inventories.
pub(crate) fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether a selector is a pattern of block names (`llt*`).
fn is_pattern(sel: &str) -> bool {
    sel.contains(['*', '?', '['])
}

/// Which blocks of a device directory to open, by name ([`Device::open_of`]).
pub type Keep<'a> = &'a dyn Fn(&str) -> bool;

/// Whether selector `sel` (one part of a comma-separated list) chooses the block
/// named `name`, by the rules of [`Device::select`]: `all`, a kind, a glob, or the
/// block's name (in any case). What a command that names its blocks needs to list
/// of a device of dozens.
pub(crate) fn selects(sel: &str, name: &str) -> bool {
    if sel == "all" {
        return true;
    }
    if let Some(kind) = BlockKind::parse(sel) {
        return BlockKind::from_block_name(name) == kind;
    }
    if is_pattern(sel) {
        return crate::catalog::Glob::new(sel).is_ok_and(|g| g.matches(name));
    }
    name.eq_ignore_ascii_case(sel)
}

/// Whether a block's directory could have this name (no path, no hidden entry).
fn may_be_a_name(sel: &str) -> bool {
    !(sel.is_empty() || sel.contains(['/', '\0']) || sel.starts_with('.'))
}

/// Whether [`Device::select`] takes this selector (one part of a comma-separated
/// list) for a block's whole name: not `all`, a kind or a pattern.
pub(crate) fn selects_by_name(sel: &str) -> bool {
    sel != "all" && BlockKind::parse(sel).is_none() && !is_pattern(sel) && may_be_a_name(sel)
}

/// Sorts `tile10` after `tile2`: the name before its first digits, their number, and
/// the rest, borrowed from `name` (the exposition sorts its series by it at every
/// scrape).
pub(crate) fn natural_key(name: &str) -> (&str, u64, &str) {
    let split = name
        .bytes()
        .position(|c| c.is_ascii_digit())
        .unwrap_or(name.len());
    let (head, rest) = name.split_at(split);
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    (head, rest[..n].parse().unwrap_or(0), &rest[n..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Generation;
    use std::sync::Arc;

    fn device(gen: Generation) -> Device {
        let clock = Arc::new(crate::sim::SystemClock::new());
        let sim = crate::sim::Sim::new(gen, crate::sim::Kernel::V6_16, clock);
        Device::open(Box::new(Arc::new(sim))).unwrap()
    }

    /// What a command that names its blocks opens ([`selects`]) is what
    /// [`Device::select`] then chooses on the whole device, for every kind of
    /// selector; a selector the device refuses chooses no block by name either.
    #[test]
    fn a_selector_chooses_by_name_the_blocks_select_chooses() {
        let selectors = [
            "all",
            "tile",
            "tilenet",
            "l3cache",
            "pcie",
            "llt",
            "llt_miss",
            "mss",
            "trio",
            "triogen",
            "gic",
            "smmu",
            "ecc",
            "tile0",
            "TILE1",
            "pcie1",
            "llt_miss3",
            "tile*",
            "tile[0-1]",
            "llt?",
            "*net*",
            "clock_measure",
            "nothing",
            "tiles",
            "[",
        ];
        for gen in [Generation::Bf1, Generation::Bf2, Generation::Bf3] {
            let d = device(gen);
            for sel in selectors {
                let chosen: Vec<&str> = match d.select(&[sel.to_string()]) {
                    Ok(blocks) => blocks.iter().map(|b| b.name.as_str()).collect(),
                    Err(_) => Vec::new(),
                };
                for b in d.blocks() {
                    assert_eq!(
                        selects(sel, &b.name),
                        chosen.contains(&b.name.as_str()),
                        "{gen:?}: '{sel}' and {}",
                        b.name
                    );
                }
            }
        }
    }
}
