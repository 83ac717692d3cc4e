//! The protocol routes against a real server on loopback: MCP's
//! streamable HTTP at `/mcp`, the OpenAI-compatible `/v1` and Dify's
//! `/dify/retrieval` — their shapes, authentication (key mode and open
//! mode), and tenant, knowledge-base and owner scope. (One test binary for
//! the three, to keep link time down; the real client libraries are driven
//! by `crates/ragscope/tests/clients.rs`.)

mod common;

use common::{start, Server};
use rag_core::KeyStore;
use rag_server::Limits;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use std::sync::Arc;

const FAQS: &str = r#"{"question":"怎么申请退款？","answer":"在订单页点击申请退款，三个工作日内原路退回。","tags":["售后"],"source_url":"https://shop.example/help/refund"}
{"question":"配送要多久？","answer":"同城配送一般两小时内送达。","tags":["物流"]}
{"question":"你们的营业时间是几点到几点？","answer":"每天九点到晚上十点营业，周末十点开门。"}
{"question":"How do I reset my password?","answer":"Use the reset link on the sign-in page; it expires after 30 minutes."}
"#;

/// A knowledge base `kb` with the FAQ table.
async fn seed(server: &Server, key: &str, kb: &str) {
    let (s, b) = server.post("/kbs", key, json!({ "name": kb })).await;
    assert_eq!(s, 201, "{b}");
    let text = server
        .upload(kb, key, "faq.jsonl", FAQS.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
}

async fn key(server: &Server, body: Value) -> String {
    let (s, b) = server.post("/keys", &server.admin_key, body).await;
    assert_eq!(s, 201, "{b}");
    b["key"].as_str().unwrap().to_owned()
}

/// Sends a request with an optional bearer token; (status, headers, body).
async fn send(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, HeaderMap, Value) {
    let mut req = server
        .client
        .request(method, format!("{}{path}", server.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let h = res.headers().clone();
    let text = res.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, h, v)
}

/// A server in `--open` mode (no keys needed) with one knowledge base.
struct OpenServer {
    url: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start_open() -> OpenServer {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let engine = rag_engine::Engine::new(
        rag_engine::Components::lexical(Arc::new(store.clone())),
        rag_engine::EngineConfig::default(),
    );
    let keys: Arc<dyn KeyStore> = Arc::new(store);
    rag_server::ensure_admin_key(keys.as_ref()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = rag_server::ServerConfig {
        addr,
        open: true,
        log_queries: false,
        limits: Limits::default(),
        cors_origins: vec![],
    };
    let state = rag_server::AppState::new(engine, keys, config);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(rag_server::serve(listener, state, async move {
        let _ = rx.await;
    }));
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap();
    let url = format!("http://{addr}");
    let res = client
        .post(format!("{url}/api/v1/kbs"))
        .json(&json!({ "name": "shop" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(FAQS.as_bytes().to_vec()).file_name("faq.jsonl"),
    );
    let res = client
        .post(format!("{url}/api/v1/kbs/shop/documents"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert!(res.text().await.unwrap().contains("event: indexed"));
    OpenServer {
        url,
        client,
        _dir: dir,
        _stop: tx,
    }
}

// ---------------------------------------------------------------- MCP ----

/// An MCP session over streamable HTTP.
struct Mcp<'a> {
    server: &'a Server,
    token: String,
    session: Option<String>,
    next: u64,
}

impl<'a> Mcp<'a> {
    async fn initialize(server: &'a Server, token: &str, version: &str) -> (Mcp<'a>, Value) {
        let mut mcp = Mcp {
            server,
            token: token.to_owned(),
            session: None,
            next: 1,
        };
        let (s, h, body) = mcp
            .post(
                json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": { "name": "test", "version": "1" } } }),
            )
            .await;
        assert_eq!(s, 200, "{body}");
        mcp.session = Some(
            h.get("mcp-session-id")
                .expect("initialize starts a session")
                .to_str()
                .unwrap()
                .to_owned(),
        );
        let (s, _, _) = mcp
            .post(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        assert_eq!(s, 202);
        (mcp, body["result"].clone())
    }

    async fn post(&self, message: Value) -> (u16, HeaderMap, Value) {
        let mut headers = vec![("accept", "application/json, text/event-stream")];
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id", s));
        }
        send(
            self.server,
            reqwest::Method::POST,
            "/mcp",
            Some(&self.token),
            &headers,
            Some(message),
        )
        .await
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let (s, _, body) = self
            .post(json!({ "jsonrpc": "2.0", "id": self.next, "method": method, "params": params }))
            .await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(body["id"], self.next, "{body}");
        body
    }

    /// Calls a tool: (isError, text).
    async fn tool(&mut self, name: &str, arguments: Value) -> (bool, String) {
        let body = self
            .request(
                "tools/call",
                json!({ "name": name, "arguments": arguments }),
            )
            .await;
        let r = &body["result"];
        assert_eq!(r["content"][0]["type"], "text", "{body}");
        (
            r["isError"].as_bool().unwrap(),
            r["content"][0]["text"].as_str().unwrap().to_owned(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_negotiates_lists_the_tools_and_calls_them() {
    let server = start(Limits::default(), None).await;
    seed(&server, &server.admin_key, "shop").await;
    let (mut mcp, init) = Mcp::initialize(&server, &server.admin_key, "2025-06-18").await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "ragscope");
    assert!(init["capabilities"]["tools"].is_object());
    // An unknown revision is answered with ours.
    let (_, newest) = Mcp::initialize(&server, &server.admin_key, "2099-01-01").await;
    assert_eq!(newest["protocolVersion"], "2025-11-25");

    assert_eq!(mcp.request("ping", json!({})).await["result"], json!({}));
    let tools = mcp.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["list_knowledge_bases", "search", "ask", "faq_lookup"]
    );
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().unwrap().len() > 40);
    }

    let (err, text) = mcp.tool("list_knowledge_bases", json!({})).await;
    assert!(!err);
    let kbs: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(kbs[0]["name"], "shop");

    let (err, text) = mcp
        .tool(
            "search",
            json!({ "kb": "shop", "query": "怎么退款", "top_k": 2 }),
        )
        .await;
    assert!(!err, "{text}");
    let found: Value = serde_json::from_str(&text).unwrap();
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 2, "{found}");
    assert_eq!(hits[0]["title"], "怎么申请退款？");
    assert_eq!(hits[0]["source"], "https://shop.example/help/refund");
    assert!(hits[0]["text"].as_str().unwrap().contains("原路退回"));
    let score = hits[0]["score"].as_f64().unwrap();
    assert!(score > 0.0 && score <= 1.0, "{score}");

    let (err, text) = mcp
        .tool("ask", json!({ "kb": "shop", "question": "怎么申请退款？" }))
        .await;
    assert!(!err, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["kb_miss"], false, "{answer}");
    assert!(
        answer["answer"].as_str().unwrap().contains("[1]"),
        "{answer}"
    );
    assert_eq!(answer["sources"][0]["title"], "怎么申请退款？");
    assert!(answer["log_id"].is_string());

    let (err, text) = mcp
        .tool(
            "faq_lookup",
            json!({ "kb": "shop", "query": "怎么申请退款" }),
        )
        .await;
    assert!(!err);
    assert!(
        text.starts_with("Q: 怎么申请退款？\nA: 在订单页点击申请退款"),
        "{text}"
    );
    assert!(
        text.contains("Source: https://shop.example/help/refund"),
        "{text}"
    );
    let (_, text) = mcp
        .tool("faq_lookup", json!({ "kb": "shop", "query": "披萨" }))
        .await;
    assert_eq!(text, "No relevant FAQs found for: 披萨");

    // Tool failures are results the model can read; an unknown tool is a protocol error.
    let (err, text) = mcp
        .tool("search", json!({ "kb": "nope", "query": "退款" }))
        .await;
    assert!(err);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["error"]["code"],
        "unknown_kb"
    );
    let (err, text) = mcp.tool("search", json!({ "kb": "shop" })).await;
    assert!(err && text.contains("invalid_param"), "{text}");
    let body = mcp
        .request(
            "tools/call",
            json!({ "name": "drop_tables", "arguments": {} }),
        )
        .await;
    assert_eq!(body["error"]["code"], -32602);
    let body = mcp.request("resources/list", json!({})).await;
    assert_eq!(body["error"]["code"], -32601);

    // A client that accepts only events gets the response as one event.
    let (s, h, body) = send(
        &server,
        reqwest::Method::POST,
        "/mcp",
        Some(&server.admin_key),
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", mcp.session.as_deref().unwrap()),
        ],
        Some(json!({ "jsonrpc": "2.0", "id": 99, "method": "ping" })),
    )
    .await;
    assert_eq!(s, 200);
    assert!(h["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let text = body.as_str().unwrap();
    assert!(
        text.starts_with("event: message\ndata: {") && text.contains(r#""id":99"#),
        "{text}"
    );

    // No server-initiated stream; a session ends with DELETE.
    let (s, h, body) = send(
        &server,
        reqwest::Method::GET,
        "/mcp",
        Some(&server.admin_key),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 405);
    assert_eq!(h["allow"], "POST, DELETE");
    assert!(body["error"]["message"].is_string(), "{body}");
    let session = mcp.session.clone().unwrap();
    let (s, _, _) = send(
        &server,
        reqwest::Method::DELETE,
        "/mcp",
        Some(&server.admin_key),
        &[("mcp-session-id", &session)],
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, _, body) = mcp
        .post(json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/list" }))
        .await;
    assert_eq!(s, 404, "{body}");

    // Without a session: tools need one; a probe of another revision is "method not found".
    mcp.session = None;
    let (s, _, body) = mcp
        .post(json!({ "jsonrpc": "2.0", "id": 6, "method": "tools/list" }))
        .await;
    assert_eq!((s, body["error"]["code"].clone()), (400, json!(-32600)));
    let (s, _, body) = mcp
        .post(json!({ "jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {} }))
        .await;
    assert_eq!(
        (s, body["error"]["code"].clone(), body["id"].clone()),
        (404, json!(-32601), json!(7))
    );
    let (s, _, body) = mcp
        .post(json!([{ "jsonrpc": "2.0", "id": 8, "method": "ping" }]))
        .await;
    assert_eq!((s, body["error"]["code"].clone()), (400, json!(-32600)));
    let (s, _, _) = mcp
        .post(json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }))
        .await;
    assert_eq!(s, 200);
    let (s, _, body) = send(
        &server,
        reqwest::Method::POST,
        "/mcp",
        Some(&server.admin_key),
        &[("mcp-protocol-version", "1999-01-01")],
        Some(json!({ "jsonrpc": "2.0", "id": 10, "method": "ping" })),
    )
    .await;
    assert_eq!(s, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_authenticates_every_request_and_keeps_every_scope() {
    let server = start(Limits::default(), None).await;
    let alpha = server.tenant("alpha").await;
    let beta = server.tenant("beta").await;
    seed(&server, &alpha, "shop").await;
    seed(&server, &alpha, "other").await;
    seed(&server, &beta, "beta-kb").await;
    let scoped = key(
        &server,
        json!({ "tenant": "alpha", "role": "read_only", "kb": "shop" }),
    )
    .await;
    let widget = key(
        &server,
        json!({ "tenant": "alpha", "role": "widget", "kb": "shop" }),
    )
    .await;
    let alice = key(
        &server,
        json!({ "tenant": "alpha", "role": "read_write", "owner": "alice" }),
    )
    .await;
    let doc = "# 体检报告\n\n血压正常，ALICE-PRIVATE 需要复查胆固醇。\n";
    let text = server
        .upload("shop", &alice, "report.md", doc.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");

    // Key mode: no key, an unknown key → 401 with a JSON-RPC error.
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-06-18" } });
    for token in [None, Some("rsk_not-a-key")] {
        let (s, h, body) = send(
            &server,
            reqwest::Method::POST,
            "/mcp",
            token,
            &[],
            Some(init.clone()),
        )
        .await;
        assert_eq!(s, 401, "{body}");
        assert_eq!(h["www-authenticate"], "Bearer");
        assert_eq!(body["error"]["code"], -32001, "{body}");
        assert_eq!(body["jsonrpc"], "2.0");
    }
    let (s, _, _) = send(
        &server,
        reqwest::Method::POST,
        "/mcp",
        Some(&widget),
        &[],
        Some(init.clone()),
    )
    .await;
    assert_eq!(s, 403);

    // A session belongs to its key.
    let (mcp, _) = Mcp::initialize(&server, &alpha, "2025-06-18").await;
    let (s, _, _) = send(
        &server,
        reqwest::Method::POST,
        "/mcp",
        Some(&beta),
        &[("mcp-session-id", mcp.session.as_deref().unwrap())],
        Some(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" })),
    )
    .await;
    assert_eq!(s, 404);

    // Tenant scope: beta's key does not find alpha's knowledge base.
    let (mut b, _) = Mcp::initialize(&server, &beta, "2025-06-18").await;
    let (_, text) = b.tool("list_knowledge_bases", json!({})).await;
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!([{ "name": "beta-kb", "created_at": serde_json::from_str::<Value>(&text).unwrap()[0]["created_at"] }])
    );
    let (err, text) = b
        .tool("search", json!({ "kb": "shop", "query": "退款" }))
        .await;
    assert!(err && text.contains("unknown_kb"), "{text}");

    // Knowledge-base scope: the scoped key lists and reaches only its own.
    let (mut s1, _) = Mcp::initialize(&server, &scoped, "2025-06-18").await;
    let (_, text) = s1.tool("list_knowledge_bases", json!({})).await;
    let names: Vec<String> = serde_json::from_str::<Vec<Value>>(&text)
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["shop"]);
    for tool in ["search", "faq_lookup"] {
        let (err, text) = s1
            .tool(tool, json!({ "kb": "other", "query": "退款" }))
            .await;
        assert!(err && text.contains("unknown_kb"), "{tool}: {text}");
    }
    let (err, text) = s1
        .tool("ask", json!({ "kb": "other", "question": "退款" }))
        .await;
    assert!(err && text.contains("unknown_kb"), "{text}");
    let (err, _) = s1
        .tool("search", json!({ "kb": "shop", "query": "退款" }))
        .await;
    assert!(!err);

    // Owner scope: alice's document is hers alone.
    let (mut plain, _) = Mcp::initialize(&server, &alpha, "2025-06-18").await;
    let (mut her, _) = Mcp::initialize(&server, &alice, "2025-06-18").await;
    let q = json!({ "kb": "shop", "query": "ALICE-PRIVATE 胆固醇" });
    // (The query itself is echoed: look at the hits and the answer only.)
    let (_, text) = her.tool("search", q.clone()).await;
    let hits = serde_json::from_str::<Value>(&text).unwrap()["hits"].to_string();
    assert!(hits.contains("ALICE-PRIVATE 需要复查胆固醇"), "{text}");
    let (_, text) = plain.tool("search", q).await;
    let hits = serde_json::from_str::<Value>(&text).unwrap()["hits"].to_string();
    assert!(!hits.contains("ALICE-PRIVATE"), "{text}");
    let (_, text) = plain
        .tool(
            "ask",
            json!({ "kb": "shop", "question": "ALICE-PRIVATE 需要复查什么" }),
        )
        .await;
    let asked: Value = serde_json::from_str(&text).unwrap();
    let seen = format!("{}{}", asked["answer"], asked["sources"]);
    assert!(!seen.contains("胆固醇"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_mode_treats_a_token_that_is_no_key_as_absent() {
    let server = start_open().await;
    let post = |path: &str, token: &str, body: Value| {
        server
            .client
            .post(format!("{}{path}", server.url))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send()
    };
    let res = post(
        "/mcp",
        "sk-whatever-the-client-sends",
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-06-18" } }),
    )
    .await
    .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let res = post(
        "/v1/chat/completions",
        "sk-whatever",
        json!({ "model": "shop", "messages": [{ "role": "user", "content": "怎么申请退款？" }] }),
    )
    .await
    .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let res = post(
        "/dify/retrieval",
        "dify-key",
        json!({ "knowledge_id": "shop", "query": "退款", "retrieval_setting": { "top_k": 3, "score_threshold": 0.0 } }),
    )
    .await
    .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["records"][0]["title"], "怎么申请退款？", "{body}");
    // A page of another site may not drive a key-less server.
    let res = server
        .client
        .post(format!("{}/dify/retrieval", server.url))
        .header("origin", "https://evil.example")
        .json(&json!({ "knowledge_id": "shop", "query": "退款", "retrieval_setting": { "top_k": 3 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
}

// ------------------------------------------------------------- OpenAI ----

fn chat(model: &str, messages: Value) -> Value {
    json!({ "model": model, "messages": messages, "temperature": 0.3, "max_tokens": 300 })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_models_and_chat_completions_have_openai_shapes() {
    let server = start(Limits::default(), None).await;
    let alpha = server.tenant("alpha").await;
    seed(&server, &alpha, "shop").await;
    seed(&server, &alpha, "other").await;
    let scoped = key(
        &server,
        json!({ "tenant": "alpha", "role": "read_only", "kb": "shop" }),
    )
    .await;
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;

    let (s, _, models) = send(&server, get.clone(), "/v1/models", Some(&alpha), &[], None).await;
    assert_eq!(s, 200, "{models}");
    assert_eq!(models["object"], "list");
    let mut ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["other", "shop"]);
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["owned_by"], "ragscope");
    let (_, _, models) = send(&server, get.clone(), "/v1/models", Some(&scoped), &[], None).await;
    assert_eq!(models["data"].as_array().unwrap().len(), 1);
    assert_eq!(models["data"][0]["id"], "shop");
    let (s, _, m) = send(
        &server,
        get.clone(),
        "/v1/models/shop",
        Some(&alpha),
        &[],
        None,
    )
    .await;
    assert_eq!((s, m["id"].clone()), (200, json!("shop")));

    // Non-streaming.
    let (s, _, c) = send(
        &server,
        post.clone(),
        "/v1/chat/completions",
        Some(&alpha),
        &[],
        Some(chat(
            "shop",
            json!([{ "role": "user", "content": "怎么申请退款？" }]),
        )),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["model"], "shop");
    assert!(c["id"].as_str().unwrap().starts_with("chatcmpl-"));
    let choice = &c["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["finish_reason"], "stop");
    assert!(
        choice["message"]["content"]
            .as_str()
            .unwrap()
            .contains("[1]"),
        "{c}"
    );
    assert!(c["usage"]["total_tokens"].is_number());
    let ext = &c["ragscope"];
    assert_eq!(ext["kb_miss"], false);
    assert_eq!(ext["sources"][0]["n"], 1);
    assert_eq!(ext["sources"][0]["title"], "怎么申请退款？");
    let log_id = ext["log_id"].as_str().unwrap();
    assert_eq!(c["id"], format!("chatcmpl-{log_id}"));
    let (s, row) = server.get(&format!("/log/{log_id}"), &alpha).await;
    assert_eq!(s, 200, "{row}");

    // Multi-turn: the follow-up is rewritten from the chat's earlier turn.
    let first = json!([{ "role": "user", "content": "你们的营业时间是几点到几点？" }]);
    let (_, _, c1) = send(
        &server,
        post.clone(),
        "/v1/chat/completions",
        Some(&alpha),
        &[],
        Some(chat("shop", first)),
    )
    .await;
    let a1 = c1["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, _, c2) = send(
        &server,
        post.clone(),
        "/v1/chat/completions",
        Some(&alpha),
        &[],
        Some(chat(
            "shop",
            json!([
                { "role": "user", "content": "你们的营业时间是几点到几点？" },
                { "role": "assistant", "content": a1 },
                { "role": "user", "content": "那周末呢？" }
            ]),
        )),
    )
    .await;
    assert_eq!(s, 200, "{c2}");
    assert_eq!(c2["ragscope"]["rewrite_method"], "add_qualifier", "{c2}");
    assert_eq!(
        c2["ragscope"]["conversation_id"],
        c1["ragscope"]["conversation_id"]
    );

    // Streaming: data lines only, the content over several chunks, then [DONE].
    let mut body = chat(
        "shop",
        json!([{ "role": "user", "content": "怎么申请退款？" }]),
    );
    body["stream"] = json!(true);
    body["stream_options"] = json!({ "include_usage": true });
    let res = server
        .client
        .post(format!("{}/v1/chat/completions", server.url))
        .bearer_auth(&alpha)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let text = res.text().await.unwrap();
    assert!(!text.contains("event:"), "{text}");
    let datas: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with(':'))
        .map(|l| {
            l.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data line: {l:?}"))
        })
        .collect();
    assert_eq!(datas.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let pieces: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert!(pieces.len() >= 2, "{pieces:?}");
    assert!(pieces.concat().contains("[1]"));
    let last = &chunks[chunks.len() - 2];
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["ragscope"]["kb_miss"], false);
    assert_eq!(last["ragscope"]["sources"][0]["title"], "怎么申请退款？");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["total_tokens"].is_number());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_errors_come_in_openai_shape() {
    let server = start(Limits::default(), None).await;
    let alpha = server.tenant("alpha").await;
    seed(&server, &alpha, "shop").await;
    seed(&server, &alpha, "other").await;
    let scoped = key(
        &server,
        json!({ "tenant": "alpha", "role": "read_only", "kb": "shop" }),
    )
    .await;
    let post = reqwest::Method::POST;
    let question = json!([{ "role": "user", "content": "怎么申请退款？" }]);
    let shape = |v: &Value| {
        let e = &v["error"];
        assert!(
            e["message"].is_string() && e["type"].is_string() && e["code"].is_string(),
            "{v}"
        );
        assert!(e.as_object().unwrap().contains_key("param"), "{v}");
    };
    for token in [None, Some("sk-not-ours")] {
        let (s, _, b) = send(
            &server,
            post.clone(),
            "/v1/chat/completions",
            token,
            &[],
            Some(chat("shop", question.clone())),
        )
        .await;
        assert_eq!(s, 401, "{b}");
        shape(&b);
        assert_eq!(b["error"]["type"], "authentication_error");
    }
    let (s, _, b) = send(
        &server,
        reqwest::Method::GET,
        "/v1/models",
        Some("sk-not-ours"),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 401);
    shape(&b);
    for (token, model) in [(&alpha, "nope"), (&scoped, "other")] {
        let (s, _, b) = send(
            &server,
            post.clone(),
            "/v1/chat/completions",
            Some(token),
            &[],
            Some(chat(model, question.clone())),
        )
        .await;
        assert_eq!(s, 404, "{b}");
        shape(&b);
        assert_eq!(
            (b["error"]["code"].clone(), b["error"]["param"].clone()),
            (json!("model_not_found"), json!("model"))
        );
    }
    let (s, _, b) = send(
        &server,
        reqwest::Method::GET,
        "/v1/models/other",
        Some(&scoped),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 404, "{b}");
    for bad in [
        json!({ "model": "shop", "messages": [] }),
        json!({ "model": "shop", "messages": [{ "role": "assistant", "content": "hi" }] }),
        json!({ "model": "shop", "n": 3, "messages": question.clone() }),
        json!({ "model": "shop" }),
        json!("not an object"),
    ] {
        let (s, _, b) = send(
            &server,
            post.clone(),
            "/v1/chat/completions",
            Some(&alpha),
            &[],
            Some(bad.clone()),
        )
        .await;
        assert_eq!(s, 400, "{bad}: {b}");
        shape(&b);
        assert_eq!(b["error"]["type"], "invalid_request_error");
    }
    let big = "退".repeat(100_000);
    let (s, _, b) = send(
        &server,
        post.clone(),
        "/v1/chat/completions",
        Some(&alpha),
        &[],
        Some(chat("shop", json!([{ "role": "user", "content": big }]))),
    )
    .await;
    assert_eq!(s, 413, "{b}");
    shape(&b);
}

// --------------------------------------------------------------- Dify ----

fn dify(kb: &str, query: &str, top_k: usize, threshold: f64) -> Value {
    json!({ "knowledge_id": kb, "query": query, "retrieval_setting": { "top_k": top_k, "score_threshold": threshold } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dify_retrieval_has_difys_shapes_and_errors() {
    let server = start(Limits::default(), None).await;
    let alpha = server.tenant("alpha").await;
    let beta = server.tenant("beta").await;
    seed(&server, &alpha, "shop").await;
    seed(&server, &alpha, "other").await;
    let scoped = key(
        &server,
        json!({ "tenant": "alpha", "role": "read_only", "kb": "shop" }),
    )
    .await;
    let post = reqwest::Method::POST;
    let url = "/dify/retrieval";

    let (s, _, b) = send(
        &server,
        post.clone(),
        url,
        Some(&alpha),
        &[],
        Some(dify("shop", "怎么退款", 3, 0.0)),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let records = b["records"].as_array().unwrap();
    assert!(!records.is_empty() && records.len() <= 3, "{b}");
    for r in records {
        assert!(
            r["content"].is_string() && r["title"].is_string() && r["metadata"].is_object(),
            "{r}"
        );
        let score = r["score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score), "{score}");
    }
    assert_eq!(records[0]["title"], "怎么申请退款？");
    assert!(records[0]["content"].as_str().unwrap().contains("原路退回"));
    assert_eq!(
        records[0]["metadata"]["source"],
        "https://shop.example/help/refund"
    );
    // The threshold drops what scores below it.
    let best = records[0]["score"].as_f64().unwrap();
    let (_, _, b) = send(
        &server,
        post.clone(),
        url,
        Some(&alpha),
        &[],
        Some(dify("shop", "怎么退款", 3, best)),
    )
    .await;
    assert!(
        b["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["score"].as_f64().unwrap() >= best),
        "{b}"
    );
    let (_, _, b) = send(
        &server,
        post.clone(),
        url,
        Some(&alpha),
        &[],
        Some(dify("shop", "怎么退款", 3, 1.01)),
    )
    .await;
    assert_eq!(b["records"], json!([]));

    // Metadata conditions: tags filter; anything else is refused clearly.
    let mut body = dify("shop", "多久", 5, 0.0);
    body["metadata_condition"] = json!({ "logical_operator": "and", "conditions": [
        { "name": ["tags"], "comparison_operator": "contains", "value": "物流" } ] });
    let (s, _, b) = send(&server, post.clone(), url, Some(&alpha), &[], Some(body)).await;
    assert_eq!(s, 200, "{b}");
    let titles: Vec<&str> = b["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["配送要多久？"]);
    let mut body = dify("shop", "多久", 5, 0.0);
    body["metadata_condition"] = json!({ "conditions": [
        { "name": ["author"], "comparison_operator": "is", "value": "x" } ] });
    let (s, _, b) = send(&server, post.clone(), url, Some(&alpha), &[], Some(body)).await;
    assert_eq!((s, b["error_code"].clone()), (400, json!(400)), "{b}");
    assert!(b["error_msg"].as_str().unwrap().contains("author"), "{b}");

    // Errors: 1001 no or malformed Authorization, 1002 a refused key, 2001 no such knowledge base.
    let (s, _, b) = send(
        &server,
        post.clone(),
        url,
        None,
        &[],
        Some(dify("shop", "退款", 3, 0.0)),
    )
    .await;
    assert_eq!((s, b["error_code"].clone()), (401, json!(1001)), "{b}");
    assert!(b["error_msg"].is_string());
    let (s, _, b) = send(
        &server,
        post.clone(),
        url,
        None,
        &[("authorization", "Basic abc")],
        Some(dify("shop", "退款", 3, 0.0)),
    )
    .await;
    assert_eq!((s, b["error_code"].clone()), (401, json!(1001)), "{b}");
    let (s, _, b) = send(
        &server,
        post.clone(),
        url,
        Some("not-a-key"),
        &[],
        Some(dify("shop", "退款", 3, 0.0)),
    )
    .await;
    assert_eq!((s, b["error_code"].clone()), (401, json!(1002)), "{b}");
    for (token, kb) in [(&alpha, "nope"), (&scoped, "other"), (&beta, "shop")] {
        let (s, _, b) = send(
            &server,
            post.clone(),
            url,
            Some(token),
            &[],
            Some(dify(kb, "退款", 3, 0.0)),
        )
        .await;
        assert_eq!(
            (s, b["error_code"].clone()),
            (404, json!(2001)),
            "{kb}: {b}"
        );
    }
    let (s, _, b) = send(
        &server,
        post.clone(),
        url,
        Some(&scoped),
        &[],
        Some(dify("shop", "退款", 3, 0.0)),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (s, _, b) = send(
        &server,
        post.clone(),
        url,
        Some(&alpha),
        &[],
        Some(json!({ "query": "退款" })),
    )
    .await;
    assert_eq!((s, b["error_code"].clone()), (400, json!(400)), "{b}");
}
