//! The exporter's config file (TOML): the events and metrics to export, and where
//! and how to serve — read in full and checked, so that a reload never half-applies.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{push, DEFAULT_CONFIG};
use crate::collector::Counting;
use crate::error::{Error, Result};
use crate::front::args::Global;
use crate::front::exit::diag;
use crate::front::setup::metric_params;

/// The config file, as TOML.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    /// `stat -e` specs, or `default`.
    #[serde(default)]
    pub(super) events: Vec<String>,
    /// `stat -M` metric names or groups: their events are programmed.
    #[serde(default)]
    pub(super) metrics: Vec<String>,
    /// Export the metrics' values as gauges too.
    #[serde(default)]
    pub(super) metric_gauges: bool,
    /// Refuse entries this device lacks instead of skipping them.
    #[serde(default)]
    pub(super) strict: bool,
    /// The PCIe link for utilisation metrics (`gen4x16`).
    pub(super) pcie_link: Option<String>,
    /// Where to serve /metrics (`--listen` overrides it).
    pub(super) listen: Option<String>,
    /// TLS and basic auth, relative to this file's directory (`--web.config.file`
    /// overrides it).
    pub(super) web_config_file: Option<PathBuf>,
    /// A group whose members may ask the exporter to count (`--socket-group`
    /// overrides it); otherwise only its user.
    pub(super) socket_group: Option<String>,
    /// Push the series to a Prometheus remote-write receiver too.
    pub(super) remote_write: Option<push::PushFile>,
    /// Push them over OTLP/HTTP too (an OpenTelemetry Collector).
    pub(super) otlp: Option<push::PushFile>,
    /// The share of a block's free counters one user other than root may hold
    /// (0 to 1; default 0.5).
    pub(super) user_share: Option<f64>,
}

/// Where and how the config file says to serve; the command line's flags win.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Serving {
    pub(super) listen: Option<String>,
    pub(super) web_config: Option<PathBuf>,
    pub(super) socket_group: Option<String>,
    /// `[remote_write]`, its file names relative to the config's directory.
    pub(super) remote_write: Option<push::PushFile>,
    /// `[otlp]`, the same.
    pub(super) otlp: Option<push::PushFile>,
}

pub(super) fn read_config(path: Option<&Path>, global: &Global) -> Result<(Counting, Serving)> {
    let (path, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from(DEFAULT_CONFIG), false),
    };
    // Non-blocking, a regular file only, bounded: a FIFO cannot hang a reload.
    let text = match crate::sysfs::read_config(&path) {
        Ok(t) => t,
        Err(Error::File { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound && !explicit =>
        {
            diag(&format!(
                "no {DEFAULT_CONFIG}: exporting the default set of this generation"
            ));
            format!("events = [\"{}\"]", crate::measure::defaults::DEFAULT)
        }
        Err(e) => return Err(e),
    };
    let file: ConfigFile = toml::from_str(&text).map_err(|e| Error::BadConfig {
        path: path.clone(),
        problem: format!(
            "not an exporter config: {}",
            crate::error::toml_problem(&text, &e)
        ),
    })?;
    let mut g = global.clone();
    if g.pcie_link.is_none() {
        g.pcie_link = file.pcie_link.clone();
    }
    if let Some(share) = file.user_share.filter(|s| !(0.0..=1.0).contains(s)) {
        return Err(Error::BadConfig {
            path: path.clone(),
            problem: format!(
                "user_share = {share}: a share of a block's free counters, from 0 (members use only what the exporter counts) to 1"
            ),
        });
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let serving = Serving {
        listen: file.listen,
        web_config: file.web_config_file.map(|w| dir.join(w)),
        socket_group: file.socket_group,
        remote_write: file.remote_write.map(|r| r.relative_to(dir)),
        otlp: file.otlp.map(|r| r.relative_to(dir)),
    };
    let config = Counting {
        events: file.events,
        metrics: file.metrics,
        params: metric_params(&g)?,
        journal: g.sim.is_none(),
        metric_gauges: file.metric_gauges,
        strict: file.strict,
        user_share: file.user_share,
    };
    Ok((config, serving))
}
