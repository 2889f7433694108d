//! `--web.config.file`: TLS and basic authentication for the exporter, in the
//! format of Prometheus' exporter-toolkit (YAML):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt    # PEM, relative to this file's directory
//!   key_file: server.key
//! basic_auth_users:
//!   alice: $2y$10$...        # bcrypt hashes (htpasswd -nBC 10 alice)
//! ```
//!
//! Keys this exporter does not implement are refused rather than ignored, so that a
//! setting that was meant to protect it is never silently left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

use crate::error::{Error, Result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebFile {
    tls_server_config: Option<TlsFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

/// The web configuration, ready to serve with.
pub(super) struct Web {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    auth: Option<Auth>,
}

/// Basic authentication: users and their bcrypt hashes, a hash for users that do
/// not exist (so that a wrong user name costs what a wrong password does: no timing
/// tells which user names exist), and the credentials recently checked, good or bad,
/// by the SHA-256 of the header (bcrypt is slow by design; a scraper sends the same
/// header every time, and so does a client that keeps guessing one wrong password).
struct Auth {
    users: BTreeMap<String, String>,
    dummy: String,
    /// Good credentials, kept apart so that no flood of wrong ones can push them out.
    good: Mutex<Vec<Checked>>,
    bad: Mutex<Vec<Checked>>,
}

/// A credential checked, and until when its verdict stands.
struct Checked {
    key: [u8; 32],
    until: Instant,
}

/// How many good credentials are remembered.
const GOOD_MAX: usize = 16;
/// How many wrong ones.
const BAD_MAX: usize = 256;
/// How long a good credential is let in without a bcrypt check since it was last
/// used.
const GOOD_FOR: Duration = Duration::from_secs(300);
/// How long a wrong one is refused without a bcrypt check.
const BAD_FOR: Duration = Duration::from_secs(60);

/// What a request's credentials get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Let in.
    Good,
    /// Refused.
    Bad,
    /// Only a bcrypt check can tell ([`Web::check`]).
    Unknown,
}

fn key_of(header: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, header.as_bytes());
    let mut k = [0u8; 32];
    k.copy_from_slice(d.as_ref());
    k
}

/// The cost of a bcrypt hash (`$2y$10$...`: 10).
fn cost_of(hash: &str) -> Option<u32> {
    hash.split('$').nth(2)?.parse().ok()
}

fn bad(path: &Path, problem: impl Into<String>) -> Error {
    Error::BadConfig {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

impl Web {
    /// No TLS, no authentication.
    pub(super) fn open() -> Web {
        Web {
            tls: None,
            auth: None,
        }
    }

    /// Reads and checks a web config file and everything it names.
    pub(super) fn load(path: &Path) -> Result<Web> {
        let text = crate::sysfs::read_config(path)?;
        let file: WebFile = serde_yaml_ng::from_str(&text).map_err(|e| {
            bad(
                path,
                format!("not a web config bfperf supports (tls_server_config: cert_file, key_file; basic_auth_users): {e}"),
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            Some(t) => Some(Arc::new(server_config(
                path,
                &dir.join(t.cert_file),
                &dir.join(t.key_file),
            )?)),
            None => None,
        };
        for (user, hash) in &file.basic_auth_users {
            if !hash.starts_with("$2") || bcrypt::verify("", hash).is_err() {
                return Err(bad(
                    path,
                    format!("basic_auth_users: {user}'s password is not a bcrypt hash (make one with htpasswd -nBC 10 {user})"),
                ));
            }
        }
        let auth = match file.basic_auth_users.is_empty() {
            true => None,
            false => Some(Auth::new(path, file.basic_auth_users)?),
        };
        Ok(Web { tls, auth })
    }

    /// Whether the connection is protected: TLS, or credentials required.
    pub(super) fn protected(&self) -> bool {
        self.tls.is_some() || self.auth.is_some()
    }

    /// What a request's `Authorization` header gets without a bcrypt check: let in
    /// when no users are configured or the header was found good lately; refused when
    /// it is missing, malformed, or was found wrong lately.
    pub(super) fn verdict(&self, authorization: Option<&[u8]>) -> Verdict {
        let Some(auth) = &self.auth else {
            return Verdict::Good;
        };
        let Some(header) = authorization.and_then(|h| std::str::from_utf8(h).ok()) else {
            return Verdict::Bad;
        };
        if credentials(header).is_none() {
            return Verdict::Bad;
        }
        auth.remembered(&key_of(header))
    }

    /// Checks a request's `Authorization` header with bcrypt (slow: tens of ms), and
    /// remembers the verdict. An unknown user is checked against a hash of the same
    /// cost, so that both take as long.
    pub(super) fn check(&self, authorization: Option<&[u8]>) -> bool {
        let Some(auth) = &self.auth else {
            return true;
        };
        let Some(header) = authorization.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        let Some((user, password)) = credentials(header) else {
            return false;
        };
        let good = match auth.users.get(&user) {
            Some(hash) => bcrypt::verify(&password, hash).unwrap_or(false),
            None => {
                let _ = bcrypt::verify(&password, &auth.dummy);
                false
            }
        };
        auth.remember(key_of(header), good);
        good
    }
}

/// The user and password of a `Basic` header.
fn credentials(header: &str) -> Option<(String, String)> {
    let encoded = header.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    let (user, password) = pair.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

impl Auth {
    fn new(path: &Path, users: BTreeMap<String, String>) -> Result<Auth> {
        let cost = users
            .values()
            .filter_map(|h| cost_of(h))
            .max()
            .unwrap_or(10);
        let dummy = bcrypt::hash("bfperf: no such user", cost).map_err(|e| {
            bad(
                path,
                format!("basic_auth_users: cannot make a bcrypt hash of cost {cost}: {e}"),
            )
        })?;
        Ok(Auth {
            users,
            dummy,
            good: Mutex::new(Vec::new()),
            bad: Mutex::new(Vec::new()),
        })
    }

    /// A good credential's time is renewed by each use.
    fn remembered(&self, key: &[u8; 32]) -> Verdict {
        let now = Instant::now();
        let mut good = self.good.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = good.iter_mut().find(|c| &c.key == key && c.until > now) {
            c.until = now + GOOD_FOR;
            return Verdict::Good;
        }
        drop(good);
        let bad = self.bad.lock().unwrap_or_else(|p| p.into_inner());
        match bad.iter().any(|c| &c.key == key && c.until > now) {
            true => Verdict::Bad,
            false => Verdict::Unknown,
        }
    }

    fn remember(&self, key: [u8; 32], good: bool) {
        let (list, max, for_) = match good {
            true => (&self.good, GOOD_MAX, GOOD_FOR),
            false => (&self.bad, BAD_MAX, BAD_FOR),
        };
        let now = Instant::now();
        let mut list = list.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|c| c.until > now && c.key != key);
        if list.len() >= max {
            // The one that would expire first goes.
            if let Some(i) = (0..list.len()).min_by_key(|&i| list[i].until) {
                list.swap_remove(i);
            }
        }
        list.push(Checked {
            key,
            until: now + for_,
        });
    }
}

/// The most a certificate chain or key file may hold.
const MAX_PEM: u64 = 1024 * 1024;

fn server_config(config: &Path, cert: &Path, key: &Path) -> Result<rustls::ServerConfig> {
    // Non-blocking, regular files only, bounded: /dev/zero or a FIFO named as a
    // certificate is an error, not a hang or a memory flood.
    let cert_pem =
        crate::sysfs::read_regular(cert, "cannot read the TLS certificate (cert_file)", MAX_PEM)?;
    let key_pem =
        crate::sysfs::files::read_secret(key, "cannot read the TLS key (key_file)", MAX_PEM)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad(config, format!("cert_file {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(bad(
            config,
            format!("cert_file {}: no certificate in it", cert.display()),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| bad(config, format!("key_file {}: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| {
            bad(
                config,
                format!("the certificate and key do not make a TLS server: {e}"),
            )
        })
}
