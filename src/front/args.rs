//! The global options both programs take (bfperf and bfperf-exporter: where the
//! device is, the lock, the metrics, the simulator), and the parsers they share.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args, Clone, Default)]
pub(crate) struct Global {
    /// The sysfs root in which to find the device (under class/hwmon)
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "BFPERF_SYSFS_ROOT",
        default_value = "/sys"
    )]
    pub sysfs_root: PathBuf,
    /// Use this hwmon directory directly, without discovery
    #[arg(long, global = true, value_name = "DIR")]
    pub device: Option<PathBuf>,
    /// The page size of the kernel serving the device's files (4k, 16k or 64k): the
    /// most one read returns, so where a driver's event_list is cut. Default: the
    /// running kernel's; give it for a tree copied from another machine, or to make
    /// --sim and `sim mount` behave as an arm64 kernel with 16 or 64 KiB pages
    #[arg(
        long,
        global = true,
        value_name = "SIZE",
        env = "BFPERF_PAGE_SIZE",
        value_parser = crate::sysfs::procfs::parse_page_size
    )]
    pub page_size: Option<usize>,
    /// Reads or writes of the simulated device that fail, as a flaky device's would:
    /// [write:]FILE@N=ERRNO, comma-separated (`tile2/counter*@3=EIO`: the third read of
    /// any tile2 counter fails with EIO). For --sim and `sim mount`
    #[arg(long, global = true, value_name = "FAULTS", env = "BFPERF_SIM_FAULTS")]
    pub sim_faults: Option<String>,
    /// The writer lock file (default: one per device in /run/bfperf, or the caller's
    /// runtime directory, or $BFPERF_STATE_DIR)
    #[arg(long, global = true, value_name = "FILE", env = "BFPERF_LOCK_FILE")]
    pub lock_file: Option<PathBuf>,
    /// When another program is writing the counters, wait for it instead of failing
    #[arg(long, global = true)]
    pub wait: bool,
    /// A metric file of your own (perf's metric JSON); repeatable. Files in
    /// ~/.config/bfperf/metrics/ and /etc/bfperf/metrics/ are read too
    #[arg(long = "metrics", global = true, value_name = "FILE")]
    pub metric_files: Vec<PathBuf>,
    /// The PCIe link, for utilisation metrics: gen1..gen5 × x1..x16, e.g. gen4x16
    #[arg(long, global = true, value_name = "LINK")]
    pub pcie_link: Option<String>,
    /// Run against an in-process simulated device instead of /sys: bf1, bf2 or bf3,
    /// optionally @KERNEL (bf3@6.14). It counts in real time for this one process; no
    /// root, no FUSE (`bfperf sim mount` serves one to several commands)
    #[arg(
        long,
        global = true,
        value_name = "GEN[@KERNEL]",
        env = "BFPERF_SIM",
        conflicts_with = "device"
    )]
    pub sim: Option<String>,
    /// The simulated traffic over time (TOML phases, see docs/simulator.md), for
    /// --sim and `sim mount`; default: one steady phase
    #[arg(long, global = true, value_name = "FILE")]
    pub workload: Option<PathBuf>,
}

/// `5s`, `500ms`, `2m`, `1.5s`, `3` (seconds).
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (e.g. 5s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        u => return Err(format!("unknown unit '{u}' in '{text}': use ms, s, m or h")),
    };
    if !(secs > 0.0 && secs < 1e9) {
        return Err(format!("'{text}' is not a positive duration"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[derive(Debug, Args, Clone)]
pub(crate) struct SimOpts {
    /// BlueField generation (1, 2, 3, or as --sim spells it: bf1, bf2, bf3)
    #[arg(long = "gen", default_value = "2", value_parser = ["1", "2", "3", "bf1", "bf2", "bf3"])]
    pub generation: String,
    // Its help lists the simulator's kernel table.
    #[arg(
        long,
        alias = "flavor",
        value_name = "VERSION",
        default_value = "6.16",
        help = kernel_help()
    )]
    pub kernel: String,
    /// Counters per block of a kind, as firmware may set them (e.g. llt=16); repeatable
    #[arg(long = "counters", value_name = "KIND=N")]
    pub counters: Vec<String>,
}

impl Default for SimOpts {
    fn default() -> SimOpts {
        SimOpts {
            generation: "2".into(),
            kernel: "6.16".into(),
            counters: Vec::new(),
        }
    }
}

/// `--kernel`'s help: every row of the simulator's kernel table, and the aliases.
fn kernel_help() -> String {
    let defs: Vec<_> = crate::sim::Kernel::all().map(|k| k.def()).collect();
    let rows: Vec<String> = defs
        .iter()
        .map(|k| match (k.stable, k.name.rsplit_once('.')) {
            (Some(_), Some((series, _))) => format!("{} (and later {series}.x)", k.name),
            _ if !k.name.starts_with(|c: char| c.is_ascii_digit()) => {
                format!("{} ({})", k.name, k.about)
            }
            _ => k.name.to_string(),
        })
        .collect();
    let aliases: Vec<String> = defs
        .iter()
        .flat_map(|k| k.aliases.iter().map(move |a| (*a, k.name)))
        .filter(|(a, name)| a != name)
        .map(|(a, name)| format!("{a} = {name}"))
        .collect();
    format!(
        "The kernel to behave like: {}; another version behaves as the row before it; {}",
        rows.join(", "),
        aliases.join(", ")
    )
}
