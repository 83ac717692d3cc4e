//! A server's first index build of a knowledge base without an index file:
//! a query waits for it at most `server.first_build_wait_ms`, then gets a
//! clear `index_building` (503, `retry-after`) while the build goes on, and
//! the server keeps serving. The build is held by the `index.build`
//! failpoint, so nothing here depends on timing but the wait itself.

mod common;

use common::served::{demo_without_vectors, Served};

/// The demo, lexical only, with its index files removed: the next server
/// must build from the store.
fn demo_without_index_files() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, data) = demo_without_vectors();
    let _ = std::fs::remove_dir_all(data.join("index"));
    (dir, data)
}

const QUERY: &str = r#"{"query": "怎么退款"}"#;

#[test]
fn a_first_build_that_takes_long_answers_index_building_and_the_server_keeps_serving() {
    let (_dir, data) = demo_without_index_files();
    let mut server = Served::start(
        &data,
        &[
            ("RAGSCOPE_FAILPOINTS", "index.build=stall"),
            ("RAGSCOPE_SERVER__FIRST_BUILD_WAIT_MS", "200"),
        ],
    );
    for _ in 0..2 {
        // A route with one JSON answer: 503 with the code and a retry hint.
        let (status, head, body) =
            server.request_with_headers("GET", "/api/v1/kbs/demo/analytics", "text/plain", b"");
        assert_eq!(status, 503, "{body}");
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["code"], "index_building", "{body}");
        assert!(
            error["message"].as_str().unwrap().contains("demo"),
            "{body}"
        );
        assert!(head.contains("retry-after: 1"), "{head}");
        // The query routes end their events with the same code.
        let (status, body) = server.request(
            "POST",
            "/api/v1/kbs/demo/query/sync",
            "application/json",
            QUERY.as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let out: serde_json::Value = serde_json::from_str(&body).unwrap();
        let last = out["events"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["type"], "error", "{body}");
        assert_eq!(last["code"], "index_building", "{body}");
    }
    let (status, sse) = server.request(
        "POST",
        "/api/v1/kbs/demo/query",
        "application/json",
        QUERY.as_bytes(),
    );
    assert_eq!(status, 200, "{sse}");
    assert!(sse.contains("index_building"), "{sse}");
    // What does not need the index is served meanwhile.
    let (status, body) = server.request("GET", "/api/v1/kbs/demo/documents", "text/plain", b"");
    assert_eq!(status, 200, "{body}");
    let (status, _) = server.request("GET", "/healthz", "text/plain", b"");
    assert_eq!(status, 200);
    assert!(server.alive());
    drop(server);

    // Without the stall the demo's build fits in the wait: answered as usual.
    let server = Served::start(&data, &[("RAGSCOPE_SERVER__FIRST_BUILD_WAIT_MS", "60000")]);
    server.query_ok("demo", "怎么退款");
}
