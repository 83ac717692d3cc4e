//! Recall of HNSW against exact search on clustered synthetic embeddings.
//!
//! The workload imitates sentence embeddings: 50,000 vectors of 384 dimensions
//! around 200 random topic centres, and 200 fresh queries from the same
//! distribution. The test asserts recall@10 ≥ 0.98 and prints build and query
//! timings (run with `--nocapture` to see them).

use rag_ann::synthetic::ClusteredVectors;
use rag_ann::{FlatIndex, HnswIndex, HnswParams, IndexKind, Query};
use std::time::{Duration, Instant};

const DIMS: usize = 384;
const N: usize = 50_000;
const QUERIES: usize = 200;
const K: usize = 10;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn hnsw_recall_at_10_is_at_least_0_98_on_50k_clustered_vectors() {
    let mut data = ClusteredVectors::new(DIMS, 200, 1.0, 20_240_601);
    let t = Instant::now();
    let rows = data.matrix(N);
    let queries = data.matrix(QUERIES);
    let generate = t.elapsed();

    let t = Instant::now();
    let mut flat = FlatIndex::<u64>::with_capacity(DIMS, N).unwrap();
    for (i, v) in rows.chunks_exact(DIMS).enumerate() {
        flat.add(i as u64, v).unwrap();
    }
    drop(rows);
    let load = t.elapsed();

    let t = Instant::now();
    let hnsw = HnswIndex::build(flat.clone(), HnswParams::default()).unwrap();
    let build = t.elapsed();

    let mut exact_times = Vec::with_capacity(QUERIES);
    let mut hnsw_times = Vec::with_capacity(QUERIES);
    let mut found = 0usize;
    for q in queries.chunks_exact(DIMS) {
        let t = Instant::now();
        let want = flat.search(&Query::new(q, K)).unwrap();
        exact_times.push(t.elapsed());
        let t = Instant::now();
        let got = hnsw.search(&Query::new(q, K)).unwrap();
        hnsw_times.push(t.elapsed());
        assert_eq!(got.kind, IndexKind::Hnsw);
        assert_eq!(got.hits.len(), K);
        found += got
            .hits
            .iter()
            .filter(|h| want.hits.iter().any(|w| w.key == h.key))
            .count();
    }
    let recall = found as f64 / (QUERIES * K) as f64;
    eprintln!(
        "n={N} dims={DIMS} params={:?}\n  generate {generate:.2?}, load {load:.2?}, hnsw build {build:.2?}\n  \
         recall@{K} = {recall:.4}\n  exact p50 {:.2?} p99 {:.2?} | hnsw p50 {:.2?} p99 {:.2?}",
        hnsw.params(),
        percentile(&mut exact_times, 0.5),
        percentile(&mut exact_times, 0.99),
        percentile(&mut hnsw_times, 0.5),
        percentile(&mut hnsw_times, 0.99),
    );
    assert!(recall >= 0.98, "recall@{K} = {recall:.4} is below 0.98");
}
