//! perf's own words inside the event grammar: its modifiers (`:u`, `:k`), its generic
//! event names (`cycles`, `task-clock`) and its raw form (`r11`). The grammar needs
//! them to tell a perf event from a block selector; [`crate::perf`] opens them.

/// perf_event_attr.type of perf's generic hardware events.
pub(crate) const TYPE_HARDWARE: u32 = 0;
/// perf_event_attr.type of the kernel's software events.
pub(crate) const TYPE_SOFTWARE: u32 = 1;
/// perf_event_attr.type of a raw event of the CPU's own PMU (perf's `rNNN`).
pub(crate) const TYPE_RAW: u32 = 4;

/// perf's event modifiers: which privilege levels are counted (`:u` user space only,
/// `:k` the kernel only; none: both, as far as perf_event_paranoid allows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Levels {
    /// Leave out user space (`:k`).
    pub exclude_user: bool,
    /// Leave out the kernel (`:u`).
    pub exclude_kernel: bool,
}

impl Levels {
    /// Parses perf's modifier letters `u`, `k` (`uk`: both); None for anything else.
    pub fn parse(mods: &str) -> Option<Levels> {
        if mods.is_empty() || !mods.chars().all(|c| c == 'u' || c == 'k') {
            return None;
        }
        let (u, k) = (mods.contains('u'), mods.contains('k'));
        Some(Levels {
            exclude_user: !u,
            exclude_kernel: !k,
        })
    }
}

/// One of perf's generic events: its names (perf's own first), type, config, unit,
/// and what it counts.
pub(crate) type Generic = (
    &'static [&'static str],
    u32,
    u64,
    &'static str,
    &'static str,
);

/// perf's generic event names. The kernel's ABI (`PERF_COUNT_HW_*`,
/// `PERF_COUNT_SW_*`); clocks count nanoseconds. On Arm cores the hardware events
/// map to the architecture's events (cycles: CPU_CYCLES, instructions: INST_RETIRED).
pub(crate) const GENERIC: &[Generic] = &[
    (
        &["cycles", "cpu-cycles"],
        TYPE_HARDWARE,
        0,
        "cycles",
        "CPU cycles",
    ),
    (
        &["instructions"],
        TYPE_HARDWARE,
        1,
        "instructions",
        "instructions retired",
    ),
    (
        &["cache-references"],
        TYPE_HARDWARE,
        2,
        "events",
        "cache accesses (on Arm: L1 data cache)",
    ),
    (
        &["cache-misses"],
        TYPE_HARDWARE,
        3,
        "events",
        "cache misses (on Arm: L1 data cache refills)",
    ),
    (
        &["branch-instructions", "branches"],
        TYPE_HARDWARE,
        4,
        "events",
        "branches retired",
    ),
    (
        &["branch-misses"],
        TYPE_HARDWARE,
        5,
        "events",
        "branches mispredicted",
    ),
    (&["bus-cycles"], TYPE_HARDWARE, 6, "cycles", "bus cycles"),
    (
        &["stalled-cycles-frontend", "idle-cycles-frontend"],
        TYPE_HARDWARE,
        7,
        "cycles",
        "cycles the front end stalled",
    ),
    (
        &["stalled-cycles-backend", "idle-cycles-backend"],
        TYPE_HARDWARE,
        8,
        "cycles",
        "cycles the back end stalled",
    ),
    (
        &["ref-cycles"],
        TYPE_HARDWARE,
        9,
        "cycles",
        "reference cycles, not scaled by frequency",
    ),
    (
        &["cpu-clock"],
        TYPE_SOFTWARE,
        0,
        "ns",
        "time on the CPU clock, per CPU (wall time system-wide)",
    ),
    (
        &["task-clock"],
        TYPE_SOFTWARE,
        1,
        "ns",
        "time tasks ran on the CPUs",
    ),
    (
        &["page-faults", "faults"],
        TYPE_SOFTWARE,
        2,
        "events",
        "page faults",
    ),
    (
        &["context-switches", "cs"],
        TYPE_SOFTWARE,
        3,
        "events",
        "context switches",
    ),
    (
        &["cpu-migrations", "migrations"],
        TYPE_SOFTWARE,
        4,
        "events",
        "tasks moved to another CPU",
    ),
    (
        &["minor-faults"],
        TYPE_SOFTWARE,
        5,
        "events",
        "page faults served without I/O",
    ),
    (
        &["major-faults"],
        TYPE_SOFTWARE,
        6,
        "events",
        "page faults that needed I/O",
    ),
    (
        &["alignment-faults"],
        TYPE_SOFTWARE,
        7,
        "events",
        "alignment faults fixed up by the kernel",
    ),
    (
        &["emulation-faults"],
        TYPE_SOFTWARE,
        8,
        "events",
        "instructions the kernel emulated",
    ),
];

/// A spec and its modifiers: `cycles:u` → (`cycles`, user only); `PMU/EVENT/k` and
/// `PMU/EVENT/:k` likewise. A suffix that is not modifiers stays in the spec.
pub(crate) fn modifiers(spec: &str) -> (&str, Levels) {
    let spec = spec.trim();
    let split = match spec.rfind('/') {
        Some(slash) if spec.matches('/').count() >= 2 => {
            let mods = &spec[slash + 1..];
            Some((&spec[..=slash], mods.strip_prefix(':').unwrap_or(mods)))
        }
        _ => spec.rsplit_once(':'),
    };
    match split.and_then(|(body, mods)| Some((body, Levels::parse(mods)?))) {
        Some(found) => found,
        None => (spec, Levels::default()),
    }
}

/// Whether `name` is one of perf's generic or raw events, with or without modifiers
/// (`cycles`, `task-clock:u`, `r11`).
pub(crate) fn is_plain_event(name: &str) -> bool {
    let (body, _) = modifiers(name);
    let body = body.split(':').next().unwrap_or(body);
    generic(body).is_some() || raw_config(body).is_some()
}

/// The generic event a name (any case, any of its names) stands for.
pub(crate) fn generic(name: &str) -> Option<&'static Generic> {
    GENERIC
        .iter()
        .find(|(names, ..)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
}

/// The event number of perf's raw form: `r` and the number in hex (`r11`, `r80C0`).
pub(crate) fn raw_config(name: &str) -> Option<u64> {
    u64::from_str_radix(name.strip_prefix('r')?, 16).ok()
}
