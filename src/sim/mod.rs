//! A simulated BlueField PMC device: a model of the mlxbf-pmc driver's show/store
//! rules for BlueField-1, -2 and -3 layouts on every kernel that shipped the driver
//! ([`Kernel`]). It implements [`crate::Sysfs`], so every command runs on it
//! in-process, and it is served as a FUSE filesystem by `bfperf sim mount`.
//!
//! `state` is the hardware (counters counting with time), `driver` the kernel's
//! show/store rules, `tree` the files, `kernel` what each kernel does, `layout` the
//! blocks of each generation.

mod clock;
mod driver;
mod fault;
pub mod kernel;
mod layout;
#[cfg(feature = "sim-mount")]
pub mod mount;
mod parse;
pub mod root;
mod state;
pub mod traffic;
mod tree;

pub use clock::{
    take_virtual_clock, virtual_clock, virtual_time_asked, Clock, ManualClock, SystemClock,
};
pub use fault::{parse_faults, Fault};
pub use kernel::{Kernel, KernelDef};
pub use parse::{kstrtobool, kstrtouint};
pub use root::{export_tree, SysfsRootLayout};
pub use state::{block_seed, pll_hz, CLOCK_HZ, REFERENCE_WINDOW};
pub use traffic::{Flows, Phase, Workload};

use std::io;
use std::sync::{Arc, Mutex};

use crate::block::{BlockKind, Generation};
use crate::error::errno;
use state::{build_block, Place, SimBlock};

pub(crate) struct State {
    blocks: Vec<SimBlock>,
}

/// Choices beyond generation and kernel.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Counters per block of a kind, overriding the layout (firmware decides on a DPU).
    pub counters: Vec<(BlockKind, usize)>,
    /// The traffic over time (default: one steady phase).
    pub workload: Workload,
    /// The page size of the simulated kernel (4, 16 or 64 KiB on arm64): where its
    /// `event_list` is cut. None: 4 KiB.
    pub page_size: Option<usize>,
    /// Reads that fail (see [`parse_faults`]).
    pub faults: Vec<Fault>,
}

/// The simulated device. Cheap to share: clone the `Arc`.
pub struct Sim {
    generation: Generation,
    kernel: &'static KernelDef,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    page_size: usize,
    faults: fault::Faults,
}

impl Sim {
    /// A device of a generation on a kernel, counting on `clock`.
    pub fn new(generation: Generation, kernel: Kernel, clock: Arc<dyn Clock>) -> Sim {
        Sim::with_options(generation, kernel, clock, &SimOptions::default())
    }

    /// A simulated device with options (counters per kind, workload).
    pub fn with_options(
        generation: Generation,
        kernel: Kernel,
        clock: Arc<dyn Clock>,
        options: &SimOptions,
    ) -> Sim {
        let kernel = kernel.def();
        // A workload of phases starts with its first as the simulator starts; one
        // steady workload counts from the machine's boot, so that every process
        // reading the simulator sees the same registers.
        let clock: Arc<dyn Clock> = match options.workload.phases.len() {
            0 | 1 => clock,
            _ => Arc::new(clock::Since::now(clock)),
        };
        let now = clock.now_ns();
        let specs = layout::blocks(generation, kernel, &options.counters);
        let kinds: Vec<BlockKind> = specs
            .iter()
            .map(|s| BlockKind::from_block_name(s.name))
            .collect();
        let workload = Arc::new(options.workload.clone());
        let blocks = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                let place = Place {
                    index: i as u64,
                    of_kind: kinds.iter().filter(|k| **k == kinds[i]).count(),
                };
                build_block(generation, kernel, place, spec, &workload, now)
            })
            .collect();
        Sim {
            generation,
            kernel,
            clock,
            state: Mutex::new(State { blocks }),
            page_size: options.page_size.unwrap_or(crate::sysfs::MIN_PAGE_SIZE),
            faults: fault::Faults::new(&options.faults),
        }
    }

    /// A device on a manual clock starting at 0 (tests).
    pub fn with_manual_clock(generation: Generation, kernel: Kernel) -> (Sim, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(0));
        (Sim::new(generation, kernel, clock.clone()), clock)
    }

    /// The generation it simulates.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// The kernel whose driver it behaves like.
    pub fn kernel(&self) -> Kernel {
        self.kernel.kernel
    }

    /// The simulator's clock now, ns.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The ground truth: events per second the simulated hardware counts for event
    /// number `event` of `block` now, on whichever counter counts it.
    pub fn event_rate(&self, block: &str, event: u32) -> Option<u64> {
        let state = self.lock();
        let b = state.blocks.iter().find(|b| b.name == block)?;
        Some(
            b.event_drive(event)
                .rate(b.workload.flows_at(self.clock.now_ns())),
        )
    }

    /// The ground truth: events `event` of `block` counts over `[t0, t1)` of the
    /// simulator's clock (ns), following the workload's phases.
    pub fn expected_count(&self, block: &str, event: u32, t0: u64, t1: u64) -> Option<u64> {
        let state = self.lock();
        let b = state.blocks.iter().find(|b| b.name == block)?;
        Some(b.workload.count(&b.event_drive(event), t0, t1))
    }

    /// The ground truth of a statistics register: what it adds per second now.
    pub fn register_rate(&self, block: &str, register: &str) -> Option<u64> {
        let state = self.lock();
        let b = state.blocks.iter().find(|b| b.name == block)?;
        let r = b.registers.iter().find(|r| r.def.name == register)?;
        Some(r.drive.rate(b.workload.flows_at(self.clock.now_ns())))
    }

    /// The device-wide flows of the workload now.
    pub fn flows(&self) -> Flows {
        let state = self.lock();
        state
            .blocks
            .first()
            .map(|b| *b.workload.flows_at(self.clock.now_ns()))
            .unwrap_or_default()
    }

    /// Cycles per second a `count_clock` counter of `block` counts.
    pub fn clock_hz(&self, block: &str) -> Option<u64> {
        let state = self.lock();
        state
            .blocks
            .iter()
            .find(|b| b.name == block)
            .map(|b| b.clock_hz)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hid_link(&self) -> String {
        root::device_link(self.generation)
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
