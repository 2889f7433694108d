//! The exporter's HTTP surface, with every cost bounded: hyper's HTTP/1 server on a
//! current-thread tokio runtime in a thread of its own. A request body is never read;
//! headers are bounded in size (16 KiB) and count (64) and must arrive within 10 s;
//! a connection lives at most 10 minutes; at most 64 are open at once: a new one
//! beyond that closes the oldest connection whose credentials are being checked or
//! were refused, else the oldest with no request in progress (so neither half-open
//! connections nor password guessing can lock a scraper out), or itself when every
//! connection is serving a request it was let in for; a connection that sends wrong
//! credentials [`MAX_FAILURES`] times is closed; an accept error such as EMFILE backs
//! off and keeps the listener. `/metrics` requests are handed to the main thread, which answers
//! every request that arrived while one sweep ran with that sweep's exposition, and
//! sweeps at most once per [`SHARED_FOR`] — so no flood of scrapes can starve another.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

use super::web::{Verdict, Web};

/// Connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 64;
/// Wrong credentials a connection may send before it is closed.
pub const MAX_FAILURES: u32 = 3;
/// bcrypt checks at once (each takes a core for tens of milliseconds).
const CHECKS: usize = 2;
/// The longest a connection is kept.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
/// The longest a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a request's head (line and headers) that is buffered.
const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;
/// An exposition answers every scrape that comes within this long of its sweep.
pub const SHARED_FOR: Duration = Duration::from_millis(100);
/// How long a scrape waits for the main thread before it is answered 503.
const SCRAPE_WAIT: Duration = Duration::from_secs(30);

const INDEX: &str = "<html><head><title>bfperf exporter</title></head><body><h1>bfperf exporter</h1><p><a href=\"/metrics\">/metrics</a>: the BlueField performance counters.</p></body></html>\n";

/// A scrape waiting for the main thread: where to answer.
pub struct Scrape {
    pub reply: oneshot::Sender<Arc<Exposition>>,
}

/// One sweep's exposition in both formats.
pub struct Exposition {
    pub openmetrics: Bytes,
    pub text_004: Bytes,
    pub at: Instant,
}

/// Binds `addr` now (so that an error is said before the device is touched) and
/// serves it from a thread of its own, with TLS and authentication as `web` says;
/// scrapes arrive on the returned channel.
pub fn serve(addr: SocketAddr, web: Web) -> std::io::Result<mpsc::Receiver<Scrape>> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let (tx, rx) = mpsc::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    std::thread::Builder::new()
        .name("bfperf-http".into())
        .spawn(move || runtime.block_on(accept_loop(listener, tx, Arc::new(web))))?;
    Ok(rx)
}

/// What a connection is doing, from the first to be closed to make room to the
/// last: its credentials being checked or refused, nothing, serving a request it was
/// let in for (never closed).
const SUSPECT: u8 = 0;
const IDLE: u8 = 1;
const SERVING: u8 = 2;

/// An open connection: when it came, what it is doing, and how to close it.
struct Open {
    id: u64,
    since: Instant,
    state: Arc<AtomicU8>,
    close: Option<oneshot::Sender<()>>,
}

type Table = Arc<Mutex<Vec<Open>>>;

/// Makes room for one more connection: closes the oldest suspect one, else the
/// oldest idle one. False when every connection is serving a request.
fn make_room(table: &Table) -> bool {
    let mut open = table.lock().unwrap_or_else(|p| p.into_inner());
    if open.len() < MAX_CONNECTIONS {
        return true;
    }
    let oldest = open
        .iter()
        .enumerate()
        .map(|(i, o)| (i, o.state.load(Ordering::SeqCst), o.since))
        .filter(|(_, state, _)| *state != SERVING)
        .min_by_key(|(_, state, since)| (*state, *since))
        .map(|(i, _, _)| i);
    match oldest {
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

async fn accept_loop(
    listener: std::net::TcpListener,
    scrapes: mpsc::Sender<Scrape>,
    web: Arc<Web>,
) {
    let tls = web.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    // bcrypt is slow by design: at most CHECKS at once, off the serving thread.
    let checks = Arc::new(tokio::sync::Semaphore::new(CHECKS));
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let table: Table = Arc::default();
    let mut next_id = 0u64;
    loop {
        let (stream, _) = match listener.accept().await {
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
        if !make_room(&table) {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let state = Arc::new(AtomicU8::new(IDLE));
        let failures = Arc::new(AtomicU32::new(0));
        let (close, closed) = oneshot::channel();
        table.lock().unwrap_or_else(|p| p.into_inner()).push(Open {
            id,
            since: Instant::now(),
            state: state.clone(),
            close: Some(close),
        });
        let (scrapes, table, web, checks, tls) = (
            scrapes.clone(),
            table.clone(),
            web.clone(),
            checks.clone(),
            tls.clone(),
        );
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let (scrapes, state, failures, web, checks) = (
                    scrapes.clone(),
                    state.clone(),
                    failures.clone(),
                    web.clone(),
                    checks.clone(),
                );
                async move {
                    if !authorized(&req, web, checks, &state).await {
                        state.store(SUSPECT, Ordering::SeqCst);
                        let failed = failures.fetch_add(1, Ordering::SeqCst) + 1;
                        return Ok(unauthorized(failed >= MAX_FAILURES));
                    }
                    state.store(SERVING, Ordering::SeqCst);
                    let r = handle(req, scrapes).await;
                    state.store(IDLE, Ordering::SeqCst);
                    r
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .max_headers(MAX_HEADERS)
                .keep_alive(true)
                .pipeline_flush(true);
            let served = async {
                match tls {
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
            table
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|o| o.id != id);
        });
    }
}

/// Whether the request may be served: always without basic_auth_users; otherwise
/// by the credentials' remembered verdict, or a bcrypt check off the serving thread
/// (the connection is suspect meanwhile: the first to be closed to make room).
async fn authorized(
    req: &Request<Incoming>,
    web: Arc<Web>,
    checks: Arc<tokio::sync::Semaphore>,
    state: &AtomicU8,
) -> bool {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    match web.verdict(header.as_deref()) {
        Verdict::Good => return true,
        Verdict::Bad => return false,
        Verdict::Unknown => {}
    }
    state.store(SUSPECT, Ordering::SeqCst);
    let Ok(_permit) = checks.acquire_owned().await else {
        return false;
    };
    tokio::task::spawn_blocking(move || web.check(header.as_deref()))
        .await
        .unwrap_or(false)
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
            scrape(openmetrics, &scrapes).await
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

async fn scrape(openmetrics: bool, scrapes: &mpsc::Sender<Scrape>) -> Response<Full<Bytes>> {
    let (tx, rx) = oneshot::channel();
    let unavailable = || {
        reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "the exporter is stopping or busy\n",
        )
    };
    if scrapes.send(Scrape { reply: tx }).is_err() {
        return unavailable();
    }
    match tokio::time::timeout(SCRAPE_WAIT, rx).await {
        Ok(Ok(e)) if openmetrics => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            e.openmetrics.clone(),
        ),
        Ok(Ok(e)) => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            e.text_004.clone(),
        ),
        _ => unavailable(),
    }
}
