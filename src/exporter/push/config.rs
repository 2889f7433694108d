//! `[remote_write]` and `[otlp]` of the exporter's config read and checked: the
//! receiver's address, its credentials and CA (read bounded, secrets private), the
//! labels and pace of the pushes.

use super::*;

/// `[remote_write]` or `[otlp]` in the exporter's config: the same keys, but for
/// the receiver's address (`url`, `endpoint`) and what only one protocol has.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(in crate::exporter) struct PushFile {
    /// Remote write's endpoint (`https://prometheus:9090/api/v1/write`).
    pub(super) url: Option<String>,
    /// OTLP's endpoint (`https://collector:4318/v1/metrics`).
    pub(super) endpoint: Option<String>,
    /// Headers sent with every request (a tenant, an API key's name).
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// The name the receiver's certificate is checked against, when not the
    /// endpoint's host.
    pub(super) server_name: Option<String>,
    /// OTLP: attributes added to the Resource (`deployment.environment`).
    #[serde(default)]
    pub(super) resource_attributes: BTreeMap<String, String>,
    /// Time between pushes (`15s`).
    pub(super) interval: Option<String>,
    /// A file holding a bearer token.
    pub(super) bearer_token_file: Option<PathBuf>,
    /// Basic auth: a user and a file holding the password.
    pub(super) basic_auth: Option<BasicAuthFile>,
    /// The CA that signs the receiver's certificate (PEM); default the system's.
    pub(super) ca_file: Option<PathBuf>,
    /// The queue's bound in samples.
    pub(super) queue_samples: Option<usize>,
    /// Labels added to every series (`instance` defaults to the host name, `job`
    /// to bfperf).
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(super) struct BasicAuthFile {
    pub(super) username: String,
    pub(super) password_file: PathBuf,
}

/// The protocol a pusher speaks.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::exporter) enum Protocol {
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
    pub(super) fn section(&self) -> &'static str {
        match self {
            Protocol::RemoteWrite => "remote_write",
            Protocol::Otlp { .. } => "otlp",
        }
    }
}

/// A receiver to push to, from a checked `[remote_write]` or `[otlp]`: everything
/// read and valid before the device is touched.
pub(in crate::exporter) struct Receiver {
    pub(super) target: Target,
    pub(super) url: String,
    pub(super) interval: Duration,
    pub(super) bound: usize,
    pub(super) labels: Vec<(String, String)>,
    pub(super) protocol: Protocol,
}

/// A section of the config file, for its messages.
pub(super) struct Section<'a> {
    pub(super) config: &'a Path,
    pub(super) name: &'static str,
}

impl Section<'_> {
    /// What failed, when a file the section names cannot be read.
    pub(super) fn cannot_read(&self, key: &str) -> &'static str {
        match (self.name, key) {
            ("otlp", "bearer_token_file") => "cannot read otlp's bearer_token_file",
            ("otlp", "password_file") => "cannot read otlp's password_file",
            ("otlp", _) => "cannot read otlp's CA (ca_file)",
            (_, "bearer_token_file") => "cannot read remote_write's bearer_token_file",
            (_, "password_file") => "cannot read remote_write's password_file",
            _ => "cannot read remote_write's CA (ca_file)",
        }
    }

    pub(super) fn bad(&self, problem: String) -> Error {
        Error::BadConfig {
            path: self.config.to_path_buf(),
            problem: format!("{}: {problem}", self.name),
        }
    }
}

impl PushFile {
    /// The same, its file names taken relative to `dir` (the config's directory).
    pub(in crate::exporter) fn relative_to(mut self, dir: &Path) -> PushFile {
        let join = |p: &mut PathBuf| *p = dir.join(&*p);
        self.bearer_token_file.as_mut().map(join);
        self.ca_file.as_mut().map(join);
        if let Some(b) = self.basic_auth.as_mut() {
            join(&mut b.password_file);
        }
        self
    }
}

impl Receiver {
    /// Checks `file` (its paths made relative to the config's directory), named
    /// `config` in messages, for `protocol` (for OTLP, the Resource bfperf gives;
    /// the file's `resource_attributes` are added to it).
    pub(in crate::exporter) fn check(
        file: &PushFile,
        config: &Path,
        protocol: Protocol,
    ) -> Result<Receiver> {
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
        Ok(Receiver {
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
pub(super) fn address<'f>(
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
pub(super) fn labelled(
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
pub(super) fn endpoint(
    url: &str,
    key: &str,
    at: &Section,
) -> Result<(hyper::Uri, bool, String, u16)> {
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
pub(super) fn pace(file: &PushFile, at: &Section) -> Result<(Duration, usize)> {
    let interval = match &file.interval {
        Some(t) => {
            crate::front::args::parse_duration(t).map_err(|e| at.bad(format!("interval: {e}")))?
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
pub(super) fn headers(
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
pub(super) fn loopback(host: &str) -> bool {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// The Authorization header the config asks for (token or basic), its secret read
/// from its file now.
pub(super) fn authorization(
    file: &PushFile,
    at: &Section,
) -> Result<Option<hyper::header::HeaderValue>> {
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
pub(super) fn labels(
    given: &BTreeMap<String, String>,
    at: &Section,
) -> Result<Vec<(String, String)>> {
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
pub(in crate::exporter) fn host_name() -> String {
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
pub(super) fn client_tls(at: &Section, ca: &Option<PathBuf>) -> Result<Arc<rustls::ClientConfig>> {
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
