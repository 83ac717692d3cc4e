//! How the store reaches its server: the connection string with its TLS
//! settings resolved once into a [`PgConfig`].
//!
//! The settings are libpq's: `sslmode` (`disable`, `prefer`, `require`,
//! `verify-ca`, `verify-full`) and `sslrootcert` (a PEM file of the
//! certificate authorities to trust; without it, the Mozilla roots of
//! `webpki-roots`). They mean what they mean for libpq, with one change of
//! default: a server that is not on this machine is reached with
//! `verify-full` (TLS, the certificate checked against the trusted roots and
//! the host name) unless the string says otherwise, so a password never
//! crosses a network in the clear by accident. A server on loopback or a
//! Unix socket is reached without TLS unless the string asks for it.
//!
//! | `sslmode` | TLS | certificate checked |
//! |---|---|---|
//! | `disable` | never | – |
//! | `prefer` | when the server offers it | only with `sslrootcert` (chain, not name) |
//! | `require` | always | only with `sslrootcert` (chain, not name) |
//! | `verify-ca` | always | chain |
//! | `verify-full` | always | chain and host name |

use crate::error::PgStoreError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How much TLS a connection asks for (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it.
    Prefer,
    /// TLS always; the certificate is checked only against `sslrootcert`.
    Require,
    /// TLS always, the certificate's chain checked.
    VerifyCa,
    /// TLS always, the certificate's chain and host name checked.
    VerifyFull,
}

impl TlsMode {
    /// libpq's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }

    fn parse(s: &str) -> Result<Self, PgStoreError> {
        Ok(match s {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => {
                return Err(PgStoreError::Url(format!(
                "sslmode {other:?} is not one of disable, prefer, require, verify-ca, verify-full"
            )))
            }
        })
    }
}

/// A parsed connection string: the driver's settings, and how to secure
/// the connection. Dereferences to the driver's [`Config`], so its setters
/// (user, database, options) apply as usual.
#[derive(Clone)]
pub struct PgConfig {
    pg: Config,
    mode: TlsMode,
    /// The TLS connector of every connection (one shared client
    /// configuration), `None` under [`TlsMode::Disable`].
    tls: Option<MakeRustlsConnect>,
}

impl std::fmt::Debug for PgConfig {
    // The driver's Debug redacts the password; ours adds only the mode.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConfig")
            .field("pg", &self.pg)
            .field("tls", &self.mode)
            .finish()
    }
}

impl std::ops::Deref for PgConfig {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.pg
    }
}

impl std::ops::DerefMut for PgConfig {
    fn deref_mut(&mut self) -> &mut Config {
        &mut self.pg
    }
}

impl PgConfig {
    /// Parses a `postgres://…` URL or a `key=value` connection string.
    pub fn parse(url: &str) -> Result<Self, PgStoreError> {
        let (rest, sslmode, rootcert) = take_tls_params(url)?;
        let mut pg: Config = rest
            .parse()
            .map_err(|e| PgStoreError::Url(crate::error::describe(&e)))?;
        let mode = match sslmode.as_deref() {
            Some(s) => TlsMode::parse(s)?,
            None if all_local(&pg) => TlsMode::Disable,
            None => TlsMode::VerifyFull,
        };
        let roots = rootcert.map(PathBuf::from);
        let tls = match mode {
            TlsMode::Disable => None,
            _ => Some(MakeRustlsConnect::new(client_config(mode, roots.as_ref())?)),
        };
        pg.ssl_mode(match mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        });
        Ok(PgConfig { pg, mode, tls })
    }

    /// How the connection is secured.
    pub fn tls_mode(&self) -> TlsMode {
        self.mode
    }

    pub(crate) fn tls(&self) -> Option<&MakeRustlsConnect> {
        self.tls.as_ref()
    }
}

impl std::str::FromStr for PgConfig {
    type Err = PgStoreError;
    fn from_str(s: &str) -> Result<Self, PgStoreError> {
        PgConfig::parse(s)
    }
}

/// Whether every host is this machine (loopback, `localhost` or a socket).
fn all_local(pg: &Config) -> bool {
    pg.get_hosts().iter().all(|h| match h {
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        #[cfg(unix)]
        Host::Unix(_) => true,
    }) && pg.get_hostaddrs().iter().all(|a| a.is_loopback())
}

/// Splits `sslmode` and `sslrootcert` (which the driver does not know in
/// full) off the connection string; returns the rest and the two values.
type Split = (String, Option<String>, Option<String>);

fn take_tls_params(url: &str) -> Result<Split, PgStoreError> {
    let ours = |k: &str| k == "sslmode" || k == "sslrootcert";
    let (mut mode, mut root) = (None, None);
    let mut keep = |k: &str, v: String| {
        if k == "sslmode" {
            mode = Some(v);
        } else {
            root = Some(v);
        }
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), None, None));
        };
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if ours(k) {
                let v = percent_encoding::percent_decode_str(v)
                    .decode_utf8()
                    .map_err(|_| PgStoreError::Url(format!("{k} is not UTF-8")))?;
                keep(k, v.into_owned());
            } else {
                rest.push(pair);
            }
        }
        let rest = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        return Ok((rest, mode, root));
    }
    // key = value pairs, values optionally in single quotes with \ escapes.
    let mut rest = String::new();
    let mut chars = url.char_indices().peekable();
    let skip_ws = |c: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
        while c.next_if(|(_, ch)| ch.is_whitespace()).is_some() {}
    };
    loop {
        skip_ws(&mut chars);
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, ch)) = chars.next_if(|(_, ch)| *ch != '=' && !ch.is_whitespace()) {
            key.push(ch);
        }
        skip_ws(&mut chars);
        if chars.next_if(|(_, ch)| *ch == '=').is_none() {
            return Err(PgStoreError::Url(format!("expected = after {key:?}")));
        }
        skip_ws(&mut chars);
        let mut value = String::new();
        if chars.next_if(|(_, ch)| *ch == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, ch)) => value.push(ch),
                        None => return Err(PgStoreError::Url("unterminated quote".into())),
                    },
                    Some((_, ch)) => value.push(ch),
                    None => return Err(PgStoreError::Url("unterminated quote".into())),
                }
            }
        } else {
            while let Some((_, ch)) = chars.next_if(|(_, ch)| !ch.is_whitespace()) {
                value.push(ch);
            }
        }
        let end = chars.peek().map_or(url.len(), |&(i, _)| i);
        if ours(&key) {
            keep(&key, value);
        } else {
            rest.push_str(&url[start..end]);
            rest.push(' ');
        }
    }
    Ok((rest.trim_end().to_owned(), mode, root))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(detail: String) -> PgStoreError {
    PgStoreError::Tls(detail)
}

/// The trusted roots: the PEM file's certificates, or the Mozilla roots.
fn roots(file: Option<&PathBuf>) -> Result<RootCertStore, PgStoreError> {
    let mut store = RootCertStore::empty();
    match file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| tls_error(format!("sslrootcert {}: {e}", path.display())))?;
            for cert in certs {
                let cert =
                    cert.map_err(|e| tls_error(format!("sslrootcert {}: {e}", path.display())))?;
                store
                    .add(cert)
                    .map_err(|e| tls_error(format!("sslrootcert {}: {e}", path.display())))?;
            }
            if store.is_empty() {
                return Err(tls_error(format!(
                    "sslrootcert {}: no certificate in the file",
                    path.display()
                )));
            }
        }
        None => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(store)
}

fn client_config(mode: TlsMode, root_file: Option<&PathBuf>) -> Result<ClientConfig, PgStoreError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(e.to_string()))?;
    if mode == TlsMode::VerifyFull {
        return Ok(builder
            .with_root_certificates(roots(root_file)?)
            .with_no_client_auth());
    }
    // verify-ca checks the chain; libpq's prefer and require do too when
    // given a root file.
    let chain = if mode == TlsMode::VerifyCa || root_file.is_some() {
        let roots = Arc::new(roots(root_file)?);
        Some(
            WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| tls_error(e.to_string()))?,
        )
    } else {
        None
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Lenient { chain, provider }))
        .with_no_client_auth())
}

/// The verifier below `verify-full`: with `chain`, the certificate must
/// lead to a trusted root but its name is not checked (`verify-ca`, and
/// libpq's `prefer`/`require` with a root file); without, any certificate
/// is taken (`prefer`/`require` without one). Either way the connection is
/// encrypted and the handshake's signatures are checked.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_plain_and_other_hosts_are_verified_by_default() {
        for url in [
            "postgres://u@127.0.0.1:5432/db",
            "postgres://u@localhost/db",
            "postgres://u@[::1]:5432/db",
            "host=/run/postgresql user=u",
            "host=127.0.0.1 user=u",
        ] {
            assert_eq!(
                PgConfig::parse(url).unwrap().tls_mode(),
                TlsMode::Disable,
                "{url}"
            );
        }
        for url in [
            "postgres://u@db.example.com/db",
            "postgres://u@10.0.0.5:5432/db",
            "host=db.example.com user=u",
            "host=127.0.0.1,db.example.com user=u",
        ] {
            let c = PgConfig::parse(url).unwrap();
            assert_eq!(c.tls_mode(), TlsMode::VerifyFull, "{url}");
            assert_eq!(c.get_ssl_mode(), SslMode::Require, "{url}");
        }
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_off_and_the_rest_kept() {
        let c = PgConfig::parse(
            "postgres://u:p@db.example.com:6543/db?application_name=x&sslmode=require&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(c.tls_mode(), TlsMode::Require);
        assert_eq!(c.get_application_name(), Some("x"));
        assert_eq!(
            c.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        assert_eq!(c.get_ports(), &[6543]);
        let c =
            PgConfig::parse("host=db.example.com sslmode = 'disable' user='a b' password='it\\'s'")
                .unwrap();
        assert_eq!(c.tls_mode(), TlsMode::Disable);
        assert_eq!(c.get_user(), Some("a b"));
        assert_eq!(c.get_password(), Some(&b"it's"[..]));
        let c = PgConfig::parse("postgres://u@127.0.0.1/db?sslmode=verify-ca").unwrap();
        assert_eq!(c.tls_mode(), TlsMode::VerifyCa);
    }

    #[test]
    fn bad_settings_are_clear_errors() {
        let e = PgConfig::parse("postgres://u@h/db?sslmode=verify").unwrap_err();
        assert!(e.to_string().contains("verify-full"), "{e}");
        let e = PgConfig::parse("postgres://u@h/db?sslmode=verify-full&sslrootcert=/no/such/file")
            .unwrap_err();
        assert!(e.to_string().contains("/no/such/file"), "{e}");
        let dir = std::env::temp_dir().join(format!("ragscope-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = PgConfig::parse(&format!(
            "postgres://u@h/db?sslmode=verify-ca&sslrootcert={}",
            empty.display()
        ))
        .unwrap_err();
        assert!(e.to_string().contains("no certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(PgConfig::parse("host=h user='unterminated").is_err());
    }

    #[test]
    fn the_password_stays_out_of_debug_output() {
        let c = PgConfig::parse("postgres://u:s3cret@db.example.com/db").unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
