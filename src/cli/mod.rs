//! The command line: parses arguments, runs the operations, and hands their typed
//! reports to the output layer.

mod args;
pub mod complete;
pub mod exit;
#[cfg(feature = "exporter")]
mod exporter;
pub mod manual;
pub mod output;
mod plot;
pub mod report;
mod stat;
mod top;

pub use args::{Cli, Command, ExporterArgs, FormatOpts, Global, Shell, SimCommand, StatArgs};
pub use exit::ExitCode;
pub use output::{group, group_f};

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use clap::Parser;

use crate::block::Generation;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ops::{control, diff, metrics, program, read, snapshot};
use crate::sim;
use args::MetricsFormat;
use exit::{diag, Failure};
use output::{Format, Report};
use report::*;

/// Opens the device the global options name, and says on stderr what was skipped.
pub fn open_device(global: &Global) -> Result<Device> {
    let device = match (&global.sim, &global.device) {
        (Some(spec), _) => {
            let c = sim_choice(spec, &args::SimOpts::default(), global)?;
            let sim = sim::Sim::with_options(
                c.gen,
                c.kernel,
                Arc::new(sim::SystemClock::new()),
                &c.options,
            );
            Device::open(Box::new(Arc::new(sim)))?
        }
        (None, Some(dir)) => Device::open_dir(dir)?,
        (None, None) => Device::discover(&global.sysfs_root)?,
    };
    for w in device.warnings() {
        diag(&format!("warning: {w}"));
    }
    Ok(device)
}

/// Takes the writer lock of the device (writing commands hold it while they run).
/// An in-process simulator (`--sim`) belongs to this process alone: no lock.
pub fn lock_device(
    global: &Global,
    device: &Device,
) -> Result<Option<crate::ops::lock::WriterLock>> {
    if global.sim.is_some() {
        return Ok(None);
    }
    let path = match &global.lock_file {
        Some(p) => p.clone(),
        None => crate::ops::lock::default_path(&device.canonical_location())?,
    };
    crate::ops::lock::WriterLock::acquire(&path, global.wait).map(Some)
}

/// The metrics of these generations: built-ins and the user's files (a broken file
/// is warned about, never fatal).
pub fn load_metrics(global: &Global, gens: &[Generation]) -> Result<metrics::MetricSet> {
    let files = metrics::user_files(&global.metric_files)?;
    let set = metrics::MetricSet::load(gens, &files);
    for w in &set.warnings {
        diag(&format!("warning: {w}"));
    }
    Ok(set)
}

/// The command line's values for metric formulas.
pub fn metric_params(global: &Global) -> Result<std::collections::HashMap<String, f64>> {
    let mut params = std::collections::HashMap::new();
    if let Some(link) = &global.pcie_link {
        let bps = metrics::pcie_link_bytes_per_s(link).ok_or_else(|| Error::BadAssignment {
            problem: format!(
                "unknown PCIe link '{link}': give gen1 to gen5 and x1, x2, x4, x8 or x16, e.g. gen4x16"
            ),
        })?;
        params.insert("pcie_link_bytes_per_s".to_string(), bps);
    }
    Ok(params)
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
    MetricsReport {
        metrics: set
            .metrics
            .iter()
            .filter(|m| keep(m) && m.problem().is_none())
            .map(|m| MetricRow {
                metric: m.def.name.clone(),
                group: m.def.group.clone(),
                kind: m.kind,
                unit: m.unit.clone(),
                description: m.def.description.clone(),
                formula: m.def.expr.clone(),
                events: metrics::specs_for(&[m]),
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

/// Where reports go: a writer, the terminal's width, whether it is a terminal.
pub struct Out<'a> {
    pub w: &'a mut dyn Write,
    pub width: Option<u16>,
    pub terminal: bool,
}

impl Out<'_> {
    /// Renders a report and flushes it. A failure carries what the command wrote to
    /// the device, so that it can still be said on stderr.
    fn emit(&mut self, format: Format, report: &dyn Report) -> std::result::Result<(), Failure> {
        output::renderer(format, self.width, self.terminal)
            .render(report, self.w)
            .and_then(|_| self.w.flush())
            .map_err(|source| Failure::Output {
                source,
                writes: report.writes_made(),
            })
    }

    fn raw(&mut self, text: &str) -> std::result::Result<(), Failure> {
        self.w
            .write_all(text.as_bytes())
            .and_then(|_| self.w.flush())
            .map_err(|source| Failure::Output {
                source,
                writes: Vec::new(),
            })
    }
}

/// Parses the process's arguments and runs the command. Returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout (exit 0), usage errors to stderr (exit 2);
            // a closed stream is ignored.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::Usage
            } else {
                ExitCode::Success
            } as i32;
        }
    };
    // Buffered: a report goes out in a few large writes, flushed when complete
    // (and `stat` flushes each interval).
    let stdout = io::stdout();
    let mut lock = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut out = Out {
        w: &mut lock,
        width: output::terminal_width(),
        terminal: std::io::IsTerminal::is_terminal(&stdout),
    };
    match run(cli, &mut out) {
        Ok(code) => code,
        Err(f) => exit::report(f) as i32,
    }
}

/// Runs a parsed command line, writing its report to `out`. Returns the exit code.
pub fn run(cli: Cli, out: &mut Out) -> std::result::Result<i32, Failure> {
    if let Command::Stat(a) = cli.command {
        return stat::run(&cli.global, a, out.w, out.width);
    }
    run_once(cli, out).map(|()| ExitCode::Success as i32)
}

fn run_once(cli: Cli, out: &mut Out) -> std::result::Result<(), Failure> {
    let g = &cli.global;
    match cli.command {
        Command::Stat(_) => Ok(()),
        Command::Top(a) => Ok(top::run(g, a)?),
        Command::Plot(a) => Ok(plot::run(a)?),
        #[cfg(feature = "exporter")]
        Command::Exporter(a) => Ok(exporter::run(g, a)?),
        #[cfg(not(feature = "exporter"))]
        Command::Exporter(_) => Err(not_built("exporter").into()),
        Command::Restore => {
            let device = open_device(g)?;
            let _lock = lock_device(g, &device)?;
            let text = match crate::ops::journal::restore_leftover(&device)? {
                Some(r) => format!("{}\n", r.describe()),
                None => format!(
                    "nothing to restore: no journal for {} (every writer restored the device, or none ran)\n",
                    device.canonical_location()
                ),
            };
            out.raw(&text)
        }
        Command::Info(f) => out.emit(f.or(Format::Table), &info(&open_device(g)?)),
        Command::Blocks(f) => out.emit(f.or(Format::Table), &blocks(&open_device(g)?)?),
        Command::List {
            patterns,
            details,
            format,
        } => {
            let device = open_device(g)?;
            let set = load_metrics(g, &[device.generation()])?;
            let listing = crate::ops::list::list(&device, &set, &patterns, details)?;
            if listing.events.is_empty() && listing.metrics.is_empty() {
                diag(&format!("nothing matches {}", patterns.join(" or ")));
            }
            out.emit(format.or(Format::Table), &ListReport { listing, patterns })
        }
        Command::Events {
            block,
            pattern,
            format,
        } => {
            let device = open_device(g)?;
            if device.block(&block).is_err() {
                // A kind, a glob, a list or `all`: the events of every kind chosen.
                let chosen = device.select(std::slice::from_ref(&block))?;
                let patterns: Vec<String> = pattern.into_iter().collect();
                let listing = crate::ops::list::list_blocks(
                    &device,
                    &chosen,
                    &metrics::MetricSet::default(),
                    &patterns,
                    false,
                )?;
                return out.emit(format.or(Format::Table), &ListReport { listing, patterns });
            }
            let r = events(&device, &block, pattern)?;
            if r.events.is_empty() {
                diag(&format!(
                    "no event of {} matches '{}'",
                    r.block,
                    r.pattern.as_deref().unwrap_or_default()
                ));
            }
            out.emit(format.or(Format::Table), &r)
        }
        Command::Program {
            block,
            assignments,
            force,
            start,
            count_clock,
            write,
        } => {
            let device = open_device(g)?;
            let _lock = (!write.dry_run)
                .then(|| lock_device(g, &device))
                .transpose()?;
            let parsed = program::parse_assignments(&assignments, count_clock)?;
            let opts = program::ProgramOptions {
                force,
                start,
                count_clock,
            };
            // Every block is planned (validated) before the first write.
            let plans = each_block(&device, &block, |b| {
                program::plan_program(&device, b, &parsed, &opts)
            })?;
            let mut reports = Vec::new();
            for plan in plans {
                let outcome = if write.dry_run {
                    plan
                } else {
                    program::apply(&device, plan).map_err(|e| partly_done(e, &reports))?
                };
                reports.push(ProgramReport::new(
                    outcome,
                    write.dry_run,
                    device.location(),
                ));
            }
            for w in reports.iter().flat_map(|r| &r.warnings) {
                diag(&format!("warning: {w}"));
            }
            out.emit(write.format.or(Format::Table), &OneOrMany::of(reports))
        }
        Command::Start { block, write } => {
            let device = open_device(g)?;
            let _lock = (!write.dry_run)
                .then(|| lock_device(g, &device))
                .transpose()?;
            let plans = each_block(&device, &block, |b| control::plan_start(&device, b))?;
            finish_control(out, &device, plans, write)
        }
        Command::Stop {
            block,
            counter,
            write,
        } => {
            let device = open_device(g)?;
            let _lock = (!write.dry_run)
                .then(|| lock_device(g, &device))
                .transpose()?;
            let plans = each_block(&device, &block, |b| {
                control::plan_stop(&device, b, counter.as_deref())
            })?;
            finish_control(out, &device, plans, write)
        }
        Command::Clear {
            block,
            target,
            force,
            write,
        } => {
            let device = open_device(g)?;
            let _lock = (!write.dry_run)
                .then(|| lock_device(g, &device))
                .transpose()?;
            let plans = each_block(&device, &block, |b| {
                control::plan_clear(&device, b, target.as_deref(), force)
            })?;
            finish_control(out, &device, plans, write)
        }
        Command::Read { selectors, format } => {
            let device = open_device(g)?;
            let blocks = device.select(&selectors)?;
            let r = read::read_blocks(&device, &blocks)?;
            let report = ReadReport {
                device: device.location(),
                timestamp: snapshot::rfc3339(r.wall),
                blocks: r.blocks,
            };
            out.emit(format.or(Format::Table), &report)
        }
        Command::Snapshot {
            selectors,
            output,
            follow: _,
            format,
        } => {
            let device = open_device(g)?;
            let report = SnapshotReport(snapshot::take(&device, &selectors)?);
            let format = format.or(Format::Json);
            match output.as_deref() {
                Some(path) if path != Path::new("-") => {
                    write_file(path, format, &report)?;
                    let values: usize = report
                        .0
                        .blocks
                        .iter()
                        .map(|b| b.counters.len() + b.registers.len())
                        .sum();
                    diag(&format!(
                        "wrote {} values of {} blocks to {}",
                        values,
                        report.0.blocks.len(),
                        path.display()
                    ));
                    Ok(())
                }
                _ => out.emit(format, &report),
            }
        }
        Command::Diff {
            old,
            new,
            strict,
            plot: chart,
            format,
        } => {
            let a = snapshot::load(&old)?;
            let b = snapshot::load(&new)?;
            let names = (old.display().to_string(), new.display().to_string());
            for w in diff::check(&a, &b, strict, (&names.0, &names.1))? {
                diag(&format!("warning: {w}"));
            }
            let d = diff::diff(&a, &b);
            if let Some(path) = &chart {
                plot::diff_bars(&d, path)?;
            }
            let set = load_metrics(g, &[Generation::from_label(&b.generation)])?;
            let values = diff::metrics(&d, &b, &set, metric_params(g)?);
            out.emit(
                format.or(Format::Table),
                &DiffReport {
                    diff: d,
                    metrics: values,
                },
            )
        }
        Command::Metrics {
            pattern,
            all,
            format,
            json,
            csv,
            metric,
            window,
        } => {
            let gens = if all {
                vec![Generation::Bf1, Generation::Bf2, Generation::Bf3]
            } else {
                vec![open_device(g)?.generation()]
            };
            let set = load_metrics(g, &gens)?;
            let format = match (format, json, csv) {
                (Some(MetricsFormat::PrometheusRules), _, _) => {
                    let chosen = match metric.is_empty() {
                        true => set.metrics.iter().collect(),
                        false => set.select(&metric)?,
                    };
                    return out.raw(&metrics::prom::rules(&set, &chosen, &window));
                }
                (Some(MetricsFormat::Json), _, _) | (None, true, _) => Format::Json,
                (Some(MetricsFormat::Csv), _, _) | (None, _, true) => Format::Csv,
                _ => Format::Table,
            };
            out.emit(format, &metrics_report(&set, pattern.as_deref(), &gens))
        }
        Command::Completions { shell } => out.raw(&complete::script(shell)),
        Command::Sim(cmd) => Ok(sim_cmd(cmd, g)?),
        Command::Complete {
            index,
            descriptions,
            words,
        } => {
            let mut text = String::new();
            for c in complete::described(&words, index) {
                text.push_str(&c.line(descriptions));
                text.push('\n');
            }
            out.raw(&text)
        }
    }
}

/// Renders a report into a file, by the output file rule (`ops::outfile`).
fn write_file(
    path: &Path,
    format: Format,
    report: &dyn Report,
) -> std::result::Result<(), Failure> {
    let renderer = output::renderer(format, None, false);
    crate::ops::outfile::replace(path, &mut |w| renderer.render(report, w))?;
    Ok(())
}

/// What `sim mount|export` were asked for, validated.
struct SimChoice {
    gen: Generation,
    kernel: sim::Kernel,
    options: sim::SimOptions,
}

fn bad_sim(problem: String) -> Error {
    Error::BadAssignment { problem }
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

fn parse_sim_opts(o: &args::SimOpts, global: &Global) -> Result<SimChoice> {
    let gen = match o.generation.as_str() {
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
    let mut options = sim::SimOptions::default();
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
fn not_built(feature: &str) -> Error {
    Error::BadAssignment {
        problem: format!("this bfperf was built without the `{feature}` feature; build it with `cargo build --features {feature}`"),
    }
}

fn sim_cmd(cmd: SimCommand, global: &Global) -> Result<()> {
    match cmd {
        SimCommand::Mount { dir, sim: o } => {
            let c = parse_sim_opts(&o, global)?;
            let device = Arc::new(sim::Sim::with_options(
                c.gen,
                c.kernel,
                Arc::new(sim::SystemClock::new()),
                &c.options,
            ));
            #[cfg(feature = "sim-mount")]
            return sim::mount::serve(device, &dir);
            #[cfg(not(feature = "sim-mount"))]
            return {
                let _ = (device, dir);
                Err(not_built("sim-mount"))
            };
        }
        SimCommand::Export {
            dir,
            sim: o,
            fixture,
        } => {
            let c = parse_sim_opts(&o, global)?;
            if dir.exists()
                && std::fs::read_dir(&dir)
                    .map(|mut d| d.next().is_some())
                    .unwrap_or(true)
            {
                return Err(Error::OutputTarget {
                    path: dir,
                    problem: "it exists and is not empty; export writes a new tree".into(),
                });
            }
            let device = if fixture {
                sim::export::fixture_sim(c.gen)
            } else {
                sim::Sim::with_options(
                    c.gen,
                    c.kernel,
                    Arc::new(sim::ManualClock::new(0)),
                    &c.options,
                )
            };
            sim::export_tree(&device, sim::SysfsRootLayout::default(), &dir).map_err(|e| {
                Error::File {
                    what: "cannot export the simulated tree to",
                    path: dir.clone(),
                    source: e,
                }
            })
        }
    }
}

fn info(device: &Device) -> InfoReport {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for b in device.blocks() {
        *kinds.entry(b.kind.as_str().to_string()).or_default() += 1;
    }
    InfoReport {
        device: device.location(),
        generation: device.generation(),
        blocks: device.blocks().len(),
        kinds,
    }
}

fn blocks(device: &Device) -> Result<BlocksReport> {
    let mut rows = Vec::new();
    for b in device.blocks() {
        let enabled = if b.has_enable {
            Some(read::read_number(device.fs(), &crate::sysfs::layout::enable(&b.name))? != 0)
        } else {
            None
        };
        rows.push(report::BlockRow {
            block: b.name.clone(),
            kind: b.kind,
            mechanism: b.mechanism,
            counters: b.counters.len(),
            registers: b.registers.clone(),
            enabled,
            events: device.catalog(b)?.events.len(),
        });
    }
    Ok(BlocksReport {
        device: device.location(),
        generation: device.generation(),
        blocks: rows,
    })
}

fn events(device: &Device, block: &str, pattern: Option<String>) -> Result<EventsReport> {
    let b = device.block(block)?;
    let catalog = device.catalog(b)?;
    let events = match &pattern {
        Some(p) => catalog.filter(p).into_iter().cloned().collect(),
        None => catalog.events.clone(),
    };
    Ok(EventsReport {
        block: b.name.clone(),
        kind: b.kind,
        mechanism: b.mechanism,
        truncated_event_list: catalog.truncated,
        events,
        pattern,
    })
}

/// Plans an operation on every block a selector (a block, kind, glob or list)
/// chooses; any refusal refuses the whole command.
fn each_block<T>(
    device: &Device,
    selector: &str,
    plan: impl Fn(&str) -> Result<T>,
) -> Result<Vec<T>> {
    device
        .select(&[selector.to_string()])?
        .into_iter()
        .map(|b| plan(&b.name))
        .collect()
}

/// A failure on a later block says which blocks were already written.
fn partly_done<R: Report>(e: Error, done: &[R]) -> Error {
    let writes: Vec<String> = done.iter().flat_map(|r| r.writes_made()).collect();
    if writes.is_empty() {
        return e;
    }
    crate::error::with_hint(e, &format!("(before this: {})", writes.join("; ")))
}

fn finish_control(
    out: &mut Out,
    device: &Device,
    plans: Vec<control::ControlOutcome>,
    w: args::WriteOpts,
) -> std::result::Result<(), Failure> {
    let mut reports = Vec::new();
    for plan in plans {
        let outcome = if w.dry_run {
            plan
        } else {
            control::apply(device, plan).map_err(|e| partly_done(e, &reports))?
        };
        reports.push(ControlReport::new(outcome, w.dry_run, device.location()));
    }
    out.emit(w.format.or(Format::Table), &OneOrMany::of(reports))
}
