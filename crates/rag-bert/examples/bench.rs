//! Rough speed figures for a model directory, on this machine:
//!
//! ```text
//! cargo run --release -p rag-bert --example bench -- models/all-MiniLM-L6-v2 [threads] [f32|int8|bf16 ...]
//! ```
//!
//! With several precisions, each runs in turn on the same texts.
//!
//! Prints the median latency of short single queries (one thread) and the
//! throughput of batches of passages (tokens and texts per second), with one
//! thread and with `threads` threads.

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "models/all-MiniLM-L6-v2".to_owned());
    let threads: usize = args
        .next()
        .map_or(2, |t| t.parse().expect("threads is a number"));

    let mut precisions: Vec<rag_bert::Precision> = args
        .map(|p| p.parse().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    if precisions.is_empty() {
        precisions.push(rag_bert::Precision::F32);
    }
    for precision in precisions {
        let start = Instant::now();
        let model = rag_bert::BertModel::load(&dir)
            .and_then(|m| m.with_precision(precision))
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        println!(
            "precision {precision}: load and pack {:.2} s, linear weights {:.1} MB",
            start.elapsed().as_secs_f64(),
            model.linear_weight_bytes() as f64 / 1e6
        );
        run(&model, threads);
    }
}

fn run(model: &rag_bert::BertModel, threads: usize) {
    let queries = [
        "how much protein per day",
        "what is retrieval augmented generation",
        "Rust borrow checker error E0502",
        "capital of Australia",
        "why is the sky blue?",
        "How do I reset my password?",
        "BM25 vs dense retrieval",
        "symptoms of vitamin D deficiency",
    ];
    for q in queries {
        model.embed(q);
    }
    let mut times = Vec::new();
    for i in 0..200 {
        let q = queries[i % queries.len()];
        let t = Instant::now();
        std::hint::black_box(model.embed(q));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "single short query: median {:.2} ms, p90 {:.2} ms",
        times[100], times[180]
    );

    let sentence = "Retrieval-augmented generation combines a retriever, which finds passages relevant to a \
                    question, with a generator, which writes an answer grounded in those passages. ";
    let passages: Vec<String> = (0..64)
        .map(|i| format!("Passage {i}. {}", sentence.repeat(1 + i % 8)))
        .collect();
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let tokens: usize = refs.iter().map(|p| model.encode(p).ids.len()).sum();
    for n in [1, threads] {
        let t = Instant::now();
        let out = if n == 1 {
            model.embed_batch(&refs)
        } else {
            model.embed_batch_parallel(&refs, n)
        };
        let s = t.elapsed().as_secs_f64();
        assert_eq!(out.len(), refs.len());
        println!(
            "passages, {n} thread(s): {} texts, {tokens} tokens (mean {}) in {s:.2} s: {:.0} tokens/s, {:.1} texts/s",
            refs.len(),
            tokens / refs.len(),
            tokens as f64 / s,
            refs.len() as f64 / s
        );
    }
}
