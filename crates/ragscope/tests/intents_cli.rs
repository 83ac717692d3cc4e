//! `ragscope intents` and an intent's webhook answering `ragscope ask`: the
//! command line acts as the operator, so a webhook on loopback is allowed.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpListener;

/// A one-request webhook stand-in on loopback: returns its URL and a handle
/// yielding the request body it received.
fn webhook_once(reply: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = sock.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(h) = text.find("\r\n\r\n") {
                let len: usize = text[..h]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if buf.len() >= h + 4 + len {
                    let body = String::from_utf8_lossy(&buf[h + 4..h + 4 + len]).to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        reply.len()
                    );
                    sock.write_all(head.as_bytes()).unwrap();
                    sock.write_all(reply.as_bytes()).unwrap();
                    return body;
                }
            }
            if n == 0 {
                return String::new();
            }
        }
    });
    (url, handle)
}

#[test]
fn intents_are_set_listed_and_route_a_question_to_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "kb", "create", "shop"]);
    ok(c);
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "ingest", "--kb", "shop"])
        .arg(demo_dir().join("faq.jsonl"));
    ok(c);

    let (url, hook) = webhook_once(r#"{"answer":"订单 42 正在配送中。"}"#);
    let file = dir.path().join("intents.jsonl");
    std::fs::write(
        &file,
        format!(
            "{{\"name\":\"order_status\",\"examples\":[\"我的订单到哪了\",\"查物流\"],\"webhook\":\"{url}\"}}\n"
        ),
    )
    .unwrap();
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "intents", "--kb", "shop"])
        .arg(&file);
    assert!(ok(c).stdout.contains("1 intents set"));
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "intents", "--kb", "shop"]);
    let listed = ok(c).stdout;
    assert!(
        listed.contains("order_status\t2 examples\tthreshold 0.7"),
        "{listed}"
    );

    let mut c = cmd(&data);
    c.args([
        "--embedder",
        "none",
        "ask",
        "--kb",
        "shop",
        "--json",
        "我的订单到哪了",
    ]);
    let events: Vec<serde_json::Value> = ok(c)
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let routed = events
        .iter()
        .find(|e| e["type"] == "routed")
        .expect("routed");
    assert_eq!(routed["intent"], "order_status");
    assert_eq!(routed["answered"], true, "{routed}");
    let answered = events.iter().find(|e| e["type"] == "answered").unwrap();
    assert_eq!(answered["text"], "订单 42 正在配送中。");
    assert!(!events.iter().any(|e| e["type"] == "recall"));
    let body: serde_json::Value = serde_json::from_str(&hook.join().unwrap()).unwrap();
    assert_eq!(body["question"], "我的订单到哪了");
    assert_eq!(body["kb"], "shop");

    // A bad line is named; --clear removes them all.
    std::fs::write(&file, "{\"name\":\"x\"}\n").unwrap();
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "intents", "--kb", "shop"])
        .arg(&file);
    let r = run(c);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("line 1"), "{}", r.stderr);
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "intents", "--kb", "shop", "--clear"]);
    ok(c);
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "intents", "--kb", "shop"]);
    assert!(ok(c).stdout.contains("no intents"));
}
