//! Watching without writing: every counter and statistics register of the device,
//! each value file opened once and read with one `pread` per sample, turned into
//! rates per second between samples (a counter that went backwards is a reset, not a
//! rate). A counter's `event<N>` is read the same way at each sample: an interval in
//! which another program changed it has no rate, and says so. Nothing is programmed:
//! counters count whatever they already count, so an unprivileged user can watch the
//! PCIe registers, and `top` shows the device as it is.

use crate::block::{BlockKind, Mechanism};
use crate::device::values::{event_number, parse_event, parse_value};
use crate::device::Device;
use crate::error::Result;
use crate::kinds::Role;
use crate::metrics::Inputs;
use crate::sysfs::{layout, ValueFile};

/// One watched value.
struct Watched<'d> {
    block: String,
    kind: BlockKind,
    /// The event's or register's name (`counter 3` when the event has no name).
    name: String,
    /// The counter (None for a register).
    counter: Option<u32>,
    /// What it counts: `events`, or a register's unit (`bytes`...).
    unit: &'static str,
    /// The counter's event is not known to count (stopped, or never programmed).
    idle: bool,
    level: bool,
    width_bits: u32,
    file: Box<dyn ValueFile + 'd>,
    /// A counter's `event<N>`, read again at every sample: another program may
    /// program or stop the counter while it is watched. With the event number it
    /// held at the last read (None: nothing programmed).
    event: Option<(Box<dyn ValueFile + 'd>, Option<u32>)>,
    /// The block, for naming a counter's new event.
    of: &'d crate::block::Block,
    last: Option<u64>,
    /// When it was last read, ns (the middle of the read).
    read_ns: u64,
}

/// A value's rate over the last interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// The block.
    pub block: String,
    /// Its kind.
    pub kind: BlockKind,
    /// The event's or register's name.
    pub name: String,
    /// The counter it is read from (None for a register or a perf event).
    pub counter: Option<u32>,
    /// What it counts: `events`, `cycles`, or a register's unit (`bytes`...).
    pub unit: &'static str,
    /// Per second over the last interval (a level: its value); None before the
    /// second sample, after a reset or when the file could not be read.
    pub per_s: Option<f64>,
    /// The counter is not programmed: it counts nothing.
    pub idle: bool,
    /// A level (a reading, not a count).
    pub level: bool,
    /// Another program changed the counter's event during the interval: it has no
    /// rate for it (`per_s` is None), and `name` is the new event.
    pub reprogrammed: bool,
}

/// An `event<N>`'s number and the name it says.
type Event = (u32, Option<String>);

/// A counter's name and whether it is idle, by what its `event<N>` holds (the name
/// it says, else the catalog's).
fn describe(
    device: &Device,
    b: &crate::block::Block,
    c: u32,
    event: Option<Event>,
) -> (String, bool) {
    let named = event.and_then(|(n, name)| {
        name.or_else(|| {
            device
                .catalog(b)
                .ok()
                .and_then(|cat| cat.by_number(n).map(|e| e.name.to_string()))
        })
    });
    let idle = named.as_deref().is_none_or(|n| n == "DISABLE");
    (named.unwrap_or_else(|| format!("counter {c}")), idle)
}

/// Reads a counter's event again (after its value: a change before the value's read
/// is seen in the same sample); true (and the new name) when another program changed
/// it since the last read. Only the number is compared, without allocating (the
/// driver names a number the same way each time); the name is read on a change.
fn reread_event(device: &Device, w: &mut Watched<'_>) -> bool {
    let (Some((file, last)), Some(c)) = (&mut w.event, w.counter) else {
        return false;
    };
    let text = file.read_now().ok();
    let number = text.and_then(event_number);
    if number == *last {
        return false;
    }
    *last = number;
    (w.name, w.idle) = describe(device, w.of, c, text.and_then(parse_event));
    true
}

/// Every counter and register of a device, opened for sampling.
pub struct Watch<'d> {
    device: &'d Device,
    values: Vec<Watched<'d>>,
    last_ns: Option<u64>,
    rates: Vec<Rate>,
}

impl<'d> Watch<'d> {
    /// Opens every value file of every block but `skip` (none is written).
    pub fn open(device: &'d Device, skip: &[&str]) -> Result<Watch<'d>> {
        let fs = device.fs();
        let mut values = Vec::new();
        for b in device
            .blocks()
            .iter()
            .filter(|b| !skip.contains(&b.name.as_str()))
        {
            let def = b.kind.def();
            let open = |rel: &str| {
                fs.open_value(rel)
                    .map_err(|e| crate::error::io_error("opening", rel, None, e))
            };
            if b.mechanism == Mechanism::Registers {
                for r in &b.registers {
                    values.push(Watched {
                        block: b.name.clone(),
                        kind: b.kind,
                        name: r.trim_end().to_string(),
                        counter: None,
                        unit: crate::kinds::register_unit(r.trim_end()),
                        idle: false,
                        level: def.role(r) != Role::Count,
                        width_bits: b.width_bits,
                        file: open(&layout::register(&b.name, r))?,
                        event: None,
                        of: b,
                        last: None,
                        read_ns: 0,
                    });
                }
                continue;
            }
            for &c in &b.counters {
                let mut event = open(&layout::event(&b.name, c))?;
                let now = event.read_now().ok().and_then(parse_event);
                let number = now.as_ref().map(|(n, _)| *n);
                let (name, idle) = describe(device, b, c, now);
                values.push(Watched {
                    block: b.name.clone(),
                    kind: b.kind,
                    name,
                    counter: Some(c),
                    unit: "events",
                    idle,
                    level: false,
                    width_bits: b.width_bits,
                    file: open(&layout::counter(&b.name, c))?,
                    event: Some((event, number)),
                    of: b,
                    last: None,
                    read_ns: 0,
                });
            }
        }
        Ok(Watch {
            device,
            values,
            last_ns: None,
            rates: Vec::new(),
        })
    }

    /// Reads every value once at `now_ns` and updates the rates: each over the time
    /// between its own reads (the middle of each, `now_ns` on from the sample's start),
    /// so that a slow read of one value does not skew another's rate.
    pub fn sample(&mut self, now_ns: u64) -> &[Rate] {
        let first = self.last_ns.is_none();
        let started = std::time::Instant::now();
        let since = || started.elapsed().as_nanos() as u64;
        self.rates.clear();
        for w in &mut self.values {
            let before = since();
            let value = w.file.read_now().ok().and_then(|t| parse_value(t.trim()));
            let at = now_ns + before + (since() - before) / 2;
            let reprogrammed = reread_event(self.device, w);
            let span_s =
                Some(at.saturating_sub(w.read_ns) as f64 / 1e9).filter(|s| *s > 0.0 && !first);
            let per_s = match (value, w.last, span_s) {
                _ if reprogrammed => None,
                (Some(v), _, _) if w.level => Some(v as f64),
                (Some(v), Some(l), Some(s)) if v >= l => Some((v - l) as f64 / s),
                // 32-bit counters wrap; wider ones going backwards were reset.
                (Some(v), Some(l), Some(s)) if w.width_bits < 64 => {
                    Some((v + (1u64 << w.width_bits) - l) as f64 / s)
                }
                _ => None,
            };
            (w.last, w.read_ns) = (value, at);
            self.rates.push(Rate {
                block: w.block.clone(),
                kind: w.kind,
                name: w.name.clone(),
                counter: w.counter,
                unit: w.unit,
                per_s,
                idle: w.idle,
                level: w.level,
                reprogrammed,
            });
        }
        self.last_ns = Some(now_ns);
        &self.rates
    }

    /// The last sample's rates.
    pub fn rates(&self) -> &[Rate] {
        &self.rates
    }

    /// Metric inputs from the last interval: each counting event's rate as a count
    /// over one second (so `duration_time` is 1), each level as it is.
    pub fn inputs(&self) -> Inputs {
        let mut inputs = Inputs {
            duration_s: 1.0,
            ..Inputs::default()
        };
        for r in self.rates.iter().filter(|r| !r.idle) {
            if let Some(v) = r.per_s {
                inputs.add(&r.block, r.kind, &r.name, v, 1.0);
            }
        }
        inputs
    }
}
