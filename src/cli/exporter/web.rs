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
pub struct Web {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    auth: Option<Auth>,
}

/// Basic authentication: users and their bcrypt hashes, and the credentials already
/// verified (bcrypt is slow by design; a scraper sends the same header every time).
struct Auth {
    users: BTreeMap<String, String>,
    verified: Mutex<Vec<String>>,
}

/// How many verified credentials are remembered.
const VERIFIED_MAX: usize = 16;

fn bad(path: &Path, problem: impl Into<String>) -> Error {
    Error::BadConfig {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

impl Web {
    /// No TLS, no authentication.
    pub fn open() -> Web {
        Web {
            tls: None,
            auth: None,
        }
    }

    /// Reads and checks a web config file and everything it names.
    pub fn load(path: &Path) -> Result<Web> {
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
        let auth = (!file.basic_auth_users.is_empty()).then(|| Auth {
            users: file.basic_auth_users,
            verified: Mutex::new(Vec::new()),
        });
        Ok(Web { tls, auth })
    }

    /// Whether the connection is protected: TLS, or credentials required.
    pub fn protected(&self) -> bool {
        self.tls.is_some() || self.auth.is_some()
    }

    /// Whether a request is let in without a bcrypt check: no users configured, or
    /// the very header already verified.
    pub fn allows_without_checking(&self, authorization: Option<&[u8]>) -> bool {
        let Some(auth) = &self.auth else {
            return true;
        };
        let Some(header) = authorization.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        let verified = auth.verified.lock().unwrap_or_else(|p| p.into_inner());
        verified.iter().any(|v| v == header)
    }

    /// Whether a request's `Authorization` header lets it in (bcrypt: slow).
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(auth) = &self.auth else {
            return true;
        };
        let Some(header) = authorization.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        {
            let verified = auth.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.iter().any(|v| v == header) {
                return true;
            }
        }
        let Some(encoded) = header.strip_prefix("Basic ") else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Ok(pair) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = pair.split_once(':') else {
            return false;
        };
        let ok = auth
            .users
            .get(user)
            .is_some_and(|hash| bcrypt::verify(password, hash).unwrap_or(false));
        if ok {
            let mut verified = auth.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.len() >= VERIFIED_MAX {
                verified.remove(0);
            }
            verified.push(header.to_string());
        }
        ok
    }
}

fn server_config(config: &Path, cert: &Path, key: &Path) -> Result<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<std::result::Result<_, _>>())
        .map_err(|e| bad(config, format!("cert_file {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(bad(
            config,
            format!("cert_file {}: no certificate in it", cert.display()),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
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
