//! `bfperf sim`: a simulated device served over FUSE, or written out as files.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;

use crate::error::{Error, Result};
use crate::front::args::{Global, SimOpts};
use crate::front::setup::parse_sim_opts;
use crate::sim;

#[derive(Debug, Subcommand)]
#[command(
    after_help = "Examples:\n  bfperf sim mount --gen 3 /tmp/dpu &\n  bfperf --sysfs-root /tmp/dpu stat -M ddr --duration 2s\n  bfperf sim export --gen 2 --fixture fixtures/bf2"
)]
pub(crate) enum SimCommand {
    /// Serve a simulated device as a FUSE filesystem laid out like /sys, until interrupted
    Mount {
        /// An empty directory; the device appears at DIR/class/hwmon/hwmonN (--hwmon)
        dir: PathBuf,
        #[command(flatten)]
        sim: SimOpts,
        /// N of the device's hwmonN (a driver loaded again takes a new one); hwmon0
        /// and hwmon1 are the simulated machine's other devices
        #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=9999))]
        hwmon: u32,
    },
    /// Write a simulated device's tree as plain files (how fixtures/ is made)
    Export {
        /// The directory to create
        dir: PathBuf,
        #[command(flatten)]
        sim: SimOpts,
        /// Export the fixture state (some counters programmed, 2 s after boot)
        #[arg(long)]
        fixture: bool,
    },
}

/// Serves or exports the simulated device.
pub(super) fn exec(global: &Global, cmd: SimCommand) -> Result<()> {
    match cmd {
        SimCommand::Mount { dir, sim: o, hwmon } => {
            let c = parse_sim_opts(&o, global)?;
            let device = Arc::new(sim::Sim::with_options(
                c.gen,
                c.kernel,
                Arc::new(sim::SystemClock::new()),
                &c.options,
            ));
            #[cfg(feature = "sim-mount")]
            return sim::mount::serve(device, &dir, sim::SysfsRootLayout { hwmon_index: hwmon });
            #[cfg(not(feature = "sim-mount"))]
            return {
                let _ = (device, dir, hwmon);
                Err(crate::front::setup::not_built("sim-mount"))
            };
        }
        SimCommand::Export {
            dir,
            sim: o,
            fixture,
        } => {
            let c = parse_sim_opts(&o, global)?;
            if dir.exists()
                && std::fs::read_dir(&dir)
                    .map(|mut d| d.next().is_some())
                    .unwrap_or(true)
            {
                return Err(Error::OutputTarget {
                    path: dir,
                    problem: "it exists and is not empty; export writes a new tree".into(),
                });
            }
            let device = if fixture {
                sim::root::fixture_sim(c.gen)
            } else {
                sim::Sim::with_options(
                    c.gen,
                    c.kernel,
                    Arc::new(sim::ManualClock::new(0)),
                    &c.options,
                )
            };
            sim::export_tree(&device, sim::SysfsRootLayout::default(), &dir).map_err(|e| {
                Error::File {
                    what: "cannot export the simulated tree to",
                    path: dir.clone(),
                    source: e,
                }
            })
        }
    }
}
