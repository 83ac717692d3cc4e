//! FAQ entries drafted from a document by an LLM, over the HTTP API, with a
//! loopback stand-in LLM the test scripts: valid JSON, invalid JSON and JSON
//! with an entry missing its answer; then an edited draft survives the
//! document's re-sync while the unedited one is replaced.

mod common;

use common::{sse_events, start, start_full};
use rag_server::Limits;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Replies the stand-in gives, in order, and the request bodies it received.
#[derive(Clone, Default)]
struct Script {
    replies: Arc<Mutex<VecDeque<(u16, String)>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Script {
    /// The next reply streams `text` as the LLM's answer.
    fn answer(&self, text: &str) {
        let chars: Vec<char> = text.chars().collect();
        let (a, b) = chars.split_at(chars.len() / 2);
        let mut sse = String::new();
        for part in [a, b] {
            let part: String = part.iter().collect();
            sse.push_str(&format!(
                "data: {}\n\n",
                json!({ "choices": [{ "delta": { "content": part } }] })
            ));
        }
        sse.push_str("data: [DONE]\n\n");
        self.replies.lock().unwrap().push_back((200, sse));
    }
    /// The next reply is an HTTP error.
    fn fail(&self, status: u16) {
        self.replies.lock().unwrap().push_back((
            status,
            "{\"error\":{\"message\":\"upstream exploded\"}}".into(),
        ));
    }
    fn last_request(&self) -> Value {
        self.requests
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the LLM was asked")
    }
    fn asked(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// A loopback chat-completions stand-in answering from `script`.
async fn stand_in(script: Script) -> String {
    common::stand_in(std::time::Duration::ZERO, move |body| {
        script
            .requests
            .lock()
            .unwrap()
            .push(serde_json::from_str(body).unwrap_or(Value::Null));
        let (status, payload) = script
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((500, "{\"error\":\"no reply scripted\"}".into()));
        (
            status,
            if status == 200 {
                "text/event-stream"
            } else {
                "application/json"
            },
            payload,
        )
    })
    .await
}

fn chat(url: String) -> Arc<dyn rag_core::Generator> {
    Arc::new(
        rag_models::OpenAiChat::new(rag_models::ChatConfig {
            base_url: url,
            model: "stand-in".into(),
            max_retries: 0,
            ..rag_models::ChatConfig::default()
        })
        .unwrap(),
    )
}

const GUIDE_V1: &str = "# 升降桌使用指南\n\n升降桌最大承重 120 公斤。电机保修五年，桌面保修两年。\n\n清洁时请用微湿的软布擦拭桌面，不要使用酒精。\n";
const GUIDE_V2: &str = "# 升降桌使用指南\n\n升降桌最大承重 150 公斤。电机保修五年，桌面保修三年。\n\n清洁时请用微湿的软布擦拭桌面，不要使用酒精。\n";

async fn document_id(server: &common::Server, key: &str, kb: &str) -> String {
    let (s, docs) = server.get(&format!("/kbs/{kb}/documents"), key).await;
    assert_eq!(s, 200, "{docs}");
    let docs = docs["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 1, "{docs:?}");
    docs[0]["id"].as_str().unwrap().to_owned()
}

async fn faqs(server: &common::Server, key: &str) -> Vec<Value> {
    let (s, list) = server.get("/kbs/desk/faqs", key).await;
    assert_eq!(s, 200, "{list}");
    list["faqs"].as_array().unwrap().clone()
}

fn questions(list: &[Value]) -> Vec<&str> {
    list.iter()
        .map(|f| f["question"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafts_from_a_stand_in_llm_are_checked_linked_and_survive_resync_only_when_edited() {
    let script = Script::default();
    let server = start_full(
        Limits::default(),
        None,
        Some(chat(stand_in(script.clone()).await)),
    )
    .await;
    let key = server.tenant("acme").await;
    let (s, _) = server.post("/kbs", &key, json!({ "name": "desk" })).await;
    assert_eq!(s, 201);
    let text = server
        .upload("desk", &key, "guide.md", GUIDE_V1.as_bytes().to_vec())
        .await;
    assert!(
        text.contains("event: indexed") && !text.contains("drafted"),
        "no automatic drafting by default: {text}"
    );
    let doc = document_id(&server, &key, "desk").await;
    let drafts = format!("/kbs/desk/documents/{doc}/faq-drafts");

    // (b) Invalid JSON: rejected with the reason, nothing stored.
    script.answer("{\"faqs\": [{\"question\": \"最大承重多少？\", \"answer\": \"120 公斤");
    let (s, body) = server.post(&drafts, &key, json!({})).await;
    assert_eq!(s, 502, "{body}");
    assert_eq!(body["code"], "drafts_rejected", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("not valid JSON"),
        "{body}"
    );
    assert!(faqs(&server, &key).await.is_empty());
    // What the LLM was asked: JSON mode, the rules, the document as quoted data.
    let asked = script.last_request();
    assert_eq!(
        asked["response_format"],
        json!({ "type": "json_object" }),
        "{asked}"
    );
    let system = asked["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("at most 8 question-and-answer pairs")
            && system.contains("Simplified Chinese"),
        "{system}"
    );
    let user = asked["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("<document title=\"升降桌使用指南\">") && user.contains("电机保修五年"),
        "{user}"
    );

    // (c) JSON with an entry missing its answer: that entry is dropped with its reason.
    script.answer(r#"{"faqs": [{"question": "升降桌最大承重多少？", "answer": "最大承重 120 公斤。"}, {"question": "怎么清洁桌面？"}]}"#);
    let (s, body) = server.post(&drafts, &key, json!({})).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["dropped"], json!(["entry 2: no answer"]));
    assert_eq!(
        (body["replaced"].as_u64(), body["language"].as_str()),
        (Some(0), Some("zh"))
    );
    let added = body["added"].as_array().unwrap();
    assert_eq!(questions(added), ["升降桌最大承重多少？"]);
    assert_eq!(
        added[0]["status"], "pending",
        "the knowledge base's default: drafts wait for review"
    );
    assert_eq!(
        (
            added[0]["source_doc"].as_str(),
            added[0]["source_url"].as_str()
        ),
        (Some(doc.as_str()), Some("guide.md"))
    );
    assert_eq!(added[0]["edited"], false);

    // (a) Valid JSON with two pairs: they replace the earlier unedited draft.
    script.answer(
        "```json\n{\"faqs\": [{\"question\": \"电机保修多久？\", \"answer\": \"电机保修五年。\"}, {\"question\": \"桌面保修多久？\", \"answer\": \"桌面保修两年。\"}]}\n```",
    );
    let (s, body) = server.post(&drafts, &key, json!({})).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        (
            body["replaced"].as_u64(),
            body["dropped"].as_array().map(Vec::len)
        ),
        (Some(1), Some(0)),
        "{body}"
    );
    let list = faqs(&server, &key).await;
    assert_eq!(questions(&list), ["电机保修多久？", "桌面保修多久？"]);
    assert!(
        list.iter()
            .all(|f| f["status"] == "pending" && f["source_doc"] == doc.as_str()),
        "{list:?}"
    );

    // A person edits one draft; the other stays as the LLM wrote it.
    let edited_id = list[1]["id"].as_str().unwrap().to_owned();
    let unedited_id = list[0]["id"].as_str().unwrap().to_owned();
    let (s, edited) = server
        .call(
            reqwest::Method::PATCH,
            &format!("/kbs/desk/faqs/{edited_id}"),
            &key,
            Some(json!({ "answer": "桌面保修两年，人工核对过。" })),
        )
        .await;
    assert_eq!((s, &edited["edited"]), (200, &json!(true)), "{edited}");

    // From now on drafts are approved at once and drafted on every ingest.
    let (s, kb) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/desk/settings",
            &key,
            Some(json!({ "drafts": { "status": "approved", "auto": true } })),
        )
        .await;
    assert_eq!(s, 200, "{kb}");
    assert_eq!(
        kb["settings"]["drafts"],
        json!({ "status": "approved", "auto": true, "max_pairs": 8 })
    );

    // Re-sync: the same source with new content.
    script.answer(r#"{"faqs": [{"question": "升降桌最大承重多少？", "answer": "最大承重 150 公斤。"}, {"question": "桌面保修多久？", "answer": "桌面保修三年。"}]}"#);
    let text = server
        .upload("desk", &key, "guide.md", GUIDE_V2.as_bytes().to_vec())
        .await;
    let events = sse_events(&text);
    let drafted = events
        .iter()
        .find(|(e, d)| e == "stage" && d["step"] == "drafted")
        .map(|(_, d)| &d["detail"])
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        (drafted["added"].as_u64(), drafted["replaced"].as_u64()),
        (Some(1), Some(1)),
        "{drafted}"
    );
    assert_eq!(
        drafted["dropped"],
        json!(["entry 2: the knowledge base already has this question"]),
        "{drafted}"
    );
    assert!(drafted.get("error").is_none(), "{drafted}");
    let new_doc = document_id(&server, &key, "desk").await;
    assert_ne!(new_doc, doc, "the document was replaced");
    let user = script.last_request()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        user.contains("150 公斤"),
        "the new version was drafted from: {user}"
    );

    let list = faqs(&server, &key).await;
    let ids: Vec<&str> = list.iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(
        !ids.contains(&unedited_id.as_str()),
        "the unedited draft is gone: {list:?}"
    );
    let kept = list
        .iter()
        .find(|f| f["id"] == edited_id.as_str())
        .expect("the edited draft survives re-sync");
    assert_eq!(
        (kept["answer"].as_str(), kept["source_doc"].as_str()),
        (Some("桌面保修两年，人工核对过。"), Some(new_doc.as_str())),
        "{kept}"
    );
    assert_eq!(
        kept["status"], "pending",
        "a person's draft keeps its review status"
    );
    let fresh = list
        .iter()
        .find(|f| f["question"] == "升降桌最大承重多少？")
        .expect("a new draft from the new version");
    assert_eq!(
        (
            fresh["status"].as_str(),
            fresh["source_doc"].as_str(),
            fresh["edited"].as_bool()
        ),
        (Some("approved"), Some(new_doc.as_str()), Some(false))
    );
    assert_eq!(list.len(), 2, "{list:?}");

    // Approved drafts are searchable at once; the pending one is not.
    let (_, found) = server
        .post(
            "/kbs/desk/retrieve",
            &key,
            json!({ "query": "最大承重多少" }),
        )
        .await;
    assert!(
        found.to_string().contains(fresh["id"].as_str().unwrap()),
        "{found}"
    );
    let (_, found) = server
        .post(
            "/kbs/desk/retrieve",
            &key,
            json!({ "query": "桌面保修多久" }),
        )
        .await;
    assert!(!found.to_string().contains(edited_id.as_str()), "{found}");

    // Deleting the document takes its unedited drafts with it and keeps the edited one, unlinked.
    let res = server
        .client
        .delete(server.api(&format!("/kbs/desk/documents/{new_doc}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    let list = faqs(&server, &key).await;
    assert_eq!(questions(&list), ["桌面保修多久？"]);
    assert!(list[0]["source_doc"].is_null(), "{list:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafting_errors_have_their_status_and_never_fail_an_ingest() {
    // No LLM: 409 no_llm, after the document was found.
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    let (s, _) = server.post("/kbs", &key, json!({ "name": "desk" })).await;
    assert_eq!(s, 201);
    server
        .upload("desk", &key, "guide.md", GUIDE_V1.as_bytes().to_vec())
        .await;
    let doc = document_id(&server, &key, "desk").await;
    let (s, body) = server
        .post(
            &format!("/kbs/desk/documents/{doc}/faq-drafts"),
            &key,
            json!({}),
        )
        .await;
    assert_eq!((s, body["code"].as_str()), (409, Some("no_llm")), "{body}");
    let (s, body) = server
        .post(
            "/kbs/desk/documents/0190a0b0-0000-7000-8000-000000000000/faq-drafts",
            &key,
            json!({}),
        )
        .await;
    assert_eq!(s, 404, "{body}");

    // A failing LLM: 502 llm_failed; during an automatic draft the ingest still succeeds.
    let script = Script::default();
    let server = start_full(
        Limits::default(),
        None,
        Some(chat(stand_in(script.clone()).await)),
    )
    .await;
    let key = server.tenant("acme").await;
    let (s, _) = server
        .post(
            "/kbs",
            &key,
            json!({ "name": "desk", "settings": { "drafts": { "auto": true } } }),
        )
        .await;
    assert_eq!(s, 201);
    script.fail(500);
    let text = server
        .upload("desk", &key, "guide.md", GUIDE_V1.as_bytes().to_vec())
        .await;
    assert!(text.contains("event: indexed"), "{text}");
    let events = sse_events(&text);
    let drafted = &events
        .iter()
        .find(|(e, d)| e == "stage" && d["step"] == "drafted")
        .unwrap_or_else(|| panic!("{text}"))
        .1["detail"];
    assert_eq!(
        (drafted["added"].as_u64(), drafted["error"]["code"].as_str()),
        (Some(0), Some("llm_failed")),
        "{drafted}"
    );
    assert!(
        drafted["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("HTTP 500"),
        "{drafted}"
    );
    let doc = document_id(&server, &key, "desk").await;
    script.fail(500);
    let (s, body) = server
        .post(
            &format!("/kbs/desk/documents/{doc}/faq-drafts"),
            &key,
            json!({}),
        )
        .await;
    assert_eq!(
        (s, body["code"].as_str()),
        (502, Some("llm_failed")),
        "{body}"
    );
    assert_eq!(script.asked(), 2);
    // A read-only key may not draft.
    let (s, ro) = server
        .post(
            "/keys",
            &server.admin_key,
            json!({ "tenant": "acme", "role": "read_only" }),
        )
        .await;
    assert_eq!(s, 201);
    let (s, _) = server
        .post(
            &format!("/kbs/desk/documents/{doc}/faq-drafts"),
            ro["key"].as_str().unwrap(),
            json!({}),
        )
        .await;
    assert_eq!(s, 403);
    assert_eq!(script.asked(), 2, "refused before the LLM was asked");
    // Invalid settings are refused.
    let (s, body) = server
        .call(
            reqwest::Method::PUT,
            "/kbs/desk/settings",
            &key,
            Some(json!({ "drafts": { "max_pairs": 0 } })),
        )
        .await;
    assert_eq!(
        (s, body["code"].as_str()),
        (400, Some("invalid_param")),
        "{body}"
    );
}
