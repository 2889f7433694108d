//! The exposition's format, apart from who fills it (as node_exporter keeps its
//! collectors apart from the registry): a family and its series ([`Family`]),
//! Prometheus' two text formats ([`render`]), and the base units and recording
//! rules that name the metrics in Prometheus (`prom`).

pub(crate) mod prom;
mod text;

pub use text::{render, render_each, TextFormat};

/// A series' labels, in order; shared, so that a series' labels made once go into
/// every scrape without being copied (`vec![..].into()` makes them).
pub type Labels = std::sync::Arc<[(&'static str, String)]>;

/// A family of the exposition and its samples: `name` without a counter's
/// `_total`, which the encoders add.
#[derive(Debug, Clone)]
pub struct Family {
    /// The name without its counter's suffix (`bfperf_events`, `bfperf_up`,
    /// `process_open_fds`).
    pub name: String,
    /// Its HELP.
    pub help: String,
    /// A counter (its series end in `_total`), or a gauge.
    pub counter: bool,
    /// Each series' labels and value.
    pub samples: Vec<(Labels, f64)>,
}
