//! `POST /api/v1/kbs/{kb}/why-not` against a real server on loopback: the
//! verdicts of an entry a query missed, bad requests, and scope (another
//! tenant's knowledge base and another owner's document are not found).

mod common;

use common::start;
use rag_server::Limits;
use serde_json::{json, Value};

const FAQS: &str = r#"{"question":"怎么申请退款？","answer":"在订单页点击申请退款，三个工作日内原路退回。"}
{"question":"配送要多久？","answer":"同城配送一般两小时内送达。","tags":["物流"]}
{"question":"How do I reset my password?","answer":"Use the reset link on the sign-in page."}
"#;

/// The textual id of the FAQ entry with this question.
async fn faq_id(server: &common::Server, key: &str, question: &str) -> String {
    let (s, list) = server.get("/kbs/shop/faqs", key).await;
    assert_eq!(s, 200, "{list}");
    let id = list["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["question"] == question)
        .unwrap_or_else(|| panic!("no FAQ {question} in {list}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    format!("faq:{id}")
}

fn verdict<'a>(w: &'a Value, path: &str) -> &'a Value {
    w["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"] == path)
        .unwrap_or_else(|| panic!("no {path} verdict in {w}"))
}

async fn log_len(server: &common::Server, key: &str) -> usize {
    let (s, log) = server.get("/kbs/shop/log", key).await;
    assert_eq!(s, 200, "{log}");
    log.as_array().map(Vec::len).expect("the log is a list")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_not_explains_a_miss_and_keeps_scope() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("alpha").await;
    let other = server.tenant("beta").await;
    let (s, b) = server.post("/kbs", &key, json!({ "name": "shop" })).await;
    assert_eq!(s, 201, "{b}");
    let text = server
        .upload("shop", &key, "faq.jsonl", FAQS.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
    let alice = server.key_for("alpha", Some("alice")).await;
    let doc = "# 体检报告\n\nALICE-PRIVATE 需要复查胆固醇。\n";
    let text = server
        .upload("shop", &alice, "report.md", doc.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");

    // The refund entry, asked about delivery: BM25 has no term of it.
    let refund = faq_id(&server, &key, "怎么申请退款？").await;
    let logged = log_len(&server, &key).await;
    let body = json!({ "query": "配送要多久", "entry_id": refund, "paths": ["bm25", "substring"] });
    let (s, w) = server.post("/kbs/shop/why-not", &key, body).await;
    assert_eq!(s, 200, "{w}");
    assert_eq!(w["title"], "怎么申请退款？", "{w}");
    assert_eq!(w["paths"].as_array().unwrap().len(), 2, "{w}");
    let bm25 = verdict(&w, "bm25");
    assert_eq!(bm25["status"], "no_match", "{bm25}");
    assert!(
        bm25["missing_terms"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "配送"),
        "{bm25}"
    );
    assert!(w.get("fused_rank").is_none(), "{w}");
    assert_eq!(log_len(&server, &key).await, logged, "why-not logs nothing");
    // (An ordinary query of the same is logged at once, so the check above can fail.)
    let (s, _) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "配送要多久", "generate": false }),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(log_len(&server, &key).await, logged + 1);

    // The entry the query finds: returned, fused first, packed as source 1.
    let delivery = faq_id(&server, &key, "配送要多久？").await;
    let body = json!({ "query": "配送要多久", "entry_id": delivery, "paths": ["bm25"] });
    let (s, w) = server.post("/kbs/shop/why-not", &key, body).await;
    assert_eq!(s, 200, "{w}");
    assert_eq!(verdict(&w, "bm25")["status"], "returned", "{w}");
    assert_eq!(w["fused_rank"], 1, "{w}");
    assert_eq!(w["context_source"], 1, "{w}");
    // A tag filter that excludes it is named.
    let body = json!({ "query": "配送要多久", "entry_id": delivery, "paths": ["bm25"],
        "filters": { "tags": ["售后"] } });
    let (s, w) = server.post("/kbs/shop/why-not", &key, body).await;
    assert_eq!(s, 200, "{w}");
    assert_eq!(verdict(&w, "bm25")["filter"], "tags", "{w}");

    // Bad requests get their codes.
    for (body, status, code) in [
        (
            json!({ "query": "配送", "entry_id": "" }),
            400,
            "invalid_param",
        ),
        (
            json!({ "query": "配送", "entry_id": "x".repeat(300) }),
            400,
            "limit_exceeded",
        ),
        (
            json!({ "query": "配送", "entry_id": delivery, "bogus": 1 }),
            422,
            "invalid_body",
        ),
        (
            json!({ "query": "配送", "entry_id": delivery, "top_k": 0 }),
            400,
            "invalid_param",
        ),
    ] {
        let (s, e) = server.post("/kbs/shop/why-not", &key, body.clone()).await;
        assert_eq!(
            (s, e["code"].as_str()),
            (status, Some(code)),
            "{body} → {e}"
        );
    }

    // Another tenant: the knowledge base does not exist for it.
    let body = json!({ "query": "配送要多久", "entry_id": delivery });
    let (s, e) = server.post("/kbs/shop/why-not", &other, body).await;
    assert_eq!((s, e["code"].as_str()), (404, Some("unknown_kb")), "{e}");

    // Alice's restricted chunk: she gets its verdicts, a key without her
    // owner gets exactly what a made-up id gets.
    let (_, r) = server
        .post(
            "/kbs/shop/retrieve",
            &alice,
            json!({ "query": "ALICE-PRIVATE 胆固醇" }),
        )
        .await;
    let hit = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "fused")
        .and_then(|e| e["hits"].as_array())
        .and_then(|h| h.iter().find(|h| h["id"]["kind"] == "chunk"))
        .unwrap_or_else(|| panic!("alice finds her chunk: {r}"));
    let chunk = format!("chunk:{}", hit["id"]["id"].as_str().unwrap());
    let body = json!({ "query": "ALICE-PRIVATE 胆固醇", "entry_id": chunk });
    let (s, w) = server.post("/kbs/shop/why-not", &alice, body.clone()).await;
    assert_eq!(s, 200, "{w}");
    let (s, hidden) = server.post("/kbs/shop/why-not", &key, body).await;
    assert_eq!(s, 404, "{hidden}");
    let fake = "chunk:0190b5f4-0000-7000-8000-000000000000".to_owned();
    let body = json!({ "query": "ALICE-PRIVATE 胆固醇", "entry_id": fake });
    let (s, made_up) = server.post("/kbs/shop/why-not", &key, body).await;
    assert_eq!(s, 404, "{made_up}");
    assert_eq!(
        hidden["message"].as_str().unwrap().replace(&chunk, "ID"),
        made_up["message"].as_str().unwrap().replace(&fake, "ID")
    );
    assert!(!hidden.to_string().contains("ALICE-PRIVATE"), "{hidden}");
}
