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
    assert_eq!(m["kind"], "doc", "titled passages load as documents");
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

/// `eval --run-out` writes a TREC run whose figures, computed by pytrec_eval
/// (PyPI pytrec_eval-terrier, pinned in scripts/eval/requirements.txt), are
/// the ones `eval` reports. banking77's rows are short questions, so `--kind
/// auto` loads them as FAQ entries.
#[test]
fn run_file_figures_match_pytrec_eval() {
    let python = std::env::var("EVAL_PYTHON").expect(
        "EVAL_PYTHON must name the python of scripts/eval/setup-python.sh (scripts/test sets it)",
    );
    let d = eval_dir().join("banking77");
    assert!(d.exists(), "evaluation data missing at {}", d.display());
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.txt");
    let mut c = cmd(&dir.path().join("data"));
    c.args(["eval", "--mode", "lexical", "--json", "--corpus"])
        .arg(d.join("corpus.jsonl"))
        .arg("--queries")
        .arg(d.join("queries.jsonl"))
        .arg("--qrels")
        .arg(d.join("qrels/dev.tsv"))
        .arg("--run-out")
        .arg(&run);
    let r = ok(c);
    let ours: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(ours["kind"], "faq", "{ours}");
    assert_eq!(ours["queries"], 1540);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/eval/trec-check.py");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(d.join("qrels/dev.tsv"))
        .arg(&run)
        .output()
        .expect("run pytrec_eval");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(theirs["queries"], 1540);
    for m in ["ndcg@10", "recall@10", "recall@100", "mrr@10"] {
        let (a, b) = (ours[m].as_f64().unwrap(), theirs[m].as_f64().unwrap());
        assert!((a - b).abs() <= 2e-5, "{m}: ours {a}, pytrec_eval {b}");
    }
    // The run is not trivially perfect or empty.
    let ndcg = ours["ndcg@10"].as_f64().unwrap();
    assert!(ndcg > 0.5 && ndcg < 0.95, "{ndcg}");
}
