//! The kernel's perf_event counters beside the DPU's blocks: perf's generic event
//! names (`cycles`, `task-clock`...), any PMU under `/sys/bus/event_source/devices`
//! (`armv8_pmuv3_0/l2d_cache_refill/`, `PMU/event=0x11/`), and their counting,
//! system-wide per CPU, in the same window as the hwmon counters.

pub mod counter;
pub mod pmu;
pub mod process;

use crate::error::{Error, Result};
pub use counter::{Counters, Reading, Target};
pub use pmu::{discover, Configs, Pmu};
pub use process::spawn_counted;

/// perf_event_attr.type of perf's generic hardware events.
pub const TYPE_HARDWARE: u32 = 0;
/// perf_event_attr.type of the kernel's software events.
pub const TYPE_SOFTWARE: u32 = 1;

/// One of perf's generic events: its names (perf's own first), type, config, unit,
/// and what it counts.
pub type Generic = (
    &'static [&'static str],
    u32,
    u64,
    &'static str,
    &'static str,
);

/// perf's generic event names. The kernel's ABI (`PERF_COUNT_HW_*`,
/// `PERF_COUNT_SW_*`); clocks count nanoseconds. On Arm cores the hardware events
/// map to the architecture's events (cycles: CPU_CYCLES, instructions: INST_RETIRED).
pub const GENERIC: &[Generic] = &[
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

/// The PMU name perf gives a generic event's type.
pub fn generic_pmu(type_: u32) -> &'static str {
    match type_ {
        TYPE_HARDWARE => "hardware",
        _ => "software",
    }
}

/// One perf event, resolved to what perf_event_open takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfEvent {
    /// Its name as shown: `task-clock`, or `PMU/EVENT/` as typed.
    pub name: String,
    /// The PMU: `hardware`, `software`, or the sysfs PMU's name.
    pub pmu: String,
    /// perf_event_attr.type.
    pub type_: u32,
    /// config, config1, config2, config3.
    pub configs: Configs,
    /// What it counts.
    pub unit: &'static str,
    /// The CPUs it may be opened on (an uncore PMU's `cpumask`); None: every CPU.
    pub cpus: Option<Vec<usize>>,
}

/// perf's own spelling of a generic event name (`cpu-cycles` → `cycles`), if it is one.
pub fn generic_name(name: &str) -> Option<&'static str> {
    GENERIC
        .iter()
        .find(|(names, ..)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
        .map(|(names, ..)| names[0])
}

fn generic(name: &str) -> Option<PerfEvent> {
    let (names, type_, config, unit, _) = GENERIC
        .iter()
        .find(|(names, ..)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))?;
    Some(PerfEvent {
        name: names[0].to_string(),
        pmu: generic_pmu(*type_).to_string(),
        type_: *type_,
        configs: Configs([*config, 0, 0, 0]),
        unit,
        cpus: None,
    })
}

/// Splits `-e` specs into perf events and the rest (the DPU's blocks). A spec is a
/// perf event when it is one of perf's generic names, or `PMU/.../` with a PMU the
/// kernel lists. Every perf event is resolved here, so that a bad one is refused
/// before anything is written to the device.
pub fn split(pmus: &[Pmu], specs: &[String]) -> Result<(Vec<PerfEvent>, Vec<String>)> {
    let mut perf = Vec::new();
    let mut rest = Vec::new();
    for text in specs {
        let terms = crate::ops::stat::spec::expand(text)?;
        let mut others = Vec::new();
        for term in &terms {
            match resolve(pmus, &term.spec)? {
                Some(e) if !perf.contains(&e) => perf.push(e),
                Some(_) => {}
                None => others.push(term.spec.clone()),
            }
        }
        // A list with no perf event stays whole (its groups with it).
        match others.len() == terms.len() {
            true => rest.push(text.clone()),
            false => rest.extend(others),
        }
    }
    Ok((perf, rest))
}

/// A perf event a metric names (`instructions`, `PMU/EVENT/`), which must resolve:
/// a PMU this machine lacks is named, with the PMUs it has.
pub fn required(pmus: &[Pmu], spec: &str) -> Result<PerfEvent> {
    if let Some(e) = resolve(pmus, spec)? {
        return Ok(e);
    }
    let pmu = spec.split('/').next().unwrap_or(spec);
    let names = pmus.iter().map(|p| p.name.as_str());
    Err(Error::BadSpec {
        spec: spec.to_string(),
        problem: format!(
            "no PMU named '{pmu}' under /sys/bus/event_source/devices{}",
            crate::catalog::did_you_mean(&crate::catalog::suggest(pmu, names))
        ),
    })
}

/// A perf event, None when the spec is not one.
fn resolve(pmus: &[Pmu], spec: &str) -> Result<Option<PerfEvent>> {
    if !spec.contains('/') {
        return Ok(generic(spec));
    }
    let body = spec.trim().trim_end_matches('/');
    let Some((pmu_name, event)) = body.split_once('/') else {
        return Ok(None);
    };
    let Some(pmu) = pmus.iter().find(|p| p.name == pmu_name) else {
        return Ok(None);
    };
    let bad = |problem: String| Error::BadSpec {
        spec: spec.to_string(),
        problem,
    };
    if event.contains('/') {
        return Err(bad(
            "a perf spec is PMU/EVENT/ or PMU/TERM=VALUE,.../".into()
        ));
    }
    let configs = pmu.resolve(event).map_err(|e| bad(e.to_string()))?;
    Ok(Some(PerfEvent {
        name: format!("{pmu_name}/{event}/"),
        pmu: pmu.name.clone(),
        type_: pmu.type_,
        configs,
        unit: "events",
        cpus: pmu.cpus.clone(),
    }))
}
