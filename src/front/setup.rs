//! What every command of both programs starts from: the device the global options name, the writer
//! lock, the metrics and their parameters, and report files.

use std::sync::Arc;

use crate::block::Generation;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::front::args::{self, Global};
use crate::front::exit::diag;
use crate::metrics;
use crate::sim;

/// Opens the device the global options name, and says on stderr what was skipped.
pub(crate) fn open_device(global: &Global) -> Result<Device> {
    said(open_device_of(global, None)?)
}

/// Opens the device for a command about the blocks `selectors` choose. When each
/// is a block's whole name (`read llt0`, `events tile2`), only those blocks'
/// directories are listed: most of a one-block command's cost on a device of
/// dozens of blocks. Anything else (a kind, a pattern, `all`, a name that is not
/// there, to be explained with the others) opens the whole device.
pub(crate) fn open_device_for(global: &Global, selectors: &[String]) -> Result<Device> {
    let names: Vec<&str> = selectors
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .collect();
    if !names.is_empty() && names.iter().all(|n| crate::device::selects_by_name(n)) {
        let device = open_device_of(global, Some(&|n: &str| names.contains(&n)))?;
        if names
            .iter()
            .all(|n| device.blocks().iter().any(|b| b.name == *n))
        {
            return said(device);
        }
    }
    open_device(global)
}

/// Opens the device for the event specs of `stat` (`-e`'s texts): when each spec
/// names its blocks (`tile/EVENT/`, `pcie0,pcie1/...`, `llt*/...`) and each of
/// those selectors chooses a block, only the blocks they choose are listed (20 of
/// a BlueField-2's block directories are listed at every start otherwise); None
/// when the whole device is needed: bare event names and perf events (looked for
/// on every block), metrics and the default set (the caller knows those). Says
/// nothing yet: what opening it skipped is said by [`said`] once it is used.
pub(crate) fn open_device_for_specs(global: &Global, specs: &[String]) -> Result<Option<Device>> {
    let mut selectors: Vec<String> = Vec::new();
    for text in specs {
        let Ok(terms) = crate::spec::expand(text) else {
            return Ok(None);
        };
        for t in terms {
            let Ok((blocks, _)) = crate::spec::split(&t.spec) else {
                return Ok(None);
            };
            selectors.extend(blocks.split(',').map(|s| s.trim().to_string()));
        }
    }
    if selectors.is_empty() || selectors.iter().any(|s| s.is_empty() || s == "all") {
        return Ok(None);
    }
    let keep = |name: &str| selectors.iter().any(|s| crate::device::selects(s, name));
    let device = open_device_of(global, Some(&keep))?;
    // A selector that chooses nothing here (a perf PMU's name, a mistake) is for
    // the whole device to take or explain; a journal left in place is put back
    // first, on whichever blocks it names.
    let journal = crate::measure::owner::journal::may_be_in_place(&device);
    Ok((!journal && device.select(&selectors).is_ok()).then_some(device))
}

/// Says on stderr what opening `device` skipped.
pub(crate) fn said(device: Device) -> Result<Device> {
    for w in device.warnings() {
        diag(&format!("warning: {w}"));
    }
    Ok(device)
}

/// Opens the device the global options name, with only the blocks `only` names
/// when given; says nothing yet.
fn open_device_of(global: &Global, only: Option<crate::device::Keep<'_>>) -> Result<Device> {
    match (&global.sim, &global.device) {
        (Some(spec), _) => {
            let c = sim_choice(spec, &args::SimOpts::default(), global)?;
            let clock: Arc<dyn sim::Clock> = match sim::virtual_clock() {
                Some(virtual_clock) => virtual_clock,
                None => Arc::new(sim::SystemClock::new()),
            };
            let sim = sim::Sim::with_options(c.gen, c.kernel, clock, &c.options);
            Device::open_of(Box::new(Arc::new(sim)), only)
        }
        (None, dir) => {
            let fs = |dir| crate::sysfs::RealFs::new(dir).with_page_size(global.page_size);
            match dir {
                // A directory named by the user: its name file is checked.
                Some(dir) => Device::open_tree_of(fs(dir.clone()), only),
                // Found by its name file, which is not read again.
                None => Device::open_of(
                    Box::new(fs(crate::device::discover(&global.sysfs_root)?)),
                    only,
                ),
            }
        }
    }
}

/// Takes the writer lock of the device (writing commands hold it while they run).
/// An in-process simulator (`--sim`) belongs to this process alone: no lock.
pub(crate) fn lock_device(
    global: &Global,
    device: &Device,
) -> Result<Option<crate::lock::WriterLock>> {
    match lock_path(global, device)? {
        Some(path) => crate::lock::WriterLock::acquire(&path, global.wait).map(Some),
        None => Ok(None),
    }
}

/// The writer lock's file for this device (`--lock-file`, or by its identity); None
/// for an in-process simulator, which no other process can write.
pub(crate) fn lock_path(global: &Global, device: &Device) -> Result<Option<std::path::PathBuf>> {
    if global.sim.is_some() {
        return Ok(None);
    }
    match &global.lock_file {
        Some(p) => Ok(Some(p.clone())),
        None => crate::measure::owner::default_lock(device).map(Some),
    }
}

/// When a long-running bfperf (the exporter) owns the device and listens beside its
/// lock: a measurement of `specs` it counts for this command, and its socket
/// (`measure::owner::ask`). None for an in-process simulator, or when nobody
/// listens (the caller takes the lock and programs the device).
pub(crate) fn owner_client<'d>(
    global: &Global,
    device: &'d Device,
    specs: &[String],
) -> Result<
    Option<(
        crate::measure::owner::protocol::Shared<'d>,
        std::path::PathBuf,
    )>,
> {
    if global.sim.is_some() {
        return Ok(None);
    }
    crate::measure::owner::ask(device, global.lock_file.as_deref(), specs)
}

/// The metrics of these generations: built-ins and the user's files (a broken file
/// is warned about, never fatal).
pub(crate) fn load_metrics(global: &Global, gens: &[Generation]) -> Result<metrics::MetricSet> {
    let files = metrics::user_files(&global.metric_files)?;
    let set = metrics::MetricSet::load(gens, &files);
    for w in &set.warnings {
        diag(&format!("warning: {w}"));
    }
    Ok(set)
}

/// The command line's values for metric formulas.
pub(crate) fn metric_params(global: &Global) -> Result<std::collections::HashMap<String, f64>> {
    let mut params = std::collections::HashMap::new();
    if let Some(link) = &global.pcie_link {
        let bps = metrics::pcie_link_bytes_per_s(link).ok_or_else(|| Error::BadOption {
            problem: format!(
                "unknown PCIe link '{link}': give gen1 to gen5 and x1, x2, x4, x8 or x16, e.g. gen4x16"
            ),
        })?;
        params.insert("pcie_link_bytes_per_s".to_string(), bps);
    }
    Ok(params)
}

/// What `sim mount|export` were asked for, validated.
pub(crate) struct SimChoice {
    /// The generation.
    pub gen: Generation,
    /// The kernel it behaves like.
    pub kernel: sim::Kernel,
    /// The other choices.
    pub options: sim::SimOptions,
}

fn bad_sim(problem: String) -> Error {
    Error::BadOption { problem }
}

/// `--sim bf3@6.14`: the generation and kernel, with the other choices of `o`.
fn sim_choice(spec: &str, o: &args::SimOpts, global: &Global) -> Result<SimChoice> {
    let (gen, kernel) = spec.split_once('@').unwrap_or((spec, &o.kernel));
    let gen = match gen.to_ascii_lowercase().trim_start_matches("bf") {
        g @ ("1" | "2" | "3") => g.to_string(),
        _ => {
            return Err(bad_sim(format!(
                "--sim takes bf1, bf2 or bf3, optionally @KERNEL (e.g. bf3@6.14), not '{spec}'"
            )))
        }
    };
    parse_sim_opts(
        &args::SimOpts {
            generation: gen,
            kernel: kernel.to_string(),
            counters: o.counters.clone(),
        },
        global,
    )
}

pub(crate) fn parse_sim_opts(o: &args::SimOpts, global: &Global) -> Result<SimChoice> {
    let gen = match o.generation.trim_start_matches("bf") {
        "1" => Generation::Bf1,
        "3" => Generation::Bf3,
        _ => Generation::Bf2,
    };
    let kernel = sim::Kernel::parse(&o.kernel).ok_or_else(|| {
        let known: Vec<&str> = sim::kernel::KERNELS.iter().map(|k| k.name).collect();
        bad_sim(format!(
            "unknown kernel '{}': give a version ({}, or a later one such as 6.17) or old, new, oot",
            o.kernel,
            known.join(", ")
        ))
    })?;
    if gen == Generation::Bf3 && !kernel.def().bf3 {
        return Err(bad_sim(format!(
            "kernel {} has no BlueField-3 support (it came with v6.4)",
            kernel.name()
        )));
    }
    let faults = match &global.sim_faults {
        Some(text) => sim::parse_faults(text).map_err(|problem| Error::BadOption {
            problem: format!("--sim-faults: {problem}"),
        })?,
        None => Vec::new(),
    };
    let mut options = sim::SimOptions {
        page_size: global.page_size,
        faults,
        ..sim::SimOptions::default()
    };
    if let Some(path) = &global.workload {
        options.workload = sim::Workload::load(path)?;
    }
    for c in &o.counters {
        let parsed = c.split_once('=').and_then(|(k, n)| {
            Some((crate::block::BlockKind::parse(k)?, n.parse::<usize>().ok()?))
        });
        match parsed {
            Some((kind, n)) if n <= 64 => options.counters.push((kind, n)),
            _ => {
                return Err(bad_sim(format!(
                    "--counters takes KIND=N with a block kind and 0 to 64 counters (e.g. llt=16), not '{c}'"
                )))
            }
        }
    }
    Ok(SimChoice {
        gen,
        kernel,
        options,
    })
}

/// A command of a feature this binary was built without.
#[allow(dead_code)]
pub(crate) fn not_built(feature: &'static str) -> Error {
    Error::NotBuilt { feature }
}

/// The device the options name, or the one found; None when none is found and
/// none was named (as perf list works anywhere).
pub(crate) fn device_here(global: &Global) -> crate::error::Result<Option<crate::device::Device>> {
    if global.sim.is_some() || global.device.is_some() {
        return open_device(global).map(Some);
    }
    match open_device(global) {
        Err(Error::NoDevice { .. } | Error::NoHwmon { .. }) => Ok(None),
        other => other.map(Some),
    }
}
