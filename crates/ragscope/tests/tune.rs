//! `ragscope tune` end to end: a golden set too small for cross-validation
//! is refused. (A test that a clear gain is saved and a small one refused
//! is still to come: on the demo FAQ every candidate, even zero weights on
//! the paths that find the entries, ranks each question's entry first.)

mod common;

use common::*;
use std::path::Path;

/// A knowledge base `faq` of the demo's FAQ entries, created under a
/// configuration whose fusion weights leave only the fact path (which
/// finds no FAQ entry), and a golden set of its
/// questions with their entries' source URLs.
fn poor_kb(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = dir.join("data");
    let config = dir.join("poor.toml");
    std::fs::write(
        &config,
        "[retrieval.fusion.weights]\nbm25 = 0.0\nsubstring = 0.0\nsynonym = 0.0\nfact = 1.0\nfuzzy = 0.0\n",
    )
    .unwrap();
    let mut c = cmd(&data);
    c.arg("--config")
        .arg(&config)
        .args(["--embedder", "none", "kb", "create", "faq"]);
    ok(c);
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "ingest", "--kb", "faq"])
        .arg(demo_dir().join("faq.jsonl"));
    ok(c);
    let golden = dir.join("golden.jsonl");
    let text = std::fs::read_to_string(demo_dir().join("faq.jsonl")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .take(30)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            serde_json::json!({"question": v["question"], "expected": [v["source_url"]]})
                .to_string()
        })
        .collect();
    std::fs::write(&golden, lines.join("\n")).unwrap();
    (data, golden)
}

#[test]
fn tune_needs_enough_questions() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = poor_kb(dir.path());
    let small = dir.path().join("small.jsonl");
    std::fs::write(
        &small,
        "{\"question\": \"营业时间\", \"expected\": [\"x\"]}\n",
    )
    .unwrap();
    let mut c = cmd(&data);
    c.args(["--embedder", "none", "tune", "--kb", "faq", "--golden"])
        .arg(&small);
    let r = run(c);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("cross-validation needs"), "{}", r.stderr);
}
