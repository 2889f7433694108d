//! The driver's show and store rules, per kernel: what reading a file prints and what
//! writing one does or refuses.

use std::io;

use crate::kinds::Role;
use crate::sim::kernel::Unnamed;
use crate::sim::parse::{kstrtobool, kstrtoint, kstrtouint};
use crate::sim::state::{Mech, SimBlock};
use crate::sim::{eacces, einval, enoent, Sim, State};
use crate::sysfs::layout as files;

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
    pub(super) fn find<'a>(state: &'a State, block: &str) -> Option<(usize, &'a SimBlock)> {
        state
            .blocks
            .iter()
            .enumerate()
            .find(|(_, b)| b.name == block)
    }

    pub(super) fn node(b: &SimBlock, file: &str) -> Option<Node> {
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
            files::ENABLE if b.mech.all_at_once() => Some(Node::Enable),
            files::COUNT_CLOCK if b.has_count_clock => Some(Node::CountClock),
            _ => None,
        }
    }

    /// The files of a block, in the order the driver creates them.
    pub(super) fn block_files(b: &SimBlock) -> Vec<String> {
        if b.mech == Mech::Register {
            return b.registers.iter().map(|r| r.def.name.to_string()).collect();
        }
        let mut out = vec![files::EVENT_LIST.to_string()];
        if b.mech.all_at_once() {
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
        for d in &b.table {
            let line = if self.kernel.list_without_0x {
                format!("{:x}: {}\n", d.number, d.name)
            } else {
                format!("0x{:x}: {}\n", d.number, d.name)
            };
            // The driver stops before the line that would reach a page.
            if out.len() + line.len() >= self.page_size {
                break;
            }
            out.push_str(&line);
        }
        out
    }

    fn show_event(&self, b: &SimBlock, i: usize) -> io::Result<String> {
        let ev = b.counters[i].event;
        match (b.name_of(ev), self.kernel.unnamed) {
            (Some(name), _) => Ok(format!("0x{ev:x}: {name}\n")),
            (None, Unnamed::Einval) => Err(einval()),
            (None, Unnamed::NoEvent) => Ok("No event being monitored\n".to_string()),
            (None, Unnamed::Null) => Ok(format!("0x{ev:x}: (null)\n")),
        }
    }

    pub(super) fn show(&self, block: &str, file: &str) -> io::Result<String> {
        let now = self.clock.now_ns();
        let state = self.lock();
        let (_, b) = Self::find(&state, block).ok_or_else(enoent)?;
        let node = Self::node(b, file).ok_or_else(enoent)?;
        Ok(match node {
            Node::Counter(i) => format!("0x{:x}\n", b.counter_value(i, now)),
            Node::Event(i) => self.show_event(b, i)?,
            Node::EventList => self.event_list(b),
            Node::Enable => format!("{}\n", u32::from(b.enabled)),
            Node::CountClock => format!("{}\n", b.count_clock),
            Node::Register(r) => format!("0x{:x}\n", b.register_value(&b.registers[r], now)),
        })
    }

    fn parse_number(&self, buf: &str) -> io::Result<u32> {
        self.parse_wide(buf).map(|n| n as u32)
    }

    /// A number as this kernel parses it, widened as it reaches a 64-bit register (a
    /// signed `int` sign-extends).
    fn parse_wide(&self, buf: &str) -> io::Result<u64> {
        let base = if self.kernel.hex_numbers { 16 } else { 0 };
        match self.kernel.signed_numbers {
            true => kstrtoint(buf, base).map(|n| i64::from(n) as u64),
            false => kstrtouint(buf, base).map(u64::from),
        }
        .map_err(io::Error::from_raw_os_error)
    }

    /// The event number a write to `event<N>` names: a name (compared as this kernel
    /// compares it) or a number (validated where this kernel validates).
    fn event_number(&self, b: &SimBlock, buf: &str) -> io::Result<u32> {
        if buf
            .as_bytes()
            .first()
            .is_some_and(|c| c.is_ascii_alphabetic())
        {
            let name = if self.kernel.name_newline {
                buf.strip_suffix('\n').unwrap_or(buf)
            } else {
                buf
            };
            return b
                .table
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.number)
                .ok_or_else(einval);
        }
        let n = self.parse_number(buf)?;
        if self.kernel.validates_numbers && b.name_of(n).is_none() {
            return Err(einval());
        }
        Ok(n)
    }

    fn enable_value(&self, b: &SimBlock, buf: &str) -> io::Result<bool> {
        if self.kernel.enable_bool {
            return kstrtobool(buf).map_err(io::Error::from_raw_os_error);
        }
        let en = self.parse_number(buf)?;
        if b.mech == Mech::L3 && en > 1 {
            return Err(einval());
        }
        Ok(en != 0)
    }

    pub(super) fn store(&self, block: &str, file: &str, data: &[u8]) -> io::Result<()> {
        let now = self.clock.now_ns();
        let buf = std::str::from_utf8(data).map_err(|_| einval())?;
        let mut state = self.lock();
        let idx = Self::find(&state, block).ok_or_else(enoent)?.0;
        let node = Self::node(&state.blocks[idx], file).ok_or_else(enoent)?;
        match node {
            Node::EventList => Err(eacces()),
            Node::Event(i) => {
                let number = self.event_number(&state.blocks[idx], buf)?;
                program(&mut state.blocks[idx], i, number, now);
                Ok(())
            }
            Node::Counter(i) => {
                let value = self.parse_number(buf)?;
                let b = &mut state.blocks[idx];
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
                        program(b, i, ev, now);
                        Ok(())
                    }
                }
            }
            Node::Register(r) => {
                let value = self.parse_wide(buf)?;
                let b = &mut state.blocks[idx];
                let any = b.kind.def().registers_take_any_value;
                if b.registers[r].role == Role::Level || (!any && value != 0) {
                    return Err(einval());
                }
                let reg = &mut b.registers[r];
                reg.acc = value;
                reg.since = now;
                Ok(())
            }
            Node::Enable => {
                let on = self.enable_value(&state.blocks[idx], buf)?;
                let b = &mut state.blocks[idx];
                b.fold_all(now);
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
                let b = &mut state.blocks[idx];
                b.fold_all(now);
                let n = b.counters.len().min(32) as u32;
                let valid = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
                b.count_clock = mask & valid;
                Ok(())
            }
        }
    }
}

/// Programming a counter, by mechanism.
fn program(b: &mut SimBlock, i: usize, number: u32, now: u64) {
    match b.mech {
        Mech::L3 => {
            // Programming any event stops all counters of the half; values kept.
            b.fold_all(now);
            for c in &mut b.counters {
                c.running = false;
            }
            b.enabled = false;
            b.counters[i].event = number & b.kind.def().max_event;
        }
        Mech::Crspace => {
            b.fold(i, now);
            b.counters[i].event = number & b.kind.def().max_event;
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
