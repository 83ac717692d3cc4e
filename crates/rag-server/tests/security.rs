//! Security hardening (issue 15) against a real server on loopback: the
//! widget role and global admin keys, bounded and strict JSON bodies, safe
//! stored links and knowledge-base names, uploads that stop with their
//! client and a per-key ingest limit, and `/system` without provider
//! credentials.

mod common;

use async_trait::async_trait;
use common::{sse_events, start, start_with};
use futures::StreamExt;
use rag_engine::rag_ingest::Extraction;
use rag_engine::{ExtractFailure, ExtractJob, Extractor, InProcessExtractor};
use rag_server::Limits;
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FAQS: &str = r#"{"question":"怎么申请退款？","answer":"在订单页点击申请退款，三个工作日内原路退回。","tags":["售后"]}
{"question":"配送要多久？","answer":"同城配送一般两小时内送达。","tags":["物流"]}
{"question":"How do I reset my password?","answer":"Use the reset link on the sign-in page; it expires after 30 minutes."}
"#;

/// A knowledge base `kb` with three FAQ entries.
async fn seed(server: &common::Server, key: &str, kb: &str) {
    let (s, b) = server.post("/kbs", key, json!({ "name": kb })).await;
    assert_eq!(s, 201, "{b}");
    let text = server
        .upload(kb, key, "faq.jsonl", FAQS.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
}

async fn new_key(server: &common::Server, body: Value) -> (u16, Value) {
    server.post("/keys", &server.admin_key, body).await
}

fn query_id(asked: &Value) -> String {
    asked["events"][0]["query_id"].as_str().unwrap().to_owned()
}

// ------------------------------------------------------------ widget role

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_widget_key_asks_and_rates_its_own_answers_and_reads_nothing_else() {
    let server = start(Limits::default(), None).await;
    let writer = server.tenant("shopco").await;
    seed(&server, &writer, "shop").await;
    let (s, created) = new_key(
        &server,
        json!({ "tenant": "shopco", "role": "widget", "kb": "shop", "label": "site widget" }),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    assert_eq!(created["info"]["role"], "widget");
    assert_eq!(created["info"]["kb"], "shop");
    let widget = created["key"].as_str().unwrap().to_owned();
    let (s, body) = new_key(&server, json!({ "tenant": "shopco", "role": "widget" })).await;
    assert_eq!(s, 400, "a widget key names its knowledge base: {body}");
    assert_eq!(body["code"], "invalid_param");

    // The writer's own question, with a conversation.
    let writer_conv = "writer-conversation-0001";
    let (s, asked) = server
        .post(
            "/kbs/shop/query/sync",
            &writer,
            json!({ "query": "WRITER-PRIVATE 配送要多久", "conversation_id": writer_conv }),
        )
        .await;
    assert_eq!(s, 200, "{asked}");
    let writers_answer = query_id(&asked);

    // The widget asks, streamed and as JSON, and retrieves.
    let (s, asked) = server
        .post(
            "/kbs/shop/query/sync",
            &widget,
            json!({ "query": "怎么申请退款" }),
        )
        .await;
    assert_eq!(s, 200, "{asked}");
    let widgets_answer = query_id(&asked);
    let res = server
        .client
        .post(server.api("/kbs/shop/query"))
        .bearer_auth(&widget)
        .json(&json!({ "query": "配送要多久" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let streamed = sse_events(&res.text().await.unwrap());
    assert_eq!(streamed.last().unwrap().0, "done");
    let streamed_answer = streamed[0].1["query_id"].as_str().unwrap().to_owned();
    let (s, retrieved) = server
        .post("/kbs/shop/retrieve", &widget, json!({ "query": "退款" }))
        .await;
    assert_eq!(s, 200, "{retrieved}");

    // It reads nothing of the knowledge base's users: not the log, the
    // conversations, the analytics, nor anything else.
    let writer_conv_path = format!("/kbs/shop/conversations/{writer_conv}");
    let log_row = format!("/log/{writers_answer}");
    let replay = format!("/log/{widgets_answer}/replay");
    for (method, path, status) in [
        (Method::GET, "/kbs/shop/log", 403),
        (Method::GET, "/kbs/shop/analytics", 403),
        (Method::GET, "/kbs/shop/conversations", 403),
        (Method::GET, writer_conv_path.as_str(), 403),
        (Method::DELETE, writer_conv_path.as_str(), 403),
        (Method::GET, "/kbs/shop/faqs", 403),
        (Method::GET, "/kbs/shop/documents", 403),
        (Method::GET, "/kbs/shop/lexicon", 403),
        (Method::GET, "/kbs/shop", 403),
        (Method::POST, "/kbs/shop/faq-tool", 403),
        (Method::GET, log_row.as_str(), 404),
        (Method::POST, replay.as_str(), 404),
        (Method::GET, "/kbs", 404),
        (Method::GET, "/system", 404),
        (Method::GET, "/session", 404),
        (Method::GET, "/keys", 404),
    ] {
        let (s, body) = server
            .call(
                method.clone(),
                path,
                &widget,
                Some(json!({ "query": "退款" })),
            )
            .await;
        assert_eq!(s, status, "{method} {path}: {body}");
        assert!(
            !body.to_string().contains("WRITER-PRIVATE"),
            "{method} {path}: {body}"
        );
    }

    // A read-only key scoped to the knowledge base keeps what it could do.
    let (s, created) = new_key(
        &server,
        json!({ "tenant": "shopco", "role": "read_only", "kb": "shop" }),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let scoped = created["key"].as_str().unwrap().to_owned();
    let (s, log) = server.get("/kbs/shop/log", &scoped).await;
    assert_eq!(s, 200, "{log}");
    assert!(log.as_array().is_some_and(|rows| rows.len() >= 3), "{log}");
    let (s, _) = server
        .post("/kbs/shop/query/sync", &scoped, json!({ "query": "退款" }))
        .await;
    assert_eq!(s, 200);

    // Feedback on its own answers only.
    for id in [&widgets_answer, &streamed_answer] {
        let (s, body) = server
            .post(
                &format!("/log/{id}/feedback"),
                &widget,
                json!({ "feedback": "useful" }),
            )
            .await;
        assert_eq!(s, 204, "{body}");
        let (_, row) = server.get(&format!("/log/{id}"), &writer).await;
        assert_eq!(row["feedback"], "useful", "{row}");
    }
    let (s, _) = server
        .post(
            &format!("/log/{writers_answer}/feedback"),
            &widget,
            json!({ "feedback": "not_useful" }),
        )
        .await;
    assert_eq!(s, 404, "not an answer given to the widget");
    let (_, created) = new_key(
        &server,
        json!({ "tenant": "shopco", "role": "widget", "kb": "shop" }),
    )
    .await;
    let other_widget = created["key"].as_str().unwrap().to_owned();
    let (s, _) = server
        .post(
            &format!("/log/{widgets_answer}/feedback"),
            &other_widget,
            json!({ "feedback": "not_useful" }),
        )
        .await;
    assert_eq!(s, 404, "another widget key's answer");
    let (_, row) = server.get(&log_row, &writer).await;
    assert!(row["feedback"].is_null(), "{row}");
    let (_, row) = server.get(&format!("/log/{widgets_answer}"), &writer).await;
    assert_eq!(row["feedback"], "useful", "{row}");

    // Its conversations live apart: sending the writer's conversation id
    // neither continues nor reads that conversation.
    let (s, body) = server
        .post(
            "/kbs/shop/query/sync",
            &widget,
            json!({ "query": "那退款呢", "conversation_id": writer_conv }),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    assert!(!body.to_string().contains("WRITER-PRIVATE"), "{body}");
    let (_, conv) = server.get(&writer_conv_path, &writer).await;
    assert_eq!(conv["turns"].as_array().unwrap().len(), 1, "{conv}");
    let (s, body) = server
        .post(
            "/kbs/shop/query/sync",
            &widget,
            json!({ "query": "退款", "conversation_id": "c1" }),
        )
        .await;
    assert_eq!(s, 400, "a guessable conversation id: {body}");
    assert_eq!(body["code"], "invalid_param");

    // A widget key writes nothing.
    let (s, _) = server
        .post(
            "/kbs/shop/faqs",
            &widget,
            json!({ "question": "q?", "answer": "a" }),
        )
        .await;
    assert_eq!(s, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_key_is_global_and_never_created_for_a_tenant() {
    let server = start(Limits::default(), None).await;
    let _writer = server.tenant("acme").await;
    let admins = |keys: &Value| {
        keys.as_array()
            .unwrap()
            .iter()
            .filter(|k| k["role"] == "admin")
            .count()
    };
    let (_, before) = server.get("/keys", &server.admin_key).await;
    for body in [
        json!({ "tenant": "acme", "role": "admin" }),
        json!({ "tenant": "default", "role": "admin" }),
        json!({ "role": "admin", "kb": "shop" }),
    ] {
        let (s, res) = new_key(&server, body.clone()).await;
        assert_eq!(s, 400, "{body}: {res}");
        assert_eq!(res["code"], "invalid_param", "{res}");
    }
    let (_, after) = server.get("/keys", &server.admin_key).await;
    assert_eq!(admins(&after), admins(&before), "no admin key was created");
    let (s, created) = new_key(&server, json!({ "role": "admin", "label": "second admin" })).await;
    assert_eq!(s, 201, "{created}");
    let second = created["key"].as_str().unwrap().to_owned();
    let (s, tenants) = server.get("/tenants", &second).await;
    assert_eq!(s, 200);
    assert!(tenants.to_string().contains("acme"), "{tenants}");
}

// ------------------------------------------------------------ JSON bodies

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_json_body_is_bounded_by_the_bytes_read() {
    let limits = Limits {
        max_json_bytes: 16 * 1024,
        ..Limits::default()
    };
    let server = start(limits, None).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop").await;
    // Valid JSON, padded with white space: without a Content-Length only
    // the bytes read can tell it is too large. Sent by hand, so the answer is
    // read while the body is still being written (the server stops reading
    // it, and a client that only reads once it has written all would see a
    // broken pipe instead).
    let head = r#"{"query": "退款""#;
    let (status, body) =
        chunked_post(&server, "/kbs/shop/query/sync", &key, head, 5 * 1024 * 1024).await;
    assert_eq!(status, 413, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["code"], "body_too_large", "{body}");
    assert!(body["request_id"].as_str().is_some());
    let chunked = |total: usize| {
        let head = head.as_bytes().to_vec();
        let pad = total.saturating_sub(head.len() + 1);
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = std::iter::once(Ok(head))
            .chain((0..pad / 4096).map(|_| Ok(vec![b' '; 4096])))
            .chain(std::iter::once(Ok(b" }".to_vec())))
            .collect();
        reqwest::Body::wrap_stream(futures::stream::iter(chunks))
    };
    // A small chunked body is read as usual.
    let res = server
        .client
        .post(server.api("/kbs/shop/query/sync"))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(chunked(8 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
}

/// POSTs `head` and then white space up to `total` bytes with chunked
/// transfer encoding, reading the response as it comes; returns its status
/// and body.
async fn chunked_post(
    server: &common::Server,
    path: &str,
    key: &str,
    head: &str,
    total: usize,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.url.trim_start_matches("http://").to_owned();
    let sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut rd, mut wr) = sock.into_split();
    let request = format!(
        "POST /api/v1{path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let head = head.as_bytes().to_vec();
    let writer = tokio::spawn(async move {
        let chunk = |bytes: &[u8]| {
            let mut c = format!("{:x}\r\n", bytes.len()).into_bytes();
            c.extend_from_slice(bytes);
            c.extend_from_slice(b"\r\n");
            c
        };
        wr.write_all(request.as_bytes()).await?;
        wr.write_all(&chunk(&head)).await?;
        let pad = vec![b' '; 4096];
        let mut sent = head.len();
        while sent < total {
            wr.write_all(&chunk(&pad)).await?;
            sent += pad.len();
        }
        wr.write_all(&chunk(b"}")).await?;
        wr.write_all(b"0\r\n\r\n").await?;
        Ok::<_, std::io::Error>(())
    });
    let mut response = Vec::new();
    let mut buf = vec![0u8; 16384];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let n = match tokio::time::timeout_at(deadline, rd.read(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) | Err(_) => 0, // reset after the answer, or no answer
        };
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&response);
        if let Some((headers, body)) = text.split_once("\r\n\r\n") {
            let len = headers.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            });
            if len.is_some_and(|len| body.len() >= len) {
                break;
            }
        }
    }
    writer.abort();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_refused_on_writes_and_change_nothing() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop").await;
    let mut settings = server.get("/kbs/shop", &key).await.1["settings"].clone();
    settings["answer"]["profile"] = json!("faq");
    settings["retrieval"]["per_path_k"] = json!(7);
    let (s, body) = server
        .call(
            Method::PUT,
            "/kbs/shop/settings",
            &key,
            Some(settings.clone()),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let before = server.get("/kbs/shop", &key).await.1["settings"].clone();
    assert_eq!(before, settings);

    let mut misspelt = settings.clone();
    misspelt["answr"] = json!({ "profile": "document" });
    let mut nested = settings.clone();
    nested["retrieval"]["fusion"]["kk"] = json!(10);
    let mut tagged = settings.clone();
    tagged["retrieval"]["bm25"]["fields"] = json!({ "mode": "flat", "title": 3 });
    for body in [
        json!({ "answr": { "profile": "document" } }),
        misspelt,
        nested,
        tagged,
    ] {
        let (s, res) = server
            .call(Method::PUT, "/kbs/shop/settings", &key, Some(body.clone()))
            .await;
        assert_eq!(s, 422, "{body}: {res}");
        assert_eq!(res["code"], "invalid_body", "{res}");
    }
    let after = server.get("/kbs/shop", &key).await.1["settings"].clone();
    assert_eq!(after, before, "a refused write changes nothing");

    // Every other write body, nested fields included.
    for (method, path, body) in [
        (
            Method::POST,
            "/kbs",
            json!({ "name": "new-kb", "settings": { "retreival": {} } }),
        ),
        (
            Method::POST,
            "/kbs/shop/query/sync",
            json!({ "query": "退款", "weights": { "bm52": 1.0 } }),
        ),
        (
            Method::POST,
            "/kbs/shop/retrieve",
            json!({ "query": "退款", "filters": { "tag": ["x"] } }),
        ),
        (
            Method::POST,
            "/kbs/shop/synonyms",
            json!([{ "terms": ["退款", "退钱"], "weight": 2 }]),
        ),
        (
            Method::POST,
            "/kbs/shop/dictionary",
            json!([{ "word": "暗号", "tag": "n" }]),
        ),
        (
            Method::POST,
            "/kbs/shop/facts",
            json!([{ "key": "k", "value": "v", "ttl": 1 }]),
        ),
        (
            Method::POST,
            "/kbs/shop/faqs",
            json!({ "question": "q?", "answer": "a", "owner": "x" }),
        ),
        (
            Method::POST,
            "/kbs/shop/sources",
            json!({ "url": "https://example.invalid/", "deep": 2 }),
        ),
        (
            Method::POST,
            "/keys",
            json!({ "tenant": "acme", "role": "read_only", "scope": "all" }),
        ),
    ] {
        let (s, res) = server
            .call(
                method.clone(),
                path,
                &key_for(&server, path, &key),
                Some(body.clone()),
            )
            .await;
        assert_eq!(s, 422, "{method} {path} {body}: {res}");
        assert_eq!(res["code"], "invalid_body", "{res}");
    }
    let (s, _) = server.get("/kbs/new-kb", &key).await;
    assert_eq!(s, 404, "the refused knowledge base was not created");
}

fn key_for(server: &common::Server, path: &str, key: &str) -> String {
    if path == "/keys" {
        server.admin_key.clone()
    } else {
        key.to_owned()
    }
}

// ------------------------------------------------------------ links and names

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_links_are_http_or_https_and_sources_keep_no_credentials() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop").await;
    for url in [
        "javascript:alert(document.cookie)",
        " JavaScript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "//evil.example/x",
        "https://",
        "https://shop.example/\nx",
    ] {
        let (s, body) = server
            .post(
                "/kbs/shop/faqs",
                &key,
                json!({ "question": "q?", "answer": "a", "source_url": url }),
            )
            .await;
        assert_eq!(s, 400, "{url:?}: {body}");
        assert_eq!(body["code"], "invalid_param", "{body}");
    }
    let (s, faq) = server
        .post(
            "/kbs/shop/faqs",
            &key,
            json!({ "question": "q?", "answer": "a", "source_url": "https://shop.example/help" }),
        )
        .await;
    assert_eq!(s, 201, "{faq}");
    let path = format!("/kbs/shop/faqs/{}", faq["id"].as_str().unwrap());
    let (s, body) = server
        .call(
            Method::PATCH,
            &path,
            &key,
            Some(json!({ "source_url": "javascript:alert(1)" })),
        )
        .await;
    assert_eq!(s, 400, "{body}");
    let (s, body) = server
        .call(
            Method::PATCH,
            &path,
            &key,
            Some(json!({ "source_url": "" })),
        )
        .await;
    assert_eq!(s, 200, "removing the link: {body}");
    let (_, faqs) = server.get("/kbs/shop/faqs", &key).await;
    assert!(!faqs.to_string().contains("script:"), "{faqs}");

    // URL sources: credentials are refused; the scheme rule already held.
    for url in [
        "https://user:hunter2@example.invalid/help",
        "https://token@example.invalid/",
        "https://us\ner:hunter2@example.invalid/",
        "javascript:alert(1)",
    ] {
        let (s, body) = server
            .post("/kbs/shop/sources", &key, json!({ "url": url }))
            .await;
        assert_eq!(s, 400, "{url:?}: {body}");
        assert_eq!(body["code"], "invalid_param", "{body}");
    }
    let (s, body) = server
        .post(
            "/kbs/shop/sources",
            &key,
            json!({ "url": "https://example.invalid/a@b?page=1" }),
        )
        .await;
    assert_eq!(s, 201, "an @ in the path is no credential: {body}");
    let (_, sources) = server.get("/kbs/shop/sources", &key).await;
    assert_eq!(sources.as_array().unwrap().len(), 1, "{sources}");
    assert!(!sources.to_string().contains("hunter2"), "{sources}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knowledge_base_names_are_no_dot_names_nor_hold_bidi_controls() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    for name in [
        ".",
        "..",
        "invoice\u{202E}fdp.exe",
        "a\u{202A}b",
        "a\u{2066}b\u{2069}",
        "\u{200F}shop",
        "shop\u{200E}",
        "shop\u{061C}",
        "shop\u{0007}",
        "shop\u{009B}",
    ] {
        let (s, body) = server.post("/kbs", &key, json!({ "name": name })).await;
        assert_eq!(s, 400, "{name:?}: {body}");
        assert_eq!(body["code"], "invalid_param", "{body}");
    }
    let (_, kbs) = server.get("/kbs", &key).await;
    assert_eq!(kbs, json!([]), "{kbs}");
    for name in ["shop.v2", "...", "商店", "متجر"] {
        let (s, body) = server.post("/kbs", &key, json!({ "name": name })).await;
        assert_eq!(s, 201, "{name:?}: {body}");
    }
}

// ------------------------------------------------------------ uploads

/// An extractor that, for files named `*.block.txt`, waits until its
/// future is dropped, and records that it was; other files are extracted
/// as usual.
#[derive(Default)]
struct Blocking {
    entered: tokio::sync::Notify,
    running: AtomicUsize,
    dropped: AtomicBool,
}

struct OnDrop<'a>(&'a Blocking);
impl Drop for OnDrop<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Extractor for Blocking {
    async fn extract(&self, job: ExtractJob) -> Result<Extraction, ExtractFailure> {
        if job.name.ends_with(".block.txt") {
            self.running.fetch_add(1, Ordering::SeqCst);
            let _guard = OnDrop(self);
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        InProcessExtractor.extract(job).await
    }

    async fn links(&self, job: ExtractJob) -> Result<Vec<String>, ExtractFailure> {
        InProcessExtractor.links(job).await
    }
}

async fn start_blocking(limits: Limits) -> (common::Server, Arc<Blocking>) {
    let blocking = Arc::new(Blocking::default());
    let extractor = blocking.clone();
    let server = start_with(limits, move |c| c.extractor = Some(extractor)).await;
    (server, blocking)
}

/// Starts an upload of `name` and returns its response (the stream open).
async fn begin_upload(server: &common::Server, key: &str, name: &str) -> reqwest::Response {
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"some words to ingest".to_vec())
            .file_name(name.to_owned()),
    );
    server
        .client
        .post(server.api("/kbs/shop/documents"))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

async fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_stops_when_its_client_goes_away() {
    let (server, blocking) = start_blocking(Limits::default()).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop").await;
    let res = begin_upload(&server, &key, "slow.block.txt").await;
    assert_eq!(res.status().as_u16(), 200);
    let mut stream = res.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("received"));
    tokio::time::timeout(Duration::from_secs(30), blocking.entered.notified())
        .await
        .expect("the ingest reaches the extractor");
    drop(stream);
    // The server notices the closed stream and drops the running ingest.
    until("the ingest went on after its client left", 40, || {
        blocking.dropped.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(blocking.running.load(Ordering::SeqCst), 0);
    // Nothing of the abandoned file was stored, and the server goes on.
    let (_, docs) = server.get("/kbs/shop/documents", &key).await;
    assert!(!docs.to_string().contains("slow.block.txt"), "{docs}");
    let text = server
        .upload("shop", &key, "fine.txt", b"a fine text".to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_runs_a_limited_number_of_ingests_at_once() {
    assert_eq!(Limits::default().max_concurrent_ingests_per_key, 2);
    let (server, blocking) = start_blocking(Limits {
        max_concurrent_ingests_per_key: 1,
        ..Limits::default()
    })
    .await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop").await;
    let held = begin_upload(&server, &key, "held.block.txt").await;
    assert_eq!(held.status().as_u16(), 200);
    let mut held = held.bytes_stream();
    let _ = held.next().await;
    tokio::time::timeout(Duration::from_secs(30), blocking.entered.notified())
        .await
        .expect("the first upload is running");

    let res = begin_upload(&server, &key, "second.txt").await;
    assert_eq!(res.status().as_u16(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "too_many_ingests", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(body["request_id"].as_str().is_some());

    // Another key of the same tenant has its own slots.
    let (_, created) = server
        .post(
            "/keys",
            &server.admin_key,
            json!({ "tenant": "acme", "role": "read_write" }),
        )
        .await;
    let other = created["key"].as_str().unwrap().to_owned();
    let text = server
        .upload("shop", &other, "other.txt", b"another text".to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");

    // When the first upload's client leaves, its slot is free again.
    drop(held);
    until("the slot was not released", 40, || {
        blocking.dropped.load(Ordering::SeqCst)
    })
    .await;
    let mut status = 0;
    for _ in 0..100 {
        let res = begin_upload(&server, &key, "third.txt").await;
        status = res.status().as_u16();
        if status == 200 {
            assert!(res.text().await.unwrap().contains("event: indexed"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200);
}

// ------------------------------------------------------------ /system

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_shows_no_provider_credentials() {
    // Closed loopback ports: the connection tests fail at once, with the URL
    // in the error.
    let llm = rag_models::OpenAiChat::new(rag_models::ChatConfig {
        base_url: "http://bob:hunter2@127.0.0.1:9/v1?api_key=LLMSECRET".into(),
        model: "gpt-test".into(),
        max_retries: 0,
        ..Default::default()
    })
    .unwrap();
    let reranker = rag_models::HttpReranker::new(rag_models::HttpRerankerConfig {
        base_url: "http://rr:rerankpass@127.0.0.1:9/v1?token=RRTOKEN".into(),
        model: "bge-test".into(),
        max_retries: 0,
        ..Default::default()
    })
    .unwrap();
    let embedder = rag_models::OpenAiEmbedder::new(rag_models::OpenAiEmbedderConfig {
        base_url: "http://emb:embpass@127.0.0.1:9/v1?key=EMBKEY&secret=EMBSECRET".into(),
        model: "embed-test".into(),
        dimensions: Some(8),
        max_retries: 0,
        ..Default::default()
    })
    .unwrap();
    let server = start_with(Limits::default(), move |c| {
        c.generator = Some(Arc::new(llm));
        c.reranker = Arc::new(reranker);
        c.embedder = Some(Arc::new(embedder));
    })
    .await;
    let key = server.tenant("acme").await;
    let secrets = [
        "hunter2",
        "LLMSECRET",
        "rerankpass",
        "RRTOKEN",
        "embpass",
        "EMBKEY",
        "EMBSECRET",
    ];
    let (s, info) = server.get("/system", &key).await;
    assert_eq!(s, 200, "{info}");
    let text = info.to_string();
    for secret in secrets {
        assert!(!text.contains(secret), "/system shows {secret}: {text}");
    }
    assert!(
        info["llm"]
            .as_str()
            .unwrap()
            .contains("***@127.0.0.1:9/v1?api_key=***"),
        "{info}"
    );
    assert!(
        info["reranker"].as_str().unwrap().contains("bge-test"),
        "{info}"
    );
    assert!(
        info["embedder"]["model_id"]
            .as_str()
            .unwrap()
            .contains("embed-test"),
        "{info}"
    );
    for test in ["test-llm", "test-reranker", "test-embedder"] {
        let (s, out) = server
            .post(&format!("/system/{test}"), &server.admin_key, json!({}))
            .await;
        assert_eq!(s, 200, "{test}: {out}");
        assert_eq!(out["ok"], false, "{test}: {out}");
        let text = out.to_string();
        for secret in secrets {
            assert!(!text.contains(secret), "{test} shows {secret}: {text}");
        }
    }
}
