//! TLS to a real PostgreSQL that accepts TLS connections only
//! (scripts/pg/start-tls.sh; its directory in PG_TLS_DIR): each sslmode
//! connects or is refused as libpq's would, with a clear reason.

#![cfg(feature = "pg-tests")]

use rag_store_pg::{parse_config, probe, TlsMode};
use std::path::PathBuf;

fn server() -> (PathBuf, u16) {
    let dir = std::env::var("PG_TLS_DIR").unwrap_or_else(|_| {
        panic!(
            "PG_TLS_DIR is not set: these tests need the TLS-only PostgreSQL of\n  \
             export PG_TLS_DIR=\"$(scripts/pg/start-tls.sh)\"\n(scripts/pg/start-tls.sh --stop stops it)."
        )
    });
    let dir = PathBuf::from(dir);
    let port = std::fs::read_to_string(dir.join("port"))
        .expect("PG_TLS_DIR/port")
        .trim()
        .parse()
        .expect("a port number");
    (dir, port)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn url(host: &str, port: u16, params: &str) -> String {
    format!("postgres://postgres@{host}:{port}/postgres{params}")
}

#[test]
fn verify_full_checks_the_chain_and_the_name() {
    let (dir, port) = server();
    let ca = dir.join("ca.pem");
    let rt = rt();
    let c = parse_config(&url(
        "localhost",
        port,
        &format!("?sslmode=verify-full&sslrootcert={}", ca.display()),
    ))
    .unwrap();
    assert_eq!(c.tls_mode(), TlsMode::VerifyFull);
    let p = rt.block_on(probe(&c)).unwrap();
    assert!(p.tls, "{p:?}");
    assert!(!p.version.is_empty());

    // The certificate names localhost, not 127.0.0.1.
    let c = parse_config(&url(
        "127.0.0.1",
        port,
        &format!("?sslmode=verify-full&sslrootcert={}", ca.display()),
    ))
    .unwrap();
    let e = rt.block_on(probe(&c)).unwrap_err().to_string();
    assert!(e.contains("not valid for name"), "{e}");

    // A CA that signed nothing of the server's.
    let other = dir.join("other-ca.pem");
    let c = parse_config(&url(
        "localhost",
        port,
        &format!("?sslmode=verify-full&sslrootcert={}", other.display()),
    ))
    .unwrap();
    let e = rt.block_on(probe(&c)).unwrap_err().to_string();
    assert!(
        e.contains("UnknownIssuer") || e.contains("BadSignature"),
        "{e}"
    );

    // Without sslrootcert the public roots are trusted, and the test CA is not one.
    let c = parse_config(&url("localhost", port, "?sslmode=verify-full")).unwrap();
    let e = rt.block_on(probe(&c)).unwrap_err().to_string();
    assert!(e.contains("invalid peer certificate"), "{e}");
}

#[test]
fn verify_ca_checks_the_chain_only() {
    let (dir, port) = server();
    let rt = rt();
    let c = parse_config(&url(
        "127.0.0.1",
        port,
        &format!(
            "?sslmode=verify-ca&sslrootcert={}",
            dir.join("ca.pem").display()
        ),
    ))
    .unwrap();
    assert!(rt.block_on(probe(&c)).unwrap().tls);
    let c = parse_config(&url(
        "127.0.0.1",
        port,
        &format!(
            "?sslmode=verify-ca&sslrootcert={}",
            dir.join("other-ca.pem").display()
        ),
    ))
    .unwrap();
    assert!(rt.block_on(probe(&c)).is_err());
}

#[test]
fn require_and_prefer_encrypt_and_check_a_given_root() {
    let (dir, port) = server();
    let rt = rt();
    for mode in ["require", "prefer"] {
        let c = parse_config(&url("127.0.0.1", port, &format!("?sslmode={mode}"))).unwrap();
        assert!(rt.block_on(probe(&c)).unwrap().tls, "{mode}");
        // With a root file, libpq checks the chain under require too.
        let c = parse_config(&url(
            "127.0.0.1",
            port,
            &format!(
                "?sslmode={mode}&sslrootcert={}",
                dir.join("other-ca.pem").display()
            ),
        ))
        .unwrap();
        assert!(rt.block_on(probe(&c)).is_err(), "{mode}");
    }
}

#[test]
fn plain_connections_are_what_the_server_refuses() {
    let (_, port) = server();
    let rt = rt();
    // Loopback without sslmode is plain, which this server rejects.
    for params in ["", "?sslmode=disable"] {
        let c = parse_config(&url("127.0.0.1", port, params)).unwrap();
        assert_eq!(c.tls_mode(), TlsMode::Disable);
        let e = rt.block_on(probe(&c)).unwrap_err().to_string();
        assert!(e.contains("no encryption"), "{e}");
    }
}
