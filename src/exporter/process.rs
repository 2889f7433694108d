//! The exporter's own process, as every Prometheus exporter exports it: the
//! `process_*` series of the client libraries' process collector (CPU time, memory,
//! file descriptors, start time), read at each sweep.

use crate::exposition::{Family, Labels};

/// Adds to `bfperf_build_info` what built this binary: `revision` (the source's)
/// and `rustversion` (the compiler's), as exporters give their Go version.
pub(super) fn build_labels(fams: &mut [Family]) {
    for f in fams.iter_mut().filter(|f| f.name == "bfperf_build_info") {
        for (labels, _) in &mut f.samples {
            let mut more = labels.to_vec();
            more.push(("revision", env!("BFPERF_REVISION").into()));
            more.push(("rustversion", env!("BFPERF_RUSTC_VERSION").into()));
            *labels = more.into();
        }
    }
}

/// The `process_*` families now (a figure that cannot be read is left out).
pub(super) fn families() -> Vec<Family> {
    let p = crate::sysfs::process_figures();
    let rows: [(&str, &str, bool, Option<f64>); 6] = [
        (
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            true,
            p.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            false,
            p.resident_bytes,
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            false,
            p.virtual_bytes,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors.",
            false,
            p.open_fds,
        ),
        (
            "process_max_fds",
            "Maximum number of open file descriptors.",
            false,
            p.max_fds,
        ),
        (
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            false,
            p.start_time_seconds,
        ),
    ];
    rows.into_iter()
        .map(|(name, help, counter, value)| Family {
            name: name.into(),
            help: help.into(),
            counter,
            samples: value.map(|v| (Labels::default(), v)).into_iter().collect(),
        })
        .collect()
}
