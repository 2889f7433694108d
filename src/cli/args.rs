//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::output::Format;

#[derive(Debug, Parser)]
#[command(
    name = "bfperf",
    version,
    about = "Measure and export the hardware performance counters of NVIDIA BlueField DPUs",
    long_about = "Measure and export the hardware performance counters of NVIDIA BlueField DPUs.\n\n\
        bfperf finds the mlxbf-pmc driver's hwmon device, names the events of its blocks, \
        programs, reads and snapshots counters, measures them perf-style (`stat`: counts, \
        rates and metrics during a command or a period, multiplexed when they do not fit), \
        and exports them to Prometheus (`exporter`). Every writing command checks its input \
        before the first write, and `stat` and the exporter put the device back as they \
        found it.",
    after_help = "Examples:\n  bfperf blocks\n  bfperf stat -M ddr,llc --duration 10s\n  bfperf stat -e 'tile/MEMORY_READS/' -I 1000 -- ./workload\n  bfperf exporter\n  bfperf program tile2 3 HNF_REQUESTS && bfperf read tile2\n  bfperf --sim bf3 stat -M ddr --duration 2s"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone, Default)]
pub struct Global {
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
        conflicts_with = "device"
    )]
    pub sim: Option<String>,
    /// The simulated traffic over time (TOML phases, see docs/simulator.md), for
    /// --sim and `sim mount`; default: one steady phase
    #[arg(long, global = true, value_name = "FILE")]
    pub workload: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the device: where it is, its generation, its blocks by kind
    Info(FormatOpts),
    /// List the blocks: kind, mechanism, counters, enable state, events known
    Blocks(FormatOpts),
    /// List events, registers, metrics and groups across the device, as perf list
    List {
        /// Only what matches one of these (a glob or a substring, any case) in its
        /// name, description, kind or group
        patterns: Vec<String>,
        /// Metrics with their formulas and the events they need
        #[arg(long)]
        details: bool,
        #[command(flatten)]
        format: FormatOpts,
    },
    /// List the events of a block, or of the kinds of several (a kind, a glob, a list, all)
    Events {
        /// The block (tile2), or blocks: a kind (tile), a glob ('llt*'), a list or all
        block: String,
        /// Show only events whose name or description contains this (any case)
        pattern: Option<String>,
        #[command(flatten)]
        format: FormatOpts,
    },
    /// Program counters: `program tile2 3 HNF_REQUESTS` or `program l3cachehalf0 0=HITS_BANK0 1=MISSES_BANK0 --start`
    Program {
        /// The block, or blocks: a kind (tile), a glob ('tile*') or a comma list
        block: String,
        /// COUNTER EVENT, or COUNTER=EVENT pairs; EVENT by name, 0x45 or 69
        #[arg(
            required = true,
            value_name = "ASSIGNMENT",
            allow_negative_numbers = true
        )]
        assignments: Vec<String>,
        /// Write an event number that is not in the block's table
        #[arg(long)]
        force: bool,
        /// Start an all-at-once block (l3cache, BF3 crspace) after programming: one enable write
        #[arg(long)]
        start: bool,
        /// Count clock cycles on these counters (BF3 crspace count_clock)
        #[arg(long)]
        count_clock: bool,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// Start the counters of an L3-cache or BF3 crspace block together (resets them to 0)
    Start {
        /// The block, or blocks: a kind (l3cache), a glob or a comma list
        block: String,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// Stop an all-at-once block, or un-program one or all counters of a block
    Stop {
        /// The block, or blocks: a kind, a glob or a comma list
        block: String,
        /// Only this counter (per-counter blocks)
        #[arg(allow_negative_numbers = true)]
        counter: Option<String>,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// Reset counters or statistics registers to 0
    Clear {
        /// The block, or blocks: a kind, a glob or a comma list
        block: String,
        /// A counter number or register name (default: all of the block's counters, or its count registers)
        #[arg(allow_negative_numbers = true)]
        target: Option<String>,
        /// Also write a control register named as TARGET (ecc error injection, DISABLE)
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// Read counters and registers: blocks, kinds (tile, pcie, l3cache...) or all
    Read {
        #[arg(value_name = "SELECTOR")]
        selectors: Vec<String>,
        #[command(flatten)]
        format: FormatOpts,
    },
    /// Read selected values once into a JSON snapshot (default: the pcie blocks)
    Snapshot {
        /// Blocks, kinds, or `all` (default: every pcie block)
        #[arg(value_name = "SELECTOR")]
        selectors: Vec<String>,
        /// Write to this file instead of standard output (`-` is standard output): a regular file is replaced atomically, a device, FIFO or socket written in place
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Accepted for compatibility: a symbolic link given as FILE is always followed
        #[arg(long, requires = "output", hide = true)]
        follow: bool,
        /// Output format (default json, the format `diff` reads)
        #[command(flatten)]
        format: FormatOpts,
    },
    /// Compare two snapshots: deltas, rates, wraps and resets, PCIe throughput
    Diff {
        /// The older snapshot
        old: PathBuf,
        /// The newer snapshot
        new: PathBuf,
        /// Refuse snapshots of different hosts, devices or generations (default: warn)
        #[arg(long)]
        strict: bool,
        /// Also draw each value's rate as a bar chart into FILE (.svg or .png)
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
        #[command(flatten)]
        format: FormatOpts,
    },
    /// Count events during a command or a period: `stat -e 'tile/MEMORY_READS/' -- CMD`
    #[command(
        after_help = "Examples:\n  bfperf stat -e 'l3cache/HITS_BANK0,HITS_BANK1,MISSES_BANK0,MISSES_BANK1/' -A --duration 5s\n  bfperf stat -e 'tile/MEMORY_READS,MEMORY_WRITES/' -I 1000 --format json -- sleep 3\n  bfperf stat -e 'pcie/*_BYTE_CNT/' -e 'llt*/cycles,GDC_BANK0_RD_REQ/' --duration 10s"
    )]
    Stat(StatArgs),
    /// Export the counters to Prometheus: serve /metrics, or write a node_exporter textfile
    Exporter(ExporterArgs),
    /// Watch the device live: bandwidths, ratios and every block's activity, refreshed in place
    #[command(
        long_about = "Watch the device live, full screen, refreshed in place: the headline \
            metrics of this generation (PCIe in/out, memory or DDR and LLC bandwidth, L3 hit \
            ratio, PLL frequencies) with their history, every block's activity sorted to show \
            imbalance, and every counter and register's rate.\n\nIt programs what its panels \
            need like `stat` (the writer lock, multiplexing with coverage shown, the journal) and \
            restores the device when it ends (q, Ctrl-C, SIGTERM, SIGHUP, or a crash). Without \
            the right to write (or with --read-only) it writes nothing and shows the registers and \
            whatever is already programmed.\n\nKeys: q quit, p pause, Tab/arrows switch view, \
            s sort, / filter blocks, +/- refresh interval, ? help."
    )]
    Top(TopArgs),
    /// Draw a `stat -I --json` run (or several) as charts: SVG or PNG
    Plot(PlotArgs),
    /// Put the device back as it was before a `stat` or exporter that was killed
    /// (SIGKILL, OOM, power loss), from the journal it left
    #[command(
        long_about = "Put the device back as it was before a `stat` or exporter that was killed \
            (SIGKILL, OOM, power loss).\n\nBefore their first write, `stat` and the exporter record \
            the programming they change (events, enable, count_clock) in a journal beside the \
            device's lock (/run/bfperf for root), and remove it when they have restored the device. \
            A journal left behind means its writer died; `restore` writes the recorded programming \
            back and removes the journal. It takes the writer lock: a writer still running is named, \
            not disturbed."
    )]
    Restore,
    /// List the metrics available on this device: name, group, unit, formula, events
    Metrics {
        /// Only metrics whose name, group or description contains this (any case)
        pattern: Option<String>,
        /// Every generation's metrics, not only this device's (no device needed)
        #[arg(long)]
        all: bool,
        /// Output format; prometheus-rules: recording rules computing the metrics
        /// (or those named by -M) from the exporter's raw counters
        #[arg(long, value_enum, value_name = "FORMAT", conflicts_with_all = ["json", "csv"])]
        format: Option<MetricsFormat>,
        /// Print JSON (same as --format json)
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print CSV (same as --format csv)
        #[arg(long)]
        csv: bool,
        /// With prometheus-rules: only these metrics or groups (as stat -M)
        #[arg(short = 'M', long = "metric", value_name = "METRICS")]
        metric: Vec<String>,
        /// With prometheus-rules: the range of the rules' rate() (at least four
        /// scrape intervals)
        #[arg(long, value_name = "RANGE", default_value = "1m", value_parser = parse_range)]
        window: String,
    },
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// A simulated BlueField device, for trying bfperf without a DPU
    #[command(subcommand)]
    Sim(SimCommand),
    /// Completion candidates for the words of a command line (used by the scripts)
    #[command(name = "__complete", hide = true)]
    Complete {
        /// Index of the word being completed
        #[arg(long)]
        index: usize,
        /// Print `candidate<TAB>description` lines (zsh, fish)
        #[arg(long)]
        descriptions: bool,
        /// The command line's words, the program name first
        #[arg(last = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

/// `bfperf stat`.
#[derive(Debug, Args)]
pub struct StatArgs {
    /// BLOCKS/EVENT[,EVENT...]/ : blocks by name, kind, glob or list; events by name,
    /// number, `cycles`, register name or glob; several per -e, comma-separated, and
    /// `{...}` groups, always counted together (repeatable). Without -e and -M: the
    /// generation's default set and its metrics
    #[arg(short = 'e', long = "event", value_name = "SPEC")]
    pub events: Vec<String>,
    /// Metrics or metric groups to compute (comma list; repeatable): their events are
    /// counted, shared ones once; see `bfperf metrics`
    #[arg(short = 'M', long = "metric", value_name = "NAME|GROUP")]
    pub metric: Vec<String>,
    /// Count for this long (5s, 500ms, 2m); default: until COMMAND ends, or Ctrl-C
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "command")]
    pub duration: Option<std::time::Duration>,
    /// Print counts every MS milliseconds
    #[arg(short = 'I', long = "interval-print", value_name = "MS", value_parser = clap::value_parser!(u64).range(10..))]
    pub interval: Option<u64>,
    /// Repeat the measurement N times and show the mean and its spread
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// One row per block instead of sums per kind
    #[arg(short = 'A', long = "no-aggr")]
    pub no_aggr: bool,
    /// Stop after N intervals of -I (as perf stat --interval-count)
    #[arg(long = "interval-count", value_name = "N", requires = "interval", conflicts_with_all = ["duration", "command"], value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_count: Option<u64>,
    /// Print the metrics only, not the counts (as perf stat --metric-only)
    #[arg(long = "metric-only", requires = "metric")]
    pub metric_only: bool,
    /// NDJSON, one record per line (as perf stat -j; same as --json)
    #[arg(short = 'j', long = "json-lines")]
    pub json_lines: bool,
    /// Accepted for perf's habit: the DPU's counters are system-wide anyway
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    #[command(flatten)]
    pub format: FormatOpts,
    /// CSV with this field separator (one character), as perf stat -x
    #[arg(short = 'x', long = "field-separator", value_name = "SEP")]
    pub separator: Option<String>,
    /// Write the counts to FILE instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Leave the counters programmed as the measurement left them
    #[arg(long)]
    pub no_restore: bool,
    /// Refuse more events than a block has counters instead of taking turns
    #[arg(long)]
    pub no_multiplex: bool,
    /// The command to measure, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `bfperf exporter`.
#[derive(Debug, Args, Clone)]
pub struct ExporterArgs {
    /// The config (TOML): events and metrics to export, as stat -e and -M take them
    /// [default: /etc/bfperf/exporter.toml; without it, the registers only]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where to serve /metrics [default: 127.0.0.1:9839]; any other address is your explicit choice
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "textfile")]
    pub listen: Option<String>,
    /// TLS and basic authentication, in Prometheus' exporter-toolkit format (YAML:
    /// tls_server_config with cert_file and key_file; basic_auth_users with bcrypt hashes)
    #[arg(
        long = "web.config.file",
        value_name = "FILE",
        conflicts_with = "textfile"
    )]
    pub web_config: Option<PathBuf>,
    /// Write the exposition to this file atomically instead of serving it (node_exporter's textfile collector)
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// How often to write the textfile
    #[arg(long, value_name = "TIME", default_value = "15s", value_parser = parse_duration, requires = "textfile")]
    pub interval: std::time::Duration,
}

/// `bfperf top`.
#[derive(Debug, Args, Clone)]
pub struct TopArgs {
    /// Refresh every TIME (`+`/`-` change it while running)
    #[arg(long, short = 'i', value_name = "TIME", default_value = "1s", value_parser = parse_duration)]
    pub interval: std::time::Duration,
    /// More metrics or groups to show (as stat -M), in a panel of their own
    #[arg(short = 'M', long = "metric", value_name = "NAME|GROUP")]
    pub metrics: Vec<String>,
    /// More events to count (as stat -e), shown in the raw view
    #[arg(short = 'e', long = "event", value_name = "SPEC")]
    pub events: Vec<String>,
    /// Write nothing: show the registers and whatever is already programmed
    #[arg(long)]
    pub read_only: bool,
}

/// `bfperf plot`.
#[derive(Debug, Args, Clone)]
pub struct PlotArgs {
    /// `bfperf stat -I MS --json` outputs (NDJSON); several are drawn on the same charts
    #[arg(value_name = "RUN.ndjson", required = true)]
    pub runs: Vec<std::path::PathBuf>,
    /// The chart file: .svg or .png
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: std::path::PathBuf,
    /// One line per block (runs made with -A) instead of the kind's total
    #[arg(long)]
    pub per_block: bool,
}

/// `5s`, `500ms`, `2m`, `1.5s`, `3` (seconds).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
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

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve a simulated device as a FUSE filesystem laid out like /sys, until interrupted
    Mount {
        /// An empty directory; the device appears at DIR/class/hwmon/hwmon3
        dir: PathBuf,
        #[command(flatten)]
        sim: SimOpts,
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

#[derive(Debug, Args, Clone)]
pub struct SimOpts {
    /// BlueField generation
    #[arg(long = "gen", default_value = "2", value_parser = ["1", "2", "3"])]
    pub generation: String,
    /// The kernel to behave like: 5.10, 6.4, 6.7, 6.14, 6.16, 6.19 (or any later
    /// version), oot (NVIDIA's out-of-tree driver); old = 6.7, new = 6.16
    #[arg(long, alias = "flavor", value_name = "VERSION", default_value = "6.16")]
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

/// `bfperf metrics --format`: the usual formats and Prometheus recording rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsFormat {
    /// Aligned columns for people
    Table,
    /// One JSON document; schema in docs/schema/
    Json,
    /// RFC 4180 CSV with a header row
    Csv,
    /// A Prometheus rules file (YAML) recording each metric per block and per kind
    PrometheusRules,
}

/// A PromQL range: digits and a unit (`30s`, `1m`, `5m`, `1h`).
fn parse_range(text: &str) -> Result<String, String> {
    let t = text.trim();
    let unit = t.trim_start_matches(|c: char| c.is_ascii_digit());
    let digits = &t[..t.len() - unit.len()];
    if digits.is_empty() || !["ms", "s", "m", "h", "d"].contains(&unit) {
        return Err(format!(
            "'{text}' is no PromQL range; give one such as 30s, 1m or 5m"
        ));
    }
    Ok(t.to_string())
}

/// The output format switch of every command that prints data.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct FormatOpts {
    /// Output format
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with_all = ["json", "csv"])]
    pub format: Option<Format>,
    /// Print JSON (same as --format json)
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV (same as --format csv)
    #[arg(long)]
    pub csv: bool,
}

impl FormatOpts {
    /// The chosen format, or `default` when none was given.
    pub fn or(self, default: Format) -> Format {
        match (self.format, self.json, self.csv) {
            (Some(f), _, _) => f,
            (None, true, _) => Format::Json,
            (None, _, true) => Format::Csv,
            _ => default,
        }
    }
}

#[derive(Debug, Args, Clone, Copy, Default)]
pub struct WriteOpts {
    /// Print each write (file and exact bytes) instead of doing it
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub format: FormatOpts,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}
