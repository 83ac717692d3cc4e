//! `POST /kbs/{kb}/eval` against a real server: per-question metrics under
//! two settings checked against rankings read independently from
//! `/retrieve`, the limits, tenant and owner scope, and no query-log row.

mod common;

use common::start;
use rag_server::Limits;
use serde_json::{json, Value};
use std::collections::HashMap;

const DOCS: &[(&str, &str)] = &[
    (
        "alpha.md",
        "# Refund policy\n\nA refund is paid within five days. Every refund request needs the order number; the refund goes back to the card.\n",
    ),
    (
        "beta.md",
        "# Returns\n\nReturning a desk is free, and the refund follows once the desk is back in our warehouse after the carrier has scanned it.\n",
    ),
    (
        "gamma.md",
        "# Shipping\n\nShipping takes two days inside the country and five days abroad. A refund of the shipping costs is possible when a desk arrives damaged, as the carrier's insurance pays for it.\n",
    ),
    (
        "delta.md",
        "# Warranty\n\nThe frame carries a five-year warranty; the motor two years.\n",
    ),
];

/// The A and B settings of the comparison: BM25 alone, B keeps one hit.
/// A's rerank stage keeps one hit too: the rest of the fused ranking is
/// still scored after it.
fn side_a() -> Value {
    json!({ "paths": ["bm25"], "rerank": false, "rerank_top_k": 1 })
}
fn side_b() -> Value {
    json!({ "paths": ["bm25"], "rerank": false, "top_k": 1 })
}

async fn seed(server: &common::Server, key: &str) {
    let (s, b) = server.post("/kbs", key, json!({ "name": "desk" })).await;
    assert_eq!(s, 201, "{b}");
    for (name, text) in DOCS {
        let out = server
            .upload("desk", key, name, text.as_bytes().to_vec())
            .await;
        assert!(out.contains("event: indexed"), "{out}");
    }
}

/// The fused ranking of `/retrieve` under `settings`: (passage id as
/// `kind:uuid`, its source), best first.
async fn ranking(
    server: &common::Server,
    key: &str,
    query: &str,
    settings: &Value,
) -> Vec<(String, Option<String>)> {
    let mut body = settings.clone();
    body["query"] = json!(query);
    let (s, r) = server.post("/kbs/desk/retrieve", key, body).await;
    assert_eq!(s, 200, "{r}");
    let events = r["events"].as_array().unwrap();
    let mut sources: HashMap<String, Option<String>> = HashMap::new();
    for e in events.iter().filter(|e| e["type"] == "recall") {
        for p in e["passages"].as_array().unwrap() {
            let id = format!(
                "{}:{}",
                p["id"]["kind"].as_str().unwrap(),
                p["id"]["id"].as_str().unwrap()
            );
            sources.insert(id, p["source"].as_str().map(str::to_owned));
        }
    }
    let fused = events.iter().find(|e| e["type"] == "fused").unwrap();
    fused["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let id = format!(
                "{}:{}",
                h["id"]["kind"].as_str().unwrap(),
                h["id"]["id"].as_str().unwrap()
            );
            let source = sources.get(&id).cloned().flatten();
            (id, source)
        })
        .collect()
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

async fn log_rows(server: &common::Server, key: &str) -> usize {
    let (s, rows) = server.get("/kbs/desk/log?limit=1000", key).await;
    assert_eq!(s, 200, "{rows}");
    rows.as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_settings_are_scored_per_question_without_log_rows() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("alpha").await;
    seed(&server, &key).await;

    let ranked = ranking(&server, &key, "refund", &side_a()).await;
    assert!(ranked.len() >= 3, "three documents match: {ranked:?}");
    let top3: Vec<&str> = ranked[..3]
        .iter()
        .map(|(_, s)| s.as_deref().expect("a document chunk has a source"))
        .collect();
    assert!(
        top3[0] != top3[1] && top3[1] != top3[2] && top3[0] != top3[2],
        "one chunk per document: {ranked:?}"
    );
    let logged = log_rows(&server, &key).await;

    // Q1 expects the second hit by id; Q2 the third hit's document by its
    // source and the first hit by its id.
    let golden = json!([
        { "question": "refund", "expected": [ranked[1].0] },
        { "question": "refund", "expected": [top3[2], ranked[0].0] },
    ]);
    let (s, r) = server
        .post(
            "/kbs/desk/eval",
            &key,
            json!({ "golden": golden, "a": side_a(), "b": side_b() }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    let q = r["queries"].as_array().unwrap();
    assert_eq!(q.len(), 2, "{r}");
    let l3 = 3f64.log2();

    // Rank 2 of one expected: nDCG 1/log2(3), MRR 1/2.
    let a1 = &q[0]["a"];
    assert!(close(&a1["ndcg10"], 1.0 / l3), "{a1}");
    assert!(close(&a1["mrr10"], 0.5), "{a1}");
    assert!(close(&a1["recall10"], 1.0), "{a1}");
    assert_eq!(a1["first_rank"], 2, "{a1}");
    let ids: Vec<&str> = ranked.iter().take(10).map(|(id, _)| id.as_str()).collect();
    assert_eq!(a1["hits"], json!(ids), "A's hits are the fused ranking");
    // B keeps one hit: the expected one is gone.
    let b1 = &q[0]["b"];
    assert!(close(&b1["ndcg10"], 0.0), "{b1}");
    assert!(close(&b1["mrr10"], 0.0), "{b1}");
    assert_eq!(b1["first_rank"], Value::Null, "{b1}");
    assert_eq!(b1["hits"], json!([ranked[0].0]), "{b1}");

    // Ranks 1 and 3 of two expected: (1 + 1/2) / (1 + 1/log2(3)).
    let a2 = &q[1]["a"];
    let ideal = 1.0 + 1.0 / l3;
    assert!(close(&a2["ndcg10"], 1.5 / ideal), "{a2}");
    assert!(close(&a2["recall10"], 1.0), "{a2}");
    assert!(close(&a2["mrr10"], 1.0), "{a2}");
    assert_eq!(a2["first_rank"], 1, "{a2}");
    let b2 = &q[1]["b"];
    assert!(close(&b2["ndcg10"], 1.0 / ideal), "{b2}");
    assert!(close(&b2["recall10"], 0.5), "{b2}");
    assert_eq!(q[1]["expected"], json!([top3[2], ranked[0].0]));

    // The means and the settings each side ran with.
    assert!(close(
        &r["a"]["means"]["ndcg10"],
        (1.0 / l3 + 1.5 / ideal) / 2.0
    ));
    assert!(close(&r["b"]["means"]["ndcg10"], (1.0 / ideal) / 2.0));
    assert!(close(&r["b"]["means"]["recall10"], 0.25));
    assert!(close(&r["a"]["means"]["mrr10"], 0.75));
    assert_eq!(r["a"]["settings"]["paths"], json!(["bm25"]));
    assert_eq!(r["a"]["settings"]["fusion"]["top_k"], 10);
    assert_eq!(r["b"]["settings"]["fusion"]["top_k"], 1);
    assert_eq!(r["b"]["settings"]["rerank"], false);

    // Without B: A only.
    let (s, r) = server
        .post(
            "/kbs/desk/eval",
            &key,
            json!({ "golden": [{ "question": "refund", "expected": [ranked[1].0] }] }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["b"], Value::Null);
    assert_eq!(r["queries"][0]["b"], Value::Null);

    assert_eq!(
        log_rows(&server, &key).await,
        logged,
        "an evaluation writes no query-log row"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_scope_are_enforced() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("alpha").await;
    let other = server.tenant("beta").await;
    seed(&server, &key).await;
    let row = json!({ "question": "refund", "expected": ["alpha.md"] });
    let cases = [
        (json!({ "golden": [] }), 400, "invalid_param"),
        (
            json!({ "golden": vec![row.clone(); 501] }),
            400,
            "limit_exceeded",
        ),
        (
            json!({ "golden": [{ "question": "refund", "expected": vec!["x"; 101] }] }),
            400,
            "limit_exceeded",
        ),
        (
            json!({ "golden": [{ "question": "refund", "expected": [] }] }),
            400,
            "invalid_param",
        ),
        (
            json!({ "golden": [row.clone(), { "question": "x".repeat(5000), "expected": ["a"] }] }),
            413,
            "query_too_long",
        ),
        (
            json!({ "golden": [{ "question": "   ", "expected": ["a"] }] }),
            400,
            "empty_query",
        ),
        (
            json!({ "golden": [row.clone()], "b": { "top_k": 201 } }),
            400,
            "limit_exceeded",
        ),
        (
            json!({ "golden": [row.clone()], "a": { "paths": [] } }),
            400,
            "invalid_param",
        ),
        (
            json!({ "golden": [row.clone()], "b": { "weights": { "bm25": -1.0 } } }),
            400,
            "invalid_param",
        ),
        (
            json!({ "golden": [{ "question": "refund", "expected": ["a"], "note": 1 }] }),
            422,
            "invalid_body",
        ),
    ];
    for (body, status, code) in cases {
        let (s, r) = server.post("/kbs/desk/eval", &key, body.clone()).await;
        assert_eq!((s, r["code"].as_str()), (status, Some(code)), "{body}: {r}");
    }
    // 500 questions are within the limit.
    let (s, r) = server
        .post(
            "/kbs/desk/eval",
            &key,
            json!({ "golden": vec![row.clone(); 500] }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["queries"].as_array().unwrap().len(), 500);

    // Another tenant's knowledge base does not exist for beta.
    let (s, r) = server
        .post("/kbs/desk/eval", &other, json!({ "golden": [row.clone()] }))
        .await;
    assert_eq!((s, r["code"].as_str()), (404, Some("unknown_kb")), "{r}");

    // An owner's restricted document ranks for her and for nobody else.
    let (s, b) = server
        .post(
            "/keys",
            &server.admin_key,
            json!({ "tenant": "alpha", "role": "read_write", "owner": "alice" }),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let alice = b["key"].as_str().unwrap().to_owned();
    let out = server
        .upload(
            "desk",
            &alice,
            "private.md",
            b"# Notes\n\nThe zebracode refund of my own desk.\n".to_vec(),
        )
        .await;
    assert!(out.contains("event: indexed"), "{out}");
    let body = json!({ "golden": [{ "question": "zebracode", "expected": ["private.md"] }] });
    let (s, r) = server.post("/kbs/desk/eval", &alice, body.clone()).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["queries"][0]["a"]["first_rank"], 1, "{r}");
    let hers = r["queries"][0]["a"]["hits"][0].clone();
    let (s, r) = server.post("/kbs/desk/eval", &key, body).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["queries"][0]["a"]["first_rank"], Value::Null, "{r}");
    let hits = r["queries"][0]["a"]["hits"].as_array().unwrap();
    assert!(!hits.contains(&hers), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_takes_a_query_slot() {
    let server = start(
        Limits {
            max_concurrent_queries_per_key: 0,
            ..Limits::default()
        },
        None,
    )
    .await;
    let key = server.tenant("alpha").await;
    seed(&server, &key).await;
    let (s, r) = server
        .post(
            "/kbs/desk/eval",
            &key,
            json!({ "golden": [{ "question": "refund", "expected": ["alpha.md"] }] }),
        )
        .await;
    assert_eq!(
        (s, r["code"].as_str()),
        (429, Some("too_many_queries")),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_is_described_in_the_openapi_document() {
    let server = start(Limits::default(), None).await;
    let doc: Value = server
        .client
        .get(format!("{}/api/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let op = &doc["paths"]["/kbs/{kb}/eval"]["post"];
    let mut statuses: Vec<&str> = op["responses"]
        .as_object()
        .expect("the route is documented")
        .keys()
        .map(String::as_str)
        .collect();
    statuses.sort();
    assert_eq!(
        statuses,
        ["200", "400", "401", "403", "404", "413", "422", "429"]
    );
    let body = &doc["components"]["schemas"]["EvalBody"];
    assert_eq!(body["required"], json!(["golden"]), "{body}");
    let report = &doc["components"]["schemas"]["SideScore"];
    for field in ["ndcg10", "recall10", "mrr10", "first_rank", "hits"] {
        assert!(report["properties"].get(field).is_some(), "{report}");
    }
}
