//! Reads a CC-CEDICT file and prints its size, load time and the
//! translations of the questions given: `cargo run --release -p rag-text
//! --example bilingual_load -- models/cedict_ts.u8 "银行的营业时间" "refund"`.

use rag_text::{Analyzer, Bilingual, Mode};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a CC-CEDICT file");
    let text = std::fs::read_to_string(&path).expect("readable UTF-8");
    let analyzer = Analyzer::new();
    Analyzer::preload();
    let before = resident_mb();
    let start = Instant::now();
    let dict = Bilingual::parse(&text, &analyzer).expect("a dictionary");
    let elapsed = start.elapsed();
    drop(text);
    let after = resident_mb();
    let (zh, en) = dict.sizes();
    println!(
        "{} entries, {zh} Chinese words, {en} English words, read in {:.0} ms, resident memory {before:.1} -> {after:.1} MB",
        dict.entries(),
        elapsed.as_secs_f64() * 1e3
    );
    for q in args {
        for t in dict.translate(&analyzer.analyze(&q, Mode::Query)) {
            println!("{q}: {} -> {}", t.source, t.targets.join(", "));
        }
    }
}

/// This process's resident memory in MB (Linux; 0 elsewhere).
fn resident_mb() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |pages| pages * 4096.0 / 1e6)
}
