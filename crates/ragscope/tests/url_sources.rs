//! `ragscope source`: a small site served on loopback by the test is added,
//! synced, re-synced (nothing changes) and searched; private addresses are
//! refused unless the configuration allows them.

mod common;
use common::*;
use std::io::{Read, Write};

/// Serves two HTML pages until the test ends.
fn site() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let n = sock.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let body = match head.split_whitespace().nth(1) {
                Some("/") => "<html><body><nav><a href=\"/returns\">Returns</a></nav><main><h1>Zebracorn shop</h1><p>We sell zebracorn desks and chairs.</p></main></body></html>",
                Some("/returns") => "<html><body><main><h1>Returns</h1><p>Zebracorn desks may be returned within thirty days of delivery.</p></main></body></html>",
                _ => "",
            };
            let status = if body.is_empty() {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let _ = write!(sock, "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    base
}

#[test]
fn a_site_is_added_synced_and_searched_from_the_command_line() {
    let base = site();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for kb in ["web", "guarded"] {
        let mut c = cmd(&data);
        c.args(["kb", "create", kb]);
        ok(c);
    }
    // Refused by default: loopback is a private address.
    let mut c = cmd(&data);
    c.args(["source", "add", "--kb", "guarded", &format!("{base}/")]);
    let r = ok(c);
    assert!(
        r.stdout.contains("FAILED") && r.stdout.contains("private or loopback"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(": failed"), "{}", r.stdout);

    let allowed = |c: &mut std::process::Command| {
        c.env("RAGSCOPE_SOURCES__ALLOW_PRIVATE", "true");
    };
    let mut c = cmd(&data);
    allowed(&mut c);
    c.args([
        "source",
        "add",
        "--kb",
        "web",
        "--depth",
        "1",
        &format!("{base}/"),
    ]);
    let r = ok(c);
    assert_eq!(r.stdout.matches("indexed ").count(), 2, "{}", r.stdout);
    assert!(
        r.stdout.contains(": synced — 2 indexed, 0 unchanged"),
        "{}",
        r.stdout
    );

    let mut c = cmd(&data);
    allowed(&mut c);
    c.args(["source", "sync", "--kb", "web"]);
    let r = ok(c);
    assert!(
        r.stdout.contains(": synced — 0 indexed, 2 unchanged"),
        "{}",
        r.stdout
    );

    let events = query_events(&data, "web", "how many days to return a desk", &[]);
    let found = sources(&events);
    assert!(
        found.iter().any(|(title, _)| title.contains("Returns")),
        "{found:?}"
    );

    let mut c = cmd(&data);
    c.args(["source", "list", "--kb", "web", "--json"]);
    let r = ok(c);
    let list: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list[0]["pages"].as_array().unwrap().len(), 2);
    let mut c = cmd(&data);
    c.args(["source", "remove", "--kb", "web", &id]);
    ok(c);
    let mut c = cmd(&data);
    c.args(["kb", "list"]);
    let r = ok(c);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("web") && l.contains(" 0 documents")),
        "{}",
        r.stdout
    );
}
