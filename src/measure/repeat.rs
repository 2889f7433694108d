//! Repeated runs (`stat -r`): each count's and metric's mean over the runs, and the
//! spread of the mean, as perf stat prints it (`+- 1.23%`).

use super::Count;
use crate::metrics::MetricValue;

/// Mean and relative standard deviation (%) of a value over runs (`-r`).
pub(crate) fn spread(values: &[u64]) -> (f64, Option<f64>) {
    spread_of(&values.iter().map(|&v| v as f64).collect::<Vec<_>>())
}

/// Mean and the spread of the mean in percent (perf's `+- 1.23%`): needs two values
/// or more and a mean other than 0.
pub(crate) fn spread_of(values: &[f64]) -> (f64, Option<f64>) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n.max(1.0);
    if values.len() < 2 || mean == 0.0 {
        return (mean, None);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, Some(var.sqrt() / n.sqrt() / mean * 100.0))
}

/// The mean of each count over runs, with the spread of the mean in percent.
pub(crate) fn mean_counts(per_run: &[Vec<Count>]) -> Vec<(Count, Option<f64>)> {
    let Some(first) = per_run.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let values: Vec<u64> = per_run
                .iter()
                .filter_map(|r| r.get(i))
                .filter_map(|c| c.value)
                .collect();
            // Not counted in some run: no mean.
            let counted = values.len() == per_run.len();
            let (m, sd) = spread(&values);
            let raws: Vec<u64> = per_run
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.raw)
                .collect();
            let (raw, _) = spread(&raws);
            let mean_of = |f: fn(&Count) -> u64| {
                let all: Vec<u64> = per_run.iter().filter_map(|r| r.get(i)).map(f).collect();
                spread(&all).0.round() as u64
            };
            (
                Count {
                    value: counted.then(|| m.round() as u64),
                    counted,
                    raw: raw.round() as u64,
                    enabled_ns: mean_of(|c| c.enabled_ns),
                    running_ns: mean_of(|c| c.running_ns),
                    valid: per_run.iter().filter_map(|r| r.get(i)).all(|c| c.valid),
                    invalid: per_run
                        .iter()
                        .filter_map(|r| r.get(i)?.invalid.clone())
                        .next(),
                    ..c.clone()
                },
                sd.filter(|_| counted),
            )
        })
        .collect()
}

/// Each metric's mean over runs.
pub(crate) fn mean_metrics(per_run: &[Vec<MetricValue>]) -> Vec<MetricValue> {
    let Some(first) = per_run.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let values: Vec<f64> = per_run.iter().filter_map(|r| r.get(i)?.value).collect();
            MetricValue {
                value: (values.len() == per_run.len())
                    .then(|| values.iter().sum::<f64>() / values.len() as f64),
                ..v.clone()
            }
        })
        .collect()
}
