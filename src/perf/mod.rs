//! The kernel's perf_event counters beside the DPU's blocks: perf's generic event
//! names (`cycles`, `task-clock`...), any PMU under `/sys/bus/event_source/devices`
//! (`armv8_pmuv3_0/l2d_cache_refill/`, `PMU/event=0x11/`), and their counting,
//! system-wide per CPU, in the same window as the hwmon counters.

mod counter;
mod pmu;
mod process;

use crate::error::{Error, Result};
pub use counter::{online_cpus, Counters, Reading, Target};
pub(crate) use pmu::parse_cpu_list;
pub use pmu::{discover, Configs, Pmu, Pmus};
pub use process::spawn_counted;

pub use crate::spec::perf_terms::Levels;
pub(crate) use crate::spec::perf_terms::{modifiers, GENERIC, TYPE_HARDWARE, TYPE_RAW};

/// The PMU name perf gives a generic event's type.
pub(crate) fn generic_pmu(type_: u32) -> &'static str {
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
    /// Which privilege levels it counts (perf's `:u`, `:k`).
    pub levels: Levels,
}

/// perf's own spelling of a generic event name (`cpu-cycles` → `cycles`), if it is one.
pub(crate) fn generic_name(name: &str) -> Option<&'static str> {
    crate::spec::perf_terms::generic(name).map(|(names, ..)| names[0])
}

/// A generic event, named as typed (`branches`, as perf names it, not
/// `branch-instructions`).
fn generic(name: &str) -> Option<PerfEvent> {
    let (_, type_, config, unit, _) = crate::spec::perf_terms::generic(name)?;
    Some(PerfEvent {
        name: name.to_string(),
        pmu: generic_pmu(*type_).to_string(),
        type_: *type_,
        configs: Configs([*config, 0, 0, 0]),
        unit,
        cpus: None,
        levels: Levels::default(),
    })
}

/// perf's raw event of the CPU's PMU: `r` and the event number in hex (`r11`, `r80C0`).
fn raw(name: &str) -> Option<PerfEvent> {
    let config = crate::spec::perf_terms::raw_config(name)?;
    Some(PerfEvent {
        name: name.to_string(),
        pmu: "raw".into(),
        type_: TYPE_RAW,
        configs: Configs([config, 0, 0, 0]),
        unit: "events",
        cpus: None,
        levels: Levels::default(),
    })
}

/// Splits `-e` specs into perf events and the rest (the DPU's blocks). A spec is a
/// perf event when it is one of perf's generic names, or `PMU/.../` with a PMU the
/// kernel lists. Every perf event is resolved here, so that a bad one is refused
/// before anything is written to the device.
pub fn split(pmus: &Pmus, specs: &[String]) -> Result<(Vec<PerfEvent>, Vec<String>)> {
    let mut perf = Vec::new();
    let mut rest = Vec::new();
    for text in specs {
        let terms = crate::spec::expand(text)?;
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
pub(crate) fn required(pmus: &Pmus, spec: &str) -> Result<PerfEvent> {
    if let Some(e) = resolve(pmus, spec)? {
        return Ok(e);
    }
    let pmu = spec.split('/').next().unwrap_or(spec);
    let names = pmus.all().map(|p| p.name.as_str());
    Err(Error::BadSpec {
        spec: spec.to_string(),
        problem: format!(
            "no PMU named '{pmu}' under /sys/bus/event_source/devices{}",
            crate::catalog::did_you_mean(&crate::catalog::suggest(pmu, names))
        ),
    })
}

/// A perf event, None when the spec is not one.
fn resolve(pmus: &Pmus, spec: &str) -> Result<Option<PerfEvent>> {
    let (body, levels) = modifiers(spec);
    if let Some((name, mods)) = body.rsplit_once(':') {
        if generic(name).or_else(|| raw(name)).is_some() {
            return Err(Error::BadSpec {
                spec: spec.to_string(),
                problem: format!(
                    "'{mods}' is no modifier: perf's are u (user space only), k (the kernel only) and uk"
                ),
            });
        }
    }
    let event = match body.contains('/') {
        false => generic(body).or_else(|| raw(body)),
        true => pmu_event(pmus, spec, body)?,
    };
    Ok(event.map(|mut e| {
        if levels != Levels::default() {
            e.name = spec.trim().to_string();
            e.levels = levels;
        }
        e
    }))
}

/// `PMU/EVENT/` or `PMU/TERM=VALUE,.../` of a PMU the kernel lists.
fn pmu_event(pmus: &Pmus, spec: &str, body: &str) -> Result<Option<PerfEvent>> {
    let body = body.trim_end_matches('/');
    let Some((pmu_name, event)) = body.split_once('/') else {
        return Ok(None);
    };
    let Some(pmu) = pmus.get(pmu_name) else {
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
        levels: Levels::default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::perf_terms::TYPE_SOFTWARE;

    fn pmu() -> Pmu {
        let mut formats = std::collections::BTreeMap::new();
        formats.insert(
            "event".to_string(),
            pmu::parse_format("config:0-15").unwrap(),
        );
        let mut events = std::collections::BTreeMap::new();
        events.insert("l2d_cache_refill".to_string(), "event=0x17".to_string());
        Pmu {
            name: "armv8_pmuv3_0".into(),
            type_: 8,
            formats,
            events,
            cpus: None,
        }
    }

    #[test]
    fn modifiers_and_raw_events_as_perf_writes_them() {
        let user = Levels {
            exclude_user: false,
            exclude_kernel: true,
        };
        let kernel = Levels {
            exclude_user: true,
            exclude_kernel: false,
        };
        let specs: Vec<String> = vec![
            "cycles:u,task-clock:k,r80C0".into(),
            "armv8_pmuv3_0/l2d_cache_refill/u,tile/MEMORY_READS/".into(),
        ];
        let (perf, rest) = split(&Pmus::from(vec![pmu()]), &specs).unwrap();
        let got: Vec<(&str, u32, u64, Levels)> = perf
            .iter()
            .map(|e| (e.name.as_str(), e.type_, e.configs.0[0], e.levels))
            .collect();
        assert_eq!(
            got,
            vec![
                ("cycles:u", TYPE_HARDWARE, 0, user),
                ("task-clock:k", TYPE_SOFTWARE, 1, kernel),
                ("r80C0", TYPE_RAW, 0x80c0, Levels::default()),
                ("armv8_pmuv3_0/l2d_cache_refill/u", 8, 0x17, user),
            ]
        );
        assert_eq!(rest, vec!["tile/MEMORY_READS/".to_string()]);
        assert!(split(&Pmus::default(), &["cycles:x".into()]).is_err());
        assert_eq!(Levels::parse("uk"), Some(Levels::default()));
    }
}
