//! Prometheus remote write, for DPUs a Prometheus server cannot reach: every
//! `interval` the exporter sweeps and queues the series a scrape would see (the same
//! names and labels, plus `job` and `instance`, which a scrape would add); a thread
//! of its own sends them. The queue is bounded in samples and drops the oldest
//! (counted) when the receiver is down for longer than it holds; a request that fails
//! is retried with backoff (1 s doubling to 30 s, or the receiver's `Retry-After`,
//! at most 5 minutes), one the receiver refuses (a 4xx
//! other than 429) is dropped and counted. Sampling never waits on the receiver: the
//! main thread only appends to the queue.

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

/// `[remote_write]` in the exporter's config.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(super) struct RemoteWriteFile {
    /// The receiver's endpoint (`https://prometheus:9090/api/v1/write`).
    url: String,
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

/// A checked `[remote_write]`: everything read and valid before the device is
/// touched.
pub(super) struct RemoteWrite {
    target: Target,
    url: String,
    interval: Duration,
    bound: usize,
    labels: Vec<(String, String)>,
}

fn bad(config: &Path, problem: String) -> Error {
    Error::BadConfig {
        path: config.to_path_buf(),
        problem: format!("remote_write: {problem}"),
    }
}

impl RemoteWriteFile {
    /// The same, its file names taken relative to `dir` (the config's directory).
    pub(super) fn relative_to(mut self, dir: &Path) -> RemoteWriteFile {
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
    /// `config` in messages.
    pub(super) fn check(file: &RemoteWriteFile, config: &Path) -> Result<RemoteWrite> {
        let uri: hyper::Uri = file
            .url
            .parse()
            .map_err(|e| bad(config, format!("url '{}': {e}", file.url)))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(bad(
                    config,
                    format!("url '{}' is not http:// or https://", file.url),
                ))
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| bad(config, format!("url '{}' names no host", file.url)))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let interval = match &file.interval {
            Some(t) => crate::cli::args::parse_duration(t)
                .map_err(|e| bad(config, format!("interval: {e}")))?,
            None => DEFAULT_INTERVAL,
        };
        if interval < Duration::from_secs(1) {
            return Err(bad(config, "interval must be 1s or more".into()));
        }
        let bound = file.queue_samples.unwrap_or(DEFAULT_QUEUE);
        if !(1_000..=10_000_000).contains(&bound) {
            return Err(bad(
                config,
                format!("queue_samples {bound} is not between 1000 and 10000000"),
            ));
        }
        let tls = match https {
            true => Some(client_tls(config, &file.ca_file)?),
            false => None,
        };
        let authorization = authorization(file, config)?;
        if authorization.is_some() && !https && !loopback(&host) {
            diag(&format!(
                "warning: remote_write sends its credentials to {host} over plain http, readable by anyone on the path; use https:// ({})",
                config.display()
            ));
        }
        let labels = labels(&file.labels, config)?;
        let url = format!(
            "{}://{}{}",
            if https { "https" } else { "http" },
            uri.authority().map_or("", |a| a.as_str()),
            uri.path()
        );
        Ok(RemoteWrite {
            target: Target {
                uri,
                host,
                port,
                tls,
                authorization,
            },
            url,
            interval,
            bound,
            labels,
        })
    }
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
fn authorization(
    file: &RemoteWriteFile,
    config: &Path,
) -> Result<Option<hyper::header::HeaderValue>> {
    // One line: its line end is not part of it, and a second line means the file
    // is not what the config meant (never sent).
    let secret = |p: &PathBuf, what: &'static str| -> Result<String> {
        let bytes = crate::sysfs::read_secret(p, what, MAX_SECRET)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| bad(config, format!("{} is not text", p.display())))?;
        let line = text
            .strip_suffix('\n')
            .map_or(text.as_str(), |l| l.strip_suffix('\r').unwrap_or(l));
        if line.contains(['\n', '\r']) || line.is_empty() {
            return Err(bad(
                config,
                format!(
                    "{} holds {}, not one line: a token or password file holds the secret alone",
                    p.display(),
                    match line.is_empty() {
                        true => "nothing".to_string(),
                        false => format!("{} lines", text.lines().count()),
                    }
                ),
            ));
        }
        Ok(line.to_string())
    };
    let value = match (&file.bearer_token_file, &file.basic_auth) {
        (Some(_), Some(_)) => {
            return Err(bad(
                config,
                "bearer_token_file and basic_auth exclude each other".into(),
            ))
        }
        (Some(t), None) => format!(
            "Bearer {}",
            secret(t, "cannot read remote_write's bearer_token_file")?
        ),
        (None, Some(b)) => {
            use base64::Engine;
            let pass = secret(&b.password_file, "cannot read remote_write's password_file")?;
            let pair = format!("{}:{pass}", b.username);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }
        (None, None) => return Ok(None),
    };
    let mut v = hyper::header::HeaderValue::from_str(&value).map_err(|_| {
        bad(
            config,
            "the token or password holds characters a header cannot".into(),
        )
    })?;
    v.set_sensitive(true);
    Ok(Some(v))
}

/// The labels every pushed series carries: the config's, `job` and `instance`
/// (the host name) unless it names them.
fn labels(given: &BTreeMap<String, String>, config: &Path) -> Result<Vec<(String, String)>> {
    for name in given.keys() {
        let ok = name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if !ok || name.is_empty() || name.starts_with("__") {
            return Err(bad(
                config,
                format!("'{name}' is not a label name (letters, digits, _; not __ first)"),
            ));
        }
    }
    let mut l: BTreeMap<String, String> = given.clone();
    l.entry("job".into()).or_insert_with(|| "bfperf".into());
    if !l.contains_key("instance") {
        l.insert("instance".into(), host_name());
    }
    Ok(l.into_iter().collect())
}

fn host_name() -> String {
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
fn client_tls(config: &Path, ca: &Option<PathBuf>) -> Result<Arc<rustls::ClientConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let path = ca.clone().unwrap_or_else(|| PathBuf::from(SYSTEM_CA));
    let pem = crate::sysfs::read_regular(&path, "cannot read remote_write's CA (ca_file)", MAX_CA)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(config, format!("ca_file {}: {e}", path.display())))?;
        roots
            .add(cert)
            .map_err(|e| bad(config, format!("ca_file {}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(bad(
            config,
            format!("ca_file {}: no certificate in it", path.display()),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(config, format!("TLS: {e}")))?
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

struct Shared {
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
            queue: Mutex::new(Queue::new(rw.bound)),
            metadata: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            stats: Stats::default(),
        });
        diag(&format!(
            "pushing to {} every {:.1} s (queue of {} samples)",
            rw.url,
            rw.interval.as_secs_f64(),
            rw.bound
        ));
        let s = shared.clone();
        let (target, url) = (rw.target, rw.url);
        let thread = std::thread::Builder::new()
            .name("remote-write".into())
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
        st.queued.store(q.samples as u64, Ordering::Relaxed);
        st.queued_bytes
            .store(q.heap_bytes() as u64, Ordering::Relaxed);
        drop(q);
        self.shared.wake.notify_one();
        // On the interval's grid; a late sweep does not shift the next ones.
        self.next += self.interval;
        if self.next <= Instant::now() {
            self.next = Instant::now() + self.interval;
        }
    }

    /// The pusher's own series, beside the exporter's.
    pub(super) fn families(&self) -> Vec<Family> {
        let st = &self.shared.stats;
        let v = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let fam = |name: &str, help: &str, counter, samples| Family {
            name: format!("bfperf_{name}"),
            help: help.into(),
            counter,
            samples,
        };
        vec![
            fam("remote_write_samples_in", "Samples queued for the remote-write receiver", true, vec![(vec![], v(&st.queued_in))]),
            fam("remote_write_samples", "Samples the remote-write receiver accepted", true, vec![(vec![], v(&st.sent))]),
            fam(
                "remote_write_dropped_samples",
                "Samples never delivered: the queue was full (the oldest go) or the receiver refused them",
                true,
                vec![
                    (vec![("reason", "queue_full".into())], v(&st.dropped_full)),
                    (vec![("reason", "refused".into())], v(&st.refused)),
                ],
            ),
            fam("remote_write_failures", "Requests that failed and are tried again", true, vec![(vec![], v(&st.failures))]),
            fam("remote_write_queue_samples", "Samples waiting to be sent", false, vec![(vec![], v(&st.queued))]),
            fam("remote_write_queue_bytes", "Memory the samples waiting to be sent take, bytes", false, vec![(vec![], v(&st.queued_bytes))]),
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
        Err(e) => return diag(&format!("remote write stopped: no runtime: {e}")),
    };
    let mut backoff = MIN_BACKOFF;
    let mut failing = false;
    while let Some(series) = next_request(shared) {
        let metadata = shared
            .metadata
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        let body = wire::body(&wire::WriteRequest {
            timeseries: series,
            metadata,
        });
        let outcome = rt.block_on(post::send(target, body));
        let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let st = &shared.stats;
        match outcome {
            Outcome::Accepted => {
                st.sent.fetch_add(q.done() as u64, Ordering::Relaxed);
                if failing {
                    diag(&format!("remote write to {url} accepted again"));
                }
                failing = false;
                backoff = MIN_BACKOFF;
            }
            Outcome::Refused(why) => {
                let n = q.done();
                st.refused.fetch_add(n as u64, Ordering::Relaxed);
                diag(&format!(
                    "warning: remote write to {url} refused {n} samples (dropped): {why}"
                ));
            }
            Outcome::Retry(why, after) => {
                q.failed();
                st.failures.fetch_add(1, Ordering::Relaxed);
                if !failing {
                    diag(&format!("warning: remote write to {url} failed ({why}); queueing up to {} samples and trying again", q.bound));
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
        st.queued.store(q.samples as u64, Ordering::Relaxed);
        st.queued_bytes
            .store(q.heap_bytes() as u64, Ordering::Relaxed);
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

/// The next request's series; None when stopping and nothing is left to send.
fn next_request(shared: &Shared) -> Option<Vec<TimeSeries>> {
    let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if !q.is_empty() {
            return Some(q.take(MAX_PER_SEND));
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
    use super::*;

    #[test]
    fn labels_default_job_and_instance_and_refuse_reserved_names() {
        let p = Path::new("exporter.toml");
        let l = labels(&BTreeMap::new(), p).unwrap();
        assert_eq!(l[1].0, "job");
        assert_eq!(l[1].1, "bfperf");
        assert_eq!(l[0].0, "instance");
        let mut given = BTreeMap::new();
        given.insert("__name__".to_string(), "x".to_string());
        assert!(labels(&given, p).is_err());
    }
}
