//! `bfperf-exporter`, the program: serves `/metrics` over HTTP ([`http`]: bounded, its own
//! thread; the device is swept here, once for all the scrapes that wait), or writes
//! the exposition to a textfile for node_exporter; reloads its config on SIGHUP and
//! restores the device on SIGTERM and SIGINT.

pub(crate) mod args;
mod config;
mod entry;
mod http;
mod process;
mod push;
mod serve;
mod web;

pub use entry::entry;

use args::Options;
use config::{read_config, Serving};
use serve::{http_loop, listen_addr, textfile_loop, Serve};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::collector::{self, Collector, Counting};
use crate::device::values::monotonic_ns;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exposition::{self, Family, TextFormat};
use crate::front::args::Global;
use crate::front::exit::diag;
use crate::front::setup::{load_metrics, lock_path, open_device};
use crate::measure::owner::Held;

/// The default config file; its absence means the default set.
const DEFAULT_CONFIG: &str = "/etc/bfperf/exporter.toml";
/// The default address: loopback, a fixed port so that `instance` stays stable.
const DEFAULT_LISTEN: &str = "127.0.0.1:9839";
/// The longest time between two sweeps (windows must not wrap).
const SWEEP: Duration = Duration::from_secs(1);

struct Signals {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
}

fn signals() -> Signals {
    let s = Signals {
        stop: Arc::new(AtomicBool::new(false)),
        reload: Arc::new(AtomicBool::new(false)),
    };
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let _ = signal_hook::flag::register(sig, s.stop.clone());
    }
    let _ = signal_hook::flag::register(libc::SIGHUP, s.reload.clone());
    s
}

/// Loads a new config on SIGHUP: checked in full first; a bad one keeps the old
/// programming and says why; one that is the config running changes nothing. A
/// config that checks out but fails to start (the device refuses a write) is
/// undone, and the old configuration starts again.
/// The series that continue keep their running totals.
fn reload<'d>(r: &mut Running<'d, '_>, current: Collector<'d>) -> Result<Collector<'d>> {
    let (device, global) = (r.device, r.global);
    let checked = read_config(r.args.config.as_deref(), global).and_then(|(c, serving)| {
        if serving != r.serving {
            diag("listen, web_config_file, socket_group, remote_write and otlp take effect when the exporter restarts; the rest of the configuration is reloaded");
        }
        let set = load_metrics(global, &[device.generation()])?;
        let checked = collector::check(device, &c, &set)?;
        for s in &checked.skipped {
            diag(&format!("warning: skipped {s} (strict = true refuses it)"));
        }
        Ok((c, set, checked))
    });
    let mut current = current;
    let (config, set, checked) = match checked {
        Err(e) => {
            diag(&format!(
                "warning: reload refused, the old configuration keeps running: {e}"
            ));
            end_clients(r, &mut current);
            return Ok(current);
        }
        Ok(c) => c,
    };
    if same_config(&r.config, (&config, &set)) {
        // Nothing to change: the counters and the clients' go on, nothing lost.
        diag("configuration reloaded: unchanged, the counters go on as they are");
        return Ok(current);
    }
    end_clients(r, &mut current);
    // Blocks whose events stay keep counting; the series that continue keep their
    // running totals (counters never go backwards across a reload).
    match current.reload(&config, checked, set.clone()) {
        Ok(next) => {
            diag("configuration reloaded");
            r.config = (config, set);
            Ok(next)
        }
        Err((e, totals)) => {
            diag(&format!(
                "warning: reload failed, the old configuration runs again: {e}"
            ));
            let (old, old_set) = r.config.clone();
            let mut next = Collector::start(device, &old, old_set, monotonic_ns)?;
            next.carry(totals);
            Ok(next)
        }
    }
}

/// Ends every client's measurement, its counters put back: a reload ends them
/// (a refused one too: the clients must not be counted for by an exporter they
/// did not ask).
fn end_clients(r: &mut Running, e: &mut Collector) {
    if let Some(h) = &mut r.owner {
        h.clients.close_all(e);
        said(&mut h.clients);
    }
}

/// Whether a configuration read again is the one running: the same config and the
/// same metric definitions (a metric file may have changed).
fn same_config(
    running: &(Counting, crate::metrics::MetricSet),
    (config, set): (&Counting, &crate::metrics::MetricSet),
) -> bool {
    let defs = |s: &crate::metrics::MetricSet| -> Vec<(crate::metrics::MetricDef, String)> {
        s.metrics
            .iter()
            .map(|m| (m.def.clone(), m.source.clone()))
            .collect()
    };
    running.0 == *config && defs(&running.1) == defs(set)
}

/// Logs what the owner's socket says happened to its clients.
fn said(clients: &mut crate::measure::owner::socket::Clients) {
    for line in clients.take_said() {
        diag(&line);
    }
}

fn log_events(e: &mut Collector) {
    for ev in e.events.drain(..) {
        diag(&ev);
    }
}

/// Runs the exporter until SIGTERM or SIGINT; restores the device then.
fn run(global: &Global, mut args: Options) -> Result<()> {
    let device = open_device(global)?;
    // What the device is, fixed now, while it answers: what a device found
    // again must be.
    crate::front::exit::log(
        crate::front::exit::Level::Debug,
        &format!("the device is {}", device.identity()),
    );
    let (config, serving) = read_config(args.config.as_deref(), global)?;
    // The command line's flags win over the config file.
    args.listen = args.listen.or(serving.listen.clone());
    args.web_config = args.web_config.or(serving.web_config.clone());
    args.socket_group = args.socket_group.or(serving.socket_group.clone());
    // Checked before the device is touched.
    let group = args
        .socket_group
        .as_deref()
        .map(crate::measure::owner::socket::group_id)
        .transpose()?;
    let set = load_metrics(global, &[device.generation()])?;
    // Checked once for this device: the first run starts from it.
    let checked = collector::check(&device, &config, &set)?;
    for s in &checked.skipped {
        diag(&format!("warning: skipped {s} (strict = true refuses it)"));
    }
    let mut checked = Some(checked);
    // Checked before the device is touched, like everything else.
    if args.textfile.is_none() {
        listen_addr(&args)?;
    }
    let web = match &args.web_config {
        Some(path) => web::Web::load(path)?,
        None => web::Web::open(),
    };
    let push = pushers(&args, &serving, &device)?;
    let sig = signals();
    let mut server = Serve::Pending(web);
    let mut pusher: Vec<_> = push.into_iter().map(push::Pusher::start).collect();
    let mut owner = match lock_path(global, &device)? {
        Some(lock) => Some(Held::take(&lock, global.wait, group)?),
        None => None,
    };
    let mut device = device;
    let mut config = (config, set);
    let mut earlier = None;
    loop {
        let outcome = run_on(
            &device,
            global,
            (&args, &mut owner),
            (&mut config, &serving, earlier.take(), checked.take()),
            (&mut pusher, &mut server),
            &sig,
        )?;
        match outcome {
            Outcome::Stopped(result) => {
                // A failure says itself, as the exporter exits.
                if result.is_ok() {
                    diag("stopped; the counters are as they were");
                }
                return result;
            }
            Outcome::Moved(found, saved) => {
                // What the device held before the exporter is put back at the
                // place it is found at when the exporter stops.
                earlier = Some(saved);
                match found.location() == device.location() {
                    true => diag("the device answers again: programming it again (its series start again from 0, a counter reset)"),
                    false => diag(&format!(
                        "the device answers again at {} (it was at {}): programming it there (its series start again from 0, a counter reset)",
                        found.location(),
                        device.location()
                    )),
                }
                device = found;
            }
        }
    }
}

/// The pushers the config asks for (remote write, OTLP), checked.
fn pushers(args: &Options, serving: &Serving, device: &Device) -> Result<Vec<push::Receiver>> {
    let config_path = args.config.clone().unwrap_or_else(|| DEFAULT_CONFIG.into());
    let mut push = Vec::new();
    if let Some(rw) = &serving.remote_write {
        let p = push::Protocol::RemoteWrite;
        push.push(push::Receiver::check(rw, &config_path, p)?);
    }
    if let Some(o) = &serving.otlp {
        push.push(push::Receiver::check(o, &config_path, otlp_of(device))?);
    }
    Ok(push)
}

/// OTLP's Resource for `device`: who sends (bfperf, its version, this host) and
/// which device (its generation, and its place as it outlasts a reboot or the
/// driver loaded again: a resource is a series' identity to many backends);
/// points carry the generation too.
fn otlp_of(device: &Device) -> push::Protocol {
    let generation = device.generation().label().to_string();
    push::Protocol::Otlp {
        resource: vec![
            ("service.name".into(), "bfperf".into()),
            ("service.version".into(), env!("CARGO_PKG_VERSION").into()),
            ("host.name".into(), push::host_name()),
            ("bfperf.device".into(), device.lasting_location()),
            ("bfperf.generation".into(), generation.clone()),
        ],
        generation,
    }
}

/// How a run on one device ended.
enum Outcome {
    /// Asked to stop (or failed): the loop's result, the device put back.
    Stopped(Result<()>),
    /// The device went away and was found again (at its place, or another
    /// hwmonN), with what it held before the exporter programmed it.
    Moved(Device, collector::Inheritance),
}

/// The exporter on `device` until it stops or the device comes back anew: the
/// loop run, the device put back at the end (as `earlier` says, when the device
/// was found here after it went away).
fn run_on(
    device: &Device,
    global: &Global,
    (args, owner): (&Options, &mut Option<Held>),
    (config, serving, earlier, checked): (
        &mut (Counting, crate::metrics::MetricSet),
        &Serving,
        Option<collector::Inheritance>,
        Option<collector::Checked>,
    ),
    (pusher, server): (&mut Vec<push::Pusher>, &mut Serve),
    sig: &Signals,
) -> Result<Outcome> {
    // A device found again is checked anew: it may list other blocks.
    let checked = match checked {
        Some(c) => c,
        None => collector::check(device, &config.0, &config.1)?,
    };
    let exporter = Collector::start_after(
        device,
        &config.0,
        checked,
        config.1.clone(),
        monotonic_ns,
        earlier,
    )?;
    let mut running = Running {
        device,
        global,
        args,
        exporter: Some(exporter),
        config: config.clone(),
        serving: serving.clone(),
        owner: owner.take(),
        pusher: std::mem::take(pusher),
        last_sweep: Instant::now(),
        last_probe: Instant::now(),
        rediscover: (Instant::now(), REDISCOVER_FIRST),
        moved: None,
    };
    let result = match &args.textfile {
        Some(path) => textfile_loop(&mut running, path, sig),
        None => server
            .started(args)
            .and_then(|server| http_loop(&mut running, sig, server)),
    };
    let Running {
        owner: kept,
        pusher: pushed,
        config: ran,
        exporter,
        moved,
        ..
    } = running;
    // The socket, the pushers' queues and the configuration a reload left go on
    // with the next run.
    (*owner, *pusher, *config) = (kept, pushed, ran);
    Ok(match (result, moved, exporter) {
        (Ok(()), Some(found), Some(exporter)) => {
            if let Some(h) = owner {
                h.clients.drop_all();
                said(&mut h.clients);
            }
            Outcome::Moved(found, exporter.forsake())
        }
        (result, _, exporter) => {
            if let Some(h) = owner {
                h.clients.drop_all();
                said(&mut h.clients);
            }
            let restored = exporter.map_or(Ok(()), Collector::stop);
            Outcome::Stopped(result.and(restored))
        }
    })
}

/// One scrape: a sweep, then the exposition in each of `formats`, the remote
/// writer's own series among the rest; `asked`: when the request it answers came.
fn exposition<const N: usize>(
    r: &mut Running,
    formats: [TextFormat; N],
    asked: Option<Instant>,
) -> [String; N] {
    let fams = swept_families(r, asked);
    exposition::render_each(&fams, formats)
}

/// A sweep, then every family a scrape sees (`asked`: when the request it answers
/// came, None for a push or a textfile).
fn swept_families(r: &mut Running, asked: Option<Instant>) -> Vec<Family> {
    let extra: Vec<Family> = r.pusher.iter().flat_map(|p| p.families()).collect();
    let e = r.exporter();
    e.asked_at(asked.map(|a| monotonic_ns().saturating_sub(a.elapsed().as_nanos() as u64)));
    let start = Instant::now();
    let up = match e.scrape(monotonic_ns()) {
        Ok(()) => true,
        Err(err) => {
            diag(&format!("warning: sweep failed: {err}"));
            false
        }
    };
    log_events(e);
    let took = start.elapsed().as_secs_f64();
    let mut fams = e.families(up, took);
    fams.extend(extra);
    fams.extend(process::families());
    process::build_labels(&mut fams);
    fams
}

/// The running exporter and what a reload needs.
struct Running<'d, 'a> {
    device: &'d Device,
    global: &'a Global,
    args: &'a Options,
    exporter: Option<Collector<'d>>,
    /// The configuration running (a failed reload starts it again).
    config: (Counting, crate::metrics::MetricSet),
    /// Where the config file said to serve when the exporter started.
    serving: Serving,
    /// The device's lock and socket, held for the exporter's life.
    owner: Option<Held>,
    /// Remote write, when the config asks for it.
    pusher: Vec<push::Pusher>,
    last_sweep: Instant,
    last_probe: Instant,
    /// While the device cannot be read: when to look for it next, and the wait
    /// after that (doubling to [`REDISCOVER_MOST`]).
    rediscover: (Instant, Duration),
    /// The device found again in another place (another hwmonN): the run ends, to
    /// start again there.
    moved: Option<Device>,
}

/// How soon a device that cannot be read is looked for, and the longest between
/// two looks.
const REDISCOVER_FIRST: Duration = Duration::from_secs(1);
const REDISCOVER_MOST: Duration = Duration::from_secs(5);

impl<'d> Running<'d, '_> {
    /// Looks for a device that could not be read (at most every second, backing
    /// off to every 5 s while it is not found): `moved` is set when it is found.
    fn look_for_device(&mut self) {
        if self.exporter().readable() || self.still_here() {
            return;
        }
        let (at, wait) = self.rediscover;
        if Instant::now() < at {
            return;
        }
        self.moved = self.found_again();
        self.rediscover = (Instant::now() + wait, (wait * 2).min(REDISCOVER_MOST));
    }

    /// Whether a device that failed a read is still here: its directory the one
    /// opened, its name answering. Then the read's failure was the read's (a flaky
    /// bus, EBUSY): that window is left out, every total is kept and nothing is
    /// programmed again; only a device gone is looked for.
    fn still_here(&self) -> bool {
        let fs = self.device.fs();
        fs.still_here().is_ok() && fs.read(crate::sysfs::layout::NAME).is_ok()
    }

    /// The device, found again: at its own place, or (when it was found by
    /// discovery, not named by `--device`) under any other hwmonN. A place is
    /// taken only if it is the same device (its name, generation, platform device
    /// and blocks: [`Device::same_device`]); anything else there is never written,
    /// is said once, and the search goes on. Not for a simulator in process.
    fn found_again(&self) -> Option<Device> {
        if self.global.sim.is_some() {
            return None;
        }
        let own = PathBuf::from(self.device.location());
        let mut places = vec![own.clone()];
        if self.global.device.is_none() {
            let others = crate::device::candidates(&self.global.sysfs_root);
            places.extend(others.into_iter().filter(|d| *d != own));
        }
        for dir in places {
            match crate::device::Device::open_tree(crate::sysfs::RealFs::new(&dir).with_page_size(self.global.page_size)) {
                Ok(found) => match self.device.same_device(&found) {
                    Ok(()) => return Some(found),
                    Err(why) => say_once(&format!(
                        "warning: {} is not the device this exporter owns ({why}): nothing is written there; still looking",
                        dir.display()
                    )),
                },
                // Something that is no bfperf device at all where the device was.
                Err(Error::NotADevice { reason, .. }) if dir == own && !reason.starts_with("cannot read") => {
                    say_once(&format!(
                        "warning: {} is not the device this exporter owns ({reason}): nothing is written there; still looking",
                        dir.display()
                    ))
                }
                Err(_) => {}
            }
        }
        None
    }

    fn exporter(&mut self) -> &mut Collector<'d> {
        self.exporter
            .as_mut()
            .expect("an exporter is always running")
    }

    /// Keeps the windows short between scrapes and handles the signals. Returns
    /// true to stop.
    fn between(&mut self, sig: &Signals) -> Result<bool> {
        if sig.stop.load(Ordering::SeqCst) {
            return Ok(true);
        }
        self.look_for_device();
        if self.moved.is_some() {
            return Ok(true);
        }
        if sig.reload.swap(false, Ordering::SeqCst) {
            let old = self.exporter.take().expect("an exporter is always running");
            self.exporter = Some(reload(self, old)?);
        }
        if let (Some(h), Some(e)) = (&mut self.owner, &mut self.exporter) {
            h.clients.poll(e);
            said(&mut h.clients);
        }
        if self.pusher.iter().any(|p| p.due()) {
            // One sweep for every pusher due: the same values, whatever the wire.
            let fams = swept_families(self, None);
            for p in self.pusher.iter_mut().filter(|p| p.due()) {
                p.push(&fams);
            }
            self.last_sweep = Instant::now();
            self.last_probe = self.last_sweep;
        }
        if self.last_sweep.elapsed() >= SWEEP {
            let e = self.exporter();
            if let Err(err) = e.sweep(monotonic_ns()) {
                diag(&format!("warning: sweep failed: {err}"));
            }
            log_events(e);
            self.last_sweep = Instant::now();
            self.last_probe = self.last_sweep;
        } else if self.last_probe.elapsed() >= crate::measure::pace::PROBE {
            let e = self.exporter();
            e.probe(monotonic_ns());
            log_events(e);
            self.last_probe = Instant::now();
        }
        Ok(false)
    }
}

/// Says a line once per process (a condition that may repeat many times a second).
fn say_once(line: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.iter().any(|s| s == line) {
        said.push(line.to_string());
        diag(line);
    }
}
