//! Pushing, for DPUs a Prometheus server cannot reach: Prometheus remote write, and
//! OTLP/HTTP for an OpenTelemetry Collector (one implementation, the wire apart).
//! Every `interval` the exporter sweeps and queues the series a scrape would see
//! (the same names and labels, plus for remote write `job` and `instance`, which a
//! scrape would add; for OTLP a Resource says whose they are); a thread of its own
//! sends them. The queue is bounded in samples and drops the oldest
//! (counted) when the receiver is down for longer than it holds; a request that fails
//! is retried with backoff (1 s doubling to 30 s, or the receiver's `Retry-After`,
//! at most 5 minutes), one the receiver refuses (a 4xx
//! other than 429) is dropped and counted. Sampling never waits on the receiver: the
//! main thread only appends to the queue.

mod otlp;
mod post;
mod queue;
mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use crate::cli::exit::diag;
use crate::error::{Error, Result};
use crate::export::Family;

use post::{Outcome, Target};
use queue::Queue;
use wire::TimeSeries;

/// The default time between two pushes.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);
/// The default bound of the queue, in samples.
const DEFAULT_QUEUE: usize = 100_000;
/// The most samples one request carries.
const MAX_PER_SEND: usize = 10_000;
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest a receiver's `Retry-After` is honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
/// How long a stopping exporter lets the sender try to deliver what is queued.
const FLUSH_ON_STOP: Duration = Duration::from_secs(2);
/// The most a token or password file may hold.
const MAX_SECRET: u64 = 4096;
/// The most a CA bundle may hold.
const MAX_CA: u64 = 4 * 1024 * 1024;
/// Debian's bundle of the system's trusted authorities, when no `ca_file` is given.
const SYSTEM_CA: &str = "/etc/ssl/certs/ca-certificates.crt";

/// `[remote_write]` or `[otlp]` in the exporter's config: the same keys, but for
/// the receiver's address (`url`, `endpoint`) and what only one protocol has.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(super) struct PushFile {
    /// Remote write's endpoint (`https://prometheus:9090/api/v1/write`).
    url: Option<String>,
    /// OTLP's endpoint (`https://collector:4318/v1/metrics`).
    endpoint: Option<String>,
    /// Headers sent with every request (a tenant, an API key's name).
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The name the receiver's certificate is checked against, when not the
    /// endpoint's host.
    server_name: Option<String>,
    /// OTLP: attributes added to the Resource (`deployment.environment`).
    #[serde(default)]
    resource_attributes: BTreeMap<String, String>,
    /// Time between pushes (`15s`).
    interval: Option<String>,
    /// A file holding a bearer token.
    bearer_token_file: Option<PathBuf>,
    /// Basic auth: a user and a file holding the password.
    basic_auth: Option<BasicAuthFile>,
    /// The CA that signs the receiver's certificate (PEM); default the system's.
    ca_file: Option<PathBuf>,
    /// The queue's bound in samples.
    queue_samples: Option<usize>,
    /// Labels added to every series (`instance` defaults to the host name, `job`
    /// to bfperf).
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct BasicAuthFile {
    username: String,
    password_file: PathBuf,
}

/// The protocol a pusher speaks.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Protocol {
    /// Prometheus remote write 1.0 (snappy, `prompb.WriteRequest`).
    RemoteWrite,
    /// OTLP/HTTP (gzip, `ExportMetricsServiceRequest`), under this Resource, each
    /// point with the device's generation among its attributes.
    Otlp {
        resource: Vec<(String, String)>,
        generation: String,
    },
}

impl Protocol {
    /// Its section in the config, and the prefix of its own series.
    fn section(&self) -> &'static str {
        match self {
            Protocol::RemoteWrite => "remote_write",
            Protocol::Otlp { .. } => "otlp",
        }
    }
}

/// A checked `[remote_write]` or `[otlp]`: everything read and valid before the
/// device is touched.
pub(super) struct RemoteWrite {
    target: Target,
    url: String,
    interval: Duration,
    bound: usize,
    labels: Vec<(String, String)>,
    protocol: Protocol,
}

/// A section of the config file, for its messages.
struct Section<'a> {
    config: &'a Path,
    name: &'static str,
}

impl Section<'_> {
    /// What failed, when a file the section names cannot be read.
    fn cannot_read(&self, key: &str) -> &'static str {
        match (self.name, key) {
            ("otlp", "bearer_token_file") => "cannot read otlp's bearer_token_file",
            ("otlp", "password_file") => "cannot read otlp's password_file",
            ("otlp", _) => "cannot read otlp's CA (ca_file)",
            (_, "bearer_token_file") => "cannot read remote_write's bearer_token_file",
            (_, "password_file") => "cannot read remote_write's password_file",
            _ => "cannot read remote_write's CA (ca_file)",
        }
    }

    fn bad(&self, problem: String) -> Error {
        Error::BadConfig {
            path: self.config.to_path_buf(),
            problem: format!("{}: {problem}", self.name),
        }
    }
}

impl PushFile {
    /// The same, its file names taken relative to `dir` (the config's directory).
    pub(super) fn relative_to(mut self, dir: &Path) -> PushFile {
        let join = |p: &mut PathBuf| *p = dir.join(&*p);
        self.bearer_token_file.as_mut().map(join);
        self.ca_file.as_mut().map(join);
        if let Some(b) = self.basic_auth.as_mut() {
            join(&mut b.password_file);
        }
        self
    }
}

impl RemoteWrite {
    /// Checks `file` (its paths made relative to the config's directory), named
    /// `config` in messages, for `protocol` (for OTLP, the Resource bfperf gives;
    /// the file's `resource_attributes` are added to it).
    pub(super) fn check(file: &PushFile, config: &Path, protocol: Protocol) -> Result<RemoteWrite> {
        let at = Section {
            config,
            name: protocol.section(),
        };
        let (key, url) = address(file, &protocol, &at)?;
        let (uri, https, host, port) = endpoint(url, key, &at)?;
        let (interval, bound) = pace(file, &at)?;
        let tls = match https {
            true => Some(client_tls(&at, &file.ca_file)?),
            false => None,
        };
        let authorization = authorization(file, &at)?;
        if authorization.is_some() && !https && !loopback(&host) {
            diag(&format!(
                "warning: {} sends its credentials to {host} over plain http, readable by anyone on the path; use https:// ({})",
                at.name,
                config.display()
            ));
        }
        let headers = headers(&protocol, &file.headers, &at)?;
        let (labels, protocol) = labelled(protocol, file, &at)?;
        let retryable = match protocol {
            Protocol::RemoteWrite => post::retry_remote_write,
            Protocol::Otlp { .. } => post::retry_otlp,
        };
        let url = format!(
            "{}://{}{}",
            if https { "https" } else { "http" },
            uri.authority().map_or("", |a| a.as_str()),
            uri.path()
        );
        let server_name = file.server_name.clone().unwrap_or_else(|| host.clone());
        Ok(RemoteWrite {
            target: Target {
                uri,
                host,
                server_name,
                port,
                tls,
                authorization,
                headers,
                retryable,
            },
            url,
            interval,
            bound,
            labels,
            protocol,
        })
    }
}

/// The section's key naming the receiver (`url`, `endpoint`) and its value; the
/// other protocol's keys refused.
fn address<'f>(
    file: &'f PushFile,
    protocol: &Protocol,
    at: &Section,
) -> Result<(&'static str, &'f str)> {
    let (key, value, wrong) = match protocol {
        Protocol::RemoteWrite => (
            "url",
            &file.url,
            [
                ("endpoint", file.endpoint.is_some()),
                ("resource_attributes", !file.resource_attributes.is_empty()),
            ],
        ),
        Protocol::Otlp { .. } => (
            "endpoint",
            &file.endpoint,
            [
                ("url", file.url.is_some()),
                ("labels", !file.labels.is_empty()),
            ],
        ),
    };
    if let Some((other, _)) = wrong.iter().find(|(_, given)| *given) {
        return Err(at.bad(format!("{other} is not a key of this section")));
    }
    match value {
        Some(v) => Ok((key, v)),
        None => Err(at.bad(format!("{key} is missing: where to send"))),
    }
}

/// The labels each pushed series gets, and the protocol with the file's additions:
/// remote write's `job`, `instance` and the config's labels; OTLP's `generation`
/// on each point and the config's Resource attributes.
fn labelled(
    protocol: Protocol,
    file: &PushFile,
    at: &Section,
) -> Result<(Vec<(String, String)>, Protocol)> {
    Ok(match protocol {
        Protocol::RemoteWrite => (labels(&file.labels, at)?, Protocol::RemoteWrite),
        Protocol::Otlp {
            mut resource,
            generation,
        } => {
            for (k, v) in &file.resource_attributes {
                resource.retain(|(key, _)| key != k);
                resource.push((k.clone(), v.clone()));
            }
            let point = vec![("generation".to_string(), generation.clone())];
            (
                point,
                Protocol::Otlp {
                    resource,
                    generation,
                },
            )
        }
    })
}

/// The receiver's address `url` (the section's `key`): its URI, whether it is
/// https, its host and port.
fn endpoint(url: &str, key: &str, at: &Section) -> Result<(hyper::Uri, bool, String, u16)> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| at.bad(format!("{key} '{url}': {e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(at.bad(format!("{key} '{url}' is not http:// or https://"))),
    };
    let host = uri
        .host()
        .ok_or_else(|| at.bad(format!("{key} '{url}' names no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    Ok((uri, https, host, port))
}

/// How often to push, and the queue's bound in samples.
fn pace(file: &PushFile, at: &Section) -> Result<(Duration, usize)> {
    let interval = match &file.interval {
        Some(t) => {
            crate::cli::args::parse_duration(t).map_err(|e| at.bad(format!("interval: {e}")))?
        }
        None => DEFAULT_INTERVAL,
    };
    if interval < Duration::from_secs(1) {
        return Err(at.bad("interval must be 1s or more".into()));
    }
    let bound = file.queue_samples.unwrap_or(DEFAULT_QUEUE);
    if !(1_000..=10_000_000).contains(&bound) {
        return Err(at.bad(format!(
            "queue_samples {bound} is not between 1000 and 10000000"
        )));
    }
    Ok((interval, bound))
}

/// The protocol's headers, then the config's (which may not replace them).
fn headers(
    protocol: &Protocol,
    given: &BTreeMap<String, String>,
    at: &Section,
) -> Result<Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>> {
    use hyper::header::{HeaderName, HeaderValue};
    let own: &[(&str, &str)] = match protocol {
        Protocol::RemoteWrite => &[
            ("content-encoding", "snappy"),
            ("content-type", "application/x-protobuf"),
            ("x-prometheus-remote-write-version", "0.1.0"),
        ],
        Protocol::Otlp { .. } => &[
            ("content-encoding", "gzip"),
            ("content-type", "application/x-protobuf"),
        ],
    };
    let mut out: Vec<(HeaderName, HeaderValue)> = own
        .iter()
        .map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
        .collect();
    for (k, v) in given {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| at.bad(format!("headers: '{k}' is not a header name")))?;
        let reserved = ["host", "authorization", "content-length", "user-agent"];
        if out.iter().any(|(n, _)| *n == name) || reserved.contains(&name.as_str()) {
            return Err(at.bad(format!(
                "headers: {k} is bfperf's to send (credentials go in bearer_token_file or basic_auth)"
            )));
        }
        let mut value = HeaderValue::from_str(v).map_err(|_| {
            at.bad(format!(
                "headers: the value of {k} holds characters a header cannot"
            ))
        })?;
        value.set_sensitive(true);
        out.push((name, value));
    }
    Ok(out)
}

/// Whether `host` (a name or an address) is this machine's loopback.
fn loopback(host: &str) -> bool {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// The Authorization header the config asks for (token or basic), its secret read
/// from its file now.
fn authorization(file: &PushFile, at: &Section) -> Result<Option<hyper::header::HeaderValue>> {
    // One line: its line end is not part of it, and a second line means the file
    // is not what the config meant (never sent).
    let secret = |p: &PathBuf, key: &str| -> Result<String> {
        let bytes = crate::sysfs::files::read_secret(p, at.cannot_read(key), MAX_SECRET)?;
        let text =
            String::from_utf8(bytes).map_err(|_| at.bad(format!("{} is not text", p.display())))?;
        let line = text
            .strip_suffix('\n')
            .map_or(text.as_str(), |l| l.strip_suffix('\r').unwrap_or(l));
        if line.contains(['\n', '\r']) || line.is_empty() {
            return Err(at.bad(format!(
                "{} holds {}, not one line: a token or password file holds the secret alone",
                p.display(),
                match line.is_empty() {
                    true => "nothing".to_string(),
                    false => format!("{} lines", text.lines().count()),
                }
            )));
        }
        Ok(line.to_string())
    };
    let value = match (&file.bearer_token_file, &file.basic_auth) {
        (Some(_), Some(_)) => {
            return Err(at.bad("bearer_token_file and basic_auth exclude each other".into()))
        }
        (Some(t), None) => format!("Bearer {}", secret(t, "bearer_token_file")?),
        (None, Some(b)) => {
            use base64::Engine;
            let pass = secret(&b.password_file, "password_file")?;
            let pair = format!("{}:{pass}", b.username);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }
        (None, None) => return Ok(None),
    };
    let mut v = hyper::header::HeaderValue::from_str(&value)
        .map_err(|_| at.bad("the token or password holds characters a header cannot".into()))?;
    v.set_sensitive(true);
    Ok(Some(v))
}

/// The labels every pushed series carries: the config's, `job` and `instance`
/// (the host name) unless it names them.
fn labels(given: &BTreeMap<String, String>, at: &Section) -> Result<Vec<(String, String)>> {
    for name in given.keys() {
        let ok = name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if !ok || name.is_empty() || name.starts_with("__") {
            return Err(at.bad(format!(
                "'{name}' is not a label name (letters, digits, _; not __ first)"
            )));
        }
    }
    let mut l: BTreeMap<String, String> = given.clone();
    l.entry("job".into()).or_insert_with(|| "bfperf".into());
    if !l.contains_key("instance") {
        l.insert("instance".into(), host_name());
    }
    Ok(l.into_iter().collect())
}

/// This machine's name (`gethostname`), `localhost` when it has none.
pub(super) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into the buffer we own.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match r {
        0 if end > 0 => String::from_utf8_lossy(&buf[..end]).into_owned(),
        _ => "localhost".into(),
    }
}

/// rustls' client side, trusting `ca` or the system's authorities.
fn client_tls(at: &Section, ca: &Option<PathBuf>) -> Result<Arc<rustls::ClientConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let path = ca.clone().unwrap_or_else(|| PathBuf::from(SYSTEM_CA));
    let pem = crate::sysfs::read_regular(&path, at.cannot_read("ca_file"), MAX_CA)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| at.bad(format!("ca_file {}: {e}", path.display())))?;
        roots
            .add(cert)
            .map_err(|e| at.bad(format!("ca_file {}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(at.bad(format!("ca_file {}: no certificate in it", path.display())));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| at.bad(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(tls))
}

#[derive(Default)]
struct Stats {
    queued_in: AtomicU64,
    sent: AtomicU64,
    dropped_full: AtomicU64,
    refused: AtomicU64,
    failures: AtomicU64,
    queued: AtomicU64,
    queued_bytes: AtomicU64,
}

impl Stats {
    /// What the queue holds now, in samples and bytes (set with the queue held).
    fn holding(&self, q: &Queue) {
        self.queued.store(q.samples as u64, Ordering::Relaxed);
        self.queued_bytes
            .store(q.heap_bytes() as u64, Ordering::Relaxed);
    }
}

struct Shared {
    protocol: Protocol,
    queue: Mutex<Queue>,
    /// The families' types and HELP, sent with every request (receivers that keep
    /// metadata, such as Mimir, show them).
    metadata: Mutex<Vec<wire::MetricMetadata>>,
    wake: Condvar,
    stop: AtomicBool,
    stats: Stats,
}

/// The running pusher: its queue and sending thread.
pub(super) struct Pusher {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    interval: Duration,
    labels: Vec<(String, String)>,
    next: Instant,
}

impl Pusher {
    /// Starts the sending thread; the first push is due at once.
    pub(super) fn start(rw: RemoteWrite) -> Pusher {
        let shared = Arc::new(Shared {
            protocol: rw.protocol.clone(),
            queue: Mutex::new(Queue::new(rw.bound)),
            metadata: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            stats: Stats::default(),
        });
        diag(&format!(
            "pushing ({}) to {} every {:.1} s (queue of {} samples)",
            rw.protocol.section(),
            rw.url,
            rw.interval.as_secs_f64(),
            rw.bound
        ));
        let s = shared.clone();
        let (target, url) = (rw.target, rw.url);
        let thread = std::thread::Builder::new()
            .name(rw.protocol.section().replace('_', "-"))
            .spawn(move || sender(&s, &target, &url))
            .ok();
        Pusher {
            shared,
            thread,
            interval: rw.interval,
            labels: rw.labels,
            next: Instant::now(),
        }
    }

    /// Whether a push is due.
    pub(super) fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Queues the series of `fams`, as swept now.
    pub(super) fn push(&mut self, fams: &[Family]) {
        let at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let batch = wire::series(fams, &self.labels);
        *self
            .shared
            .metadata
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = wire::metadata(fams);
        let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let st = &self.shared.stats;
        st.queued_in
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let dropped = q.push(at_ms, batch);
        st.dropped_full.fetch_add(dropped as u64, Ordering::Relaxed);
        st.holding(&q);
        drop(q);
        self.shared.wake.notify_one();
        // On the interval's grid; a late sweep does not shift the next ones.
        self.next += self.interval;
        if self.next <= Instant::now() {
            self.next = Instant::now() + self.interval;
        }
    }

    /// The pusher's own series, beside the exporter's (`bfperf_remote_write_*`,
    /// `bfperf_otlp_*`), read with the queue held, as every change to them is
    /// made: one moment's counts, so that what was queued is exactly what was
    /// accepted, dropped or is waiting.
    pub(super) fn families(&self) -> Vec<Family> {
        let _moment = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let st = &self.shared.stats;
        let p = self.shared.protocol.section();
        let to = match self.shared.protocol {
            Protocol::RemoteWrite => "the remote-write receiver",
            Protocol::Otlp { .. } => "the OTLP receiver",
        };
        let v = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let fam = |name: &str, help: String, counter, samples| Family {
            name: format!("bfperf_{p}_{name}"),
            help,
            counter,
            samples,
        };
        vec![
            fam("samples_in", format!("Samples queued for {to}"), true, vec![(vec![], v(&st.queued_in))]),
            fam("samples", format!("Samples {to} accepted"), true, vec![(vec![], v(&st.sent))]),
            fam(
                "dropped_samples",
                "Samples never delivered: the queue was full (the oldest go) or the receiver refused them".into(),
                true,
                vec![
                    (vec![("reason", "queue_full".into())], v(&st.dropped_full)),
                    (vec![("reason", "refused".into())], v(&st.refused)),
                ],
            ),
            fam("failures", "Requests that failed and are tried again".into(), true, vec![(vec![], v(&st.failures))]),
            fam("queue_samples", "Samples waiting to be sent".into(), false, vec![(vec![], v(&st.queued))]),
            fam("queue_bytes", "Memory the samples waiting to be sent take, bytes".into(), false, vec![(vec![], v(&st.queued_bytes))]),
        ]
    }
}

impl Drop for Pusher {
    /// Lets the sender deliver what is queued for a moment, then leaves it.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        let until = Instant::now() + FLUSH_ON_STOP;
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// The sending thread: takes the oldest batches, sends them, and on failure waits
/// (backoff) and tries the same again.
fn sender(shared: &Shared, target: &Target, url: &str) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return diag(&format!(
                "{} stopped: no runtime: {e}",
                shared.protocol.section()
            ))
        }
    };
    let mut backoff = MIN_BACKOFF;
    let mut failing = false;
    let mut refusals = Refusals::default();
    // OTLP: each counter series' start, from the time the sender began.
    let began = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut starts = otlp::Starts::new();
    let what = shared.protocol.section().replace('_', " ");
    while let Some(series) = next_request(shared) {
        let (body, after) = body_of(shared, series, &starts, began);
        let outcome = rt.block_on(post::send(target, body));
        let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let st = &shared.stats;
        match outcome {
            Outcome::Accepted(answer) => {
                starts.keep(after);
                let n = q.done();
                let rejected = rejected_of(shared, &answer, n, &what, url);
                st.sent.fetch_add((n - rejected) as u64, Ordering::Relaxed);
                st.refused.fetch_add(rejected as u64, Ordering::Relaxed);
                if failing {
                    diag(&format!("{what} to {url} accepted again"));
                }
                if let Some(line) = refusals.accepted() {
                    diag(&format!("{what} to {url} {line}"));
                }
                failing = false;
                backoff = MIN_BACKOFF;
            }
            Outcome::Refused(why) => {
                starts.keep(after);
                let n = q.done();
                st.refused.fetch_add(n as u64, Ordering::Relaxed);
                if let Some(line) = refusals.refused(Instant::now(), n, &why) {
                    diag(&format!("warning: {what} to {url} {line}"));
                }
            }
            Outcome::Retry(why, after) => {
                let dropped = q.failed();
                st.dropped_full.fetch_add(dropped as u64, Ordering::Relaxed);
                st.holding(&q);
                st.failures.fetch_add(1, Ordering::Relaxed);
                if !failing {
                    diag(&format!("warning: {what} to {url} failed ({why}); queueing up to {} samples and trying again", q.bound));
                }
                failing = true;
                // The receiver's Retry-After where it gives one, else the backoff;
                // new sweeps queue meanwhile and wake nothing.
                let wait = after.map_or(backoff, |a| a.min(MAX_RETRY_AFTER));
                if !wait_out(shared, q, wait) {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        }
        st.holding(&q);
    }
}

/// How often the log says a receiver refuses: as it says a failing device, the
/// first refusal, then a count at most once a minute while refusals go on, and
/// the acceptance that ends them.
#[derive(Debug, Default)]
struct Refusals {
    /// When the log last said a refusal (None: the receiver accepts).
    said_at: Option<Instant>,
    /// Refused requests and samples since then, unsaid; and in all, this run.
    unsaid: (u64, u64),
    total: (u64, u64),
}

impl Refusals {
    /// How long the log keeps quiet between two counts of refusals.
    const EVERY: Duration = Duration::from_secs(60);

    /// A request of `n` samples refused at `now` with `why`: the line to log, if any.
    fn refused(&mut self, now: Instant, n: usize, why: &str) -> Option<String> {
        let n = n as u64;
        self.total = (self.total.0 + 1, self.total.1 + n);
        match self.said_at {
            None => {
                self.said_at = Some(now);
                Some(format!("refused {n} samples (dropped): {why}"))
            }
            Some(at) if now.duration_since(at) >= Self::EVERY => {
                let (r, s) = (self.unsaid.0 + 1, self.unsaid.1 + n);
                self.unsaid = (0, 0);
                self.said_at = Some(now);
                Some(format!(
                    "refused {r} more requests ({s} samples, dropped) since the last line; the last said: {why}"
                ))
            }
            Some(_) => {
                self.unsaid = (self.unsaid.0 + 1, self.unsaid.1 + n);
                None
            }
        }
    }

    /// A request accepted: the line that ends a run of refusals, if there was one.
    fn accepted(&mut self) -> Option<String> {
        self.said_at.take()?;
        let (r, s) = std::mem::take(&mut self.total);
        self.unsaid = (0, 0);
        Some(format!(
            "accepted again after {r} refused requests ({s} samples dropped)"
        ))
    }
}

/// What a receiver that accepted `n` samples says it rejected of them (OTLP's
/// partial success; remote write's answer says nothing of it), said in the log
/// with the receiver's message. At most `n`.
fn rejected_of(shared: &Shared, answer: &[u8], n: usize, what: &str, url: &str) -> usize {
    let Protocol::Otlp { .. } = shared.protocol else {
        return 0;
    };
    let Some((count, message)) = otlp::partial_success(answer) else {
        return 0;
    };
    let rejected = count.min(n as u64) as usize;
    if rejected > 0 || !message.is_empty() {
        diag(&format!(
            "warning: {what} to {url} rejected {rejected} of {n} samples (dropped): {message}"
        ));
    }
    rejected
}

/// A request's body in the protocol's wire format, the families' metadata with it;
/// for OTLP, the counters' starts to keep once the request is done with (a request
/// tried again is built again from the same starts).
fn body_of(
    shared: &Shared,
    series: Vec<TimeSeries>,
    starts: &otlp::Starts,
    began: u64,
) -> (Vec<u8>, otlp::Starts) {
    let metadata = shared
        .metadata
        .lock()
        .map(|m| m.clone())
        .unwrap_or_default();
    match &shared.protocol {
        Protocol::RemoteWrite => (
            wire::body(&wire::WriteRequest {
                timeseries: series,
                metadata,
            }),
            otlp::Starts::new(),
        ),
        Protocol::Otlp { resource, .. } => {
            let (request, after) = otlp::request(&series, &metadata, resource, starts, began);
            (otlp::body(&request), after)
        }
    }
}

/// Waits `wait` (releasing the queue), woken early only to stop: false then.
fn wait_out(shared: &Shared, mut q: std::sync::MutexGuard<'_, Queue>, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        q = shared
            .wake
            .wait_timeout(q, until - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}

/// The most samples one request takes from a queue of `bound`: half of it at most,
/// so that what a request holds while it hangs (until its timeout) adds half the
/// bound at most to what the queue keeps.
fn request_samples(bound: usize) -> usize {
    MAX_PER_SEND.min(bound / 2).max(1)
}

/// The next request's series; None when stopping and nothing is left to send.
fn next_request(shared: &Shared) -> Option<Vec<TimeSeries>> {
    let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if !q.is_empty() {
            let most = request_samples(q.bound);
            return Some(q.take(most));
        }
        if shared.stop.load(Ordering::SeqCst) {
            return None;
        }
        q = shared
            .wake
            .wait_timeout(q, Duration::from_secs(1))
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_receiver_that_keeps_refusing_is_said_first_once_a_minute_and_when_it_ends() {
        let mut r = Refusals::default();
        let t0 = Instant::now();
        let first = r.refused(t0, 10, "HTTP 400").unwrap();
        assert_eq!(first, "refused 10 samples (dropped): HTTP 400");
        for s in 1..60 {
            assert_eq!(r.refused(t0 + Duration::from_secs(s), 10, "HTTP 400"), None);
        }
        let count = r
            .refused(t0 + Duration::from_secs(60), 10, "HTTP 401")
            .unwrap();
        assert!(
            count.starts_with("refused 60 more requests (600 samples"),
            "{count}"
        );
        assert!(count.ends_with("HTTP 401"), "{count}");
        assert_eq!(
            r.accepted().unwrap(),
            "accepted again after 61 refused requests (610 samples dropped)"
        );
        assert_eq!(r.accepted(), None);
        assert!(r
            .refused(t0, 1, "again")
            .unwrap()
            .starts_with("refused 1 samples"));
    }

    use super::*;

    #[test]
    fn labels_default_job_and_instance_and_refuse_reserved_names() {
        let p = &Section {
            config: Path::new("exporter.toml"),
            name: "remote_write",
        };
        let l = labels(&BTreeMap::new(), p).unwrap();
        assert_eq!(l[1].0, "job");
        assert_eq!(l[1].1, "bfperf");
        assert_eq!(l[0].0, "instance");
        let mut given = BTreeMap::new();
        given.insert("__name__".to_string(), "x".to_string());
        assert!(labels(&given, p).is_err());
    }
}
