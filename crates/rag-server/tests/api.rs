//! The HTTP API against a real server on loopback with a real HTTP client.

mod common;

use async_trait::async_trait;
use common::{sse_events, start};
use futures::StreamExt;
use rag_core::{AnalyzedQuery, CoreError, RerankCandidate, RerankedHit, Reranker};
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

async fn seed(server: &common::Server, key: &str, kb: &str, marker: &str) {
    let (s, b) = server.post("/kbs", key, json!({ "name": kb })).await;
    assert_eq!(s, 201, "{b}");
    let text = server
        .upload(kb, key, "faq.jsonl", FAQS.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
    let doc = format!("# 店铺说明\n\n营业时间是每天九点到晚上十点。{marker}\n\n## 退款\n\n退款需要提供订单号。{marker}\n");
    let text = server.upload(kb, key, "shop.md", doc.into_bytes()).await;
    assert!(text.contains("event: indexed"), "{text}");
    let (s, b) = server
        .post(&format!("/kbs/{kb}/faqs"), key, json!({ "question": format!("{marker} 的暗号是什么？"), "answer": format!("暗号是 {marker}") }))
        .await;
    assert_eq!(s, 201, "{b}");
    let (s, _) = server
        .post(
            &format!("/kbs/{kb}/facts"),
            key,
            json!([{ "key": "营业时间", "value": format!("9:00-22:00 {marker}") }]),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = server
        .post(
            &format!("/kbs/{kb}/synonyms"),
            key,
            json!([{ "terms": ["退款", "退钱"] }]),
        )
        .await;
    assert_eq!(s, 200);
    let (s, b) = server
        .post(
            &format!("/kbs/{kb}/sources"),
            key,
            json!({ "url": format!("https://example.invalid/{marker}/help") }),
        )
        .await;
    assert_eq!(s, 201, "{b}");
}

/// A reranker that waits for the test before it answers, and records whether
/// its work was dropped before finishing (the run was cancelled).
#[derive(Default)]
struct Gate {
    entered: tokio::sync::Notify,
    release: tokio::sync::Notify,
    cancelled: AtomicBool,
    calls: AtomicUsize,
    blocking: AtomicBool,
}

struct DropFlag<'a>(&'a AtomicBool, bool);
impl Drop for DropFlag<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl Reranker for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    async fn rerank(
        &self,
        _q: &AnalyzedQuery,
        candidates: Vec<RerankCandidate>,
        top_k: usize,
    ) -> Result<Vec<RerankedHit>, CoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.blocking.load(Ordering::SeqCst) {
            let mut flag = DropFlag(&self.cancelled, false);
            self.entered.notify_one();
            self.release.notified().await;
            flag.1 = true;
        }
        Ok(candidates
            .into_iter()
            .take(top_k)
            .map(|c| RerankedHit {
                hit: c.hit,
                score: None,
            })
            .collect())
    }
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_incrementally_and_the_json_variant_has_the_same_content() {
    let gate = Arc::new(Gate::default());
    let server = start(Limits::default(), Some(gate.clone())).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop", "ACME").await;

    gate.blocking.store(true, Ordering::SeqCst);
    let res = server
        .client
        .post(server.api("/kbs/shop/query"))
        .bearer_auth(&key)
        .json(&json!({ "query": "怎么退款" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut stream = res.bytes_stream();
    let mut text = String::new();
    // The recall events arrive while the reranker is still held: done cannot have been computed.
    while !text.contains("event: fused") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("events arrive")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(text.contains("event: recall"), "{text}");
    assert!(
        !text.contains("event: done"),
        "done arrived before the reranker was released"
    );
    gate.release.notify_one();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("stream ends")
    {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let streamed: Vec<Value> = sse_events(&text)
        .into_iter()
        .map(|(e, d)| {
            assert_eq!(d["type"], e, "the SSE event name is the event's type");
            d
        })
        .collect();
    let k = kinds(&streamed);
    assert_eq!(k.first().unwrap(), "query_received");
    assert_eq!(k.last().unwrap(), "done");
    let pos = |name: &str| k.iter().position(|x| x == name).unwrap();
    assert!(
        pos("query_analyzed") < pos("recall")
            && pos("recall") < pos("fused")
            && pos("fused") < pos("reranked")
    );
    assert!(pos("reranked") < pos("context_assembled"));

    gate.blocking.store(false, Ordering::SeqCst);
    let (s, body) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "怎么退款" }))
        .await;
    assert_eq!(s, 200, "{body}");
    let json_events = body["events"].as_array().unwrap().clone();
    assert_eq!(
        kinds(&json_events)
            .iter()
            .filter(|k| *k != "recall")
            .collect::<Vec<_>>(),
        k.iter().filter(|k| *k != "recall").collect::<Vec<_>>()
    );
    let fused = |events: &[Value]| -> Value {
        let f = events.iter().find(|e| e["type"] == "fused").unwrap();
        json!(f["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].clone())
            .collect::<Vec<_>>())
    };
    assert_eq!(
        fused(&streamed),
        fused(&json_events),
        "same ranking over both variants"
    );
    let paths = |events: &[Value]| -> Vec<String> {
        let mut p: Vec<String> = events
            .iter()
            .filter(|e| e["type"] == "recall")
            .map(|e| e["list"]["path"].as_str().unwrap().to_owned())
            .collect();
        p.sort();
        p
    };
    assert_eq!(paths(&streamed), paths(&json_events));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_disconnect_cancels_the_run() {
    let gate = Arc::new(Gate::default());
    let server = start(Limits::default(), Some(gate.clone())).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop", "ACME").await;
    gate.blocking.store(true, Ordering::SeqCst);
    let res = server
        .client
        .post(server.api("/kbs/shop/query"))
        .bearer_auth(&key)
        .json(&json!({ "query": "配送" }))
        .send()
        .await
        .unwrap();
    let mut stream = res.bytes_stream();
    let _first = stream.next().await;
    tokio::time::timeout(Duration::from_secs(30), gate.entered.notified())
        .await
        .expect("the run reaches the reranker");
    drop(stream);
    // The server notices the closed connection and drops the run, which drops the reranker's future.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !gate.cancelled.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was not cancelled after the client went away"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And the server keeps serving.
    gate.blocking.store(false, Ordering::SeqCst);
    let (s, _) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "配送" }))
        .await;
    assert_eq!(s, 200);
}

fn body_for(method: &str, path: &str) -> Option<Value> {
    let b = match (method, path) {
        ("post", "/kbs/{kb}/query") | ("post", "/kbs/{kb}/query/sync") | ("post", "/kbs/{kb}/retrieve") => json!({ "query": "退款" }),
        ("post", "/kbs/{kb}/refuse") => json!({ "candidates_id": "{cand}" }),
        ("post", "/kbs/{kb}/why-not") => json!({ "query": "退款", "entry_id": "{entry}" }),
        ("post", "/kbs/{kb}/eval") => json!({ "golden": [{ "question": "退款", "expected": ["shop.md"] }] }),
        ("post", "/kbs") => json!({ "name": "probe" }),
        ("put", "/kbs/{kb}/settings") => json!({ "retrieval": {} }),
        ("put", "/kbs/{kb}/intents") => json!([]),
        ("post", "/kbs/{kb}/faqs") => json!({ "question": "q?", "answer": "a" }),
        ("patch", "/kbs/{kb}/faqs/{id}") => json!({ "answer": "changed" }),
        ("post", "/kbs/{kb}/synonyms") => json!([{ "terms": ["a", "b"] }]),
        ("post", "/kbs/{kb}/dictionary") => json!([{ "word": "暗号" }]),
        ("post", "/kbs/{kb}/facts") => json!([{ "key": "k", "value": "v" }]),
        ("post", "/tenants") => json!({ "name": "intruder" }),
        ("post", "/keys") => json!({ "tenant": "alpha", "role": "read_write" }),
        ("post", "/session") => json!({ "key": "rsk_probe" }),
        ("post", "/system/test-embedder") | ("post", "/system/test-llm") | ("post", "/system/test-reranker") => return None,
        ("post", "/log/{id}/feedback") => json!({ "feedback": "useful" }),
        ("post", "/log/{id}/replay") => json!({ "lexical_interpolation": 0.5 }),
        ("post", "/kbs/{kb}/faq-tool") => json!({ "query": "退款" }),
        ("post", "/kbs/{kb}/sources") => json!({ "url": "https://example.invalid/probe" }),
        ("post", "/kbs/{kb}/sources/{id}/sync") => return None,
        ("post", "/kbs/{kb}/documents") => return None, // multipart: handled apart
        ("post", "/kbs/{kb}/documents/{id}/faq-drafts") => return None, // no body: the document is the input
        ("get", _) | ("delete", _) => return None,
        ("post", p) if p.ends_with("/approve") || p.ends_with("/disable") => return None,
        _ => panic!("route {method} {path} has no probe in this test: add one so it is checked for tenant isolation"),
    };
    Some(b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_reveals_another_tenants_data() {
    let server = start(Limits::default(), None).await;
    let alpha = server.tenant("alpha").await;
    let beta = server.tenant("beta").await;
    seed(&server, &alpha, "shop", "ALPHA-SECRET").await;
    seed(&server, &alpha, "alpha-only", "ALPHA-SECRET").await;
    seed(&server, &beta, "shop", "BETA").await;

    // Alpha's ids.
    let (_, docs) = server.get("/kbs/shop/documents", &alpha).await;
    let doc_id = docs["documents"][0]["id"].as_str().unwrap().to_owned();
    let (_, faqs) = server.get("/kbs/shop/faqs", &alpha).await;
    let faq_id = faqs["faqs"][0]["id"].as_str().unwrap().to_owned();
    let (_, lex) = server.get("/kbs/shop/lexicon", &alpha).await;
    let fact_id = lex["facts"][0]["id"].as_str().unwrap().to_owned();
    let (_, sources) = server.get("/kbs/shop/sources", &alpha).await;
    let source_id = sources[0]["id"].as_str().unwrap().to_owned();
    let (_, retrieval) = server
        .post("/kbs/shop/retrieve", &alpha, json!({ "query": "退款" }))
        .await;
    let cand = retrieval["candidates_id"].as_str().unwrap().to_owned();
    let (_, asked) = server
        .post(
            "/kbs/shop/query/sync",
            &alpha,
            json!({ "query": "ALPHA-SECRET 的暗号是什么" }),
        )
        .await;
    let log_id = asked["events"][0]["query_id"].as_str().unwrap().to_owned();
    let (s, row) = server.get(&format!("/log/{log_id}"), &alpha).await;
    assert_eq!(s, 200, "{row}");

    let (s, doc) = server
        .get("/api/openapi.json".trim_start_matches("/api/v1"), &beta)
        .await;
    let _ = (s, doc);
    let openapi: Value = server
        .client
        .get(format!("{}/api/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = openapi["paths"].as_object().unwrap();
    assert!(paths.len() >= 15, "the OpenAPI document lists the routes");
    let mut checked = 0;
    for (path, item) in paths {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let admin_only = path.starts_with("/tenants") || path.starts_with("/keys");
            // Beta's key against alpha's knowledge base name, and against beta's own
            // knowledge base with alpha's ids.
            if !path.contains('{') && !admin_only {
                // Unparameterised routes (list or create in one's own tenant) are checked for leaks below.
                let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let mut req = server
                    .client
                    .request(m, server.api(path))
                    .bearer_auth(&beta);
                if let Some(b) = body_for(method, path) {
                    req = req.json(&b);
                }
                let text = req.send().await.unwrap().text().await.unwrap();
                assert!(
                    !text.contains("ALPHA-SECRET") && !text.contains("alpha-only"),
                    "{method} {path} leaked: {text}"
                );
                checked += 1;
                continue;
            }
            for kb in ["alpha-only", "shop"] {
                if kb == "shop"
                    && !path.contains("{id}")
                    && !path.contains("refuse")
                    && !path.contains("why-not")
                    && !admin_only
                {
                    continue; // beta's own knowledge base without foreign ids: nothing foreign to reach
                }
                let id = if path.contains("/documents/") {
                    &doc_id
                } else if path.contains("/facts/") {
                    &fact_id
                } else if path.contains("/sources/") {
                    &source_id
                } else if path.contains("/keys/") {
                    "anything"
                } else if path.starts_with("/log/") {
                    &log_id
                } else {
                    &faq_id
                };
                let concrete = path.replace("{kb}", kb).replace("{id}", id);
                let status;
                let text;
                if method == "post" && path == "/kbs/{kb}/documents" {
                    let form = reqwest::multipart::Form::new().part(
                        "file",
                        reqwest::multipart::Part::bytes(b"x y z".to_vec()).file_name("x.txt"),
                    );
                    let res = server
                        .client
                        .post(server.api(&concrete))
                        .bearer_auth(&beta)
                        .multipart(form)
                        .send()
                        .await
                        .unwrap();
                    status = res.status().as_u16();
                    text = res.text().await.unwrap();
                } else {
                    let body = body_for(method, path).map(|b| {
                        let b = b
                            .to_string()
                            .replace("{cand}", &cand)
                            .replace("{entry}", &format!("faq:{faq_id}"));
                        serde_json::from_str::<Value>(&b).unwrap()
                    });
                    let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                    let mut req = server
                        .client
                        .request(m, server.api(&concrete))
                        .bearer_auth(&beta);
                    if let Some(b) = body {
                        req = req.json(&b);
                    }
                    let res = req.send().await.unwrap();
                    status = res.status().as_u16();
                    text = res.text().await.unwrap();
                }
                checked += 1;
                assert!(
                    !text.contains("ALPHA-SECRET"),
                    "{method} {concrete} leaked alpha's data: {text}"
                );
                if admin_only {
                    assert_eq!(status, 403, "{method} {concrete}: {text}");
                } else if method == "post" && path == "/kbs" {
                    // Creating a knowledge base of the same name in one's own tenant is allowed.
                    assert!(
                        status == 201 || status == 409,
                        "{method} {concrete}: {status} {text}"
                    );
                } else {
                    assert_eq!(status, 404, "{method} {concrete}: {text}");
                }
            }
        }
    }
    assert!(checked >= 25, "checked {checked} requests");

    // Beta's own queries never return alpha's passages, even with the same knowledge-base name and titles.
    for q in ["ALPHA-SECRET 的暗号", "营业时间", "退款"] {
        let (s, body) = server
            .post("/kbs/shop/query/sync", &beta, json!({ "query": q }))
            .await;
        assert_eq!(s, 200);
        let text = body.to_string();
        for secret in [
            "暗号是 ALPHA-SECRET",
            "22:00 ALPHA-SECRET",
            "。ALPHA-SECRET",
            "ALPHA-SECRET 的暗号是什么",
        ] {
            assert!(!text.contains(secret), "query {q} leaked {secret}: {body}");
        }
    }
    // Alpha still sees its own.
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &alpha,
            json!({ "query": "ALPHA-SECRET 的暗号" }),
        )
        .await;
    assert!(body.to_string().contains("暗号是 ALPHA-SECRET"));
    // Alpha's data is intact after beta's attempts.
    let (_, faqs_after) = server.get("/kbs/shop/faqs", &alpha).await;
    assert_eq!(faqs_after, faqs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_reveals_an_owners_restricted_document() {
    let server = start(Limits::default(), None).await;
    let plain = server.tenant("alpha").await;
    let alice = server.key_for("alpha", Some("alice")).await;
    let bob = server.key_for("alpha", Some("bob")).await;
    seed(&server, &plain, "shop", "PUBLIC").await;
    // Alice's upload is restricted to her; she may not upload as someone else.
    let doc = "# 体检报告\n\n血压正常，ALICE-PRIVATE 需要复查胆固醇。\n";
    let text = server
        .upload("shop", &alice, "report.md", doc.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
    let form = reqwest::multipart::Form::new().text("owner", "bob").part(
        "file",
        reqwest::multipart::Part::bytes(b"bob's notes".to_vec()).file_name("b.txt"),
    );
    let res = server
        .client
        .post(server.api("/kbs/shop/documents"))
        .bearer_auth(&alice)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);

    // Alice sees her document, finds it, and her conversation is hers.
    let (_, docs) = server.get("/kbs/shop/documents", &alice).await;
    let mine = docs["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["owner"] == "alice")
        .expect("alice lists her document");
    let doc_id = mine["id"].as_str().unwrap().to_owned();
    let (s, _) = server
        .get(&format!("/kbs/shop/documents/{doc_id}"), &alice)
        .await;
    assert_eq!(s, 200);
    let ask = json!({ "query": "ALICE-PRIVATE 需要复查什么", "conversation_id": "alice-chat" });
    let (_, asked) = server.post("/kbs/shop/query/sync", &alice, ask).await;
    assert!(asked.to_string().contains("ALICE-PRIVATE"), "{asked}");
    let log_id = asked["events"][0]["query_id"].as_str().unwrap().to_owned();
    let (_, retrieval) = server
        .post(
            "/kbs/shop/retrieve",
            &alice,
            json!({ "query": "ALICE-PRIVATE 胆固醇" }),
        )
        .await;
    let cand = retrieval["candidates_id"].as_str().unwrap().to_owned();
    let her_chunk = retrieval["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "fused")
        .and_then(|e| {
            e["hits"]
                .as_array()?
                .iter()
                .find(|h| h["id"]["kind"] == "chunk")
        })
        .map(|h| format!("chunk:{}", h["id"]["id"].as_str().unwrap()))
        .expect("alice retrieves her chunk");
    let (s, conv) = server
        .get("/kbs/shop/conversations/alice-chat", &alice)
        .await;
    assert_eq!(
        (s, conv["turns"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{conv}"
    );

    let openapi: Value = server
        .client
        .get(format!("{}/api/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut checked = 0;
    for (who, key) in [("bob", &bob), ("a key without owner", &plain)] {
        for (path, item) in openapi["paths"].as_object().unwrap() {
            for method in ["get", "post", "put", "patch", "delete"] {
                if item.get(method).is_none()
                    || path.starts_with("/tenants")
                    || path.starts_with("/keys")
                {
                    continue;
                }
                if method == "delete" && !path.contains("{id}") {
                    continue; // deleting the whole knowledge base is allowed to any writer
                }
                let id = if path.contains("/documents/") {
                    doc_id.as_str()
                } else if path.starts_with("/log/") {
                    log_id.as_str()
                } else if path.contains("/conversations/") {
                    "alice-chat"
                } else {
                    "not-a-foreign-id"
                };
                let concrete = path.replace("{kb}", "shop").replace("{id}", id);
                let (status, text) = if method == "post" && path == "/kbs/{kb}/documents" {
                    // Same file name as hers: it must not replace her document.
                    let form = reqwest::multipart::Form::new().part(
                        "file",
                        reqwest::multipart::Part::bytes(b"# notes\n\nnothing here".to_vec())
                            .file_name("report.md"),
                    );
                    let res = server
                        .client
                        .post(server.api(&concrete))
                        .bearer_auth(key)
                        .multipart(form)
                        .send()
                        .await
                        .unwrap();
                    (res.status().as_u16(), res.text().await.unwrap())
                } else {
                    let body = body_for(method, path).map(|b| {
                        serde_json::from_str::<Value>(&b.to_string().replace("{cand}", &cand))
                            .unwrap()
                    });
                    let body = match path.as_str() {
                        "/kbs/{kb}/query"
                        | "/kbs/{kb}/query/sync"
                        | "/kbs/{kb}/retrieve"
                        | "/kbs/{kb}/faq-tool" => {
                            // Her passage's words (echoes of the query are not leaks).
                            Some(json!({ "query": "血压 复查 胆固醇" }))
                        }
                        "/kbs/{kb}/why-not" => {
                            Some(json!({ "query": "血压 复查 胆固醇", "entry_id": her_chunk }))
                        }
                        _ => body,
                    };
                    let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                    let mut req = server
                        .client
                        .request(m, server.api(&concrete))
                        .bearer_auth(key);
                    if let Some(b) = body {
                        req = req.json(&b);
                    }
                    let res = req.send().await.unwrap();
                    (res.status().as_u16(), res.text().await.unwrap())
                };
                checked += 1;
                assert!(
                    !text.contains("ALICE-PRIVATE") && !text.contains("体检报告"),
                    "{who}: {method} {concrete} leaked: {text}"
                );
                if concrete.contains(&doc_id)
                    || concrete.contains(&log_id)
                    || concrete.contains("alice-chat")
                    || path.ends_with("/refuse")
                    || path.ends_with("/why-not")
                {
                    assert_eq!(status, 404, "{who}: {method} {concrete}: {text}");
                }
            }
        }
    }
    assert!(checked >= 50, "checked {checked} requests");
    // The analytics and the conversation list of others do not name her document or chat.
    for key in [&bob, &plain] {
        let (_, a) = server.get("/kbs/shop/analytics", key).await;
        assert!(!a.to_string().contains("体检报告"), "{a}");
        let (_, c) = server.get("/kbs/shop/conversations", key).await;
        assert!(!c.to_string().contains("alice-chat"), "{c}");
    }
    // A follow-up sent with her conversation id by someone else is not
    // rewritten from her turns.
    let (_, follow) = server
        .post(
            "/kbs/shop/query/sync",
            &bob,
            json!({ "query": "那要复查什么？", "conversation_id": "alice-chat" }),
        )
        .await;
    assert!(
        !follow.to_string().contains("ALICE-PRIVATE") && !follow.to_string().contains("胆固醇"),
        "{follow}"
    );
    // Nothing of hers was changed by the attempts.
    let (s, after) = server
        .get(&format!("/kbs/shop/documents/{doc_id}"), &alice)
        .await;
    assert_eq!(s, 200, "{after}");
    let (s, row) = server.get(&format!("/log/{log_id}"), &alice).await;
    assert_eq!(s, 200, "{row}");
    assert!(row["feedback"].is_null(), "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_sources_over_the_api_never_reach_private_addresses_by_default() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    let (s, _) = server.post("/kbs", &key, json!({ "name": "shop" })).await;
    assert_eq!(s, 201);
    // The server's own port: a user must not be able to make it fetch from its network.
    let internal = format!("{}/api/openapi.json", server.url);
    let (s, src) = server
        .post(
            "/kbs/shop/sources",
            &key,
            json!({ "url": internal, "depth": 1 }),
        )
        .await;
    assert_eq!(s, 201, "{src}");
    assert_eq!(src["status"], "pending");
    let id = src["id"].as_str().unwrap();
    let (s, synced) = server
        .post(&format!("/kbs/shop/sources/{id}/sync"), &key, json!(null))
        .await;
    assert_eq!(s, 200, "{synced}");
    assert_eq!(synced["status"], "failed");
    assert!(
        synced["reason"]
            .as_str()
            .unwrap()
            .contains("private or loopback address"),
        "{synced}"
    );
    let (_, docs) = server.get("/kbs/shop/documents", &key).await;
    assert_eq!(docs["documents"], json!([]));
    // Bad input is refused with a clear error.
    let (s, e) = server
        .post(
            "/kbs/shop/sources",
            &key,
            json!({ "url": "file:///etc/passwd" }),
        )
        .await;
    assert_eq!((s, e["code"].as_str()), (400, Some("invalid_param")), "{e}");
    let (s, e) = server
        .post(
            "/kbs/shop/sources",
            &key,
            json!({ "url": "https://example.invalid/", "max_pages": 100000 }),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    let (s, list) = server.get("/kbs/shop/sources", &key).await;
    assert_eq!((s, list.as_array().map(Vec::len)), (200, Some(1)));
    let res = server
        .client
        .delete(server.api(&format!("/kbs/shop/sources/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    let (s, _) = server.get(&format!("/kbs/shop/sources/{id}"), &key).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_their_documented_status_and_code() {
    let limits = Limits {
        max_json_bytes: 16 * 1024,
        max_top_k: 100,
        ..Limits::default()
    };
    let server = start(limits, None).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop", "ACME").await;
    let url = server.api("/kbs/shop/query/sync");
    let c = &server.client;
    let check = |res: reqwest::Response, status: u16, code: &'static str| async move {
        assert_eq!(res.status().as_u16(), status, "expected {code}");
        let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["request_id"], id.as_str());
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    };
    let big = json!({ "query": "x".repeat(20 * 1024) });
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&big)
            .send()
            .await
            .unwrap(),
        413,
        "body_too_large",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body("{\"query\": ")
            .send()
            .await
            .unwrap(),
        400,
        "malformed_json",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&json!({ "query": 42 }))
            .send()
            .await
            .unwrap(),
        422,
        "invalid_body",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&json!({ "query": "a", "surprise": 1 }))
            .send()
            .await
            .unwrap(),
        422,
        "invalid_body",
    )
    .await;
    check(
        c.post(server.api("/kbs/nope/query/sync"))
            .bearer_auth(&key)
            .json(&json!({ "query": "a" }))
            .send()
            .await
            .unwrap(),
        404,
        "unknown_kb",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&json!({ "query": "退款", "top_k": 1_000_000 }))
            .send()
            .await
            .unwrap(),
        400,
        "limit_exceeded",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&json!({ "query": "退款", "lexical_interpolation": 7 }))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_param",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&json!({ "query": "   " }))
            .send()
            .await
            .unwrap(),
        400,
        "empty_query",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth(&key)
            .json(&json!({ "query": "长".repeat(3000) }))
            .send()
            .await
            .unwrap(),
        413,
        "query_too_long",
    )
    .await;
    check(
        c.post(&url)
            .json(&json!({ "query": "退款" }))
            .send()
            .await
            .unwrap(),
        401,
        "missing_key",
    )
    .await;
    check(
        c.post(&url)
            .bearer_auth("rsk_not_a_key")
            .json(&json!({ "query": "退款" }))
            .send()
            .await
            .unwrap(),
        401,
        "invalid_key",
    )
    .await;
    check(
        c.get(server.api("/no/such/route"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap(),
        404,
        "no_route",
    )
    .await;
    check(
        c.get(server.api("/kbs/shop/faqs/not-an-id"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
    check(
        c.post(server.api("/tenants"))
            .bearer_auth(&key)
            .json(&json!({ "name": "x" }))
            .send()
            .await
            .unwrap(),
        403,
        "forbidden",
    )
    .await;

    // A revoked key is refused.
    let (_, created) = server
        .post(
            "/keys",
            &server.admin_key,
            json!({ "tenant": "acme", "role": "read_only" }),
        )
        .await;
    let ro = created["key"].as_str().unwrap().to_owned();
    let ro_id = created["info"]["id"].as_str().unwrap().to_owned();
    assert!(
        !created["info"].to_string().contains(&ro),
        "the key record never holds the secret"
    );
    let (s, _) = server
        .post("/kbs/shop/query/sync", &ro, json!({ "query": "退款" }))
        .await;
    assert_eq!(s, 200, "read-only keys query");
    check(
        c.post(server.api("/kbs/shop/faqs"))
            .bearer_auth(&ro)
            .json(&json!({ "question": "q", "answer": "a" }))
            .send()
            .await
            .unwrap(),
        403,
        "forbidden",
    )
    .await;
    let (s, _) = server
        .call(
            Method::DELETE,
            &format!("/keys/{ro_id}"),
            &server.admin_key,
            None,
        )
        .await;
    assert_eq!(s, 204);
    check(
        c.post(&url)
            .bearer_auth(&ro)
            .json(&json!({ "query": "退款" }))
            .send()
            .await
            .unwrap(),
        401,
        "key_revoked",
    )
    .await;
    let (_, keys) = server.get("/keys", &server.admin_key).await;
    assert!(
        !keys.to_string().contains("rsk_")
            || keys.to_string().matches("rsk_").count() == keys.as_array().unwrap().len(),
        "only prefixes are listed"
    );
    assert!(!keys.to_string().contains(&ro));

    // Still serving.
    let (s, body) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "退款" }))
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        body["events"].as_array().unwrap().last().unwrap()["type"],
        "done"
    );
    let health = c
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faq_and_document_lifecycle_over_the_api() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop", "ACME").await;
    let top_question = |body: &Value| -> Option<String> {
        let ev = body["events"]
            .as_array()?
            .iter()
            .find(|e| e["type"] == "context_assembled")?
            .clone();
        ev["sources"][0]["passage"]["title"]
            .as_str()
            .map(str::to_owned)
    };
    let (_, faqs) = server.get("/kbs/shop/faqs", &key).await;
    let refund = faqs["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["question"] == "怎么申请退款？")
        .unwrap()
        .clone();
    let id = refund["id"].as_str().unwrap();
    assert_eq!(refund["edited"], false);

    let (s, edited) = server
        .call(
            Method::PATCH,
            &format!("/kbs/shop/faqs/{id}"),
            &key,
            Some(json!({ "question": "如何申请退货退款？" })),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(edited["edited"], true);
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "退货", "paths": ["bm25"] }),
        )
        .await;
    assert_eq!(top_question(&body).as_deref(), Some("如何申请退货退款？"));

    let (s, disabled) = server
        .post(&format!("/kbs/shop/faqs/{id}/disable"), &key, json!({}))
        .await;
    assert_eq!((s, disabled["status"].as_str()), (200, Some("disabled")));
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "退货", "paths": ["bm25"] }),
        )
        .await;
    assert_ne!(
        top_question(&body).as_deref(),
        Some("如何申请退货退款？"),
        "disabled entries are not searched"
    );
    let (s, _) = server
        .post(&format!("/kbs/shop/faqs/{id}/approve"), &key, json!({}))
        .await;
    assert_eq!(s, 200);
    let (s, _) = server
        .call(Method::DELETE, &format!("/kbs/shop/faqs/{id}"), &key, None)
        .await;
    assert_eq!(s, 204);
    let (s, _) = server.get(&format!("/kbs/shop/faqs/{id}"), &key).await;
    assert_eq!(s, 404);

    let (_, docs) = server.get("/kbs/shop/documents", &key).await;
    let doc = docs["documents"][0]["id"].as_str().unwrap();
    let (s, full) = server
        .get(&format!("/kbs/shop/documents/{doc}"), &key)
        .await;
    assert_eq!(s, 200);
    let text = full["document"]["text"].as_str().unwrap();
    for c in full["chunks"].as_array().unwrap() {
        let (a, b) = (
            c["start"].as_u64().unwrap() as usize,
            c["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            &text[a..b],
            c["text"].as_str().unwrap(),
            "chunk offsets point into the text"
        );
    }
    let (s, _) = server
        .call(
            Method::DELETE,
            &format!("/kbs/shop/documents/{doc}"),
            &key,
            None,
        )
        .await;
    assert_eq!(s, 204);
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "订单号", "paths": ["bm25", "substring"] }),
        )
        .await;
    assert!(
        !body.to_string().contains("退款需要提供订单号"),
        "deleted documents are gone from the index"
    );

    // Uploading the same file twice is skipped; a bad file does not stop the others.
    let new_doc = "# 新文档\n\n会员每月可以领取优惠券。".as_bytes().to_vec();
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(new_doc.clone()).file_name("new.md"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"\xff\xfe\x00garbage{".to_vec())
                .file_name("broken.jsonl"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(new_doc).file_name("copy-of-new.md"),
        );
    let res = server
        .client
        .post(server.api("/kbs/shop/documents"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let events = sse_events(&res.text().await.unwrap());
    let names: Vec<&str> = events
        .iter()
        .map(|(e, _)| e.as_str())
        .filter(|e| *e != "stage")
        .collect();
    assert_eq!(
        names,
        ["received", "indexed", "received", "failed", "received", "skipped", "summary"]
    );
    // A refused file says why with a stable code, as every error does.
    let failed = &events.iter().find(|(e, _)| e == "failed").unwrap().1;
    assert_eq!(failed["file"], "broken.jsonl", "{failed}");
    assert_eq!(failed["code"], "malformed_file", "{failed}");
    let stages: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "stage")
        .map(|(_, d)| d["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages[..2],
        ["extracted", "chunked"],
        "per-stage progress of the indexed file: {stages:?}"
    );
    assert_eq!(
        events.last().unwrap().1,
        json!({ "stage": "summary", "files": 3, "indexed": 1, "skipped": 1, "failed": 1 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_listed_a_page_at_a_time() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    let (s, b) = server.post("/kbs", &key, json!({ "name": "lib" })).await;
    assert_eq!(s, 201, "{b}");
    let upload = |i: usize| {
        let (server, key) = (&server, &key);
        async move {
            let text = server
                .upload(
                    "lib",
                    key,
                    &format!("d{i}.md"),
                    format!("# Doc {i}\n\ntext number {i}\n").into_bytes(),
                )
                .await;
            assert!(text.contains("event: indexed"), "{text}");
        }
    };
    for i in 0..7 {
        upload(i).await;
    }
    // Three at a time; an upload between pages comes at the end, a delete
    // of a document not yet listed takes it out.
    let mut seen: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            None => "/kbs/lib/documents?limit=3".to_owned(),
            Some(c) => format!("/kbs/lib/documents?limit=3&cursor={c}"),
        };
        let (s, page) = server.get(&path, &key).await;
        assert_eq!(s, 200, "{page}");
        assert_eq!(page["limit"], 3);
        let docs = page["documents"].as_array().unwrap();
        assert!(docs.len() <= 3, "{page}");
        seen.extend(docs.iter().cloned());
        pages += 1;
        if pages == 1 {
            assert_eq!(page["total"], 7);
            upload(7).await;
        }
        if pages == 2 {
            assert_eq!(page["total"], 8);
            // The newest document (not listed yet) is gone before the next page.
            let (_, all) = server.get("/kbs/lib/documents?limit=500", &key).await;
            let last = all["documents"].as_array().unwrap().last().unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned();
            let res = server
                .client
                .delete(server.api(&format!("/kbs/lib/documents/{last}")))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status().as_u16(), 204);
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert!(page["next_cursor"].is_null(), "{page}");
                assert_eq!(page["total"], 7);
                break;
            }
        }
    }
    let sources: Vec<&str> = seen.iter().map(|d| d["source"].as_str().unwrap()).collect();
    let mut unique = sources.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), sources.len(), "listed twice: {sources:?}");
    assert_eq!(sources.len(), 7, "{sources:?}");
    let keys: Vec<(i64, &str)> = seen
        .iter()
        .map(|d| (d["created_at"].as_i64().unwrap(), d["id"].as_str().unwrap()))
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "out of order: {keys:?}"
    );
    // The default page, and one source.
    let (_, first) = server.get("/kbs/lib/documents", &key).await;
    assert_eq!(
        (first["limit"].as_u64(), first["total"].as_u64()),
        (Some(50), Some(7))
    );
    assert!(first["next_cursor"].is_null());
    let (_, one) = server.get("/kbs/lib/documents?source=d3.md", &key).await;
    let one = one["documents"].as_array().unwrap();
    assert_eq!((one.len(), one[0]["source"].as_str()), (1, Some("d3.md")));
    // Absurd limits and foreign cursors: 400 invalid_param naming the parameter.
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=-1", "limit"),
        ("limit=abc", "limit"),
        ("limit=1e3", "limit"),
        ("limit=99999999999999999999999", "limit"),
        ("cursor=nope", "cursor"),
        (
            "cursor=zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            "cursor",
        ),
    ] {
        let (s, e) = server
            .get(&format!("/kbs/lib/documents?{query}"), &key)
            .await;
        assert_eq!(
            (s, e["code"].as_str()),
            (400, Some("invalid_param")),
            "{query}: {e}"
        );
        assert!(
            e["message"].as_str().unwrap().contains(name),
            "{query}: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_lists_can_be_refused_with_new_weights() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop", "ACME").await;
    let (s, r) = server
        .post(
            "/kbs/shop/retrieve",
            &key,
            json!({ "query": "退钱 营业时间", "paths": ["bm25", "synonym", "fact"] }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    let cand = r["candidates_id"].as_str().unwrap();
    let lists: Vec<&Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "recall")
        .collect();
    assert!(!lists.is_empty());
    let bm25: Vec<Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "recall" && e["list"]["path"] == "bm25")
        .unwrap()["list"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].clone())
        .collect();
    let (s, refused) = server
        .post("/kbs/shop/refuse", &key, json!({ "candidates_id": cand, "weights": { "bm25": 1, "substring": 0, "fuzzy": 0, "synonym": 0, "fact": 0, "dense": 0 }, "top_k": 50 }))
        .await;
    assert_eq!(s, 200, "{refused}");
    let ids: Vec<Value> = refused["fused"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].clone())
        .collect();
    assert_eq!(
        ids[..bm25.len()],
        bm25[..],
        "bm25 alone reproduces the bm25 list"
    );
    for h in &refused["fused"]["hits"].as_array().unwrap()[bm25.len()..] {
        assert_eq!(
            h["score"].as_f64(),
            Some(0.0),
            "paths weighted 0 add nothing: {h}"
        );
    }
    // Without new settings the re-fusion is the run's own fusion (its per-query λ included).
    let fused = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "fused")
        .unwrap();
    let (s, same) = server
        .post("/kbs/shop/refuse", &key, json!({ "candidates_id": cand }))
        .await;
    assert_eq!(s, 200, "{same}");
    assert_eq!(
        same["fusion"]["lexical_interpolation"],
        fused["lexical_interpolation"]
    );
    let scores = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|h| (h["id"].clone(), h["score"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(scores(&same["fused"]["hits"]), scores(&fused["hits"]));
    let (s, _) = server
        .post(
            "/kbs/shop/refuse",
            &key,
            json!({ "candidates_id": "00000000-0000-0000-0000-000000000000" }),
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_concurrency_limit() {
    let gate = Arc::new(Gate::default());
    let server = start(
        Limits {
            max_concurrent_queries_per_key: 1,
            ..Limits::default()
        },
        Some(gate.clone()),
    )
    .await;
    let key = server.tenant("acme").await;
    seed(&server, &key, "shop", "ACME").await;
    gate.blocking.store(true, Ordering::SeqCst);
    let held = server
        .client
        .post(server.api("/kbs/shop/query"))
        .bearer_auth(&key)
        .json(&json!({ "query": "退款" }))
        .send()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), gate.entered.notified())
        .await
        .unwrap();
    let res = server
        .client
        .post(server.api("/kbs/shop/query/sync"))
        .bearer_auth(&key)
        .json(&json!({ "query": "退款" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "too_many_queries");
    gate.blocking.store(false, Ordering::SeqCst);
    gate.release.notify_one();
    let text = held.text().await.unwrap();
    assert!(text.contains("event: done"));
    let (s, _) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "退款" }))
        .await;
    assert_eq!(s, 200, "the slot is free again");

    let ready = server
        .client
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("ragscope_http_requests_total{method=\"POST\",route=\"/api/v1/kbs/{kb}/query/sync\",status=\"200\"}"), "{metrics}");
    assert!(
        metrics.contains("ragscope_pipeline_stage_seconds_bucket{stage=\"recall\""),
        "{metrics}"
    );
    assert!(metrics.contains("ragscope_kb_miss_total"));
    assert!(!metrics.contains(&key), "no secret in metrics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_widget_key_reaches_one_knowledge_base_from_an_allowed_origin_only() {
    let server = start(Limits::default(), None).await;
    let writer = server.tenant("shopco").await;
    seed(&server, &writer, "shop", "SHOP").await;
    seed(&server, &writer, "internal", "INTERNAL-ONLY").await;
    // A read-only key scoped to the shop's knowledge base, for the public widget.
    let (s, created) = server
        .post(
            "/keys",
            &server.admin_key,
            json!({ "tenant": "shopco", "role": "read_only", "kb": "shop", "label": "widget" }),
        )
        .await;
    assert_eq!(s, 201, "{created}");
    assert_eq!(created["info"]["kb"], "shop");
    let widget = created["key"].as_str().unwrap().to_owned();
    let (s, _) = server
        .post(
            "/keys",
            &server.admin_key,
            json!({ "tenant": "shopco", "role": "read_only", "kb": "nope" }),
        )
        .await;
    assert_eq!(s, 404, "the scope must name an existing knowledge base");

    let (s, body) = server
        .post("/kbs/shop/query/sync", &widget, json!({ "query": "退款" }))
        .await;
    assert_eq!(s, 200, "{body}");
    for (method, path) in [
        (Method::POST, "/kbs/internal/query/sync"),
        (Method::GET, "/kbs"),
        (Method::GET, "/kbs/internal/documents"),
        (Method::GET, "/kbs/shop2/faqs"),
        (Method::GET, "/system"),
        (Method::GET, "/kbs/%E5%86%85/faqs"),
    ] {
        let (s, body) = server
            .call(
                method.clone(),
                path,
                &widget,
                Some(json!({ "query": "退款" })),
            )
            .await;
        assert_eq!(s, 404, "{method} {path}: {body}");
        assert!(!body.to_string().contains("INTERNAL-ONLY"), "{body}");
    }
    let (s, _) = server
        .call(
            Method::POST,
            "/kbs/shop/faqs",
            &widget,
            Some(json!({ "question": "q?", "answer": "a" })),
        )
        .await;
    assert_eq!(s, 403, "read-only");

    // CORS: the configured shop origin may call from the browser; others get no grant.
    let preflight = |origin: &'static str| {
        let c = server.client.clone();
        let url = server.api("/kbs/shop/query");
        async move {
            c.request(Method::OPTIONS, url)
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization,content-type",
                )
                .send()
                .await
                .unwrap()
        }
    };
    let ok = preflight("https://shop.example").await;
    assert!(ok.status().is_success(), "{}", ok.status());
    assert_eq!(
        ok.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    assert!(ok.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("authorization"));
    let other = preflight("https://evil.example").await;
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let res = server
        .client
        .post(server.api("/kbs/shop/query/sync"))
        .header("origin", "https://shop.example")
        .bearer_auth(&widget)
        .json(&json!({ "query": "退款" }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
}

/// A site for URL-source syncs: the root links to /a, /b and /c; the first
/// fetch of /b never answers (it tells the test it began, and tells it again
/// when its future is dropped).
struct StallingSite {
    began: tokio::sync::mpsc::UnboundedSender<&'static str>,
    stalled: AtomicBool,
    fetched: std::sync::Mutex<Vec<String>>,
}

/// Sends `dropped` when the stalled fetch's future goes.
struct DropSignal(tokio::sync::mpsc::UnboundedSender<&'static str>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send("dropped");
    }
}

#[async_trait]
impl rag_core::Fetcher for StallingSite {
    async fn fetch(&self, url: &str) -> Result<rag_core::FetchedPage, rag_core::FetchError> {
        self.fetched.lock().unwrap().push(url.to_owned());
        if url.ends_with("/b") && !self.stalled.swap(true, Ordering::SeqCst) {
            let _signal = DropSignal(self.began.clone());
            let _ = self.began.send("began");
            std::future::pending::<()>().await;
        }
        let body = if url.ends_with("/a") || url.ends_with("/b") || url.ends_with("/c") {
            format!("<html><body><p>page {url}</p></body></html>")
        } else {
            r#"<html><body><a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>"#
                .to_owned()
        };
        Ok(rag_core::FetchedPage {
            final_url: url.to_owned(),
            content_type: Some("text/html".into()),
            body: body.into_bytes(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_sync_stops_when_its_client_disconnects() {
    let (began_tx, mut began) = tokio::sync::mpsc::unbounded_channel();
    let site = Arc::new(StallingSite {
        began: began_tx,
        stalled: AtomicBool::new(false),
        fetched: Default::default(),
    });
    let fetcher = site.clone();
    let server = common::start_with(Limits::default(), move |c| c.fetcher = Some(fetcher)).await;
    let key = server.tenant("acme").await;
    let (s, b) = server.post("/kbs", &key, json!({ "name": "web" })).await;
    assert_eq!(s, 201, "{b}");
    let (s, source) = server
        .post(
            "/kbs/web/sources",
            &key,
            json!({ "url": "https://site.example/", "depth": 1 }),
        )
        .await;
    assert_eq!(s, 201, "{source}");
    let sync = server.api(&format!(
        "/kbs/web/sources/{}/sync",
        source["id"].as_str().unwrap()
    ));
    let request = {
        let (client, sync, key) = (server.client.clone(), sync.clone(), key.clone());
        tokio::spawn(async move { client.post(sync).bearer_auth(key).send().await })
    };
    let within = std::time::Duration::from_secs(30);
    assert_eq!(
        tokio::time::timeout(within, began.recv()).await.unwrap(),
        Some("began")
    );
    // The client goes away while /b is being fetched: the sync stops there.
    request.abort();
    assert_eq!(
        tokio::time::timeout(within, began.recv())
            .await
            .expect("the stalled fetch was not dropped"),
        Some("dropped")
    );
    let fetched = site.fetched.lock().unwrap().clone();
    assert!(
        !fetched.iter().any(|u| u.ends_with("/c")),
        "went on after the client left: {fetched:?}"
    );
    // What was indexed before stays (each page is one commit), the key's
    // ingest slot is free again, and the next sync finishes the site.
    let (_, docs) = server.get("/kbs/web/documents", &key).await;
    let sources: Vec<&str> = docs["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources,
        ["https://site.example/", "https://site.example/a"],
        "{docs}"
    );
    let res = server
        .client
        .post(&sync)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let synced: Value = res.json().await.unwrap();
    let outcomes: Vec<(&str, &str)> = synced["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["url"].as_str().unwrap(), p["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("https://site.example/", "unchanged"),
            ("https://site.example/a", "unchanged"),
            ("https://site.example/b", "indexed"),
            ("https://site.example/c", "indexed"),
        ],
        "{synced}"
    );
}
