//! Grounded answers over the HTTP API: the extractive answer in the
//! question's language with checked citations, the honest miss and its log
//! row, phase timings, a failing reranker kept soft, the FAQ tool, follow-up
//! rewriting, and an LLM stand-in whose stream is closed when the client goes away.

mod common;

use async_trait::async_trait;
use common::{read_request, stand_in, start, start_full};
use futures::StreamExt;
use rag_core::{AnalyzedQuery, CoreError, RerankCandidate, RerankedHit, Reranker};
use rag_server::Limits;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FAQS: &str = r#"{"question":"怎么申请退款？","answer":"在订单页点击申请退款，三个工作日内原路退回。","source_url":"https://shop.example/help/refund"}
{"question":"肉类怎么保存？","answer":"肉类买回后请放冰箱冷冻，零下十八度可保存三个月。"}
{"question":"海鲜怎么保存？","answer":"海鲜买回后请当天食用，或冷冻保存不超过一个月。"}
{"question":"营业时间是几点？","answer":"每天上午九点到晚上十点营业。"}
"#;

async fn seeded(server: &common::Server) -> String {
    let key = server.tenant("acme").await;
    let (s, _) = server.post("/kbs", &key, json!({ "name": "shop" })).await;
    assert_eq!(s, 201);
    server
        .upload("shop", &key, "faq.jsonl", FAQS.as_bytes().to_vec())
        .await;
    key
}

fn find<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event in {events:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chinese_question_gets_a_chinese_extractive_answer_with_valid_citations_and_a_log_row() {
    let server = start(Limits::default(), None).await;
    let key = seeded(&server).await;
    let (s, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "退款怎么申请？" }),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let events = body["events"].as_array().unwrap();
    let answered = find(events, "answered");
    assert_eq!(answered["generator"], "extractive");
    assert_eq!(answered["language"], "zh");
    assert_eq!(answered["kb_miss"], false);
    let text = answered["text"].as_str().unwrap();
    assert!(text.contains("原路退回"), "{text}");
    assert!(
        text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
        "the frame is Chinese: {text}"
    );
    let sources = find(events, "context_assembled")["sources"]
        .as_array()
        .unwrap()
        .len() as u64;
    let cited = answered["cited"].as_array().unwrap();
    assert!(!cited.is_empty(), "{answered}");
    for c in cited {
        assert!(c["n"].as_u64().unwrap() >= 1 && c["n"].as_u64().unwrap() <= sources);
    }
    assert_eq!(cited[0]["source"], "https://shop.example/help/refund");
    assert!(answered["removed_citations"].as_array().unwrap().is_empty());
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "answer_token")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        streamed.trim(),
        text.trim(),
        "the tokens add up to the answer"
    );

    // The log row holds the question, parameters, ranking, answer and timings.
    let id = events[0]["query_id"].as_str().unwrap();
    let (s, row) = server.get(&format!("/log/{id}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(row["query"], "退款怎么申请？");
    assert_eq!(row["kb_name"], "shop");
    assert_eq!(row["generator"], "extractive");
    assert_eq!(row["kb_miss"], false);
    assert!(row["fused"].as_array().is_some_and(|f| !f.is_empty()));
    assert!(row["fused"][0]["path_ranks"]
        .as_array()
        .is_some_and(|p| !p.is_empty()));
    assert!(row["params"]["fusion"]["k"].as_f64().is_some());
    assert!(row["top_fused_score"].as_f64().is_some());
    assert_eq!(row["cited"], answered["cited"]);
    assert!(row["timings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["stage"] == "recall"));
    let (s, _) = server
        .post(
            &format!("/log/{id}/feedback"),
            &key,
            json!({ "feedback": "useful" }),
        )
        .await;
    assert_eq!(s, 204);
    let (_, row) = server.get(&format!("/log/{id}"), &key).await;
    assert_eq!(row["feedback"], "useful");

    // Phases do not overlap: they add up to the total.
    let done = find(events, "done");
    let sum: f64 = done["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["ms"].as_f64().unwrap())
        .sum();
    let total = done["total_ms"].as_f64().unwrap();
    assert!(
        sum <= total * 1.0001 && sum >= total * 0.95,
        "phases sum to {sum} ms of {total} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_outside_the_knowledge_base_is_an_honest_miss() {
    let server = start(Limits::default(), None).await;
    let key = seeded(&server).await;
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "火星的大气层由什么组成" }),
        )
        .await;
    let events = body["events"].as_array().unwrap();
    let answered = find(events, "answered");
    assert_eq!(answered["kb_miss"], true, "{answered}");
    assert_eq!(answered["generator"], "miss");
    assert!(
        answered["text"]
            .as_str()
            .unwrap()
            .contains("知识库中没有相关信息"),
        "{answered}"
    );
    assert!(answered["cited"].as_array().unwrap().is_empty());
    let (_, misses) = server.get("/kbs/shop/log?kb_miss=true", &key).await;
    assert_eq!(misses.as_array().unwrap().len(), 1);
    assert_eq!(misses[0]["query"], "火星的大气层由什么组成");
    let (_, stats) = server.get("/kbs/shop/analytics", &key).await;
    assert_eq!(stats["misses"], 1);
    assert_eq!(stats["recent_misses"][0], "火星的大气层由什么组成");
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("ragscope_kb_miss_total 1"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_faq_tool_and_follow_up_questions() {
    let server = start(Limits::default(), None).await;
    let key = seeded(&server).await;
    let (_, hit) = server
        .post("/kbs/shop/faq-tool", &key, json!({ "query": "怎么退款" }))
        .await;
    let text = hit["text"].as_str().unwrap();
    assert!(text.starts_with("Q: 怎么申请退款？"), "{text}");
    assert!(
        text.contains("A: 在订单页点击申请退款")
            && text.contains("Source: https://shop.example/help/refund"),
        "{text}"
    );
    let (_, miss) = server
        .post(
            "/kbs/shop/faq-tool",
            &key,
            json!({ "query": "火星的大气层由什么组成" }),
        )
        .await;
    assert_eq!(
        miss["text"],
        "No relevant FAQs found for: 火星的大气层由什么组成"
    );

    let conv = "c-1";
    let (_, first) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "肉类怎么保存？", "conversation_id": conv }),
        )
        .await;
    assert!(
        find(first["events"].as_array().unwrap(), "answered")["text"]
            .as_str()
            .unwrap()
            .contains("零下十八度")
    );
    let (_, follow) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "那海鲜呢？", "conversation_id": conv }),
        )
        .await;
    let events = follow["events"].as_array().unwrap();
    let analyzed = find(events, "query_analyzed");
    assert_eq!(analyzed["rewritten_from"], "那海鲜呢？", "{analyzed}");
    let top = &find(events, "context_assembled")["sources"][0]["passage"]["title"];
    assert_eq!(top, "海鲜怎么保存？");
}

struct Failing;
#[async_trait]
impl Reranker for Failing {
    fn name(&self) -> &str {
        "broken-reranker"
    }
    async fn rerank(
        &self,
        _q: &AnalyzedQuery,
        _c: Vec<RerankCandidate>,
        _k: usize,
    ) -> Result<Vec<RerankedHit>, CoreError> {
        Err(CoreError::Component {
            component: "reranker".into(),
            message: "HTTP 503 from the stand-in".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_reranker_is_skipped_and_the_fused_order_kept() {
    let server = start(Limits::default(), Some(Arc::new(Failing))).await;
    let key = seeded(&server).await;
    let (_, body) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "保存" }))
        .await;
    let events = body["events"].as_array().unwrap();
    let reranked = find(events, "reranked");
    assert!(
        reranked["skipped"]
            .as_str()
            .unwrap()
            .starts_with("rerank skipped: broken-reranker failed"),
        "{reranked}"
    );
    let fused_ids: Vec<&Value> = find(events, "fused")["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    let reranked_ids: Vec<&Value> = reranked["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    assert_eq!(reranked_ids[..], fused_ids[..reranked_ids.len()]);
    assert!(!find(events, "done")["warnings"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A stand-in chat server: sends one token, then holds the stream open and
/// records when the client closes it.
async fn holding_llm(closed: Arc<AtomicBool>, started: Arc<tokio::sync::Notify>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (closed, started) = (closed.clone(), started.clone());
            tokio::spawn(async move {
                if read_request(&mut sock).await.is_none() {
                    return;
                }
                let mut buf = vec![0u8; 1024];
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";
                let chunk = "data: {\"choices\":[{\"delta\":{\"content\":\"第一句\"}}]}\n\n";
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(chunk.as_bytes()).await;
                started.notify_one();
                // Hold the stream; a read of 0 bytes means the client closed it.
                let n = sock.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    closed.store(true, Ordering::SeqCst);
                }
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_disconnect_closes_the_llm_stream() {
    let closed = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let url = holding_llm(closed.clone(), started.clone()).await;
    let chat = rag_models::OpenAiChat::new(rag_models::ChatConfig {
        base_url: url,
        model: "stand-in".into(),
        idle_timeout_ms: 120_000,
        first_token_timeout_ms: 120_000,
        ..rag_models::ChatConfig::default()
    })
    .unwrap();
    let server = start_full(Limits::default(), None, Some(Arc::new(chat))).await;
    let key = seeded(&server).await;
    let res = server
        .client
        .post(server.api("/kbs/shop/query"))
        .bearer_auth(&key)
        .json(&json!({ "query": "怎么退款" }))
        .send()
        .await
        .unwrap();
    let mut stream = res.bytes_stream();
    let mut text = String::new();
    while !text.contains("event: answer_token") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("tokens arrive")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(
        text.contains("第一句"),
        "the LLM's token is streamed: {text}"
    );
    tokio::time::timeout(Duration::from_secs(30), started.notified())
        .await
        .ok();
    drop(stream);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !closed.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the LLM stream stayed open after the client left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_llm_falls_back_to_the_extractive_answer() {
    let url = stand_in(Duration::ZERO, |_| {
        (
            500,
            "application/json",
            "{\"error\":{\"message\":\"upstream exploded\"}}".into(),
        )
    })
    .await;
    let chat = rag_models::OpenAiChat::new(rag_models::ChatConfig {
        base_url: url,
        model: "stand-in".into(),
        max_retries: 1,
        backoff_ms: 10,
        ..rag_models::ChatConfig::default()
    })
    .unwrap();
    let server = start_full(Limits::default(), None, Some(Arc::new(chat))).await;
    let key = seeded(&server).await;
    let (s, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "退款怎么申请？" }),
        )
        .await;
    assert_eq!(s, 200);
    let events = body["events"].as_array().unwrap();
    let answered = find(events, "answered");
    assert_eq!(answered["generator"], "extractive", "{answered}");
    assert!(answered["text"].as_str().unwrap().contains("原路退回"));
    let warnings = find(events, "done")["warnings"].to_string();
    assert!(warnings.contains("extractive answer instead"), "{warnings}");
    assert!(!warnings.contains("rsk_"), "no key in warnings");
}

/// Reverses the fused order and scores each candidate.
struct Reverse;
#[async_trait]
impl Reranker for Reverse {
    fn name(&self) -> &str {
        "reverse"
    }
    async fn rerank(
        &self,
        _q: &AnalyzedQuery,
        c: Vec<RerankCandidate>,
        k: usize,
    ) -> Result<Vec<RerankedHit>, CoreError> {
        let n = c.len();
        Ok(c.into_iter()
            .rev()
            .take(k)
            .enumerate()
            .map(|(i, c)| RerankedHit {
                hit: c.hit,
                score: Some((n - i) as f64),
            })
            .collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_reranker_reorders_and_reports_each_move() {
    let server = start(Limits::default(), Some(Arc::new(Reverse))).await;
    let key = seeded(&server).await;
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "保存", "rerank_top_k": 10 }),
        )
        .await;
    let events = body["events"].as_array().unwrap();
    let fused: Vec<&Value> = find(events, "fused")["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    let reranked = find(events, "reranked");
    assert_eq!(reranked["reranker"], "reverse");
    assert!(reranked["skipped"].is_null());
    let moves = reranked["moves"].as_array().unwrap();
    assert_eq!(moves.len(), fused.len().min(10));
    assert!(fused.len() >= 2, "the query finds several entries");
    assert_eq!(&moves[0]["id"], fused[fused.len() - 1]);
    assert_eq!(moves[0]["from"].as_u64().unwrap() as usize, fused.len());
    assert_eq!(moves[0]["to"], 1);
    assert!(moves[0]["score"].as_f64().is_some());
    let hits = reranked["hits"].as_array().unwrap();
    assert_eq!(hits[0]["rank"], 1, "ranks follow the new order");
}

fn http_reranker(url: String) -> Arc<dyn Reranker> {
    Arc::new(
        rag_models::HttpReranker::new(rag_models::HttpRerankerConfig {
            base_url: url,
            model: "stand-in".into(),
            timeout_ms: 300,
            max_retries: 0,
            ..rag_models::HttpRerankerConfig::default()
        })
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerank_server_that_fails_or_is_slow_is_skipped_and_a_working_one_reorders() {
    // Error.
    let url = stand_in(Duration::ZERO, |_| {
        (503, "application/json", "{\"error\":\"overloaded\"}".into())
    })
    .await;
    let server = start(Limits::default(), Some(http_reranker(url))).await;
    let key = seeded(&server).await;
    let (_, body) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "保存" }))
        .await;
    let events = body["events"].as_array().unwrap();
    let reranked = find(events, "reranked");
    assert!(
        reranked["skipped"]
            .as_str()
            .unwrap()
            .starts_with("rerank skipped:"),
        "{reranked}"
    );
    let fused: Vec<&Value> = find(events, "fused")["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    let kept: Vec<&Value> = reranked["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    assert_eq!(kept[..], fused[..kept.len()], "the fused order is kept");

    // Slow: answers after the reranker's timeout.
    let url = stand_in(Duration::from_secs(5), |_| {
        (200, "application/json", "{\"results\":[]}".into())
    })
    .await;
    let server = start(Limits::default(), Some(http_reranker(url))).await;
    let key = seeded(&server).await;
    let (_, body) = server
        .post("/kbs/shop/query/sync", &key, json!({ "query": "保存" }))
        .await;
    let reranked = find(body["events"].as_array().unwrap(), "reranked").clone();
    assert!(
        reranked["skipped"]
            .as_str()
            .unwrap()
            .starts_with("rerank skipped:"),
        "{reranked}"
    );

    // Working: the stand-in ranks the documents in reverse, with scores.
    let url = stand_in(Duration::ZERO, |body| {
        let req: Value = serde_json::from_str(body).unwrap();
        let n = req["documents"].as_array().unwrap().len();
        let results: Vec<Value> = (0..n)
            .rev()
            .map(|i| json!({ "index": i, "relevance_score": (i + 1) as f64 / 10.0 }))
            .collect();
        (
            200,
            "application/json",
            json!({ "results": results }).to_string(),
        )
    })
    .await;
    let server = start(Limits::default(), Some(http_reranker(url))).await;
    let key = seeded(&server).await;
    let (_, body) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "保存", "rerank_top_k": 10 }),
        )
        .await;
    let events = body["events"].as_array().unwrap();
    let fused: Vec<&Value> = find(events, "fused")["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    let reranked = find(events, "reranked");
    assert!(reranked["skipped"].is_null(), "{reranked}");
    let moves = reranked["moves"].as_array().unwrap();
    assert!(fused.len() >= 2);
    assert_eq!(
        &moves[0]["id"],
        fused[fused.len() - 1],
        "the last fused hit moved to the top"
    );
    assert_eq!(moves[0]["to"], 1);
    assert!(moves[0]["score"].as_f64().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_llm_a_follow_up_is_rewritten_by_it() {
    let url = stand_in(Duration::ZERO, |_| {
        let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"海鲜怎么保存？\"}}]}\n\ndata: [DONE]\n\n".to_string();
        (200, "text/event-stream", sse)
    })
    .await;
    let chat = rag_models::OpenAiChat::new(rag_models::ChatConfig {
        base_url: url,
        model: "stand-in".into(),
        ..rag_models::ChatConfig::default()
    })
    .unwrap();
    let server = start_full(Limits::default(), None, Some(Arc::new(chat))).await;
    let key = seeded(&server).await;
    let (s, _) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "肉类怎么保存？", "conversation_id": "c-llm" }),
        )
        .await;
    assert_eq!(s, 200);
    let (_, follow) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "那海鲜呢？", "conversation_id": "c-llm" }),
        )
        .await;
    let events = follow["events"].as_array().unwrap();
    let analyzed = find(events, "query_analyzed");
    assert_eq!(analyzed["rewrite_method"], "llm", "{analyzed}");
    assert_eq!(analyzed["rewritten_from"], "那海鲜呢？");
    assert_eq!(
        find(events, "context_assembled")["sources"][0]["passage"]["title"],
        "海鲜怎么保存？"
    );
    let answered = find(events, "answered");
    assert_ne!(
        answered["generator"], "extractive",
        "the configured LLM answered: {answered}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_tests_make_a_real_request_to_the_llm_and_the_reranker() {
    let post = |server: &common::Server, path: &'static str| {
        let (url, key) = (server.api(path), server.admin_key.clone());
        let client = server.client.clone();
        async move {
            let res = client.post(url).bearer_auth(key).send().await.unwrap();
            assert_eq!(res.status().as_u16(), 200);
            res.json::<Value>().await.unwrap()
        }
    };
    // Nothing configured: said plainly, not an error.
    let server = start(Limits::default(), None).await;
    let t = post(&server, "/system/test-llm").await;
    assert_eq!(t["ok"], false);
    assert!(
        t["detail"]
            .as_str()
            .unwrap()
            .contains("no LLM is configured"),
        "{t}"
    );
    let t = post(&server, "/system/test-reranker").await;
    assert_eq!(t["ok"], false);
    assert!(
        t["detail"]
            .as_str()
            .unwrap()
            .contains("no reranker is configured"),
        "{t}"
    );
    // A tenant key may not spend the provider's money.
    let key = server.tenant("acme").await;
    let res = server
        .client
        .post(server.api("/system/test-llm"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);

    // Working providers: the stand-ins see the request.
    let asked = Arc::new(AtomicBool::new(false));
    let seen = asked.clone();
    let llm = stand_in(Duration::ZERO, move |body| {
        seen.store(body.contains("Reply with OK"), std::sync::atomic::Ordering::SeqCst);
        let sse = "data: {\"model\":\"stand-in-7b\",\"choices\":[{\"delta\":{\"content\":\"OK\"}}]}\n\n\
                   data: {\"model\":\"stand-in-7b\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
        (200, "text/event-stream", sse.to_string())
    })
    .await;
    let rerank = stand_in(Duration::ZERO, |body| {
        // Scores by whether the document mentions refunds.
        let req: Value = serde_json::from_str(body).unwrap();
        let results: Vec<Value> = req["documents"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, d)| json!({ "index": i, "relevance_score": if d.as_str().unwrap().contains("Refund") { 0.9 } else { 0.1 } }))
            .collect();
        (200, "application/json", json!({ "results": results }).to_string())
    })
    .await;
    let chat = rag_models::OpenAiChat::new(rag_models::ChatConfig {
        base_url: llm,
        model: "stand-in".into(),
        ..rag_models::ChatConfig::default()
    })
    .unwrap();
    let server = start_full(
        Limits::default(),
        Some(http_reranker(rerank)),
        Some(Arc::new(chat)),
    )
    .await;
    let t = post(&server, "/system/test-llm").await;
    assert_eq!(t["ok"], true, "{t}");
    assert!(t["detail"].as_str().unwrap().contains("OK"), "{t}");
    assert!(
        asked.load(std::sync::atomic::Ordering::SeqCst),
        "the LLM received the test prompt"
    );
    let t = post(&server, "/system/test-reranker").await;
    assert_eq!(t["ok"], true, "{t}");

    // Broken providers: the failure is reported with its reason, the server keeps serving.
    let llm = stand_in(Duration::ZERO, |_| {
        (
            401,
            "application/json",
            "{\"error\":{\"message\":\"invalid api key\"}}".into(),
        )
    })
    .await;
    let rerank = stand_in(Duration::ZERO, |_| {
        (500, "application/json", "{\"error\":\"boom\"}".into())
    })
    .await;
    let chat = rag_models::OpenAiChat::new(rag_models::ChatConfig {
        base_url: llm,
        model: "stand-in".into(),
        max_retries: 0,
        ..rag_models::ChatConfig::default()
    })
    .unwrap();
    let server = start_full(
        Limits::default(),
        Some(http_reranker(rerank)),
        Some(Arc::new(chat)),
    )
    .await;
    let t = post(&server, "/system/test-llm").await;
    assert_eq!(t["ok"], false, "{t}");
    assert!(t["detail"].as_str().unwrap().contains("401"), "{t}");
    let t = post(&server, "/system/test-reranker").await;
    assert_eq!(t["ok"], false, "{t}");
    let (s, _) = server.get("/kbs", &server.admin_key).await;
    assert_eq!(s, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_are_listed_shown_and_forgotten() {
    let server = start(Limits::default(), None).await;
    let key = seeded(&server).await;
    for (q, conv) in [
        ("肉类怎么保存？", "c-1"),
        ("那海鲜呢？", "c-1"),
        ("怎么申请退款？", "c-2"),
    ] {
        let (s, _) = server
            .post(
                "/kbs/shop/query/sync",
                &key,
                json!({ "query": q, "conversation_id": conv }),
            )
            .await;
        assert_eq!(s, 200);
    }
    let (s, list) = server.get("/kbs/shop/conversations", &key).await;
    assert_eq!(s, 200);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c-2", "c-1"], "latest activity first");
    assert_eq!(list[1]["turns"], 2);
    assert_eq!(list[1]["first_query"], "肉类怎么保存？");
    let (s, conv) = server.get("/kbs/shop/conversations/c-1", &key).await;
    assert_eq!(s, 200);
    let turns = conv["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1]["query"], "那海鲜呢？");
    assert!(
        turns[1]["rewritten_query"]
            .as_str()
            .is_some_and(|q| q.contains("海鲜")),
        "{conv}"
    );
    assert!(turns[1]["answer"].as_str().is_some());
    let res = server
        .client
        .delete(server.api("/kbs/shop/conversations/c-1"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    let (s, _) = server.get("/kbs/shop/conversations/c-1", &key).await;
    assert_eq!(s, 404);
    // A question sent with the forgotten id starts afresh (nothing to rewrite from).
    let (_, again) = server
        .post(
            "/kbs/shop/query/sync",
            &key,
            json!({ "query": "那海鲜呢？", "conversation_id": "c-1" }),
        )
        .await;
    let analyzed = find(again["events"].as_array().unwrap(), "query_analyzed");
    assert!(analyzed["rewritten_from"].is_null(), "{analyzed}");
}
