//! Counting perf events: system-wide, one group per PMU per CPU, opened before the
//! window, reset and enabled when it opens; or for a process tree, one group per
//! PMU, enabled by the command's `exec`. Each group is read with one `read`
//! (PERF_FORMAT_GROUP, with the times enabled and running) and led by its first
//! event, as perf does.

use perf_event::events::Event;
use perf_event::{Builder, Counter, Group, ReadFormat};

use crate::perf::{Levels, PerfEvent};

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

/// One group: a PMU on one CPU (or for a process tree, or one thread of a running
/// process), led by its first event.
struct Slot {
    /// The PMU's type, the CPU (None: any, for a process tree) and the thread (0:
    /// not one thread).
    key: (u32, Option<usize>, i32),
    group: Group,
    /// Each event it counts: its index and the kernel's id (the leader first).
    ids: Vec<(usize, u64)>,
    /// The other members, kept open.
    members: Vec<Counter>,
}

/// What is counted: every task on each CPU (`-a`), or one process and the
/// processes it starts (`--per-process`), from its `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// System-wide, per CPU.
    System,
    /// This process and its descendants (inherited), enabled when it calls `exec`.
    Process(i32),
    /// A process already running (perf's `-p`): each of its threads, and what they
    /// start from now on (inherited), enabled when the window opens.
    Running(i32),
}

/// The threads of process `pid` now (itself where its task list cannot be read).
fn threads(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    if tids.is_empty() {
        tids.push(pid);
    }
    tids
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
    /// The kernel's time enabled, ns (summed over CPUs).
    pub enabled_ns: u64,
    /// The kernel's time running, ns (summed over CPUs).
    pub running_ns: u64,
    /// Why it could not be counted (`<not supported>`), with what to do.
    pub unsupported: Option<String>,
    /// The CPU it was counted on, when split per CPU ([`Counters::per_cpu`]); None
    /// for the sum over every CPU (or for a process tree).
    pub cpu: Option<usize>,
}

/// The open counters of a measurement.
pub struct Counters {
    events: Vec<PerfEvent>,
    slots: Vec<Slot>,
    refused: Vec<Option<String>>,
    user_only: bool,
    /// The kernel said EACCES/EPERM to some event.
    denied: bool,
    /// Read each CPU's count apart (perf stat -A).
    per_cpu: bool,
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

fn denied(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// The CPUs online (`devices/system/cpu/online` under the sysfs root), or those the
/// process may use when that file says nothing.
pub fn online_cpus(sysfs_root: &std::path::Path) -> Vec<usize> {
    crate::sysfs::read_attribute(&crate::sysfs::cpus_online(sysfs_root))
        .ok()
        .and_then(|t| crate::perf::parse_cpu_list(&t))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

/// A builder for `target` on `cpu` (None: any CPU), counting the kernel's share
/// too unless `user_only`.
fn aimed(
    mut b: Builder<'_>,
    target: Target,
    cpu: Option<usize>,
    user_only: bool,
    levels: Levels,
) -> Builder<'_> {
    match target {
        Target::System => b.any_pid(),
        Target::Process(pid) => b.observe_pid(pid).inherit(true).enable_on_exec(true),
        Target::Running(tid) => b.observe_pid(tid).inherit(true),
    };
    match cpu {
        Some(c) => b.one_cpu(c),
        None => b.any_cpu(),
    };
    b.exclude_kernel(user_only || levels.exclude_kernel)
        .exclude_user(levels.exclude_user)
        .exclude_hv(user_only || levels != Levels::default());
    b
}

/// Where and how an event is opened.
#[derive(Clone, Copy)]
struct How {
    target: Target,
    cpu: Option<usize>,
    user_only: bool,
}

/// Opens event `i` into the group of its PMU on its CPU: as the leader of a new group
/// when there is none yet (as perf does), else as an enabled member (a disabled member
/// stays off when its group is enabled).
fn add(slots: &mut Vec<Slot>, e: &PerfEvent, i: usize, how: How) -> std::io::Result<()> {
    let builder = || {
        let encoded = Encoded {
            type_: e.type_,
            configs: e.configs.0,
        };
        aimed(
            Builder::new(encoded),
            how.target,
            how.cpu,
            how.user_only,
            e.levels,
        )
    };
    let thread = match how.target {
        Target::Running(tid) => tid,
        _ => 0,
    };
    let key = (e.type_, how.cpu, thread);
    match slots.iter_mut().find(|s| s.key == key) {
        Some(s) => {
            let c = builder().enabled(true).build_with_group(&mut s.group)?;
            s.ids.push((i, c.id()));
            s.members.push(c);
        }
        None => {
            let group = builder()
                .read_format(
                    ReadFormat::GROUP
                        | ReadFormat::ID
                        | ReadFormat::TOTAL_TIME_ENABLED
                        | ReadFormat::TOTAL_TIME_RUNNING,
                )
                .build_group()?;
            let ids = vec![(i, group.id())];
            slots.push(Slot {
                key,
                group,
                ids,
                members: Vec::new(),
            });
        }
    }
    Ok(())
}

impl Counters {
    /// Opens every event on every CPU in `cpus` (disabled; an uncore event on its own
    /// CPUs), system-wide. An event the kernel refuses is kept as unsupported with the
    /// reason; the others count.
    pub fn open(events: &[PerfEvent], cpus: &[usize]) -> Counters {
        Counters::open_on(events, Target::System, cpus)
    }

    /// Opens every event for `target`: per CPU when system-wide, one group per PMU
    /// for a process tree. The kernel's share is counted where the kernel allows
    /// it (perf_event_paranoid), else user space only ([`Counters::user_only`]).
    pub fn open_for(events: &[PerfEvent], target: Target) -> Counters {
        Counters::open_on(events, target, &[])
    }

    fn open_on(events: &[PerfEvent], target: Target, cpus: &[usize]) -> Counters {
        let mut c = Counters::try_open(events, target, cpus, false);
        if c.denied {
            let user = Counters::try_open(events, target, cpus, true);
            if user.refused.iter().filter(|r| r.is_some()).count()
                < c.refused.iter().filter(|r| r.is_some()).count()
            {
                c = user;
            }
        }
        c
    }

    fn try_open(events: &[PerfEvent], target: Target, cpus: &[usize], user_only: bool) -> Counters {
        // Where each event is opened: on each CPU, or for the process tree, or on
        // each thread of a running process.
        let places: Vec<(Target, Option<usize>)> = match target {
            Target::System => cpus.iter().map(|&c| (target, Some(c))).collect(),
            Target::Process(_) => vec![(target, None)],
            Target::Running(pid) => threads(pid)
                .into_iter()
                .map(|t| (Target::Running(t), None))
                .collect(),
        };
        let mut slots: Vec<Slot> = Vec::new();
        let mut refused: Vec<Option<String>> = vec![None; events.len()];
        let mut was_denied = false;
        let mut refuse = |slot: &mut Option<String>, err: &std::io::Error| {
            was_denied |= denied(err);
            slot.get_or_insert_with(|| reason(err));
        };
        for (i, e) in events.iter().enumerate() {
            let on: Vec<(Target, Option<usize>)> = match (&e.cpus, target) {
                (Some(c), Target::System) => c.iter().map(|&c| (target, Some(c))).collect(),
                (Some(_), _) => {
                    refused[i] = Some(format!(
                        "{} counts the whole chip, not a process: count it system-wide (without --per-process or -p)",
                        e.pmu
                    ));
                    continue;
                }
                (None, _) => places.clone(),
            };
            for (target, cpu) in on {
                let how = How {
                    target,
                    cpu,
                    user_only,
                };
                if let Err(err) = add(&mut slots, e, i, how) {
                    refuse(&mut refused[i], &err);
                }
            }
        }
        Counters {
            events: events.to_vec(),
            slots,
            refused,
            user_only,
            denied: was_denied,
            per_cpu: false,
        }
    }

    /// Reads each CPU's counts apart (perf stat -A) when `on`, system-wide; summed
    /// over CPUs otherwise.
    pub fn per_cpu(mut self, on: bool) -> Self {
        self.per_cpu = on;
        self
    }

    /// Whether the kernel's share is left out (perf_event_paranoid forbids it):
    /// perf's `:u`.
    pub fn user_only(&self) -> bool {
        self.user_only
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

    /// Stops every group and zeroes it: the window opens later.
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            let _ = s.group.disable();
            let _ = s.group.reset();
        }
    }

    /// Starts every group again, keeping what it counted (counting enabled again).
    pub fn resume(&mut self) {
        for s in &mut self.slots {
            let _ = s.group.enable();
        }
    }

    /// Stops every group: the window closes.
    pub fn stop(&mut self) {
        for s in &mut self.slots {
            let _ = s.group.disable();
        }
    }

    /// Each event's count since `start`, summed over CPUs or one per CPU (event by
    /// event, CPUs in order): one read per group.
    pub fn read(&mut self) -> Vec<Reading> {
        let per_cpu = self.per_cpu;
        // Per (event, CPU): scaled sum, raw sum, time enabled and running summed.
        let mut acc: std::collections::BTreeMap<(usize, Option<usize>), Sums> =
            std::collections::BTreeMap::new();
        for s in &mut self.slots {
            let Ok(data) = s.group.as_counter_mut().read_group() else {
                continue;
            };
            let enabled = data.time_enabled().map_or(0, |d| d.as_nanos());
            let running = data.time_running().map_or(0, |d| d.as_nanos());
            let cpu = s.key.1.filter(|_| per_cpu);
            for &(i, id) in &s.ids {
                if let Some(entry) = data.iter().find(|e| e.id() == id) {
                    acc.entry((i, cpu))
                        .or_default()
                        .add(entry.value(), enabled, running);
                }
            }
        }
        let mut out = Vec::new();
        let none = Sums::default();
        for (i, (e, refused)) in self.events.iter().zip(&self.refused).enumerate() {
            let mut of_event: Vec<_> = acc
                .range((i, None)..=(i, Some(usize::MAX)))
                .map(|(&(_, cpu), sums)| (cpu, sums))
                .collect();
            // Refused, or never read: one reading with nothing in it.
            if of_event.is_empty() {
                of_event.push((None, &none));
            }
            for (cpu, sums) in of_event {
                out.push(sums.reading(e, refused, cpu));
            }
        }
        out
    }
}

/// What one event counted on one CPU, or summed over CPUs.
#[derive(Default)]
struct Sums {
    scaled: f64,
    raw: u64,
    enabled: u128,
    running: u128,
}

impl Sums {
    fn add(&mut self, value: u64, enabled: u128, running: u128) {
        if running > 0 {
            self.scaled += value as f64 * enabled as f64 / running as f64;
        }
        self.raw += value;
        self.enabled += enabled;
        self.running += running;
    }

    fn reading(&self, event: &PerfEvent, refused: &Option<String>, cpu: Option<usize>) -> Reading {
        Reading {
            event: event.clone(),
            value: (refused.is_none() && self.running > 0).then_some(self.scaled.round() as u64),
            raw: self.raw,
            coverage: if self.enabled > 0 {
                self.running as f64 / self.enabled as f64
            } else {
                0.0
            },
            enabled_ns: self.enabled.min(u64::MAX as u128) as u64,
            running_ns: self.running.min(u64::MAX as u128) as u64,
            unsupported: refused.clone(),
            cpu,
        }
    }
}
