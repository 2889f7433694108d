//! The two ways the exposition leaves the exporter: served over HTTP (one sweep
//! for every scrape that waits) or written to node_exporter's textfile.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::args::Options;
use super::{exposition, http, web, Running, Signals, DEFAULT_LISTEN};
use crate::error::{Error, Result};
use crate::exposition::TextFormat;
use crate::front::exit::diag;

/// The address to serve on, as given (flag or config) or the default, checked.
pub(super) fn listen_addr(args: &Options) -> Result<(String, std::net::SocketAddr)> {
    let addr = args
        .listen
        .clone()
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let parsed = addr.parse().map_err(|_| Error::BadOption {
        problem: format!(
            "--listen (or listen in the config) takes ADDRESS:PORT such as {DEFAULT_LISTEN}, not '{addr}'"
        ),
    })?;
    Ok((addr, parsed))
}

/// The HTTP server: not started until the device is first programmed, then kept
/// (with its port and connections) while the device is lost and found again.
pub(super) enum Serve {
    Pending(web::Web),
    Started(Server),
    /// Between the two (a failed start).
    Gone,
}

/// A started HTTP server: the scrapes it hands over, and the last exposition.
pub(super) struct Server {
    scrapes: std::sync::mpsc::Receiver<http::Scrape>,
    addr: String,
    last: Option<Arc<http::Exposition>>,
}

impl Serve {
    /// The server, started the first time it is asked for.
    pub(super) fn started(&mut self, args: &Options) -> Result<&mut Server> {
        if let Serve::Pending(_) = self {
            let Serve::Pending(web) = std::mem::replace(self, Serve::Gone) else {
                unreachable!()
            };
            *self = Serve::Started(Server::start(args, web)?);
        }
        match self {
            Serve::Started(s) => Ok(s),
            _ => Err(Error::BadOption {
                problem: "the HTTP server could not be started".to_string(),
            }),
        }
    }
}

impl Server {
    fn start(args: &Options, web: web::Web) -> Result<Server> {
        let (addr, parsed) = listen_addr(args)?;
        if !parsed.ip().is_loopback() {
            diag(&format!(
                "listening on {addr}, beyond this machine, as --listen asks"
            ));
            if !web.protected() {
                diag("warning: without --web.config.file (TLS, basic auth) anyone who reaches this address reads the counters");
            }
        }
        let scheme = if web.tls.is_some() { "https" } else { "http" };
        let (scrapes, bound) = http::serve(parsed, web).map_err(|err| Error::File {
            what: "cannot listen on",
            path: addr.clone().into(),
            source: err,
        })?;
        // The address bound: with port 0 (`--listen 127.0.0.1:0`), the one the kernel chose.
        diag(&format!("serving {scheme}://{bound}/metrics"));
        Ok(Server {
            scrapes,
            addr,
            last: None,
        })
    }
}

pub(super) fn http_loop(r: &mut Running, sig: &Signals, server: &mut Server) -> Result<()> {
    let Server {
        scrapes,
        addr,
        last,
    } = server;
    loop {
        if r.between(sig)? {
            return Ok(());
        }
        let wait = match r.owner.as_ref().is_some_and(|h| h.clients.busy()) {
            true => Duration::from_millis(5),
            false => Duration::from_millis(100),
        };
        let first = match scrapes.recv_timeout(wait) {
            Ok(s) => s,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::File {
                    what: "the HTTP server stopped on",
                    path: addr.clone().into(),
                    source: std::io::Error::other("its thread ended"),
                })
            }
        };
        // One sweep answers every scrape waiting now and every one that came while
        // it ran; within SHARED_FOR of a sweep, its exposition is served again.
        let fresh = last
            .as_ref()
            .filter(|e| e.at.elapsed() < http::SHARED_FOR)
            .cloned();
        let exposition = match fresh {
            Some(e) => e,
            None => {
                let began = Instant::now();
                let e = Arc::new(both_formats(r, first.at));
                r.last_sweep = Instant::now();
                crate::front::exit::log(
                    crate::front::exit::Level::Debug,
                    &format!(
                        "scrape: waited {:.1} ms for the sweep, which took {:.1} ms",
                        (began - first.at).as_secs_f64() * 1e3,
                        (r.last_sweep - began).as_secs_f64() * 1e3
                    ),
                );
                *last = Some(e.clone());
                e
            }
        };
        let _ = first.reply.send(exposition.clone());
        while let Ok(s) = scrapes.try_recv() {
            let _ = s.reply.send(exposition.clone());
        }
    }
}

/// One sweep's exposition, in OpenMetrics and in text 0.0.4.
fn both_formats(r: &mut Running, asked: Instant) -> http::Exposition {
    let formats = [TextFormat::OpenMetrics, TextFormat::Text004];
    let [openmetrics, text_004] = exposition(r, formats, Some(asked));
    http::Exposition {
        openmetrics: openmetrics.into(),
        text_004: text_004.into(),
        at: Instant::now(),
    }
}

pub(super) fn textfile_loop(r: &mut Running, path: &Path, sig: &Signals) -> Result<()> {
    let every = r.args.interval;
    diag(&format!(
        "writing {} every {:.1} s",
        path.display(),
        every.as_secs_f64()
    ));
    let mut next_write = Instant::now();
    loop {
        if r.between(sig)? {
            return Ok(());
        }
        if Instant::now() >= next_write {
            let [text] = exposition(r, [TextFormat::Text004], None);
            // Atomically: a temporary file in the same directory, fsync, rename.
            crate::outfile::replace(path, &mut |w| w.write_all(text.as_bytes()))?;
            r.last_sweep = Instant::now();
            next_write += every;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
