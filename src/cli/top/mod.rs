//! `bfperf top`: a live, full-screen view of the device. The numbers come from the
//! stat machinery (the exporter's live core: lock, journal, multiplexing with coverage,
//! restore), or, without the right to write, from a passive [`Watch`] of what is
//! already programmed. [`view`] draws the [`App`]'s state; this module runs the loop,
//! owns the terminal and puts it and the device back on every way out.

mod cores;
mod keys;
mod panels;
mod view;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;

use crate::cli::args::Global;
use crate::cli::setup::{load_metrics, lock_device, metric_params, open_device, owner_client};
use crate::device::values::monotonic_ns;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::export::{self, ExportConfig, Exporter};
use crate::measure::compose::Work;
use crate::measure::share::Shared;
use crate::measure::Count;
use crate::metrics::{self, MetricSet, MetricValue};
use crate::ops::watch::{Rate, Watch};
use crate::sysfs::layout;
use keys::Key;

/// How many refreshes of history a sparkline keeps.
const HISTORY: usize = 120;
/// How often multiplexed counters take turns between refreshes.
const TICK: Duration = Duration::from_millis(100);

/// One metric of a panel: its kind's total (or its one block's value), its blocks.
#[derive(Debug, Clone, Default)]
pub(super) struct MetricRow {
    pub name: String,
    pub unit: String,
    pub total: Option<f64>,
    pub coverage: f64,
    pub reason: Option<String>,
    pub history: VecDeque<f64>,
    pub blocks: Vec<(String, Option<f64>)>,
}

/// A panel as shown.
#[derive(Debug, Clone)]
pub(super) struct PanelState {
    pub title: String,
    pub rows: Vec<MetricRow>,
}

/// The views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tab {
    Overview,
    Blocks,
    Raw,
}

impl Tab {
    pub(super) const ALL: [Tab; 3] = [Tab::Overview, Tab::Blocks, Tab::Raw];

    fn next(self, step: isize) -> Tab {
        let i = Tab::ALL.iter().position(|t| *t == self).unwrap_or(0) as isize;
        Tab::ALL[(i + step).rem_euclid(3) as usize]
    }
}

/// Everything the screen shows.
pub(super) struct App {
    pub device: String,
    pub generation: String,
    pub format: String,
    pub owner: String,
    pub interval: Duration,
    pub tab: Tab,
    pub paused: bool,
    pub by_name: bool,
    pub filter: String,
    pub typing: bool,
    pub help: bool,
    pub color: bool,
    pub panels: Vec<PanelState>,
    pub raw: Vec<Rate>,
    /// Each raw row's activity as sorted: it moves only when the rate moves by more
    /// than a tenth, so jitter never reorders rows. Keyed by block, counter, name.
    pub raw_order: HashMap<(String, Option<u32>, String), f64>,
    pub refreshes: u64,
}

/// Where the numbers come from.
enum Source<'d> {
    /// Programmed and owned by this process.
    Live(Option<Box<Exporter<'d>>>),
    /// Counted by the device's owner (the exporter) for this process.
    Client(Option<Box<Client<'d>>>),
    /// Read as they are.
    Passive(MetricSet, Vec<String>),
}

/// A measurement the exporter counts for top, and what its last interval gave.
struct Client<'d> {
    shared: Shared<'d>,
    set: MetricSet,
    names: Vec<String>,
    params: std::collections::HashMap<String, f64>,
    interval: (Vec<Count>, f64),
}

impl Client<'_> {
    fn values(&mut self) -> Vec<MetricValue> {
        // An owner that stopped answering leaves every value uncounted.
        self.interval = self.shared.interval().unwrap_or_default();
        let (counts, span_s) = (&self.interval.0, self.interval.1);
        if span_s <= 0.0 {
            return Vec::new();
        }
        let chosen: Vec<&metrics::Metric> =
            self.names.iter().filter_map(|n| self.set.get(n)).collect();
        crate::measure::metric_values(&self.set, &chosen, counts, span_s, &self.params, true)
    }
}

impl Source<'_> {
    fn values(&mut self, watch: &Watch, now: u64) -> Vec<MetricValue> {
        match self {
            Source::Live(Some(e)) => match e.scrape(now) {
                Ok(()) => e.values().to_vec(),
                Err(_) => Vec::new(),
            },
            Source::Client(Some(c)) => c.values(),
            Source::Live(None) | Source::Client(None) => Vec::new(),
            Source::Passive(set, names) => {
                let chosen: Vec<&metrics::Metric> =
                    names.iter().filter_map(|n| set.get(n)).collect();
                metrics::evaluate(set, &chosen, &watch.inputs(), true)
            }
        }
    }

    /// The blocks' counts over the last refresh and its seconds, when this
    /// process counts them (itself or through the owner).
    fn interval(&self) -> Option<(&[Count], f64)> {
        match self {
            Source::Live(Some(e)) => Some(e.interval_counts()),
            Source::Client(Some(c)) => Some((&c.interval.0, c.interval.1)),
            _ => None,
        }
    }

    /// The blocks counted for this process, which the passive watch leaves alone.
    fn blocks(&self) -> Vec<String> {
        match self {
            Source::Live(Some(e)) => e.blocks().into_iter().map(str::to_string).collect(),
            Source::Client(Some(c)) => c
                .shared
                .plans
                .iter()
                .map(|p| p.block.name.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    fn stop(&mut self) -> Result<()> {
        match self {
            Source::Live(e) => e.take().map_or(Ok(()), |e| e.stop()),
            // Dropping it ends the measurement: the owner puts its counters back.
            Source::Client(c) => {
                c.take();
                Ok(())
            }
            Source::Passive(..) => Ok(()),
        }
    }
}

/// Restores the device if the loop ends any other way than through `stop`.
struct Restore<'a, 'd>(&'a mut Source<'d>);

impl Drop for Restore<'_, '_> {
    fn drop(&mut self) {
        let _ = self.0.stop();
    }
}

/// Whether this process may program the device.
fn may_write(device: &Device) -> bool {
    let fs = device.fs();
    device
        .blocks()
        .iter()
        .find(|b| b.is_counter_block() && !b.is_empty())
        .is_some_and(|b| {
            let rel = match b.counters.first() {
                Some(c) => layout::event(&b.name, *c),
                None => layout::enable(&b.name),
            };
            fs.writable(&rel)
        })
}

/// What `bfperf top` was asked for.
#[derive(Debug, Clone)]
pub(super) struct TopOptions {
    /// Refresh every TIME (`+`/`-` change it while running)
    pub interval: std::time::Duration,
    /// More metrics or groups to show (as stat -M), in a panel of their own
    pub metrics: Vec<String>,
    /// More events to count (as stat -e, perf events included), shown in the raw view
    pub events: Vec<String>,
    /// Write nothing: show the registers and whatever is already programmed
    pub read_only: bool,
}

/// The generation's panels, and the metrics asked for with -M in one of their own:
/// each a title and its metrics' names.
fn titled_panels(
    gen: crate::block::Generation,
    set: &MetricSet,
    asked: &[String],
) -> Result<Vec<(String, Vec<String>)>> {
    let mut titled: Vec<(String, Vec<String>)> = panels::for_generation(gen)
        .map(|p| {
            let names = p.metrics.iter().map(|m| m.to_string()).collect();
            (p.title.to_string(), names)
        })
        .collect();
    if !asked.is_empty() {
        let chosen = set.select(asked)?;
        let names = chosen.iter().map(|m| m.def.name.clone()).collect();
        titled.push(("Metrics (-M)".into(), names));
    }
    Ok(titled)
}

/// The panels' rows, empty panels (no metric of theirs defined) left out.
fn panel_states(titled: &[(String, Vec<String>)], set: &MetricSet) -> Vec<PanelState> {
    titled
        .iter()
        .map(|(t, names)| PanelState {
            title: t.clone(),
            rows: names
                .iter()
                .filter_map(|n| set.get(n))
                .map(|m| MetricRow {
                    name: m.def.name.clone(),
                    unit: m.unit.clone(),
                    ..MetricRow::default()
                })
                .collect(),
        })
        .filter(|p| !p.rows.is_empty())
        .collect()
}

/// Where top's numbers come from: the exporter when it owns the device (for anyone
/// its socket lets in), else this process's own programming (with the right to
/// write), else a passive watch of what is programmed.
fn source<'d>(
    global: &Global,
    device: &'d Device,
    config: &ExportConfig,
    set: &MetricSet,
    read_only: bool,
) -> Result<(Option<crate::lock::WriterLock>, Source<'d>, String)> {
    let passive = || {
        let what = "read-only: nothing is written; showing what is programmed";
        (
            None,
            Source::Passive(set.clone(), config.metrics.clone()),
            what.to_string(),
        )
    };
    if read_only {
        return Ok(passive());
    }
    // Everything is checked before the first write.
    let checked = export::check(device, config, set)?;
    // The exporter counts, for anyone its socket lets in.
    if let Some(shared) = client(global, device, &checked, config, set)? {
        return Ok(shared);
    }
    if global.sim.is_some() || may_write(device) {
        return live(global, device, config, set);
    }
    if !config.events.is_empty() {
        return Err(Error::BadOption {
            problem: "-e programs counters, which needs the right to write the device (root); without it top shows what is already programmed".into(),
        });
    }
    Ok(passive())
}

/// The live source: the device locked and programmed (as the exporter does). Also
/// who owns the counters, for the header.
fn live<'d>(
    global: &Global,
    device: &'d Device,
    config: &ExportConfig,
    set: &MetricSet,
) -> Result<(Option<crate::lock::WriterLock>, Source<'d>, String)> {
    let lock = lock_device(global, device)?;
    let owner = match global.sim.is_some() {
        true => "simulator (no lock)".to_string(),
        false => format!("held by this bfperf (pid {})", std::process::id()),
    };
    let e = Exporter::start(device, config, set.clone(), monotonic_ns)?;
    Ok((lock, Source::Live(Some(Box::new(e))), owner))
}

/// What `config` counts (as the exporter would: `checked`), counted by the exporter
/// that owns the device; None when no exporter listens beside the lock.
fn client<'d>(
    global: &Global,
    device: &'d Device,
    checked: &export::Checked,
    config: &ExportConfig,
    set: &MetricSet,
) -> Result<Option<(Option<crate::lock::WriterLock>, Source<'d>, String)>> {
    let Some((mut shared, socket)) = owner_client(global, device, &checked.specs)? else {
        return Ok(None);
    };
    // The first refresh counts from here.
    shared.rebase()?;
    let client = Client {
        shared,
        set: set.clone(),
        names: checked.metrics.clone(),
        params: config.params.clone(),
        interval: (Vec::new(), 0.0),
    };
    let owner = format!("the exporter's; it counts for top ({})", socket.display());
    Ok(Some((None, Source::Client(Some(Box::new(client))), owner)))
}

/// Runs `bfperf top` until q, Ctrl-C, SIGTERM or SIGHUP.
pub(super) fn run(global: &Global, args: TopOptions) -> Result<()> {
    let device = open_device(global)?;
    let gen = device.generation();
    let set = load_metrics(global, &[gen])?;
    let titled = titled_panels(gen, &set, &args.metrics)?;
    let all: Vec<String> = titled.iter().flat_map(|(_, n)| n.clone()).collect();
    // perf events (-e cycles, and those metrics name) are counted beside the blocks;
    // metrics that need them are evaluated here, their block events counted as -e.
    let pmus = crate::perf::discover(&global.sysfs_root);
    let mut work = Work::from_events(&pmus, &args.events)?;
    let (cpu_metrics, all): (Vec<String>, Vec<String>) = all
        .into_iter()
        .partition(|n| set.get(n).is_some_and(metrics::uses_perf));
    let needing: Vec<&metrics::Metric> = cpu_metrics.iter().filter_map(|n| set.get(n)).collect();
    work.add_metrics(&pmus, &needing)?;
    let (perf, block_events) = (work.perf, work.specs);
    let config = ExportConfig {
        events: block_events,
        metrics: all,
        params: metric_params(global)?,
        journal: global.sim.is_none(),
        metric_gauges: false,
        strict: false,
    };
    let (_lock, mut source, owner) = source(global, &device, &config, &set, args.read_only)?;
    let owned = source.blocks();
    let restore = Restore(&mut source);
    // The blocks the measurement owns are read through it (it restarts their windows).
    let skip: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mut watch = Watch::open(&device, &skip)?;
    let mut app = App {
        device: device.location(),
        generation: gen.label().to_string(),
        format: export::event_list_format(&device).to_string(),
        owner,
        interval: args.interval.max(Duration::from_millis(100)),
        tab: Tab::Overview,
        paused: false,
        by_name: false,
        filter: String::new(),
        typing: false,
        help: false,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        panels: panel_states(&titled, &set),
        raw: Vec::new(),
        raw_order: HashMap::new(),
        refreshes: 0,
    };
    let cpus = crate::perf::online_cpus(&global.sysfs_root);
    let mut cores = cores::Cores::start(&perf, &cpus, cpu_metrics, monotonic_ns());
    let mut sources = Sources {
        device: restore.0,
        watch: &mut watch,
        cores: cores.as_mut(),
        set: &set,
    };
    let result = with_terminal(|term| event_loop(term, &mut app, &mut sources));
    drop(restore);
    result
}

/// Where a refresh's numbers come from: the device (live or passive), every value
/// file, and the perf counters.
struct Sources<'a, 'd> {
    device: &'a mut Source<'d>,
    watch: &'a mut Watch<'d>,
    cores: Option<&'a mut cores::Cores>,
    set: &'a MetricSet,
}

/// Sets up the terminal (raw mode, alternate screen, hidden cursor), runs `f`, and
/// puts the terminal back whatever happens, a panic included.
fn with_terminal(
    f: impl FnOnce(&mut Terminal<CrosstermBackend<Stdout>>) -> Result<()>,
) -> Result<()> {
    let io_err = |e: io::Error| Error::Io {
        message: format!("the terminal: {e} (bfperf top needs a terminal)"),
        source: e,
    };
    terminal::enable_raw_mode().map_err(io_err)?;
    let _back = TerminalBack;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave_terminal();
        previous(info);
    }));
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide).map_err(io_err)?;
    // Never dropped: ratatui's drop shows the cursor and reports a failure on standard
    // error in a way that panics when the terminal is gone; leave_terminal shows it,
    // ignoring a dead terminal.
    let mut term = std::mem::ManuallyDrop::new(
        Terminal::new(CrosstermBackend::new(io::stdout())).map_err(io_err)?,
    );
    f(&mut term)
}

fn leave_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
}

/// Leaves the alternate screen on every way out of `with_terminal`.
struct TerminalBack;

impl Drop for TerminalBack {
    fn drop(&mut self) {
        leave_terminal();
    }
}

fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    sources: &mut Sources,
) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    // True while the terminal is there: one that hung up answers writes with EIO, and
    // top then ends as when it sees the hangup.
    let draw = |term: &mut Terminal<CrosstermBackend<Stdout>>, app: &App| match term
        .draw(|f| view::draw(f, app))
    {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EIO | libc::ENXIO | libc::EPIPE)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::Io {
            message: format!("drawing the screen: {e}"),
            source: e,
        }),
    };
    // A first sample now, so the first refresh has an interval behind it.
    sources.watch.sample(monotonic_ns());
    let mut next = Instant::now() + app.interval.min(Duration::from_millis(500));
    let mut last_tick = Instant::now();
    let mut terminal = TerminalWatch { carry: Vec::new() };
    // False once the terminal is gone: the loop ends as on a hangup.
    let mut shown = draw(term, app)?;
    while shown && !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= next {
            if !app.paused {
                refresh(app, sources);
            }
            next = now + app.interval;
            shown = draw(term, app)?;
        } else if now.duration_since(last_tick) >= TICK {
            if let Source::Live(Some(e)) = sources.device {
                let _ = e.sweep(monotonic_ns());
            }
            last_tick = now;
        }
        let wait = next.saturating_duration_since(Instant::now()).min(TICK);
        match terminal.wait(wait) {
            Tty::Gone => return Ok(()),
            Tty::Quiet => continue,
            Tty::Input(keys) => {
                if keys.into_iter().any(|k| key(app, k)) {
                    return Ok(());
                }
            }
        }
        shown = draw(term, app)?;
    }
    Ok(())
}

/// What the terminal did while top waited.
enum Tty {
    /// Keys pressed.
    Input(Vec<Key>),
    /// Nothing in the time waited.
    Quiet,
    /// Hung up or closed: top ends, and puts the device back.
    Gone,
}

/// Watches standard input (the terminal) for keys and for its end, with poll(2) and
/// read(2): nothing here can wait longer than asked, whatever the terminal does.
struct TerminalWatch {
    /// The start of a character a read cut off.
    carry: Vec<u8>,
}

impl TerminalWatch {
    /// Waits up to `wait` for keys (or the terminal's end) on standard input.
    fn wait(&mut self, wait: Duration) -> Tty {
        let mut fd = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd, owned here, for the duration of the call.
        let n = unsafe { libc::poll(&mut fd, 1, ms) };
        if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Tty::Gone;
        }
        // Nothing (or EINTR: a signal, whose flag the loop reads).
        if n <= 0 || fd.revents & libc::POLLIN == 0 {
            return Tty::Quiet;
        }
        let mut buf = [0u8; 256];
        // SAFETY: reads at most buf.len() bytes into buf, which lives across the call;
        // poll said it is readable, so it does not block.
        let got = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
        match got {
            // The end of the file, or a terminal that hung up (EIO).
            0 => Tty::Gone,
            n if n < 0 => match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Tty::Quiet,
                _ => Tty::Gone,
            },
            n => Tty::Input(keys::decode(&buf[..n as usize], &mut self.carry)),
        }
    }
}

/// The raw rows' sort values: a rate that moved by a tenth or less keeps the one it
/// had.
fn keep_raw_order(app: &mut App) {
    let mut order = HashMap::new();
    for r in &app.raw {
        let key = (r.block.clone(), r.counter, r.name.clone());
        let now = r.per_s.unwrap_or(-1.0);
        let kept = match app.raw_order.get(&key) {
            Some(&was) if (now - was).abs() <= 0.1 * was.abs() => was,
            _ => now,
        };
        order.insert(key, kept);
    }
    app.raw_order = order;
}

/// Handles a key; true to quit.
fn key(app: &mut App, k: Key) -> bool {
    if k == Key::Interrupt {
        return true;
    }
    if app.typing {
        match k {
            Key::Enter | Key::Esc => app.typing = false,
            Key::Backspace => {
                app.filter.pop();
            }
            Key::Char(c) => app.filter.push(c),
            _ => {}
        }
        return false;
    }
    match k {
        Key::Char('q') => return true,
        Key::Char('p') | Key::Char(' ') => app.paused = !app.paused,
        Key::Tab | Key::Right => app.tab = app.tab.next(1),
        Key::BackTab | Key::Left => app.tab = app.tab.next(-1),
        Key::Char('1') => app.tab = Tab::Overview,
        Key::Char('2') => app.tab = Tab::Blocks,
        Key::Char('3') => app.tab = Tab::Raw,
        Key::Char('s') => app.by_name = !app.by_name,
        Key::Char('/') => {
            app.typing = true;
            app.filter.clear();
        }
        Key::Char('+') => app.interval = (app.interval * 2).min(Duration::from_secs(60)),
        Key::Char('-') => {
            app.interval = (app.interval / 2).max(Duration::from_millis(100));
        }
        Key::Char('?') | Key::Char('h') => app.help = !app.help,
        Key::Esc => {
            app.help = false;
            app.filter.clear();
        }
        _ => {}
    }
    false
}

/// One refresh: the values over the last interval, into the panels and their history.
fn refresh(app: &mut App, sources: &mut Sources) {
    let now = monotonic_ns();
    let (source, watch) = (&mut *sources.device, &mut *sources.watch);
    app.raw = watch.sample(now).to_vec();
    let mut values = source.values(watch, now);
    if let Some(cores) = sources.cores.as_deref_mut() {
        app.raw.extend_from_slice(cores.sample(now));
        // The blocks' counts over the exporter's last interval, or per second.
        let blocks = match source.interval() {
            Some((counts, span)) => crate::measure::metric_inputs(counts, span),
            None => watch.inputs(),
        };
        values.extend(cores.values(sources.set, blocks));
    }
    if let Some((counts, span)) = source.interval() {
        app.raw
            .extend(counts.iter().filter(|c| c.unit != "level").map(|c| Rate {
                block: c.block.clone(),
                kind: c.kind,
                name: c.event.clone(),
                counter: c.counter,
                unit: c.unit,
                per_s: c.value.filter(|_| span > 0.0).map(|v| v as f64 / span),
                idle: false,
                level: false,
            }));
    }
    keep_raw_order(app);
    for panel in &mut app.panels {
        for row in &mut panel.rows {
            let mine: Vec<&MetricValue> = values.iter().filter(|v| v.metric == row.name).collect();
            row.blocks = mine
                .iter()
                .filter(|v| !v.of_kind)
                .map(|v| (v.block.clone(), v.value))
                .collect();
            let total = mine.iter().find(|v| v.of_kind).or(if mine.len() == 1 {
                mine.first()
            } else {
                None
            });
            row.total = total.and_then(|v| v.value);
            row.coverage = total.map_or(0.0, |v| v.coverage);
            row.reason = total.and_then(|v| v.reason.clone());
            if mine.is_empty() {
                row.reason = Some("not counted on this device".into());
            }
            if let Some(t) = row.total {
                row.history.push_back(t);
                if row.history.len() > HISTORY {
                    row.history.pop_front();
                }
            }
        }
    }
    app.refreshes += 1;
    // The crash path's test: a panic after N refreshes must leave the terminal and
    // the device as they were (the unwinding guards restore both).
    if std::env::var("BFPERF_TOP_PANIC_AFTER")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| app.refreshes >= n)
    {
        panic!("BFPERF_TOP_PANIC_AFTER: the crash path, as asked");
    }
}
