//! Counting perf events system-wide: one group per PMU per CPU, opened before the
//! window, reset and enabled when it opens, each group read with one `read`
//! (PERF_FORMAT_GROUP, with the times enabled and running), disabled at the end.

use perf_event::events::Event;
use perf_event::{Builder, Counter, Group};

use super::PerfEvent;

/// An event as perf_event_open takes it.
struct Encoded {
    type_: u32,
    configs: [u64; 4],
}

impl Event for Encoded {
    fn update_attrs(self, attr: &mut perf_event_open_sys::bindings::perf_event_attr) {
        attr.type_ = self.type_;
        attr.config = self.configs[0];
        attr.config1 = self.configs[1];
        attr.config2 = self.configs[2];
        attr.config3 = self.configs[3];
    }
}

/// One group: a PMU on one CPU, and which event each member counts.
struct Slot {
    group: Group,
    members: Vec<(usize, Counter)>,
}

/// What one event counted since the window opened, summed over CPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The event.
    pub event: PerfEvent,
    /// The count, scaled by time enabled / time running where multiplexed (perf's
    /// estimate); None when it never ran or could not be opened.
    pub value: Option<u64>,
    /// What was counted, unscaled.
    pub raw: u64,
    /// The share of the window it ran (time running / time enabled).
    pub coverage: f64,
    /// Why it could not be counted (`<not supported>`), with what to do.
    pub unsupported: Option<String>,
}

/// The open counters of a measurement.
pub struct Counters {
    events: Vec<PerfEvent>,
    slots: Vec<Slot>,
    refused: Vec<Option<String>>,
}

/// Why the kernel refused an event, for people.
fn reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "permission denied: set kernel.perf_event_paranoid to 0 or less (sysctl), or run as root or with CAP_PERFMON".into()
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            "not supported by this kernel or CPU (a virtual machine often has no hardware counters)".into()
        }
        Some(libc::EINVAL) => "the kernel refused its encoding (EINVAL)".into(),
        _ => e.to_string(),
    }
}

/// The CPUs online (`/sys/devices/system/cpu/online`), or those the process may use.
fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| super::pmu::parse_cpu_list(&t))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

impl Counters {
    /// Opens every event on every CPU (disabled). An event the kernel refuses is kept
    /// as unsupported with the reason; the others count.
    pub fn open(events: &[PerfEvent]) -> Counters {
        let cpus = online_cpus();
        let mut slots: Vec<(u32, usize, Slot)> = Vec::new();
        let mut refused: Vec<Option<String>> = vec![None; events.len()];
        for (i, e) in events.iter().enumerate() {
            let on: Vec<usize> = match &e.cpus {
                Some(c) => c.clone(),
                None => cpus.clone(),
            };
            for cpu in on {
                let slot = match slots
                    .iter()
                    .position(|(t, c, _)| *t == e.type_ && *c == cpu)
                {
                    Some(k) => k,
                    None => {
                        let group = Group::builder().any_pid().one_cpu(cpu).build_group();
                        match group {
                            Ok(group) => {
                                slots.push((
                                    e.type_,
                                    cpu,
                                    Slot {
                                        group,
                                        members: Vec::new(),
                                    },
                                ));
                                slots.len() - 1
                            }
                            Err(err) => {
                                refused[i].get_or_insert_with(|| reason(&err));
                                continue;
                            }
                        }
                    }
                };
                let s = &mut slots[slot].2;
                let built = Builder::new(Encoded {
                    type_: e.type_,
                    configs: e.configs.0,
                })
                .any_pid()
                .one_cpu(cpu)
                .build_with_group(&mut s.group);
                match built {
                    Ok(c) => s.members.push((i, c)),
                    Err(err) => {
                        refused[i].get_or_insert_with(|| reason(&err));
                    }
                }
            }
        }
        // An event refused on one CPU is not counted on any: a partial sum would lie.
        for (_, _, s) in &mut slots {
            s.members.retain(|(i, _)| refused[*i].is_none());
        }
        Counters {
            events: events.to_vec(),
            slots: slots.into_iter().map(|(_, _, s)| s).collect(),
            refused,
        }
    }

    /// Whether there is nothing to count.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Why each refused event was refused: (event name, reason).
    pub fn refusals(&self) -> Vec<(String, String)> {
        self.events
            .iter()
            .zip(&self.refused)
            .filter_map(|(e, r)| Some((e.name.clone(), r.clone()?)))
            .collect()
    }

    /// Zeroes and starts every group: the window opens.
    pub fn start(&mut self) {
        for s in &mut self.slots {
            let _ = s.group.reset();
            let _ = s.group.enable();
        }
    }

    /// Stops every group: the window closes.
    pub fn stop(&mut self) {
        for s in &mut self.slots {
            let _ = s.group.disable();
        }
    }

    /// Each event's count since `start`: one read per group.
    pub fn read(&mut self) -> Vec<Reading> {
        // Per event: scaled sum, raw sum, time enabled and running summed.
        let mut acc = vec![(0f64, 0u64, 0u128, 0u128); self.events.len()];
        for s in &mut self.slots {
            let Ok(data) = s.group.read() else {
                continue;
            };
            let enabled = data.time_enabled().map_or(0, |d| d.as_nanos());
            let running = data.time_running().map_or(0, |d| d.as_nanos());
            for (i, c) in &s.members {
                let Some(entry) = data.get(c) else {
                    continue;
                };
                let v = entry.value();
                let a = &mut acc[*i];
                if running > 0 {
                    a.0 += v as f64 * enabled as f64 / running as f64;
                }
                a.1 += v;
                a.2 += enabled;
                a.3 += running;
            }
        }
        self.events
            .iter()
            .zip(&self.refused)
            .zip(acc)
            .map(|((e, refused), (scaled, raw, enabled, running))| Reading {
                event: e.clone(),
                value: (refused.is_none() && running > 0).then_some(scaled.round() as u64),
                raw,
                coverage: if enabled > 0 {
                    running as f64 / enabled as f64
                } else {
                    0.0
                },
                unsupported: refused.clone(),
            })
            .collect()
    }
}
