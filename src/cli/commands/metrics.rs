//! `bfperf metrics`: the metrics this device (or every generation) has, or them as
//! Prometheus recording rules.

use clap::Args as ClapArgs;

use crate::block::Generation;
use crate::cli::output::Format;
use crate::cli::report::{MetricRow, MetricsReport};
use crate::cli::Out;
use crate::front::args::Global;
use crate::front::exit::{diag, Failure};
use crate::front::setup::{device_here, load_metrics};
use crate::metrics;

#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  bfperf metrics ddr\n  bfperf metrics l3 --json\n  bfperf metrics --all --format prometheus-rules > /etc/prometheus/rules/bfperf.yml\n  bfperf metrics --format prometheus-rules -M ddr,llc --window 2m"
)]
pub(crate) struct Args {
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
}

/// `bfperf metrics --format`: the usual formats and Prometheus recording rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum MetricsFormat {
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
    // Prometheus refuses a zero range in rate().
    if digits.bytes().all(|b| b == b'0') {
        return Err(format!(
            "'{text}' is an empty range: rate() needs at least four scrape intervals, such as 1m"
        ));
    }
    Ok(t.to_string())
}

/// Prints the metrics, or the rules.
pub(super) fn exec(global: &Global, a: Args, out: &mut Out) -> Result<(), Failure> {
    const ALL: [Generation; 3] = [Generation::Bf1, Generation::Bf2, Generation::Bf3];
    let gens = match (a.all, device_here(global)?) {
        (true, _) => ALL.to_vec(),
        (false, Some(device)) => vec![device.generation()],
        (false, None) => {
            diag("no BlueField here: listing every generation's metrics (on a DPU, its own)");
            ALL.to_vec()
        }
    };
    let set = load_metrics(global, &gens)?;
    let format = match (a.format, a.json, a.csv) {
        (Some(MetricsFormat::PrometheusRules), _, _) => {
            let chosen = match a.metric.is_empty() {
                true => set.metrics.iter().collect(),
                false => set.select(&a.metric)?,
            };
            return out.raw(&crate::exposition::prom::rules(&set, &chosen, &a.window));
        }
        (Some(MetricsFormat::Json), _, _) | (None, true, _) => Format::Json,
        (Some(MetricsFormat::Csv), _, _) | (None, _, true) => Format::Csv,
        _ => Format::Table,
    };
    out.emit(format, &metrics_report(&set, a.pattern.as_deref(), &gens))
}

fn metrics_report(
    set: &metrics::MetricSet,
    pattern: Option<&str>,
    gens: &[Generation],
) -> MetricsReport {
    let p = pattern.map(str::to_ascii_lowercase);
    let keep = |m: &metrics::Metric| {
        p.as_ref().is_none_or(|p| {
            [&m.def.name, &m.def.group, &m.def.description]
                .iter()
                .any(|s| s.to_ascii_lowercase().contains(p))
        })
    };
    let gen = gens.last().copied().unwrap_or(Generation::Bf2);
    // A metric several generations define alike is one row.
    let mut seen = std::collections::HashSet::new();
    MetricsReport {
        metrics: set
            .metrics
            .iter()
            .filter(|m| keep(m) && m.problem().is_none())
            .filter(|m| seen.insert((m.def.name.clone(), m.kind, m.def.expr.clone())))
            .map(|m| MetricRow {
                metric: m.def.name.clone(),
                group: m.def.group.clone(),
                kind: m.kind,
                unit: m.unit.clone(),
                description: m.def.description.clone(),
                formula: m.def.expr.clone(),
                events: [metrics::specs_for(&[m]), metrics::perf_events_for(&[m])].concat(),
                counters_per_block: metrics::counters_needed(m, gen),
                compat: m.def.compat.clone(),
                source: m.source.clone(),
            })
            .collect(),
        broken: set
            .broken
            .iter()
            .map(|b| format!("{} ({}): {}", b.name, b.source, b.problem))
            .chain(
                set.metrics.iter().filter(|m| keep(m)).filter_map(|m| {
                    Some(format!("{} ({}): {}", m.def.name, m.source, m.problem()?))
                }),
            )
            .collect(),
    }
}
