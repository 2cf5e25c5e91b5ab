//! TLS for SSL and SASL_SSL listeners (docs/security.md#tls), with rustls: the
//! broker's certificate chain and key from PEM files, client certificates checked
//! against a CA bundle when asked for (mTLS), and all three files re-read when they
//! change, without a restart.

use crate::config::ClientAuth;
use kaas_core::fsutil::FileStamp;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// How often the PEM files are looked at for changes.
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// The largest PEM file read (a chain of a few certificates is a few KiB; a CA bundle
/// like Mozilla's is about 200 KiB).
const MAX_PEM_BYTES: u64 = 4 << 20;

#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// The current TLS configuration, rebuilt when a file changes. A change that does not
/// load (a key that does not match, a half-written file) is logged and the previous
/// configuration kept, then tried again at the next change.
pub struct Tls {
    settings: TlsSettings,
    state: Mutex<TlsState>,
}

struct TlsState {
    acceptor: TlsAcceptor,
    stamps: Vec<Option<FileStamp>>,
    checked: Instant,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {detail}")]
    File { path: PathBuf, detail: String },
    #[error("{0}")]
    Config(String),
}

impl Tls {
    /// Loads the files once; an error says which file and what is wrong with it.
    pub fn load(settings: TlsSettings) -> Result<Arc<Tls>, TlsError> {
        if settings.client_auth != ClientAuth::None && settings.ca.is_none() {
            return Err(TlsError::Config(
                "--ssl-client-auth requested or required needs --ssl-ca (the CA client certificates chain to)".into(),
            ));
        }
        let stamps = stamps(&settings);
        let acceptor = build(&settings)?;
        Ok(Arc::new(Tls {
            settings,
            state: Mutex::new(TlsState {
                acceptor,
                stamps,
                checked: Instant::now(),
            }),
        }))
    }

    /// The acceptor for a new connection: the files as they were at the last check (at
    /// most a second ago), reloaded if they changed since.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK {
            state.checked = Instant::now();
            let now = stamps(&self.settings);
            if now != state.stamps {
                state.stamps = now;
                match build(&self.settings) {
                    Ok(acceptor) => {
                        state.acceptor = acceptor;
                        info!(certificate = %self.settings.certificate.display(), "TLS certificate files changed: reloaded");
                    }
                    Err(e) => {
                        warn!(error = %e, "TLS certificate files changed but do not load; new connections keep the previous ones")
                    }
                }
            }
        }
        state.acceptor.clone()
    }
}

fn stamps(s: &TlsSettings) -> Vec<Option<FileStamp>> {
    [Some(&s.certificate), Some(&s.key), s.ca.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| kaas_core::fsutil::file_stamp(p))
        .collect()
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    let file = std::fs::File::open(path).map_err(|e| TlsError::File {
        path: path.into(),
        detail: e.to_string(),
    })?;
    kaas_core::fsutil::read_capped_from(&file, MAX_PEM_BYTES).map_err(|e| TlsError::File {
        path: path.into(),
        detail: e.to_string(),
    })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(path)?;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::File {
                path: path.into(),
                detail: format!("not a PEM certificate file: {e}"),
            })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            path: path.into(),
            detail: "no CERTIFICATE block in the file".into(),
        });
    }
    Ok(certs)
}

fn build(s: &TlsSettings) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(&s.certificate)?;
    let key_pem = read_pem(&s.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::File {
        path: s.key.clone(),
        detail: format!("no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
    })?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::File {
            path: s.key.clone(),
            detail: format!("unusable private key: {e}"),
        })?;
    let certified = rustls::sign::CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        TlsError::Config(format!(
            "{} and {} do not go together: {e}",
            s.key.display(),
            s.certificate.display()
        ))
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match (&s.ca, s.client_auth) {
        (Some(ca), ClientAuth::Requested | ClientAuth::Required) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(ca)? {
                roots.add(cert).map_err(|e| TlsError::File {
                    path: ca.clone(),
                    detail: format!("not a usable CA certificate: {e}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if s.client_auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| TlsError::Config(e.to_string()))?)
        }
        _ => builder.with_no_client_auth(),
    };
    let config = builder.with_cert_resolver(Arc::new(OneCertificate(Arc::new(certified))));
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The broker's one certificate chain, whatever name the client asks for.
#[derive(Debug)]
struct OneCertificate(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for OneCertificate {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The principal of a verified client certificate: its subject as Kafka writes it
/// (RFC 2253, most specific first: `CN=writer,OU=apps,O=Example`).
pub fn subject_principal(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let registry = x509_parser::objects::oid_registry();
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let parts: Vec<String> = rdn
            .iter()
            .map(|attr| {
                let key = x509_parser::objects::oid2abbrev(attr.attr_type(), registry)
                    .map(str::to_string)
                    .unwrap_or_else(|_| attr.attr_type().to_id_string());
                let value = attr.as_str().map(escape_rdn_value).unwrap_or_else(|_| {
                    format!(
                        "#{}",
                        attr.attr_value()
                            .data
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<String>()
                    )
                });
                format!("{key}={value}")
            })
            .collect();
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// RFC 2253 §2.4: `,+"\<>;` escaped, and a leading `#` or space and a trailing space.
fn escape_rdn_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
