//! `bfperf exporter`: the Prometheus exporter (served by `cli::exporter`).

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::cli::args::{parse_duration, Global};
use crate::cli::exit::Failure;
#[cfg(feature = "exporter")]
use crate::cli::exporter::{self, ExporterOptions};

/// `bfperf exporter --version`, as node_exporter says its own: the version, the
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

#[derive(Debug, ClapArgs)]
#[command(
    version = VERSION,
    after_help = "Examples:\n  systemctl enable --now bfperf-exporter\n  bfperf exporter --listen 0.0.0.0:9839 --web.config.file /etc/bfperf/web.yml\n  bfperf exporter --textfile /var/lib/node_exporter/textfile/bfperf.prom"
)]
pub(crate) struct Args {
    /// The config (TOML): events and metrics to export, as stat -e and -M take them,
    /// and where and how to serve (listen, web_config_file; the flags win)
    /// [default: /etc/bfperf/exporter.toml; without it, the generation's default set]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where to serve /metrics [default: listen in the config, or 127.0.0.1:9839]; any other address is your explicit choice
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "textfile")]
    listen: Option<String>,
    /// TLS and basic authentication, in Prometheus' exporter-toolkit format (YAML:
    /// tls_server_config with cert_file and key_file; basic_auth_users with bcrypt hashes)
    #[arg(
        long = "web.config.file",
        value_name = "FILE",
        conflicts_with = "textfile"
    )]
    web_config: Option<PathBuf>,
    /// Write the exposition to this file atomically instead of serving it (node_exporter's textfile collector)
    #[arg(long, value_name = "FILE")]
    textfile: Option<PathBuf>,
    /// How often to write the textfile
    #[arg(long, value_name = "TIME", default_value = "15s", value_parser = parse_duration, requires = "textfile")]
    interval: std::time::Duration,
    /// Let this group's members ask the exporter to count (stat, top) as its user can
    /// [default: socket_group in the config, or its user only]
    #[arg(long, value_name = "GROUP")]
    socket_group: Option<String>,
    /// The least serious log lines written
    #[arg(
        long = "log.level",
        value_name = "LEVEL",
        value_enum,
        default_value = "info"
    )]
    log_level: crate::cli::exit::Level,
    /// How log lines are written: logfmt (`time=… level=… msg="…"`) or json, each
    /// with its time unless standard error is journald's, which adds it
    #[arg(
        long = "log.format",
        value_name = "FORMAT",
        value_enum,
        default_value = "logfmt"
    )]
    log_format: crate::cli::exit::LogFormat,
}

#[cfg(feature = "exporter")]
impl From<Args> for ExporterOptions {
    fn from(a: Args) -> ExporterOptions {
        ExporterOptions {
            config: a.config,
            listen: a.listen,
            web_config: a.web_config,
            textfile: a.textfile,
            interval: a.interval,
            socket_group: a.socket_group,
        }
    }
}

/// Serves (or writes the textfile) until SIGTERM or SIGINT.
#[cfg(feature = "exporter")]
pub(super) fn exec(global: &Global, a: Args) -> Result<(), Failure> {
    crate::cli::exit::set_log(a.log_format, a.log_level);
    Ok(exporter::run(global, a.into())?)
}

/// This binary was built without the exporter.
#[cfg(not(feature = "exporter"))]
pub fn exec(_global: &Global, _a: Args) -> Result<(), Failure> {
    Err(crate::cli::setup::not_built("exporter").into())
}
