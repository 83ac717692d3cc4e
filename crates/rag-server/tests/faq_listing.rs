//! `GET /api/v1/kbs/{kb}/faqs` against a real server on loopback: the FAQ
//! listing a page at a time across writes between pages, its status and
//! text filters with their counts, bad parameters, and scope.

mod common;

use common::start;
use rag_server::Limits;
use serde_json::{json, Value};

async fn create(server: &common::Server, key: &str, question: &str, status: &str) -> String {
    let body = json!({ "question": question, "answer": format!("answer to {question}"), "status": status });
    let (s, b) = server.post("/kbs/desk/faqs", key, body).await;
    assert_eq!(s, 201, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

/// Every page of `query` from the first, with the totals each page gave.
async fn all_pages(server: &common::Server, key: &str, query: &str) -> (Vec<Value>, Vec<u64>) {
    let (mut rows, mut totals, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
    for _ in 0..100 {
        let path = match &cursor {
            None => format!("/kbs/desk/faqs?{query}"),
            Some(c) => format!("/kbs/desk/faqs?{query}&cursor={c}"),
        };
        let (s, page) = server.get(&path, key).await;
        assert_eq!(s, 200, "{path}: {page}");
        rows.extend(page["faqs"].as_array().unwrap().iter().cloned());
        totals.push(page["total"].as_u64().unwrap());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (rows, totals),
        }
    }
    panic!("the pages of {query} do not end");
}

fn questions(rows: &[Value]) -> Vec<&str> {
    rows.iter()
        .map(|r| r["question"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faq_entries_are_listed_a_page_at_a_time_with_filters() {
    let server = start(Limits::default(), None).await;
    let key = server.tenant("acme").await;
    let (s, b) = server.post("/kbs", &key, json!({ "name": "desk" })).await;
    assert_eq!(s, 201, "{b}");
    let mut ids = Vec::new();
    for i in 0..7 {
        let status = if i % 3 == 0 { "pending" } else { "approved" };
        ids.push(create(&server, &key, &format!("Refund question {i}"), status).await);
    }

    // Three at a time; an entry created between pages comes at the end, one
    // deleted before it is listed does not come.
    let (mut seen, mut cursor, mut pages) = (Vec::<Value>::new(), None::<String>, 0);
    loop {
        let path = match &cursor {
            None => "/kbs/desk/faqs?limit=3".to_owned(),
            Some(c) => format!("/kbs/desk/faqs?limit=3&cursor={c}"),
        };
        let (s, page) = server.get(&path, &key).await;
        assert_eq!(s, 200, "{page}");
        assert_eq!(page["limit"], 3);
        assert!(page["faqs"].as_array().unwrap().len() <= 3, "{page}");
        seen.extend(page["faqs"].as_array().unwrap().iter().cloned());
        pages += 1;
        if pages == 1 {
            assert_eq!(page["total"], 7);
            let late = create(&server, &key, "Late question", "approved").await;
            ids.push(late);
        }
        if pages == 2 {
            assert_eq!(page["total"], 8);
            let last = ids.last().unwrap();
            let res = server
                .client
                .delete(server.api(&format!("/kbs/desk/faqs/{last}")))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status().as_u16(), 204);
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert_eq!(page["total"], 7);
                break;
            }
        }
    }
    let listed = questions(&seen);
    let want: Vec<String> = (0..7).map(|i| format!("Refund question {i}")).collect();
    assert_eq!(listed, want, "each once, oldest first");

    // One status: only its entries, counted apart.
    let (pending, totals) = all_pages(&server, &key, "limit=1&status=pending").await;
    assert_eq!(
        questions(&pending),
        [
            "Refund question 0",
            "Refund question 3",
            "Refund question 6"
        ]
    );
    assert!(totals.iter().all(|t| *t == 3), "{totals:?}");
    let (approved, _) = all_pages(&server, &key, "limit=2&status=approved").await;
    assert_eq!(approved.len(), 4);
    assert!(approved.iter().all(|r| r["status"] == "approved"));
    let (none, totals) = all_pages(&server, &key, "status=disabled").await;
    assert!(none.is_empty() && totals == [0], "{totals:?}");

    // A text, in either case, in questions, answers or tags.
    let (s, b) = server
        .post(
            "/kbs/desk/faqs",
            &key,
            json!({ "question": "配送要多久？", "answer": "同城两小时。", "tags": ["Logistics"] }),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let (found, totals) = all_pages(&server, &key, "limit=2&contains=QUESTION%205").await;
    assert_eq!(questions(&found), ["Refund question 5"]);
    assert!(
        totals.iter().all(|t| *t == 8),
        "the count is the status's: {totals:?}"
    );
    let (found, _) = all_pages(&server, &key, "contains=%E4%B8%A4%E5%B0%8F%E6%97%B6").await;
    assert_eq!(questions(&found), ["配送要多久？"]);
    let (found, _) = all_pages(&server, &key, "contains=logist").await;
    assert_eq!(questions(&found), ["配送要多久？"]);
    let (found, _) = all_pages(&server, &key, "limit=1&status=pending&contains=question").await;
    assert_eq!(found.len(), 3);
    let (found, _) = all_pages(&server, &key, "contains=nowhere").await;
    assert!(found.is_empty());

    // Absurd parameters: 400 invalid_param naming the parameter.
    let long = "x".repeat(201);
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=abc", "limit"),
        ("cursor=nope", "cursor"),
        ("status=archived", "status"),
        (&format!("contains={long}") as &str, "contains"),
        ("contains=a%00b", "contains"),
    ] {
        let (s, e) = server.get(&format!("/kbs/desk/faqs?{query}"), &key).await;
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

    // Another tenant's key does not find the knowledge base.
    let other = server.tenant("globex").await;
    let (s, e) = server.get("/kbs/desk/faqs", &other).await;
    assert_eq!(s, 404, "{e}");
}
