//! `ragscope query … --why-not ID` through the real binary, on the demo.

mod common;

use common::*;

/// `query --kb demo 怎么退款 --why-not ID` plus `extra`.
fn why_not(data: &std::path::Path, id: &str, extra: &[&str]) -> std::process::Command {
    let mut c = cmd(data);
    c.args([
        "--embedder",
        "none",
        "query",
        "--kb",
        "demo",
        "怎么退款",
        "--why-not",
        id,
    ])
    .args(extra);
    c
}

/// A passage id as hits write it in JSON (`{kind, id}`), as the CLI takes it.
fn id_text(id: &serde_json::Value) -> String {
    format!(
        "{}:{}",
        id["kind"].as_str().expect("a kind"),
        id["id"].as_str().expect("an id")
    )
}

/// The id of the best fused hit of a query, as hits name it.
fn top_hit(data: &std::path::Path, query: &str) -> String {
    let events = query_events(data, "demo", query, &["--embedder", "none"]);
    let fused = events
        .iter()
        .find(|e| e["type"] == "fused")
        .expect("a fused event");
    id_text(&fused["hits"][0]["id"])
}

#[test]
fn why_not_explains_a_returned_entry_and_refuses_an_unknown_one() {
    let dir = demo_data();
    let data = data_of(&dir);
    let id = top_hit(&data, "怎么退款");

    let r = ok(why_not(&data, &id, &["--json"]));
    let w: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("one JSON object");
    assert_eq!(id_text(&w["id"]), id);
    assert_eq!(w["fused_rank"], 1, "{w}");
    let bm25 = w["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "bm25")
        .expect("a bm25 verdict");
    assert_eq!(bm25["status"], "returned", "{bm25}");

    let r = ok(why_not(&data, &id, &[]));
    assert!(
        r.stdout.starts_with(&format!("why not {id}")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("bm25"), "{}", r.stdout);
    assert!(r.stdout.contains("fused ("), "{}", r.stdout);

    let r = run(why_not(
        &data,
        "faq:01a23b33-3e08-7086-bfc5-a1d27c3525dc",
        &[],
    ));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
}
