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

mod config;
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

use crate::error::{Error, Result};
use crate::exposition::{Family, Labels};
use crate::front::exit::diag;

pub(super) use config::{host_name, Protocol, PushFile, Receiver};
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
    pub(super) fn start(rw: Receiver) -> Pusher {
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
        // OTLP: each counter series' start, from now: before the first push
        // queues a sample (the thread may start after it).
        let began = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let thread = std::thread::Builder::new()
            .name(rw.protocol.section().replace('_', "-"))
            .spawn(move || sender(&s, &target, &url, began))
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
            fam("samples_in", format!("Samples queued for {to}"), true, vec![(Labels::default(), v(&st.queued_in))]),
            fam("samples", format!("Samples {to} accepted"), true, vec![(Labels::default(), v(&st.sent))]),
            fam(
                "dropped_samples",
                "Samples never delivered: the queue was full (the oldest go) or the receiver refused them".into(),
                true,
                vec![
                    (vec![("reason", "queue_full".into())].into(), v(&st.dropped_full)),
                    (vec![("reason", "refused".into())].into(), v(&st.refused)),
                ],
            ),
            fam("failures", "Requests that failed and are tried again".into(), true, vec![(Labels::default(), v(&st.failures))]),
            fam("queue_samples", "Samples waiting to be sent".into(), false, vec![(Labels::default(), v(&st.queued))]),
            fam("queue_bytes", "Memory the samples waiting to be sent take, bytes".into(), false, vec![(Labels::default(), v(&st.queued_bytes))]),
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
fn sender(shared: &Shared, target: &Target, url: &str, began: u64) {
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

    use super::config::{labels, Section};
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
