//! `bfperf-exporter`'s command line: the global options every bfperf program takes,
//! and the exporter's own, as node_exporter spells its flags.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Parser};

use crate::front::args::{parse_duration, Global};
use crate::front::exit::{Level, LogFormat};

/// `bfperf-exporter --version`, as node_exporter says its own: the version, the
/// revision it was built from, the build's date, the compiler and the platform.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision: ",
    env!("BFPERF_REVISION"),
    ")\n  build date:   ",
    env!("BFPERF_BUILD_DATE"),
    "\n  rust version: ",
    env!("BFPERF_RUSTC_VERSION"),
    "\n  platform:     ",
    env!("BFPERF_PLATFORM"),
);

/// What `bfperf-exporter` was asked for: its own options (the global ones, where
/// the device is, are [`Global`]).
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct Options {
    /// The config (TOML): events and metrics to export, as stat -e and -M take them,
    /// and where and how to serve (listen, web_config_file; the flags win)
    /// [default: /etc/bfperf/exporter.toml; without it, the generation's default set]
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where to serve /metrics [default: listen in the config, or 127.0.0.1:9839]; any other address is your explicit choice
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "textfile")]
    pub(crate) listen: Option<String>,
    /// TLS and basic authentication, in Prometheus' exporter-toolkit format (YAML:
    /// tls_server_config with cert_file and key_file; basic_auth_users with bcrypt hashes)
    #[arg(
        long = "web.config.file",
        value_name = "FILE",
        conflicts_with = "textfile"
    )]
    pub(crate) web_config: Option<PathBuf>,
    /// Write the exposition to this file atomically instead of serving it (node_exporter's textfile collector)
    #[arg(long, value_name = "FILE")]
    pub(crate) textfile: Option<PathBuf>,
    /// How often to write the textfile
    #[arg(long, value_name = "TIME", default_value = "15s", value_parser = parse_duration, requires = "textfile")]
    pub(crate) interval: std::time::Duration,
    /// Let this group's members ask the exporter to count (stat, top) as its user can
    /// [default: socket_group in the config, or its user only]
    #[arg(long, value_name = "GROUP")]
    pub(crate) socket_group: Option<String>,
    /// The least serious log lines written
    #[arg(
        long = "log.level",
        value_name = "LEVEL",
        value_enum,
        default_value = "info"
    )]
    pub(crate) log_level: Level,
    /// How log lines are written: logfmt (`time=… level=… msg="…"`) or json, each
    /// with its time unless standard error is journald's, which adds it
    #[arg(
        long = "log.format",
        value_name = "FORMAT",
        value_enum,
        default_value = "logfmt"
    )]
    pub(crate) log_format: LogFormat,
}

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "bfperf-exporter",
    version = VERSION,
    about = "Export the BlueField performance counters to Prometheus",
    long_about = "Exports the BlueField performance counters to Prometheus: serves /metrics, \
        writes a node_exporter textfile, pushes remote write or OTLP, and lends counters \
        to bfperf stat and top. It owns the device's counters while it runs and puts \
        them back as they were when it stops.",
    after_help = "Examples:\n  systemctl enable --now bfperf-exporter\n  bfperf-exporter --listen 0.0.0.0:9839 --web.config.file /etc/bfperf/web.yml\n  bfperf-exporter --textfile /var/lib/node_exporter/textfile/bfperf.prom\n  bfperf-exporter --sim bf3 --listen 127.0.0.1:0   (no DPU needed)"
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) options: Options,
    #[command(flatten)]
    pub(crate) global: Global,
}
