//! URL sources never go through a proxy from the environment: a proxy
//! resolves names itself, so the private-address check would never see the
//! address dialled (names resolving to loopback or internal hosts were
//! fetched this way). Its own process: it sets HTTP_PROXY.

use rag_core::Fetcher;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[tokio::test]
async fn environment_proxies_are_not_used_for_sources() {
    // A stand-in proxy on loopback that serves a page for any request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let body = "<html><body><p>internal secret page</p></body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let proxy = format!("http://{addr}");
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
    ] {
        std::env::set_var(var, &proxy);
    }
    std::env::remove_var("NO_PROXY");
    std::env::remove_var("no_proxy");
    let fetcher = rag_models::HttpFetcher::new(rag_models::FetchConfig {
        timeout_ms: 3_000,
        ..rag_models::FetchConfig::default()
    })
    .unwrap();
    // A name that only an internal resolver (or the proxy) knows.
    let r = fetcher.fetch("http://wiki.internal.invalid/secret").await;
    assert!(r.is_err(), "fetched through the environment's proxy: {r:?}");
    // And loopback by name is refused by the resolver, not sent to the proxy.
    let r = fetcher.fetch("http://localhost/secret").await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the proxy was used");

    // A proxy configured for sources is used (and then resolves names itself).
    let through = rag_models::HttpFetcher::new(rag_models::FetchConfig {
        timeout_ms: 3_000,
        proxy: Some(proxy.clone()),
        ..rag_models::FetchConfig::default()
    })
    .unwrap();
    let page = through.fetch("http://wiki.example.org/page").await.unwrap();
    assert!(String::from_utf8_lossy(&page.body).contains("internal secret page"));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}
