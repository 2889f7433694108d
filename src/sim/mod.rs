//! A simulated BlueField PMC device: a model of the mlxbf-pmc driver's show/store
//! rules for BlueField-1, -2 and -3 layouts and three kernel flavours. It implements
//! [`Sysfs`], so every command runs on it in-process, and it is served as a FUSE
//! filesystem by `bfperf sim mount`.

mod clock;
pub mod export;
mod layout;
pub mod mount;
mod parse;

pub use clock::{Clock, ManualClock, SystemClock};
pub use export::{export_tree, SysfsRootLayout};
pub use parse::kstrtouint;

use std::io;
use std::sync::{Arc, Mutex};

use crate::block::{BlockKind, Generation};
use crate::catalog::{builtin, EventDef};
use crate::error::errno;
use crate::sysfs::{layout as files, Entry, EntryKind, Sysfs};

/// Kernel flavours that differ in what `event<N>` accepts and how `event_list` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Up to mid-2025: a name written with its trailing newline is EINVAL; any number
    /// is accepted (0xff stops a counter).
    Old,
    /// Mid-2025 on: newline trimmed; numbers not in the table are EINVAL; BF3 crspace
    /// blocks have `count_clock`; BF3 has `clock_measure`.
    New,
    /// NVIDIA's out-of-tree driver: `event_list` lines without `0x`, every number
    /// written is parsed as hex.
    Oot,
}

impl Flavor {
    pub fn parse(s: &str) -> Option<Flavor> {
        match s {
            "old" => Some(Flavor::Old),
            "new" => Some(Flavor::New),
            "oot" => Some(Flavor::Oot),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mech {
    Counter,
    L3,
    Crspace,
    Register,
}

#[derive(Debug, Clone)]
struct SimCounter {
    event: u32,
    running: bool,
    acc: u64,
    since: u64,
}

#[derive(Debug, Clone)]
struct SimRegister {
    def: EventDef,
    acc: u64,
    since: u64,
    rate: u64,
}

#[derive(Debug, Clone)]
struct SimBlock {
    name: String,
    kind: BlockKind,
    mech: Mech,
    table: &'static [EventDef],
    seed: u64,
    counters: Vec<SimCounter>,
    registers: Vec<SimRegister>,
    enabled: bool,
    count_clock: u32,
    has_count_clock: bool,
}

/// Cycles per second counted by a crspace counter in count_clock mode.
pub const CLOCK_HZ: u64 = 1_000_000_000;
const NS: u128 = 1_000_000_000;

impl SimBlock {
    fn width_mask(&self) -> u64 {
        match self.mech {
            Mech::L3 => (1u64 << 57) - 1,
            Mech::Crspace => u32::MAX as u64,
            Mech::Register if matches!(self.kind, BlockKind::Ecc | BlockKind::ClockMeasure) => {
                u32::MAX as u64
            }
            _ => u64::MAX,
        }
    }

    fn name_of(&self, number: u32) -> Option<&'static str> {
        self.table
            .iter()
            .find(|d| d.number == number)
            .map(|d| d.name)
    }

    /// Events per second counted by counter `i` with its current event.
    fn rate(&self, i: usize) -> u64 {
        let c = &self.counters[i];
        if self.mech == Mech::Crspace && self.count_clock & (1 << i) != 0 {
            return CLOCK_HZ;
        }
        match self.name_of(c.event) {
            None | Some("DISABLE") => 0,
            Some(_) => event_rate(self.seed, c.event, i as u64),
        }
    }

    fn counter_value(&self, i: usize, now: u64) -> u64 {
        let c = &self.counters[i];
        let mut v = c.acc as u128;
        if c.running {
            v += self.rate(i) as u128 * (now.saturating_sub(c.since)) as u128 / NS;
        }
        (v as u64) & self.width_mask()
    }

    /// Folds the running count into `acc`, so that the rate or state can change now.
    fn fold(&mut self, i: usize, now: u64) {
        let v = self.counter_value(i, now);
        let c = &mut self.counters[i];
        c.acc = v;
        c.since = now;
    }

    fn fold_all(&mut self, now: u64) {
        for i in 0..self.counters.len() {
            self.fold(i, now);
        }
    }

    fn register_value(&self, r: &SimRegister, now: u64) -> u64 {
        let v = r.acc as u128 + r.rate as u128 * now.saturating_sub(r.since) as u128 / NS;
        (v as u64) & self.width_mask()
    }
}

/// A deterministic, plausible rate for an event (events per second).
fn event_rate(seed: u64, event: u32, counter: u64) -> u64 {
    let mut x = seed ^ (event as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (counter << 17);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    100_000 + x % 9_900_000
}

struct State {
    blocks: Vec<SimBlock>,
}

/// The simulated device. Cheap to share: clone the `Arc`.
pub struct Sim {
    generation: Generation,
    flavor: Flavor,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl Sim {
    /// A device of a generation and kernel flavour, counting on `clock`.
    pub fn new(generation: Generation, flavor: Flavor, clock: Arc<dyn Clock>) -> Sim {
        let now = clock.now_ns();
        let blocks = layout::blocks(generation, flavor)
            .into_iter()
            .enumerate()
            .map(|(i, spec)| build_block(generation, flavor, i as u64, spec, now))
            .collect();
        Sim {
            generation,
            flavor,
            clock,
            state: Mutex::new(State { blocks }),
        }
    }

    /// A device on a manual clock starting at 0 (tests).
    pub fn with_manual_clock(generation: Generation, flavor: Flavor) -> (Sim, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(0));
        (Sim::new(generation, flavor, clock.clone()), clock)
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hid_link(&self) -> String {
        export::device_link(self.generation)
    }
}

fn build_block(
    gen: Generation,
    flavor: Flavor,
    index: u64,
    spec: layout::Spec,
    now: u64,
) -> SimBlock {
    let kind = BlockKind::from_block_name(spec.name);
    let table = builtin(kind, gen);
    let mech = match kind {
        BlockKind::Pcie | BlockKind::Ecc | BlockKind::ClockMeasure => Mech::Register,
        BlockKind::L3cache => Mech::L3,
        BlockKind::Llt | BlockKind::LltMiss => Mech::Crspace,
        BlockKind::Mss if gen == Generation::Bf3 => Mech::Crspace,
        _ => Mech::Counter,
    };
    let seed = 0x5EED_0000 + index * 7919;
    let counters = (0..spec.counters)
        .map(|_| SimCounter {
            event: 0,
            running: false,
            acc: 0,
            since: now,
        })
        .collect();
    let registers = if mech == Mech::Register {
        table
            .iter()
            .map(|d| SimRegister {
                def: *d,
                acc: register_start(kind, seed, d),
                since: now,
                rate: register_rate(kind, seed, d),
            })
            .collect()
    } else {
        Vec::new()
    };
    SimBlock {
        name: spec.name.to_string(),
        kind,
        mech,
        table,
        seed,
        counters,
        registers,
        enabled: false,
        count_clock: 0,
        has_count_clock: mech == Mech::Crspace && flavor == Flavor::New,
    }
}

/// PCIe traffic: bytes in the GB/s range, packets at bytes/256.
fn register_rate(kind: BlockKind, seed: u64, d: &EventDef) -> u64 {
    match kind {
        BlockKind::Pcie => {
            let bytes = 200_000_000 + event_rate(seed, d.number, 0) * 100;
            if d.name.contains("PKT") {
                bytes / 256
            } else {
                bytes
            }
        }
        BlockKind::ClockMeasure => 0,
        _ => 0,
    }
}

fn register_start(kind: BlockKind, seed: u64, d: &EventDef) -> u64 {
    match kind {
        BlockKind::Pcie => register_rate(kind, seed, d) * 3600,
        BlockKind::ClockMeasure if d.name.starts_with("FMON") => 1_562_500 + d.number as u64,
        BlockKind::ClockMeasure => 1_000_000,
        _ => 0,
    }
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(errno::EINVAL)
}
fn enoent() -> io::Error {
    io::Error::from_raw_os_error(errno::ENOENT)
}
fn eacces() -> io::Error {
    io::Error::from_raw_os_error(errno::EACCES)
}

/// What a path inside a block names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Counter(usize),
    Event(usize),
    EventList,
    Enable,
    CountClock,
    Register(usize),
}

impl Sim {
    fn find<'a>(state: &'a State, block: &str) -> Option<(usize, &'a SimBlock)> {
        state
            .blocks
            .iter()
            .enumerate()
            .find(|(_, b)| b.name == block)
    }

    fn node(b: &SimBlock, file: &str) -> Option<Node> {
        if b.mech == Mech::Register {
            return b
                .registers
                .iter()
                .position(|r| r.def.name == file)
                .map(Node::Register);
        }
        let n = b.counters.len();
        if let Some(i) = files::counter_index(file).filter(|&i| (i as usize) < n) {
            return Some(Node::Counter(i as usize));
        }
        if let Some(i) = files::event_index(file).filter(|&i| (i as usize) < n) {
            return Some(Node::Event(i as usize));
        }
        match file {
            files::EVENT_LIST => Some(Node::EventList),
            files::ENABLE if matches!(b.mech, Mech::L3 | Mech::Crspace) => Some(Node::Enable),
            files::COUNT_CLOCK if b.has_count_clock => Some(Node::CountClock),
            _ => None,
        }
    }

    /// The files of a block, in the order the driver creates them.
    fn block_files(b: &SimBlock) -> Vec<String> {
        if b.mech == Mech::Register {
            return b.registers.iter().map(|r| r.def.name.to_string()).collect();
        }
        let mut out = vec![files::EVENT_LIST.to_string()];
        if matches!(b.mech, Mech::L3 | Mech::Crspace) {
            out.push(files::ENABLE.to_string());
        }
        if b.has_count_clock {
            out.push(files::COUNT_CLOCK.to_string());
        }
        for i in 0..b.counters.len() {
            out.push(format!("counter{i}"));
            out.push(format!("event{i}"));
        }
        out
    }

    fn event_list(&self, b: &SimBlock) -> String {
        let mut out = String::new();
        let mut len = 0usize;
        for d in b.table {
            let line = match self.flavor {
                Flavor::Oot => format!("{:x}: {}\n", d.number, d.name),
                _ => format!("0x{:x}: {}\n", d.number, d.name),
            };
            len += line.len();
            if len >= 4096 {
                break;
            }
            out.push_str(&line);
        }
        out
    }

    fn show(&self, block: &str, file: &str) -> io::Result<String> {
        let now = self.clock.now_ns();
        let state = self.lock();
        let (_, b) = Self::find(&state, block).ok_or_else(enoent)?;
        let node = Self::node(b, file).ok_or_else(enoent)?;
        Ok(match node {
            Node::Counter(i) => format!("0x{:x}\n", b.counter_value(i, now)),
            Node::Event(i) => {
                let ev = b.counters[i].event;
                let name = b.name_of(ev).ok_or_else(einval)?;
                format!("0x{ev:x}: {name}\n")
            }
            Node::EventList => self.event_list(b),
            Node::Enable => format!("{}\n", u32::from(b.enabled)),
            Node::CountClock => format!("{}\n", b.count_clock),
            Node::Register(r) => format!("0x{:x}\n", b.register_value(&b.registers[r], now)),
        })
    }

    fn parse_number(&self, buf: &str) -> io::Result<u32> {
        let base = if self.flavor == Flavor::Oot { 16 } else { 0 };
        kstrtouint(buf, base).map_err(io::Error::from_raw_os_error)
    }

    fn store(&self, block: &str, file: &str, data: &[u8]) -> io::Result<()> {
        let now = self.clock.now_ns();
        let buf = std::str::from_utf8(data).map_err(|_| einval())?;
        let mut state = self.lock();
        let idx = Self::find(&state, block).ok_or_else(enoent)?.0;
        let b = &mut state.blocks[idx];
        let node = Self::node(b, file).ok_or_else(enoent)?;
        match node {
            Node::EventList => Err(eacces()),
            Node::Event(i) => {
                let number = if buf
                    .as_bytes()
                    .first()
                    .is_some_and(|c| c.is_ascii_alphabetic())
                {
                    let name = match self.flavor {
                        Flavor::Old => buf,
                        _ => buf.strip_suffix('\n').unwrap_or(buf),
                    };
                    b.table
                        .iter()
                        .find(|d| d.name == name)
                        .map(|d| d.number)
                        .ok_or_else(einval)?
                } else {
                    let n = self.parse_number(buf)?;
                    if self.flavor == Flavor::New && b.name_of(n).is_none() {
                        return Err(einval());
                    }
                    n
                };
                self.program(b, i, number, now);
                Ok(())
            }
            Node::Counter(i) => {
                let value = self.parse_number(buf)?;
                if value != 0 {
                    return Err(einval());
                }
                match b.mech {
                    Mech::L3 => Err(einval()),
                    Mech::Crspace => {
                        b.fold(i, now);
                        b.counters[i].acc = 0;
                        Ok(())
                    }
                    _ => {
                        let ev = b.counters[i].event;
                        self.program(b, i, ev, now);
                        Ok(())
                    }
                }
            }
            Node::Register(r) => {
                let value = self.parse_number(buf)?;
                if b.kind == BlockKind::ClockMeasure || (b.kind != BlockKind::Ecc && value != 0) {
                    return Err(einval());
                }
                let reg = &mut b.registers[r];
                reg.acc = value as u64;
                reg.since = now;
                Ok(())
            }
            Node::Enable => {
                let en = self.parse_number(buf)?;
                if b.mech == Mech::L3 && en > 1 {
                    return Err(einval());
                }
                b.fold_all(now);
                let on = en != 0;
                for c in &mut b.counters {
                    if on {
                        c.acc = 0;
                    }
                    c.running = on;
                    c.since = now;
                }
                b.enabled = on;
                Ok(())
            }
            Node::CountClock => {
                let mask = self.parse_number(buf)?;
                b.fold_all(now);
                b.count_clock = mask & ((1u64 << b.counters.len()) - 1) as u32;
                Ok(())
            }
        }
    }

    fn program(&self, b: &mut SimBlock, i: usize, number: u32, now: u64) {
        match b.mech {
            Mech::L3 => {
                // Programming any event stops all counters of the half; values kept.
                b.fold_all(now);
                for c in &mut b.counters {
                    c.running = false;
                }
                b.enabled = false;
                b.counters[i].event = number & 0x3f;
            }
            Mech::Crspace => {
                b.fold(i, now);
                b.counters[i].event = number & 0xff;
            }
            _ => {
                let c = &mut b.counters[i];
                c.event = number;
                c.acc = 0;
                c.since = now;
                c.running = true;
            }
        }
    }
}

fn split(rel: &str) -> (&str, Option<&str>) {
    match rel.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (rel, None),
    }
}

impl Sysfs for Sim {
    fn read(&self, rel: &str) -> io::Result<String> {
        match split(rel) {
            ("name", None) => Ok(format!("{}\n", files::DEVICE_NAME)),
            ("uevent", None) => Ok(String::new()),
            ("power", Some("runtime_status")) => Ok("unsupported\n".to_string()),
            ("device", Some("modalias")) => Ok(format!(
                "acpi:{}:\n",
                self.generation.acpi_hid().unwrap_or("MLNXBFD1")
            )),
            (block, Some(file)) if !file.contains('/') => self.show(block, file),
            ("", None) => Err(io::Error::from_raw_os_error(errno::EISDIR)),
            (block, None) if Self::find(&self.lock(), block).is_some() => {
                Err(io::Error::from_raw_os_error(errno::EISDIR))
            }
            _ => Err(enoent()),
        }
    }

    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        match split(rel) {
            ("name", None) | ("uevent", None) => Err(eacces()),
            (block, Some(file)) if !file.contains('/') && block != "power" && block != "device" => {
                self.store(block, file, data)
            }
            _ => Err(enoent()),
        }
    }

    fn list(&self, rel: &str) -> io::Result<Vec<Entry>> {
        let file = |n: &str| Entry {
            name: n.to_string(),
            kind: EntryKind::File,
        };
        let mut out = match split(rel) {
            ("", None) => {
                let state = self.lock();
                let mut v = vec![
                    Entry {
                        name: "device".into(),
                        kind: EntryKind::Symlink,
                    },
                    file("name"),
                    Entry {
                        name: "power".into(),
                        kind: EntryKind::Dir,
                    },
                    Entry {
                        name: "subsystem".into(),
                        kind: EntryKind::Symlink,
                    },
                    file("uevent"),
                ];
                v.extend(state.blocks.iter().map(|b| Entry {
                    name: b.name.clone(),
                    kind: EntryKind::Dir,
                }));
                v
            }
            ("power", None) => vec![file("runtime_status")],
            (block, None) => {
                let state = self.lock();
                let (_, b) = Self::find(&state, block).ok_or_else(enoent)?;
                Self::block_files(b).iter().map(|n| file(n)).collect()
            }
            _ => return Err(enoent()),
        };
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn read_link(&self, rel: &str) -> io::Result<String> {
        match rel {
            "device" => Ok(self.hid_link()),
            "subsystem" => Ok(export::SUBSYSTEM_LINK.to_string()),
            _ => Err(einval()),
        }
    }

    fn location(&self) -> String {
        format!(
            "simulated {} ({} kernel)",
            self.generation.label(),
            match self.flavor {
                Flavor::Old => "old",
                Flavor::New => "new",
                Flavor::Oot => "out-of-tree",
            }
        )
    }
}
