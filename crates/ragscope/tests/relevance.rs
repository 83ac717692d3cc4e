//! Relevance regression on the shared evaluation sets (read from ../shared/eval).
//! Thresholds are the acceptance figures: SciFact nDCG@10 ≥ 0.68 (BM25 in the
//! BEIR paper: 0.665) and CMRC 2018 at least the character-bigram BM25
//! baseline measured with bm25s (nDCG@10 0.98438, Recall@10 0.99814).

mod common;
use common::*;

fn eval(dataset: &str, corpus: &str, queries: &str, qrels: &str) -> serde_json::Value {
    let d = eval_dir().join(dataset);
    assert!(
        d.exists(),
        "evaluation data missing at {} (set RAGSCOPE_EVAL_DIR)",
        d.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let mut c = cmd(&dir.path().join("data"));
    c.args(["eval", "--mode", "lexical", "--json", "--corpus"])
        .arg(d.join(corpus))
        .arg("--queries")
        .arg(d.join(queries))
        .arg("--qrels")
        .arg(d.join(qrels));
    let r = ok(c);
    serde_json::from_str(&r.stdout).unwrap()
}

#[test]
fn scifact_lexical_quality() {
    let m = eval("scifact", "corpus.jsonl", "queries.jsonl", "qrels/test.tsv");
    assert_eq!(m["queries"], 300);
    assert_eq!(m["mode"], "lexical");
    let ndcg = m["ndcg@10"].as_f64().unwrap();
    assert!(ndcg >= 0.68, "SciFact nDCG@10 {ndcg}");
    assert!(m["recall@100"].as_f64().unwrap() >= 0.90, "{m}");
}

#[test]
fn cmrc_lexical_quality_beats_character_bigrams() {
    let m = eval(
        "cmrc2018",
        "corpus.jsonl",
        "queries.jsonl",
        "qrels/test.tsv",
    );
    assert_eq!(m["queries"], 3219);
    let ndcg = m["ndcg@10"].as_f64().unwrap();
    let r10 = m["recall@10"].as_f64().unwrap();
    assert!(ndcg >= 0.98438, "CMRC nDCG@10 {ndcg}");
    assert!(r10 >= 0.99814, "CMRC Recall@10 {r10}");
}
