//! Rough single-thread timing of the embedder.
//!
//! ```text
//! cargo run --release -p rag-e5 --example speed [path/to/e5-small-q4.bin]
//! ```
//!
//! Prints the load time, milliseconds per short and long text, the
//! throughput of a batched call, and the process's resident memory.

use std::time::Instant;

use rag_e5::{E5Model, Kind};

/// Resident set size of this process in MiB, from `/proc/self/status` (Linux).
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn time_per_call(model: &E5Model, text: &str, kind: Kind, reps: usize) -> f64 {
    let _ = model.embed(text, kind);
    let start = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(model.embed(std::hint::black_box(text), kind));
    }
    start.elapsed().as_secs_f64() * 1000.0 / reps as f64
}

fn main() -> Result<(), rag_e5::E5Error> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        let dir = std::env::var("RAGSCOPE_MODELS_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../models").to_owned());
        format!("{dir}/e5-small-q4.bin")
    });
    println!("rss before load: {:.1} MiB", rss_mib().unwrap_or(f64::NAN));
    let start = Instant::now();
    let model = E5Model::load(&path)?;
    println!(
        "load: {:.0} ms, model heap {:.1} MiB, rss after load: {:.1} MiB",
        start.elapsed().as_secs_f64() * 1000.0,
        model.weight_bytes() as f64 / 1048576.0,
        rss_mib().unwrap_or(f64::NAN)
    );

    let short = "how much protein should a female eat per day";
    if std::env::var_os("SPEED_SHORT_ONLY").is_some() {
        // Profiling aid: embed only the short text for a few seconds.
        let ms = time_per_call(&model, short, Kind::Query, 200);
        println!("short only: {ms:.2} ms per text");
        return Ok(());
    }
    let zh = "检索增强生成是一种将信息检索与文本生成相结合的技术。";
    let medium = "Retrieval-augmented generation combines a retriever that finds relevant documents with a generator that writes an answer conditioned on them. ".repeat(6);
    let long = "Search engines index documents so that queries can be answered quickly. 倒排索引把每个词映射到包含它的文档列表。".repeat(40);
    for (name, text, reps) in [
        ("short en", short, 50),
        ("short zh", zh, 50),
        ("medium", medium.as_str(), 10),
        ("long", long.as_str(), 3),
    ] {
        let tokens = model.token_count(text, Kind::Passage);
        let ms = time_per_call(&model, text, Kind::Passage, reps);
        println!("{name:>9}: {tokens:>5} tokens, {ms:8.2} ms per text");
    }

    let batch: Vec<String> = (0..64)
        .map(|i| format!("{short} variant {i} 变体"))
        .collect();
    let start = Instant::now();
    let out = model.embed_many(&batch, Kind::Query);
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    println!(
        "embed_many: {} short texts in {ms:.1} ms ({:.2} ms per text)",
        out.len(),
        ms / out.len() as f64
    );
    let start = Instant::now();
    let out = model.embed_many_parallel(&batch, Kind::Query, 2);
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    println!(
        "embed_many_parallel(2 threads): {:.2} ms per text",
        ms / out.len() as f64
    );
    println!("rss at end: {:.1} MiB", rss_mib().unwrap_or(f64::NAN));
    Ok(())
}
