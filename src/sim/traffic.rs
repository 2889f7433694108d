//! The simulator's traffic model: a few flows (memory reads and writes through the
//! last-level cache, its hit ratio, PCIe DMA in and out) drive every event that
//! measures them, so related counters agree as they do on hardware. A workload is a
//! list of phases, each a duration and its flows; the default is one steady phase.
//!
//! Rates depend on the block and the event, never on the counter that counts it.
//! Events the model does not name count at a steady background rate derived from
//! the block and the event number.

use std::path::Path;

use serde::Deserialize;

use crate::block::BlockKind;

/// Nanoseconds in a second.
const NS: u128 = 1_000_000_000;
/// Bytes in a cache line (one request, one flit, one memory access).
pub const LINE_BYTES: f64 = 64.0;

/// The device-wide flows of one phase.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Flows {
    /// Bytes per second the cores read through the last-level cache.
    pub read_bytes_per_s: f64,
    /// Bytes per second the cores write through the last-level cache.
    pub write_bytes_per_s: f64,
    /// The share of reads and writes the cache serves (0 to 1); misses go to DDR.
    pub hit_ratio: f64,
    /// Bytes per second of PCIe traffic into the DPU (all pcie blocks together).
    pub pcie_in_bytes_per_s: f64,
    /// Bytes per second of PCIe traffic out of the DPU.
    pub pcie_out_bytes_per_s: f64,
    /// The mean size of a PCIe transaction layer packet, bytes.
    pub pcie_bytes_per_packet: f64,
}

impl Default for Flows {
    /// The steady default: 8 GB/s read, 4 GB/s written, 75 % served by the cache,
    /// 6 GB/s of PCIe in, 3 GB/s out, 256-byte packets.
    fn default() -> Flows {
        Flows {
            read_bytes_per_s: 8e9,
            write_bytes_per_s: 4e9,
            hit_ratio: 0.75,
            pcie_in_bytes_per_s: 6e9,
            pcie_out_bytes_per_s: 3e9,
            pcie_bytes_per_packet: 256.0,
        }
    }
}

/// One phase of a workload.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// How long the phase lasts, seconds.
    pub seconds: f64,
    /// The traffic during the phase.
    #[serde(flatten)]
    pub flows: Flows,
}

/// Phases in order; after the last, the workload starts again from the first unless
/// `repeat` is false (then the last phase holds).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Start again from the first phase after the last (default true).
    #[serde(default = "yes")]
    pub repeat: bool,
    /// The phases, in order (`[[phase]]`).
    #[serde(rename = "phase")]
    pub phases: Vec<Phase>,
}

fn yes() -> bool {
    true
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            repeat: false,
            phases: vec![Phase {
                seconds: 1.0,
                flows: Flows::default(),
            }],
        }
    }
}

/// What a flow-driven event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Read or write requests to the cache (lines).
    Reads,
    Writes,
    Requests,
    Hits,
    Misses,
    /// Requests the cache missed, which go to DDR (lines).
    ReadMisses,
    WriteMisses,
    PcieInBytes,
    PcieOutBytes,
    PcieInPackets,
    PcieOutPackets,
}

/// Which events the flows drive: (kind, event, source, the share of the kind's flow
/// this event sees in each block, before dividing among the kind's blocks).
const DRIVEN: &[(BlockKind, &str, Source, f64)] = &[
    // BlueField-1/-2 home nodes: requests processed, and reads and writes sent to
    // the memory subsystem (the cache's misses).
    (BlockKind::Tile, "HNF_REQUESTS", Source::Requests, 1.0),
    (BlockKind::Tile, "MEMORY_READS", Source::ReadMisses, 1.0),
    (BlockKind::Tile, "MEMORY_WRITES", Source::WriteMisses, 1.0),
    // The L3 cache halves, two banks each.
    (BlockKind::L3cache, "HITS_BANK0", Source::Hits, 0.5),
    (BlockKind::L3cache, "HITS_BANK1", Source::Hits, 0.5),
    (BlockKind::L3cache, "MISSES_BANK0", Source::Misses, 0.5),
    (BlockKind::L3cache, "MISSES_BANK1", Source::Misses, 0.5),
    (BlockKind::L3cache, "EVICTIONS_BANK0", Source::Misses, 0.5),
    (BlockKind::L3cache, "EVICTIONS_BANK1", Source::Misses, 0.5),
    // BlueField-3 LLC tiles (two banks), their miss machines, and DDR.
    (BlockKind::Llt, "GDC_BANK0_RD_REQ", Source::Reads, 0.5),
    (BlockKind::Llt, "GDC_BANK1_RD_REQ", Source::Reads, 0.5),
    (BlockKind::Llt, "GDC_BANK0_WR_REQ", Source::Writes, 0.5),
    (BlockKind::Llt, "GDC_BANK1_WR_REQ", Source::Writes, 0.5),
    (
        BlockKind::LltMiss,
        "GDC_MISS_MACHINE_RD_REQ",
        Source::ReadMisses,
        1.0,
    ),
    (
        BlockKind::LltMiss,
        "GDC_MISS_MACHINE_WR_REQ",
        Source::WriteMisses,
        1.0,
    ),
    (
        BlockKind::Mss,
        "SKYLIB_DDN_TX_FLITS",
        Source::ReadMisses,
        1.0,
    ),
    (
        BlockKind::Mss,
        "SKYLIB_DDN_RX_FLITS",
        Source::WriteMisses,
        1.0,
    ),
    // PCIe TLR statistics: posted, non-posted and completion shares.
    (BlockKind::Pcie, "IN_P_BYTE_CNT", Source::PcieInBytes, 0.70),
    (BlockKind::Pcie, "IN_NP_BYTE_CNT", Source::PcieInBytes, 0.05),
    (BlockKind::Pcie, "IN_C_BYTE_CNT", Source::PcieInBytes, 0.25),
    (
        BlockKind::Pcie,
        "OUT_P_BYTE_CNT",
        Source::PcieOutBytes,
        0.70,
    ),
    (
        BlockKind::Pcie,
        "OUT_NP_BYTE_CNT",
        Source::PcieOutBytes,
        0.05,
    ),
    (
        BlockKind::Pcie,
        "OUT_C_BYTE_CNT",
        Source::PcieOutBytes,
        0.25,
    ),
    (BlockKind::Pcie, "IN_P_PKT_CNT", Source::PcieInPackets, 0.70),
    (
        BlockKind::Pcie,
        "IN_NP_PKT_CNT",
        Source::PcieInPackets,
        0.05,
    ),
    (BlockKind::Pcie, "IN_C_PKT_CNT", Source::PcieInPackets, 0.25),
    (
        BlockKind::Pcie,
        "OUT_P_PKT_CNT",
        Source::PcieOutPackets,
        0.70,
    ),
    (
        BlockKind::Pcie,
        "OUT_NP_PKT_CNT",
        Source::PcieOutPackets,
        0.05,
    ),
    (
        BlockKind::Pcie,
        "OUT_C_PKT_CNT",
        Source::PcieOutPackets,
        0.25,
    ),
];

impl Source {
    /// The device-wide rate per second.
    fn rate(self, f: &Flows) -> f64 {
        let reads = f.read_bytes_per_s / LINE_BYTES;
        let writes = f.write_bytes_per_s / LINE_BYTES;
        let miss = 1.0 - f.hit_ratio.clamp(0.0, 1.0);
        let per_packet = f.pcie_bytes_per_packet.max(1.0);
        match self {
            Source::Reads => reads,
            Source::Writes => writes,
            Source::Requests => reads + writes,
            Source::Hits => (reads + writes) * (1.0 - miss),
            Source::Misses => (reads + writes) * miss,
            Source::ReadMisses => reads * miss,
            Source::WriteMisses => writes * miss,
            Source::PcieInBytes => f.pcie_in_bytes_per_s,
            Source::PcieOutBytes => f.pcie_out_bytes_per_s,
            Source::PcieInPackets => f.pcie_in_bytes_per_s / per_packet,
            Source::PcieOutPackets => f.pcie_out_bytes_per_s / per_packet,
        }
    }
}

/// How an event of one block counts: driven by the flows (a share of a source), or
/// at a steady background rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drive {
    /// A share of one of the flows' sources.
    Flow {
        /// Which source (`Source` as an index).
        source_index: usize,
        /// The share of it the event counts.
        share: f64,
    },
    /// A steady background rate, events per second.
    Steady(u64),
    /// It does not count.
    Still,
}

/// The drive of `event` of a block that is one of `blocks` of its kind.
pub fn drive(kind: BlockKind, event: &str, number: u32, seed: u64, blocks: usize) -> Drive {
    match DRIVEN
        .iter()
        .position(|(k, e, _, _)| *k == kind && *e == event)
    {
        Some(i) => Drive::Flow {
            source_index: i,
            share: DRIVEN[i].3 / blocks.max(1) as f64,
        },
        None => Drive::Steady(background_rate(seed, number)),
    }
}

impl Drive {
    /// Events per second under `flows`.
    pub fn rate(&self, flows: &Flows) -> u64 {
        match *self {
            Drive::Flow {
                source_index,
                share,
            } => (DRIVEN[source_index].2.rate(flows) * share)
                .round()
                .max(0.0) as u64,
            Drive::Steady(r) => r,
            Drive::Still => 0,
        }
    }
}

/// A deterministic, plausible rate for an event the flows do not drive (events per
/// second): it depends on the block and the event only.
pub fn background_rate(seed: u64, event: u32) -> u64 {
    let mut x = seed ^ (event as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    100_000 + x % 9_900_000
}

impl Workload {
    /// Reads a workload file (TOML: `[[phase]]` tables with `seconds` and flows).
    pub fn load(path: &Path) -> crate::Result<Workload> {
        let text = crate::sysfs::read_config(path)?;
        let w: Workload = toml::from_str(&text).map_err(|e| crate::Error::BadConfig {
            path: path.to_path_buf(),
            problem: crate::error::toml_problem(&text, &e),
        })?;
        w.check().map_err(|problem| crate::Error::BadConfig {
            path: path.to_path_buf(),
            problem,
        })?;
        Ok(w)
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.phases.is_empty() {
            return Err("no [[phase]]: give at least one, with seconds and flows".into());
        }
        for (i, p) in self.phases.iter().enumerate() {
            let f = &p.flows;
            let fields = [
                ("seconds", p.seconds),
                ("read_bytes_per_s", f.read_bytes_per_s),
                ("write_bytes_per_s", f.write_bytes_per_s),
                ("pcie_in_bytes_per_s", f.pcie_in_bytes_per_s),
                ("pcie_out_bytes_per_s", f.pcie_out_bytes_per_s),
                ("pcie_bytes_per_packet", f.pcie_bytes_per_packet),
            ];
            for (name, v) in fields {
                if !(0.0..=1e15).contains(&v) {
                    return Err(format!(
                        "phase {}: {name} = {v} is not a number from 0 to 1e15",
                        i + 1
                    ));
                }
            }
            if p.seconds < 0.001 {
                return Err(format!("phase {}: seconds must be at least 0.001", i + 1));
            }
            if !(0.0..=1.0).contains(&f.hit_ratio) {
                return Err(format!(
                    "phase {}: hit_ratio = {} is not from 0 to 1",
                    i + 1,
                    f.hit_ratio
                ));
            }
        }
        Ok(())
    }

    fn phase_ns(&self, i: usize) -> u64 {
        (self.phases[i].seconds * 1e9) as u64
    }

    fn cycle_ns(&self) -> u64 {
        (0..self.phases.len()).map(|i| self.phase_ns(i)).sum()
    }

    /// The flows at `t_ns` from the start.
    pub fn flows_at(&self, t_ns: u64) -> &Flows {
        let (i, _) = self.locate(t_ns);
        &self.phases[i].flows
    }

    /// The phase at `t` and the time left in it (None: it lasts for ever).
    fn locate(&self, t: u64) -> (usize, Option<u64>) {
        let last = self.phases.len() - 1;
        let cycle = self.cycle_ns();
        let mut t = if self.repeat && cycle > 0 {
            t % cycle
        } else {
            t
        };
        for i in 0..self.phases.len() {
            let d = self.phase_ns(i);
            if i == last && !self.repeat {
                return (i, None);
            }
            if t < d {
                return (i, Some(d - t));
            }
            t -= d;
        }
        (last, Some(1))
    }

    /// The integral of `drive`'s rate over `[t0, t1)`, in events × nanoseconds.
    fn integral_ns(&self, drive: &Drive, t0: u64, t1: u64) -> u128 {
        if t1 <= t0 {
            return 0;
        }
        if self.phases.len() == 1 {
            return drive.rate(&self.phases[0].flows) as u128 * (t1 - t0) as u128;
        }
        let mut sum = 0u128;
        let mut t = t0;
        // Whole cycles at once, so a long span costs no more than one cycle.
        let cycle = self.cycle_ns();
        if self.repeat && cycle > 0 && t1 - t0 > cycle {
            let whole = (t1 - t0) / cycle;
            let one: u128 = (0..self.phases.len())
                .map(|i| drive.rate(&self.phases[i].flows) as u128 * self.phase_ns(i) as u128)
                .sum();
            sum += one * whole as u128;
            t += whole * cycle;
        }
        while t < t1 {
            let (i, left) = self.locate(t);
            let step = left.map_or(t1 - t, |l| l.min(t1 - t)).max(1);
            sum += drive.rate(&self.phases[i].flows) as u128 * step as u128;
            t += step;
        }
        sum
    }

    /// Events counted by `drive` over `[t0, t1)` nanoseconds.
    pub fn count(&self, drive: &Drive, t0: u64, t1: u64) -> u64 {
        (self.integral_ns(drive, t0, t1) / NS) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_phases() -> Workload {
        toml::from_str(
            "[[phase]]\nseconds = 1\nread_bytes_per_s = 6.4e9\n\
             [[phase]]\nseconds = 2\nread_bytes_per_s = 0\n",
        )
        .unwrap()
    }

    #[test]
    fn phases_integrate_piecewise_and_repeat() {
        let w = two_phases();
        let d = Drive::Flow {
            source_index: DRIVEN
                .iter()
                .position(|e| e.1 == "GDC_BANK0_RD_REQ")
                .unwrap(),
            share: 1.0,
        };
        // 6.4 GB/s / 64 B = 100 M reads/s in phase 1, none in phase 2.
        assert_eq!(w.count(&d, 0, 1_000_000_000), 100_000_000);
        assert_eq!(w.count(&d, 500_000_000, 2_500_000_000), 50_000_000);
        // Repeats: [3 s, 3.5 s) is phase 1 again; 10 whole cycles and 1.5 s more.
        assert_eq!(w.count(&d, 3_000_000_000, 3_500_000_000), 50_000_000);
        assert_eq!(w.count(&d, 0, 31_500_000_000), 1_100_000_000);
    }

    #[test]
    fn bad_workloads_are_refused() {
        let bad: Workload = toml::from_str("[[phase]]\nseconds = 1\nhit_ratio = 1.5\n").unwrap();
        assert!(bad.check().unwrap_err().contains("hit_ratio"));
        assert!(toml::from_str::<Workload>("[[phase]]\nseconds = 1\nspeed = 3\n").is_err());
    }
}
