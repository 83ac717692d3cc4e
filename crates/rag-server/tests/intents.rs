//! Intent routes against a real server on loopback, with stand-in webhooks
//! the test controls: a matched question is answered by its webhook (the
//! `routed` event, no recall), an unmatched one by the knowledge base, a
//! failing or slow webhook falls back to the knowledge base, and only an
//! admin key may point a webhook at loopback.

mod common;

use common::{stand_in, start_with};
use rag_server::Limits;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const FAQS: &str = r#"{"question":"怎么申请退款？","answer":"在订单页点击申请退款，三个工作日内原路退回。"}
{"question":"配送要多久？","answer":"同城配送一般两小时内送达。"}
"#;

fn intents(webhook: &str, timeout_ms: u64) -> Value {
    json!([{
        "name": "order_status",
        "examples": ["我的订单到哪了", "查一下我的物流进度", "where is my order"],
        "webhook": webhook,
        "timeout_ms": timeout_ms
    }])
}

fn events_of<'a>(body: &'a Value, kind: &str) -> Vec<&'a Value> {
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

async fn ask(server: &common::Server, key: &str, q: &str) -> Value {
    let (s, body) = server
        .post("/kbs/shop/query/sync", key, json!({ "query": q }))
        .await;
    assert_eq!(s, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matched_question_is_answered_by_its_webhook_and_others_by_the_knowledge_base() {
    let server = start_with(Limits::default(), |c| {
        c.webhook = Some(Arc::new(rag_models::HttpWebhook::new()));
    })
    .await;
    // Admin keys are global and act in the default tenant; `key` is a
    // read-write key of that tenant, `other` one of another tenant.
    let admin = server.admin_key.clone();
    let key = server.key_for("default", None).await;
    let other = server.tenant("beta").await;
    let (s, b) = server.post("/kbs", &key, json!({ "name": "shop" })).await;
    assert_eq!(s, 201, "{b}");
    let text = server
        .upload("shop", &key, "faq.jsonl", FAQS.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");

    let calls = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = calls.clone();
    let hook = stand_in(Duration::ZERO, move |body| {
        seen.lock().unwrap().push(serde_json::from_str(body).unwrap_or(Value::Null));
        (
            200,
            "application/json",
            json!({ "answer": "订单 123 已发货，预计明天送达。", "sources": [{ "title": "订单 123", "url": "https://shop.example/orders/123" }] }).to_string(),
        )
    })
    .await;

    // A read-write key may not point a webhook at loopback; an admin key may.
    let (s, e) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/intents",
            &key,
            Some(intents(&hook, 3000)),
        )
        .await;
    assert_eq!((s, e["code"].as_str()), (403, Some("forbidden")), "{e}");
    let mut sneaky = intents(&hook, 3000);
    sneaky[0]["private_ok"] = json!(true);
    let (s, _) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/intents",
            &key,
            Some(sneaky),
        )
        .await;
    assert_eq!(s, 403, "a body cannot grant itself private_ok");
    let (s, saved) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/intents",
            &admin,
            Some(intents(&hook, 3000)),
        )
        .await;
    assert_eq!(s, 200, "{saved}");
    assert_eq!(saved[0]["private_ok"], true, "{saved}");
    assert_eq!(saved[0]["threshold"], 0.7, "{saved}");
    let (_, listed) = server.get("/kbs/shop/intents", &key).await;
    assert_eq!(listed, saved);
    let (s, _) = server.get("/kbs/shop/intents", &other).await;
    assert_eq!(s, 404, "another tenant has no such knowledge base");
    // The other settings were kept.
    let (_, kb) = server.get("/kbs/shop", &key).await;
    assert!(kb["settings"]["retrieval"].is_object(), "{kb}");
    // A read-write key saving the whole settings back (as the settings and
    // eval pages do) keeps the admin's intent as it was.
    let (s, after) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/settings",
            &key,
            Some(kb["settings"].clone()),
        )
        .await;
    assert_eq!(s, 200, "{after}");
    assert_eq!(
        after["settings"]["intents"][0]["private_ok"], true,
        "{after}"
    );
    // …but may not change it.
    let mut changed = kb["settings"].clone();
    changed["intents"][0]["timeout_ms"] = json!(1000);
    let (s, _) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/settings",
            &key,
            Some(changed),
        )
        .await;
    assert_eq!(s, 403);

    // Matched: the webhook answers, nothing is recalled.
    let body = ask(&server, &key, "我的订单到哪了？").await;
    let routed = events_of(&body, "routed");
    assert_eq!(routed.len(), 1, "{body}");
    let r = routed[0];
    assert_eq!(
        (r["intent"].as_str(), r["answered"].as_bool()),
        (Some("order_status"), Some(true)),
        "{r}"
    );
    assert!(r["score"].as_f64().unwrap() >= 0.7, "{r}");
    assert_eq!(r["example"], "我的订单到哪了");
    assert_eq!(r["sources"][0]["title"], "订单 123");
    assert!(r["webhook_ms"].as_f64().unwrap() >= 0.0);
    assert!(events_of(&body, "recall").is_empty(), "{body}");
    let answered = events_of(&body, "answered");
    assert_eq!(answered[0]["text"], "订单 123 已发货，预计明天送达。");
    assert_eq!(answered[0]["generator"], "intent:order_status");
    assert_eq!(events_of(&body, "done").len(), 1);
    {
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["intent"], "order_status");
        assert_eq!(calls[0]["question"], "我的订单到哪了？");
        assert_eq!(calls[0]["kb"], "shop");
        assert_eq!(calls[0]["tenant"], "default");
    }
    // The query log has the routed answer.
    let (_, log) = server.get("/kbs/shop/log", &key).await;
    assert!(log.to_string().contains("订单 123 已发货"), "{log}");

    // Not matched: the knowledge base answers and the webhook is not called.
    let body = ask(&server, &key, "怎么申请退款").await;
    assert!(events_of(&body, "routed").is_empty(), "{body}");
    assert!(!events_of(&body, "recall").is_empty());
    let timings = &events_of(&body, "done")[0]["timings"];
    assert!(
        timings
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["stage"] == "intents"),
        "the matching's time is reported: {timings}"
    );
    assert!(body.to_string().contains("原路退回"), "{body}");
    assert_eq!(calls.lock().unwrap().len(), 1);

    // /retrieve never routes (it answers nothing).
    let (s, r) = server
        .post(
            "/kbs/shop/retrieve",
            &key,
            json!({ "query": "我的订单到哪了" }),
        )
        .await;
    assert_eq!(s, 200);
    assert!(events_of(&r, "routed").is_empty(), "{r}");

    // A failing webhook: routed, not answered, and the knowledge base answers.
    let broken = stand_in(Duration::ZERO, |_| (500, "text/plain", "down".into())).await;
    let (s, _) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/intents",
            &admin,
            Some(intents(&broken, 3000)),
        )
        .await;
    assert_eq!(s, 200);
    let body = ask(&server, &key, "我的订单到哪了").await;
    let r = events_of(&body, "routed")[0];
    assert_eq!(r["answered"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("HTTP 500"), "{r}");
    assert!(!events_of(&body, "recall").is_empty(), "{body}");
    let done = events_of(&body, "done")[0];
    assert!(
        done["warnings"].to_string().contains("webhook failed"),
        "{done}"
    );
    assert_ne!(
        events_of(&body, "answered")[0]["generator"],
        "intent:order_status"
    );

    // A slow webhook: cut at the intent's timeout, then the knowledge base.
    let slow = stand_in(Duration::from_secs(5), |_| {
        (
            200,
            "application/json",
            json!({ "answer": "late" }).to_string(),
        )
    })
    .await;
    let (s, _) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/shop/intents",
            &admin,
            Some(intents(&slow, 200)),
        )
        .await;
    assert_eq!(s, 200);
    let body = ask(&server, &key, "我的订单到哪了").await;
    let r = events_of(&body, "routed")[0];
    assert_eq!(r["answered"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("200 ms"), "{r}");
    // The webhook's late reply is nowhere in the answer.
    let answered = events_of(&body, "answered")[0];
    assert!(!answered["text"].to_string().contains("late"), "{body}");
    assert_ne!(answered["generator"], "intent:order_status");

    // Bad lists are refused with the error table's codes.
    for (bad, code) in [
        (
            json!([{ "name": "x", "examples": ["q"], "webhook": "https://t.example/h", "threshold": 2 }]),
            "invalid_param",
        ),
        (
            json!([{ "name": "x", "examples": [], "webhook": "https://t.example/h" }]),
            "invalid_param",
        ),
        (
            json!([{ "name": "x", "examples": ["q"], "webhook": "ftp://t.example/h" }]),
            "invalid_param",
        ),
    ] {
        let (s, e) = server
            .call(
                reqwest::Method::PUT,
                "/kbs/shop/intents",
                &key,
                Some(bad.clone()),
            )
            .await;
        assert_eq!((s, e["code"].as_str()), (400, Some(code)), "{bad} → {e}");
    }
}
