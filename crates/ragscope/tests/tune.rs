//! `ragscope tune` end to end: a small knowledge base whose settings are
//! deliberately poor is tuned on a golden set; the gain is saved only when
//! it clears the margin, and a golden set too small for cross-validation
//! is refused.

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

fn tune(data: &Path, golden: &Path, extra: &[&str]) -> Run {
    let mut c = cmd(data);
    c.args(["--embedder", "none", "tune", "--kb", "faq", "--golden"])
        .arg(golden)
        .args(extra);
    ok(c)
}

#[test]
fn tune_saves_a_clear_gain_and_refuses_a_small_one() {
    let dir = tempfile::tempdir().unwrap();
    let (data, golden) = poor_kb(dir.path());

    // A margin no gain can reach: reported, not saved.
    let r = tune(&data, &golden, &["--min-gain", "2"]);
    for metric in ["nDCG@10", "Recall@10", "MRR@10"] {
        assert!(r.stdout.contains(metric), "{}", r.stdout);
    }
    assert!(r.stdout.contains("before") && r.stdout.contains("after"));
    assert!(r.stdout.contains("not saved: "), "{}", r.stdout);
    assert!(r.stdout.contains("below --min-gain"), "{}", r.stdout);

    // The default margin: the poor settings lose clearly (the only weighted
    // path finds no FAQ entry, so no path's order counts), so the choice is saved.
    let r = tune(&data, &golden, &[]);
    assert!(
        r.stdout
            .contains("saved to the settings of knowledge base faq"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("not saved"), "{}", r.stdout);

    // Tuned again from the saved settings: nothing clearly better is left.
    let r = tune(&data, &golden, &[]);
    assert!(r.stdout.contains("not saved: "), "{}", r.stdout);
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
