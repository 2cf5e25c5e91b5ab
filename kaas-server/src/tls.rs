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

    /// Whether the next [`Tls::acceptor`] looks at the files (blocking work then).
    pub fn check_due(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).checked.elapsed() >= RELOAD_CHECK
    }

    /// The acceptor for a new connection: the files as they were at the last check (at
    /// most a second ago), reloaded if they changed since. Looking at (and re-reading)
    /// the files is blocking work: when [`Tls::check_due`], call it through
    /// [`crate::blocking::off_worker`].
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

/// The files' identities. Symbolic links are followed (unlike for volume files): a
/// Kubernetes Secret mounts `tls.crt -> ..data/tls.crt` and swaps `..data` on
/// renewal, certbot links `live/` into `archive/`.
fn stamps(s: &TlsSettings) -> Vec<Option<FileStamp>> {
    [Some(&s.certificate), Some(&s.key), s.ca.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| std::fs::metadata(p).ok().map(|m| kaas_core::fsutil::stamp_of(&m)))
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

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(&read_pem(path)?).map_err(|e| TlsError::File {
        path: path.to_path_buf(),
        detail: format!("no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
    })
}

/// The CA certificates of a PEM file, as trust roots.
fn ca_roots(ca: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca)? {
        roots.add(cert).map_err(|e| TlsError::File {
            path: ca.to_path_buf(),
            detail: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

fn build(s: &TlsSettings) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(&s.certificate)?;
    let key = private_key(&s.key)?;
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
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(ca_roots(ca)?), provider.clone());
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

/// The TLS side of this broker's connections to its peers (the inter-broker
/// listener when it is SSL or SASL_SSL): their certificates must chain to `ca`, and
/// this broker presents `identity` (its own certificate and key) when it has one.
pub fn client_connector(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<tokio_rustls::TlsConnector, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(ca_roots(ca)?);
    let config = match identity {
        Some((certificate, key)) => builder
            .with_client_auth_cert(certificates(certificate)?, private_key(key)?)
            .map_err(|e| TlsError::Config(format!("{} as a client certificate: {e}", certificate.display())))?,
        None => builder.with_no_client_auth(),
    };
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The broker's one certificate chain, whatever name the client asks for.
#[derive(Debug)]
struct OneCertificate(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for OneCertificate {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The principal of a verified client certificate: its subject as Kafka writes it,
/// which is Java's `X500Principal.getName(RFC2253)`: most specific first
/// (`CN=writer,OU=apps,O=Example`), keywords only for CN, C, L, ST, O, OU, STREET, DC
/// and UID, any other attribute as its dotted OID and `#` with the hex of its DER
/// value, multi-valued RDNs joined by `+`.
pub fn subject_principal(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let parts: Vec<String> = rdn
            .iter()
            .map(|attr| {
                let oid = attr.attr_type().to_id_string();
                let value = attr.attr_value();
                let tag = value.header.tag().0;
                match (java_keyword(&oid), decode_directory_string(tag, value.data)) {
                    (Some(key), Some(text)) => format!("{key}={}", escape_rdn_value(&text)),
                    (key, _) => format!(
                        "{}=#{}",
                        key.map(str::to_string).unwrap_or(oid),
                        der_hex(tag, value.data)
                    ),
                }
            })
            .collect();
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// The attribute keywords Java's RFC 2253 form writes by name.
fn java_keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// A DirectoryString (or IA5String) value as text, by its universal tag.
fn decode_directory_string(tag: u32, data: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String, GeneralString (Java writes
        // NumericString, VisibleString and UniversalString as #hex)
        12 | 19 | 22 | 27 => std::str::from_utf8(data).ok().map(str::to_string),
        // TeletexString: read as Latin-1, as Java does
        20 => Some(data.iter().map(|&b| b as char).collect()),
        // BMPString: UTF-16BE
        30 if data.len().is_multiple_of(2) => String::from_utf16(
            &data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect::<Vec<_>>(),
        )
        .ok(),
        _ => None,
    }
}

/// The hex of a value's whole DER encoding (tag, length, content), as Java writes an
/// attribute it has no keyword for.
fn der_hex(tag: u32, data: &[u8]) -> String {
    let mut der = vec![tag.min(30) as u8];
    let len = data.len();
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        der.push(0x80 | bytes.len() as u8);
        der.extend(bytes);
    }
    der.extend_from_slice(data);
    der.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 2253 §2.4 as Java writes it: `,=+<>#;"\` escaped anywhere, and leading and
/// trailing spaces.
fn escape_rdn_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let lead = v.chars().take_while(|c| *c == ' ').count();
    let total = v.chars().count();
    let trail = total - v.chars().rev().take_while(|c| *c == ' ').count();
    for (i, c) in v.chars().enumerate() {
        let special =
            matches!(c, ',' | '=' | '+' | '"' | '\\' | '<' | '>' | ';' | '#') || (c == ' ' && (i < lead || i >= trail));
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_written_as_java_writes_rfc_2253() {
        assert_eq!(java_keyword("2.5.4.3"), Some("CN"));
        assert_eq!(
            java_keyword("1.2.840.113549.1.9.1"),
            None,
            "emailAddress has no keyword in Java's RFC 2253 form"
        );
        assert_eq!(escape_rdn_value("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rdn_value(" #x=1 "), "\\ \\#x\\=1\\ ");
        assert_eq!(decode_directory_string(30, &[0, b'h', 0, b'i']).as_deref(), Some("hi"));
        assert_eq!(der_hex(22, b"a@b"), "1603614062");
    }

    /// A certificate whose subject cannot be read names nobody: None, and the
    /// connection is closed (server::connection) rather than served as User:ANONYMOUS.
    #[test]
    fn a_certificate_that_does_not_parse_has_no_principal() {
        assert_eq!(
            subject_principal(&CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])),
            None
        );
        assert_eq!(subject_principal(&CertificateDer::from(Vec::new())), None);
    }
}
