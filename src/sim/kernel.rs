//! The kernels that shipped the mlxbf-pmc driver, as the simulator models them: one
//! table row per behaviour that changed, and the edits each kernel made to the event
//! tables. Facts from the driver's history (see the project's ABI notes).

use crate::block::{BlockKind, Generation, Mechanism};
use crate::catalog::EventDef;

/// A kernel whose driver behaves differently from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// v5.10 to v6.1.
    V5_10,
    /// The 6.1 stable series from v6.1.192 (Debian 12's kernel), as measured on the real
    /// driver under QEMU: the DISABLE entries backported, numbers parsed as signed, and
    /// no tilenet blocks (a device that lists them fails the probe).
    V6_1Stable,
    /// v6.4 to v6.6.
    V6_4,
    /// v6.7 to v6.13.
    V6_7,
    /// The 6.12 stable series from v6.12.117 (Debian 13's kernel): v6.7's blocks with
    /// the driver's 2025 fixes backported, as measured on the real driver under QEMU.
    V6_12Stable,
    /// v6.14 and v6.15.
    V6_14,
    /// v6.16 to v6.18.
    V6_16,
    /// v6.19 on.
    V6_19,
    /// NVIDIA's out-of-tree driver v2.3 (BlueField BSP).
    Oot,
}

/// How `event<N>` reads when the programmed number has no name in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unnamed {
    /// The read fails with EINVAL.
    Einval,
    /// `No event being monitored`.
    NoEvent,
    /// `0xff: (null)` (a NULL name printed with %s).
    Null,
}

/// What a kernel's driver does.
#[derive(Debug, Clone, Copy)]
pub struct KernelDef {
    /// Which kernel.
    pub kernel: Kernel,
    /// The version as `--kernel` takes it.
    pub name: &'static str,
    /// Other names `--kernel` accepts (the former flavours).
    pub aliases: &'static [&'static str],
    /// What it changed, for people.
    pub about: &'static str,
    /// BlueField-3 blocks are supported.
    pub bf3: bool,
    /// The counter tables have DISABLE entries (a September 2023 fix).
    pub disable_entries: bool,
    /// What an unnamed event reads as in `event<N>`.
    pub unnamed: Unnamed,
    /// `echo NAME > event<N>` works (the trailing newline is dropped).
    pub name_newline: bool,
    /// Numbers outside the table are refused with EINVAL (so 0xff cannot stop).
    pub validates_numbers: bool,
    /// Every number written is read as hex (`45` is 0x45).
    pub hex_numbers: bool,
    /// `event_list` lines read `45: NAME`, without `0x`.
    pub list_without_0x: bool,
    /// `count_clock` on crspace blocks, and the `clock_measure` block.
    pub count_clock: bool,
    /// The gga, apt, emi, prnf and msn blocks.
    pub blocks_2025: bool,
    /// `enable` parsed with kstrtobool ("0x1" is false, "2" refused).
    pub enable_bool: bool,
    /// Numbers parsed with kstrtoint: `-1` is accepted, as all bits set (an event
    /// number is then cut to the block's field; an ecc register takes all ones).
    pub signed_numbers: bool,
    /// BlueField-2 tilenet blocks are served. The 6.1 stable driver's probe reads a block
    /// named `tile*` as `tile%d` and fails with EINVAL on `tilenet0`: the whole device
    /// is then missing; the model shows it without its tilenet blocks.
    pub tilenet: bool,
    /// Table names keep their trailing spaces.
    pub trailing_spaces: bool,
    /// A stable series' row: the first patch level of its major.minor that behaves so.
    /// Only versions of that series from that patch level on are this kernel.
    pub stable: Option<u32>,
    /// Which table edits of [`TABLE_QUIRKS`] this kernel has.
    pub quirks: &'static [Quirk],
}

/// A mistake some kernels' tables make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quirk {
    /// hnfnet names 0x35 NDN_DIAG_S_OUT_OF_CRED too (fixed December 2022).
    HnfnetSouthTwice,
    /// llt lists GDC_BANK0_G_RSE_PIPE_CACHE_DATA1 as 0x67 (fixed in v6.16).
    LltData1At103,
}

/// An edit of one table entry.
#[derive(Debug, Clone, Copy)]
pub enum Edit {
    /// The entry at `number` is named `name`.
    Rename {
        /// The event's number.
        number: u32,
        /// The name listed.
        name: &'static str,
    },
    /// The entry named `name` is listed at `number`.
    Renumber {
        /// The event's name.
        name: &'static str,
        /// The number listed.
        number: u32,
    },
}

/// How a quirk edits a kind's table.
#[derive(Debug, Clone, Copy)]
pub struct TableQuirk {
    /// Which quirk.
    pub quirk: Quirk,
    /// The kind whose table it affects.
    pub kind: BlockKind,
    /// What it does to the table.
    pub edit: Edit,
}

/// Each kernel's departures from the hardware's event tables.
pub static TABLE_QUIRKS: &[TableQuirk] = &[
    TableQuirk {
        quirk: Quirk::HnfnetSouthTwice,
        kind: BlockKind::Tilenet,
        edit: Edit::Rename {
            number: 0x35,
            name: "NDN_DIAG_S_OUT_OF_CRED",
        },
    },
    TableQuirk {
        quirk: Quirk::LltData1At103,
        kind: BlockKind::Llt,
        edit: Edit::Renumber {
            name: "GDC_BANK0_G_RSE_PIPE_CACHE_DATA1",
            number: 0x67,
        },
    },
];

const fn base(kernel: Kernel, name: &'static str, about: &'static str) -> KernelDef {
    KernelDef {
        kernel,
        name,
        aliases: &[],
        about,
        bf3: true,
        disable_entries: true,
        unnamed: Unnamed::Einval,
        name_newline: false,
        validates_numbers: false,
        hex_numbers: false,
        list_without_0x: false,
        count_clock: false,
        blocks_2025: false,
        enable_bool: false,
        signed_numbers: false,
        tilenet: true,
        trailing_spaces: true,
        stable: None,
        quirks: &[],
    }
}

/// Every kernel bfperf models, oldest first.
pub static KERNELS: &[KernelDef] = &[
    KernelDef {
        bf3: false,
        disable_entries: false,
        unnamed: Unnamed::NoEvent,
        quirks: &[Quirk::HnfnetSouthTwice],
        ..base(
            Kernel::V5_10,
            "5.10",
            "v5.10 to v6.1: BlueField-1 and -2 only",
        )
    },
    KernelDef {
        aliases: &["debian12"],
        stable: Some(192),
        bf3: false,
        signed_numbers: true,
        tilenet: false,
        ..base(
            Kernel::V6_1Stable,
            "6.1.192",
            "6.1.192 on (Debian 12): v5.10's blocks without tilenet, DISABLE entries, signed numbers",
        )
    },
    KernelDef {
        disable_entries: false,
        quirks: &[Quirk::LltData1At103],
        ..base(
            Kernel::V6_4,
            "6.4",
            "v6.4 to v6.6: BlueField-3 crspace blocks",
        )
    },
    KernelDef {
        aliases: &["old"],
        quirks: &[Quirk::LltData1At103],
        ..base(Kernel::V6_7, "6.7", "v6.7 to v6.13: DISABLE entries")
    },
    KernelDef {
        aliases: &["debian13"],
        stable: Some(117),
        name_newline: true,
        validates_numbers: true,
        enable_bool: true,
        trailing_spaces: false,
        ..base(
            Kernel::V6_12Stable,
            "6.12.117",
            "6.12.117 on (Debian 13): v6.7's blocks, v6.19's validation and names",
        )
    },
    KernelDef {
        count_clock: true,
        quirks: &[Quirk::LltData1At103],
        ..base(
            Kernel::V6_14,
            "6.14",
            "v6.14, v6.15: count_clock and clock_measure",
        )
    },
    KernelDef {
        aliases: &["new"],
        count_clock: true,
        name_newline: true,
        validates_numbers: true,
        blocks_2025: true,
        enable_bool: true,
        ..base(
            Kernel::V6_16,
            "6.16",
            "v6.16 to v6.18: numbers validated, names with a newline, the 2025 blocks",
        )
    },
    KernelDef {
        count_clock: true,
        name_newline: true,
        validates_numbers: true,
        blocks_2025: true,
        enable_bool: true,
        trailing_spaces: false,
        ..base(
            Kernel::V6_19,
            "6.19",
            "v6.19 on: no trailing spaces in names",
        )
    },
    KernelDef {
        aliases: &["oot"],
        unnamed: Unnamed::Null,
        hex_numbers: true,
        list_without_0x: true,
        quirks: &[Quirk::LltData1At103],
        ..base(Kernel::Oot, "oot", "NVIDIA's out-of-tree driver v2.3")
    },
];

impl Kernel {
    /// Its behaviour.
    pub fn def(self) -> &'static KernelDef {
        KERNELS
            .iter()
            .find(|k| k.kernel == self)
            .unwrap_or(&KERNELS[KERNELS.len() - 1])
    }

    /// Every kernel modelled.
    pub fn all() -> impl Iterator<Item = Kernel> {
        KERNELS.iter().map(|k| k.kernel)
    }

    /// A version or alias as `--kernel` takes it (`6.16`, `6.16.3`, `new`).
    pub fn parse(text: &str) -> Option<Kernel> {
        if let Some(k) = KERNELS
            .iter()
            .find(|k| k.name == text || k.aliases.contains(&text))
        {
            return Some(k.kernel);
        }
        // A full version: its stable series' row, or the newest modelled kernel not
        // after it.
        let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
        let (major, minor) = (parts.next()??, parts.next()??);
        let patch = parts.next().flatten().unwrap_or(0);
        let version_of = |k: &KernelDef| {
            let mut p = k.name.split('.').filter_map(|x| x.parse::<u32>().ok());
            (p.next().unwrap_or(0), p.next().unwrap_or(0))
        };
        if let Some(k) = KERNELS.iter().find(|k| {
            k.stable.is_some_and(|first| patch >= first) && version_of(k) == (major, minor)
        }) {
            return Some(k.kernel);
        }
        KERNELS
            .iter()
            .filter(|k| k.kernel != Kernel::Oot && k.stable.is_none())
            .filter(|k| version_of(k) <= (major, minor))
            .map(|k| k.kernel)
            .next_back()
    }

    /// Its name (`6.16`).
    pub fn name(self) -> &'static str {
        self.def().name
    }
}

/// The event table this kernel serves for a kind: the built-in table with the
/// kernel's DISABLE entries, quirks and name spelling applied.
pub fn served_table(kernel: &KernelDef, kind: BlockKind, gen: Generation) -> Vec<EventDef> {
    let registers = kind.def().mechanism.get(gen) == Mechanism::Registers;
    let mut table: Vec<EventDef> = crate::catalog::builtin(kind, gen)
        .iter()
        .filter(|d| kernel.disable_entries || registers || d.name != crate::catalog::DISABLE)
        .copied()
        .collect();
    for q in TABLE_QUIRKS
        .iter()
        .filter(|q| q.kind == kind && kernel.quirks.contains(&q.quirk))
    {
        for d in table.iter_mut() {
            match q.edit {
                Edit::Rename { number, name } if d.number == number => d.name = name,
                Edit::Renumber { name, number } if d.name == name => d.number = number,
                _ => {}
            }
        }
    }
    if !kernel.trailing_spaces {
        for d in table.iter_mut() {
            d.name = d.name.trim_end();
        }
    }
    table
}
