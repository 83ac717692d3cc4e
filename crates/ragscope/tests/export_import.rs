//! `ragscope export` and `ragscope import`: a knowledge base moves to another
//! data directory (or, with new ids, is copied inside one) and answers the
//! same questions the same way.

mod common;
use common::*;

fn fused_titles(data: &std::path::Path, kb: &str, q: &str) -> Vec<String> {
    let events = query_events(data, kb, q, &[]);
    let fused = events
        .iter()
        .find(|e| e["type"] == "fused")
        .expect("fused event");
    let ids: Vec<String> = fused["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].to_string())
        .collect();
    // Titles through the context sources keep the comparison readable; ids must match too.
    let mut out: Vec<String> = sources(&events).into_iter().map(|(t, _)| t).collect();
    out.extend(ids);
    out
}

#[test]
fn a_knowledge_base_moves_to_another_store_and_answers_the_same() {
    let dir = demo_data();
    let data = data_of(&dir);
    let file = dir.path().join("demo.jsonl");
    let mut c = cmd(&data);
    c.args(["export", "--kb", "demo", "--out"]).arg(&file);
    let r = ok(c);
    assert!(r.stderr.contains("\"documents\":"), "{}", r.stderr);
    let text = std::fs::read_to_string(&file).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["type"].as_str(), first["format"].as_str()),
        (Some("header"), Some("ragscope-kb"))
    );

    let other = dir.path().join("other-data");
    let mut c = cmd(&other);
    c.arg("import").arg(&file);
    let r = ok(c);
    assert!(r.stdout.contains("imported demo"), "{}", r.stdout);
    for q in ["怎么申请退款", "How do I reset my password?", "營業時間"] {
        assert_eq!(
            fused_titles(&other, "demo", q),
            fused_titles(&data, "demo", q),
            "{q}"
        );
    }
    // The same export again in the same store: the name is taken.
    let mut c = cmd(&other);
    c.arg("import").arg(&file);
    let r = run(c);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // A copy under another name with fresh ids answers the same, with other ids.
    let mut c = cmd(&other);
    c.arg("import")
        .arg(&file)
        .args(["--as", "copy", "--new-ids"]);
    ok(c);
    let q = "怎么申请退款";
    let (orig, copy) = (
        fused_titles(&other, "demo", q),
        fused_titles(&other, "copy", q),
    );
    let n = sources(&query_events(&other, "copy", q, &[])).len();
    assert_eq!(orig[..n], copy[..n], "same passages");
    assert_ne!(orig[n..], copy[n..], "other ids");
    // A file that is not an export is refused clearly and changes nothing.
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, "{\"type\":\"faq\"}\n").unwrap();
    let mut c = cmd(&other);
    c.arg("import").arg(&junk);
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("not an export line") || r.stderr.contains("header"),
        "{}",
        r.stderr
    );
    // A broken line after some were written: the import is undone.
    let broken = dir.path().join("broken.jsonl");
    let mut head: String = text.lines().take(3).collect::<Vec<_>>().join("\n");
    head.push_str("\n{\"type\":\"document\",\"document\":7}\n");
    std::fs::write(&broken, head).unwrap();
    let mut c = cmd(&other);
    c.arg("import")
        .arg(&broken)
        .args(["--as", "half", "--new-ids"]);
    let r = run(c);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("line 4") && r.stderr.contains("not an export line"),
        "{}",
        r.stderr
    );
    let mut c = cmd(&other);
    c.args(["kb", "list"]);
    let listed = ok(c).stdout;
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(!listed.contains("half"), "{listed}");
}
