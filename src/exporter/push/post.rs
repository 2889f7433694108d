//! One push request (remote write or OTLP): a connection (TLS when the URL says https, trusting
//! the configured CA or the system's), a POST with the protocol's headers, the
//! status. Every step has a deadline; the answer's body is read only in part: for
//! the message of a refusal, or what an accepting OTLP receiver says it rejected.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST, RETRY_AFTER, USER_AGENT};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The longest a request may take, connection and answer included.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer's body read: a refusal's message for the log, an OTLP
/// receiver's partial success (a count and a message).
const MAX_ANSWER: usize = 64 * 1024;
/// The most of a refusal's body said in the log.
const MAX_SAID: usize = 512;

/// Where and how to send.
pub(super) struct Target {
    pub uri: Uri,
    /// Where to connect.
    pub host: String,
    /// The name the receiver's certificate must carry (the host unless the config
    /// says otherwise).
    pub server_name: String,
    pub port: u16,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The Authorization header's value, when the config gives credentials.
    pub authorization: Option<HeaderValue>,
    /// The protocol's headers (type, encoding, version) and the config's.
    pub headers: Vec<(hyper::header::HeaderName, HeaderValue)>,
    /// Whether a status other than 2xx is worth trying again.
    pub retryable: fn(u16) -> bool,
}

/// What came of one request.
#[derive(Debug)]
pub(super) enum Outcome {
    /// 2xx: the receiver has the samples, and answered this body (bounded).
    Accepted(Vec<u8>),
    /// 5xx, 429, or no answer: the same samples are tried again later, after the
    /// receiver's `Retry-After` where it gave one.
    Retry(String, Option<Duration>),
    /// Another 4xx: the receiver refuses them; trying again would not help.
    Refused(String),
}

/// Remote write's rule: 429 and every 5xx are tried again.
pub(super) fn retry_remote_write(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// OTLP/HTTP's rule: 429, 502, 503 and 504 are tried again, no other status.
pub(super) fn retry_otlp(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

/// Sends `body` (the protocol's compressed request) to `target`.
pub(super) async fn send(target: &Target, body: Vec<u8>) -> Outcome {
    match tokio::time::timeout(REQUEST_TIMEOUT, attempt(target, body)).await {
        Ok(Ok((status, body, protobuf, after))) => match status {
            200..=299 => Outcome::Accepted(body),
            s if (target.retryable)(s) => {
                Outcome::Retry(format!("HTTP {status} {}", said(&body, protobuf)), after)
            }
            _ => Outcome::Refused(format!("HTTP {status} {}", said(&body, protobuf))),
        },
        Ok(Err(e)) => Outcome::Retry(e, None),
        Err(_) => Outcome::Retry(
            format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()),
            None,
        ),
    }
}

/// An answer: its status, its body (bounded), whether the body is protobuf, and
/// its `Retry-After`.
type Answer = (u16, Vec<u8>, bool, Option<Duration>);

/// `google.rpc.Status`, which an OTLP/HTTP receiver answers a refusal with in
/// protobuf: its code and message (details left).
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// An answer's body as the log says it: one line, bounded; a protobuf
/// `google.rpc.Status` by its message.
fn said(body: &[u8], protobuf: bool) -> String {
    use prost::Message;
    let status = protobuf
        .then(|| Status::decode(body).ok())
        .flatten()
        .filter(|s| !s.message.is_empty());
    let text = match &status {
        Some(s) => std::borrow::Cow::Borrowed(s.message.as_str()),
        None => String::from_utf8_lossy(&body[..body.len().min(MAX_SAID)]),
    };
    bounded(&text)
}

/// A receiver's text as the log says it: one line, at most [`MAX_SAID`] characters.
pub(super) fn bounded(text: &str) -> String {
    crate::lock::one_line(text)
        .trim()
        .chars()
        .take(MAX_SAID)
        .collect()
}

async fn attempt(target: &Target, body: Vec<u8>) -> Result<Answer, String> {
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    match &target.tls {
        None => exchange(target, TokioIo::new(tcp), body).await,
        Some(config) => {
            let name = rustls_pki_types::ServerName::try_from(target.server_name.clone())
                .map_err(|e| format!("{}: {e}", target.server_name))?;
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            exchange(target, TokioIo::new(tls), body).await
        }
    }
}

async fn exchange<IO>(target: &Target, io: IO, body: Vec<u8>) -> Result<Answer, String>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    tokio::spawn(conn);
    let authority = target
        .uri
        .authority()
        .map_or(target.host.clone(), |a| a.to_string());
    let path = target
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.to_string());
    let mut req = Request::post(path)
        .header(HOST, authority)
        .header(USER_AGENT, concat!("bfperf/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("request: {e}"))?;
    for (name, value) in &target.headers {
        req.headers_mut().insert(name.clone(), value.clone());
    }
    if let Some(a) = &target.authorization {
        req.headers_mut().insert(AUTHORIZATION, a.clone());
    }
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    let status = resp.status().as_u16();
    let protobuf = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("application/x-protobuf"));
    let after = resp
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(retry_after);
    let mut text = Vec::new();
    let mut body = resp.into_body();
    while text.len() < MAX_ANSWER {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Some(d) = f.data_ref() {
                    text.extend_from_slice(d);
                }
            }
            _ => break,
        }
    }
    text.truncate(MAX_ANSWER);
    Ok((status, text, protobuf, after))
}

/// A `Retry-After` value: seconds, or an HTTP date (the time until it).
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_said_by_its_status_message_or_its_text_in_one_bounded_line() {
        use prost::Message;
        let status = Status {
            code: 3,
            message: "metric name\ninvalid".into(),
        }
        .encode_to_vec();
        assert_eq!(said(&status, true), "metric name invalid");
        // Text (remote write's receivers), or protobuf that is not a Status.
        assert_eq!(said(b"out of order sample\n", false), "out of order sample");
        assert_eq!(said(b"\x08\x03", true), "");
        assert_eq!(said(&vec![b'x'; 5000], false).len(), MAX_SAID);
        let long = Status {
            code: 3,
            message: "y".repeat(5000),
        }
        .encode_to_vec();
        assert_eq!(said(&long, true).len(), MAX_SAID);
    }
}
