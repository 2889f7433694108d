//! The exporter's HTTP surface, with every cost bounded: hyper's HTTP/1 server on a
//! current-thread tokio runtime in a thread of its own. A request body is never read;
//! headers are bounded in size (16 KiB) and count (64) and must arrive within 10 s;
//! a connection lives at most 10 minutes; at most 64 are open at once: a new one
//! beyond that closes one of the client address holding the most connections (so no
//! client can push out another's) — the oldest whose credentials were refused, else
//! the oldest whose credentials are being checked, else the oldest with no request
//! in progress — or itself when every connection is serving a request it was let in
//! for. Password checks (bcrypt) run two at once, at most two per client address
//! (a third is answered 429 at once), and a connection that sends wrong credentials
//! [`MAX_FAILURES`] times is closed: one client's guessing never holds the slots or
//! the checks another's scrapes need. An accept error such as EMFILE backs
//! off and keeps the listener. `/metrics` requests are handed to the main thread, which answers
//! every request that arrived while one sweep ran with that sweep's exposition, and
//! sweeps at most once per [`SHARED_FOR`] — so no flood of scrapes can starve another.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, ALLOW, CONTENT_ENCODING, CONTENT_TYPE, VARY,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

use crate::exporter::web::{Verdict, Web};

/// Connections served at once; more are closed on accept.
pub(super) const MAX_CONNECTIONS: usize = 64;
/// Wrong credentials a connection may send before it is closed.
pub(super) const MAX_FAILURES: u32 = 3;
/// bcrypt checks at once (each takes a core for tens of milliseconds).
const CHECKS: usize = 2;
/// Checks one client address may have under way or waiting; a request beyond them
/// is answered 429 at once.
const CHECKS_PER_PEER: usize = 2;
/// The longest a connection is kept.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
/// The longest a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a request's head (line and headers) that is buffered.
const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;
/// An exposition answers every scrape that comes within this long of its sweep.
pub(super) const SHARED_FOR: Duration = Duration::from_millis(100);
/// How long a scrape waits for the main thread before it is answered 503.
const SCRAPE_WAIT: Duration = Duration::from_secs(30);

const INDEX: &str = "<html><head><title>bfperf exporter</title></head><body><h1>bfperf exporter</h1><p><a href=\"/metrics\">/metrics</a>: the BlueField performance counters.</p></body></html>\n";

/// A scrape waiting for the main thread: where to answer.
pub(super) struct Scrape {
    pub reply: oneshot::Sender<Arc<Exposition>>,
    /// When its request was read: the moment its values are to be of.
    pub at: Instant,
}

/// One sweep's exposition in both formats.
pub(super) struct Exposition {
    pub openmetrics: Bytes,
    pub text_004: Bytes,
    pub at: Instant,
}

/// Binds `addr` now (so that an error is said before the device is touched) and
/// serves it from a thread of its own, with TLS and authentication as `web` says;
/// scrapes arrive on the returned channel.
/// Returns the scrapes to answer and the address bound (port 0 takes a free one,
/// which it tells).
pub(super) fn serve(
    addr: SocketAddr,
    web: Web,
) -> std::io::Result<(mpsc::Receiver<Scrape>, SocketAddr)> {
    let listener = std::net::TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let (tx, rx) = mpsc::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    std::thread::Builder::new()
        .name("bfperf-http".into())
        .spawn(move || runtime.block_on(accept_loop(listener, tx, Arc::new(web))))?;
    Ok((rx, bound))
}

/// What a connection is doing, from the first to be closed to make room to the
/// last: it sent wrong credentials (and has not sent good ones since), its first
/// credentials are being checked, nothing, serving a request it was let in for
/// (never closed).
const REFUSED: u8 = 0;
const CHECKING: u8 = 1;
const IDLE: u8 = 2;
const SERVING: u8 = 3;

/// An open connection: when it came, what it is doing, and how to close it.
struct Open {
    id: u64,
    peer: IpAddr,
    since: Instant,
    state: Arc<AtomicU8>,
    close: Option<oneshot::Sender<()>>,
}

type Table = Arc<Mutex<Vec<Open>>>;

/// Makes room for one more connection: closes one of the address that holds the
/// most connections (so that no client can push out another's), the oldest of its
/// refused ones, else of those being checked, else of the idle ones. False when every
/// connection is serving a request.
fn make_room(table: &Table) -> bool {
    let mut open = table.lock().unwrap_or_else(|p| p.into_inner());
    if open.len() < MAX_CONNECTIONS {
        return true;
    }
    let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
    for o in open.iter() {
        *per_peer.entry(o.peer).or_default() += 1;
    }
    let victim = open
        .iter()
        .enumerate()
        .map(|(i, o)| (i, o.state.load(Ordering::SeqCst), o))
        .filter(|(_, state, _)| *state != SERVING)
        .min_by_key(|(_, state, o)| (std::cmp::Reverse(per_peer[&o.peer]), *state, o.since))
        .map(|(i, _, _)| i);
    match victim {
        Some(i) => {
            let mut o = open.swap_remove(i);
            if let Some(close) = o.close.take() {
                let _ = close.send(());
            }
            true
        }
        None => false,
    }
}

/// Password checks under way or waiting, per client address: each address may have
/// [`CHECKS_PER_PEER`] at once, so that one client's guessing cannot keep another's
/// first check waiting.
#[derive(Default)]
struct Pending(Mutex<HashMap<IpAddr, usize>>);

/// One pending check of an address; its count goes down when dropped.
struct PendingCheck {
    pending: Arc<Pending>,
    peer: IpAddr,
}

impl Pending {
    fn begin(self: &Arc<Self>, peer: IpAddr) -> Option<PendingCheck> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(peer).or_default();
        if *n >= CHECKS_PER_PEER {
            return None;
        }
        *n += 1;
        Some(PendingCheck {
            pending: self.clone(),
            peer,
        })
    }
}

impl Drop for PendingCheck {
    fn drop(&mut self) {
        let mut map = self.pending.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.peer);
            }
        }
    }
}

/// What every connection shares.
struct Shared {
    scrapes: mpsc::Sender<Scrape>,
    web: Arc<Web>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// bcrypt is slow by design: at most CHECKS at once, off the serving thread.
    checks: Arc<tokio::sync::Semaphore>,
    pending: Arc<Pending>,
    table: Table,
}

/// One connection's own state, shared by its requests.
#[derive(Clone)]
struct Conn {
    peer: IpAddr,
    state: Arc<AtomicU8>,
    failures: Arc<AtomicU32>,
}

async fn accept_loop(
    listener: std::net::TcpListener,
    scrapes: mpsc::Sender<Scrape>,
    web: Arc<Web>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let shared = Arc::new(Shared {
        scrapes,
        tls: web.tls.clone().map(tokio_rustls::TlsAcceptor::from),
        web,
        checks: Arc::new(tokio::sync::Semaphore::new(CHECKS)),
        pending: Arc::default(),
        table: Arc::default(),
    });
    let mut next_id = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors (EMFILE, ENFILE) or a passing error: keep the
                // listener, and give the open connections time to end.
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    super::say_once("http: out of file descriptors; backing off");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !make_room(&shared.table) {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let conn = Conn {
            peer: peer.ip(),
            state: Arc::new(AtomicU8::new(IDLE)),
            failures: Arc::default(),
        };
        let (close, closed) = oneshot::channel();
        shared
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Open {
                id: next_id,
                peer: conn.peer,
                since: Instant::now(),
                state: conn.state.clone(),
                close: Some(close),
            });
        tokio::spawn(connection(stream, next_id, conn, shared.clone(), closed));
    }
}

/// Serves one connection until it ends, is closed to make room, or has lived
/// [`CONNECTION_LIFETIME`]; then takes it off the table.
async fn connection(
    stream: tokio::net::TcpStream,
    id: u64,
    conn: Conn,
    shared: Arc<Shared>,
    closed: oneshot::Receiver<()>,
) {
    let s = shared.clone();
    let service = hyper::service::service_fn(move |req| request(req, s.clone(), conn.clone()));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(true)
        .pipeline_flush(true);
    let served = async {
        match &shared.tls {
            None => {
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
            Some(acceptor) => {
                // The handshake, too, within the header time.
                let Ok(Ok(stream)) =
                    tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await
                else {
                    return;
                };
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        }
    };
    tokio::select! {
        _ = served => {}
        _ = closed => {}
        _ = tokio::time::sleep(CONNECTION_LIFETIME) => {}
    }
    shared
        .table
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|o| o.id != id);
}

/// One request: let in, refused (the connection closed after [`MAX_FAILURES`]), or
/// told to come back when its address has too many checks pending.
async fn request(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    conn: Conn,
) -> Result<Response<Full<Bytes>>, Infallible> {
    match authorized(&req, &shared, &conn).await {
        Access::Let => {
            conn.state.store(SERVING, Ordering::SeqCst);
            let r = handle(req, shared.scrapes.clone()).await;
            conn.state.store(IDLE, Ordering::SeqCst);
            r
        }
        Access::Refused => {
            conn.state.store(REFUSED, Ordering::SeqCst);
            let failed = conn.failures.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(unauthorized(failed >= MAX_FAILURES))
        }
        Access::Busy => Ok(too_many_checks()),
    }
}

/// What a request's credentials get it.
enum Access {
    Let,
    Refused,
    /// Its address already has [`CHECKS_PER_PEER`] checks pending.
    Busy,
}

/// Whether the request may be served: always without basic_auth_users; otherwise
/// by the credentials' remembered verdict, or a bcrypt check off the serving thread
/// (meanwhile the connection is among the first to be closed to make room; one
/// refused before stays among the very first).
async fn authorized(req: &Request<Incoming>, shared: &Shared, conn: &Conn) -> Access {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    match shared.web.verdict(header.as_deref()) {
        Verdict::Good => return Access::Let,
        Verdict::Bad => return Access::Refused,
        Verdict::Unknown => {}
    }
    let Some(pending) = shared.pending.begin(conn.peer) else {
        return Access::Busy;
    };
    let _ = conn
        .state
        .compare_exchange(IDLE, CHECKING, Ordering::SeqCst, Ordering::SeqCst);
    let Ok(permit) = shared.checks.clone().acquire_owned().await else {
        return Access::Refused;
    };
    // The permit and the pending count go with the check: a connection closed
    // meanwhile cannot leave a check running beyond those allowed.
    let web = shared.web.clone();
    let good = tokio::task::spawn_blocking(move || {
        let _held = (permit, pending);
        web.check(header.as_deref())
    })
    .await
    .unwrap_or(false);
    match good {
        true => Access::Let,
        false => Access::Refused,
    }
}

/// 429: this address has enough checks pending; the connection is closed.
fn too_many_checks() -> Response<Full<Bytes>> {
    let mut r = reply(
        StatusCode::TOO_MANY_REQUESTS,
        "text/plain; charset=utf-8",
        "too many credential checks from this address at once; try again\n",
    );
    r.headers_mut()
        .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    r.headers_mut()
        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// 401; with `last`, the connection is closed after it.
fn unauthorized(last: bool) -> Response<Full<Bytes>> {
    let mut r = reply(
        StatusCode::UNAUTHORIZED,
        "text/plain; charset=utf-8",
        "credentials required\n",
    );
    r.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"bfperf\""),
    );
    if last {
        r.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Answers one request; the body, whatever its announced length, is never read.
async fn handle(
    req: Request<Incoming>,
    scrapes: mpsc::Sender<Scrape>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    const TEXT: &str = "text/plain; charset=utf-8";
    let get = matches!(*req.method(), Method::GET | Method::HEAD);
    let path = req.uri().path();
    Ok(match (get, path) {
        (true, "/metrics") => {
            let openmetrics = req.headers().get_all(ACCEPT).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.contains("application/openmetrics-text"))
            });
            let gzip = req
                .headers()
                .get_all(ACCEPT_ENCODING)
                .iter()
                .any(|v| v.to_str().is_ok_and(accepts_gzip));
            scrape(openmetrics, gzip, &scrapes).await
        }
        (true, "/") => reply(StatusCode::OK, "text/html; charset=utf-8", INDEX),
        (true, _) => reply(StatusCode::NOT_FOUND, TEXT, "not found: try /metrics\n"),
        (false, "/" | "/metrics") => {
            let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "only GET\n");
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
        (false, _) => reply(StatusCode::NOT_FOUND, TEXT, "not found\n"),
    })
}

/// Whether an `Accept-Encoding` value takes gzip (`gzip`, `gzip;q=0.5`, `*`; not
/// `gzip;q=0`).
fn accepts_gzip(value: &str) -> bool {
    value.split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

/// An exposition's response, gzipped (`Content-Encoding: gzip`) when asked.
fn exposition_reply(content_type: &'static str, body: Bytes, gzip: bool) -> Response<Full<Bytes>> {
    use std::io::Write;
    let zipped = gzip
        .then(|| {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(&body).ok()?;
            enc.finish().ok()
        })
        .flatten();
    let Some(zipped) = zipped else {
        return reply(StatusCode::OK, content_type, body);
    };
    let mut r = reply(StatusCode::OK, content_type, zipped);
    r.headers_mut()
        .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    r.headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    r
}

async fn scrape(
    openmetrics: bool,
    gzip: bool,
    scrapes: &mpsc::Sender<Scrape>,
) -> Response<Full<Bytes>> {
    let (tx, rx) = oneshot::channel();
    let unavailable = || {
        reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "the exporter is stopping or busy\n",
        )
    };
    let at = Instant::now();
    if scrapes.send(Scrape { reply: tx, at }).is_err() {
        return unavailable();
    }
    match tokio::time::timeout(SCRAPE_WAIT, rx).await {
        Ok(Ok(e)) if openmetrics => exposition_reply(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            e.openmetrics.clone(),
            gzip,
        ),
        Ok(Ok(e)) => exposition_reply(
            "text/plain; version=0.0.4; charset=utf-8",
            e.text_004.clone(),
            gzip,
        ),
        _ => unavailable(),
    }
}
