//! Build and query timings, and recall, of exact versus HNSW search.
//!
//! Run it optimised:
//!
//! ```text
//! cargo run --release -p rag-ann --features peer --example ann_bench            # 50k and 100k
//! cargo run --release -p rag-ann --features peer --example ann_bench -- 20000   # custom sizes
//! cargo run --release -p rag-ann --features peer --example ann_bench -- 50000 --m 24 --ef-construction 200
//! cargo run --release -p rag-ann --example ann_bench -- 1000000 --no-peer   # ours only
//! ```
//!
//! The peer is behind the feature `peer` (without it the example runs ours
//! only), so that the test build does not compile it.
//!
//! The data are clustered synthetic embeddings (384 dimensions, 200 centres), the
//! same kind the recall test uses. For each size the example builds a
//! [`FlatIndex`] and an [`HnswIndex`] over the same vectors, then runs 200 fresh
//! queries against both and reports p50/p99 latency and recall@10 for several
//! search widths (`ef`). The peer, the `hnsw_rs` crate (f32 vectors, its
//! parallel insert on all cores, as ours; the graph ragscope used before its own), is
//! built and searched with the same `m`, `ef_construction` and `ef` in the
//! same run.

use peer::Peer;
use rag_ann::synthetic::ClusteredVectors;
use rag_ann::{FlatIndex, HnswIndex, HnswParams, Query};
use std::time::{Duration, Instant};

/// The `hnsw_rs` graph, built from the same vectors.
#[cfg(feature = "peer")]
mod peer {
    use hnsw_rs::anndists::dist::Distance;
    use hnsw_rs::hnsw::Hnsw;
    use rag_ann::{FlatIndex, HnswParams};

    /// Cosine distance for the peer (its own dot distance asserts on rounding).
    #[derive(Clone, Copy, Default)]
    struct Cosine;

    impl Distance<f32> for Cosine {
        fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
            (1.0 - rag_ann::kernel::dot(a, b)).max(0.0)
        }
    }

    pub struct Peer(Hnsw<'static, f32, Cosine>);

    impl Peer {
        pub const AVAILABLE: bool = true;

        pub fn build(flat: &FlatIndex<u64>, params: HnswParams, n: usize) -> Self {
            let peer = Hnsw::new(params.m, n, 16, params.ef_construction, Cosine);
            let rows: Vec<(&[f32], usize)> = flat.iter().map(|(k, v)| (v, k as usize)).collect();
            peer.parallel_insert_slice(&rows);
            Peer(peer)
        }

        /// The keys of the `k` nearest to a unit query.
        pub fn search(&self, q: &[f32], k: usize, ef: usize) -> Vec<u64> {
            self.0
                .search(q, k, ef)
                .iter()
                .map(|h| h.d_id as u64)
                .collect()
        }
    }
}

/// Without the feature `peer`: ours only.
#[cfg(not(feature = "peer"))]
mod peer {
    use rag_ann::{FlatIndex, HnswParams};

    /// Never built: `AVAILABLE` keeps the peer off.
    pub struct Peer;

    impl Peer {
        pub const AVAILABLE: bool = false;

        pub fn build(_: &FlatIndex<u64>, _: HnswParams, _: usize) -> Self {
            unreachable!("built without the feature peer")
        }

        pub fn search(&self, _: &[f32], _: usize, _: usize) -> Vec<u64> {
            unreachable!("built without the feature peer")
        }
    }
}

const DIMS: usize = 384;
const QUERIES: usize = 200;
const K: usize = 10;

fn main() {
    let mut sizes = Vec::new();
    let mut params = HnswParams::default();
    let mut peer = Peer::AVAILABLE;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .and_then(|v| v.parse().ok())
                .expect("a number after the flag")
        };
        match arg.as_str() {
            "--m" => params.m = value(),
            "--ef-construction" => params.ef_construction = value(),
            "--no-peer" => peer = false,
            other => sizes.push(other.parse().expect("a vector count or a known flag")),
        }
    }
    if sizes.is_empty() {
        sizes = vec![50_000, 100_000];
    }
    params.validate().expect("valid HNSW parameters");
    if !Peer::AVAILABLE {
        println!("(the peer hnsw_rs is not built: add --features peer)");
    }
    for n in sizes {
        bench(n, params, peer);
    }
}

fn bench(n: usize, params: HnswParams, with_peer: bool) {
    println!("== {n} vectors × {DIMS} dims, {QUERIES} queries, k = {K}");
    let mut data = ClusteredVectors::new(DIMS, 200, 1.0, 7);
    let rows = data.matrix(n);
    let queries = data.matrix(QUERIES);

    let t = Instant::now();
    let mut flat = FlatIndex::<u64>::with_capacity(DIMS, n).expect("valid dims");
    for (i, v) in rows.chunks_exact(DIMS).enumerate() {
        flat.add(i as u64, v).expect("finite vectors");
    }
    println!("flat load      {:>10.2?}", t.elapsed());
    drop(rows);

    let t = Instant::now();
    let hnsw = HnswIndex::build(flat.clone(), params).expect("valid params");
    println!(
        "hnsw build     {:>10.2?}  (m = {}, ef_construction = {}, all cores; graph + codes {} MB)",
        t.elapsed(),
        params.m,
        params.ef_construction,
        hnsw.graph_bytes() / 1_000_000
    );
    let peer: Option<Peer> = with_peer.then(|| {
        let t = Instant::now();
        let peer = Peer::build(&flat, params, n);
        println!(
            "hnsw_rs build  {:>10.2?}  (same m and ef_construction, all cores)",
            t.elapsed()
        );
        peer
    });

    let mut exact = Vec::with_capacity(QUERIES);
    let mut truth = Vec::with_capacity(QUERIES);
    for q in queries.chunks_exact(DIMS) {
        let t = Instant::now();
        let out = flat.search(&Query::new(q, K)).expect("valid query");
        exact.push(t.elapsed());
        truth.push(out.hits.iter().map(|h| h.key).collect::<Vec<_>>());
    }
    println!(
        "exact search   p50 {:>9.2?}  p99 {:>9.2?}",
        pct(&mut exact, 0.5),
        pct(&mut exact, 0.99)
    );

    // First the index's own width for its size (no `ef` asked for), then fixed widths.
    let default_ef = hnsw.params().ef_for(n);
    for ef in [
        None,
        Some(16),
        Some(32),
        Some(64),
        Some(96),
        Some(128),
        Some(256),
        Some(512),
    ] {
        let mut times = Vec::with_capacity(QUERIES);
        let mut found = 0;
        for (q, want) in queries.chunks_exact(DIMS).zip(&truth) {
            let query = Query::new(q, K);
            let query = match ef {
                Some(ef) => query.ef(ef),
                None => query,
            };
            let t = Instant::now();
            let out = hnsw.search(&query).expect("valid query");
            times.push(t.elapsed());
            found += out.hits.iter().filter(|h| want.contains(&h.key)).count();
        }
        let recall = found as f64 / (QUERIES * K) as f64;
        let label = match ef {
            Some(ef) => format!("ef={ef:<4}"),
            None => format!("default ef {default_ef}"),
        };
        println!(
            "hnsw {label:<16} p50 {:>9.2?}  p99 {:>9.2?}  recall@{K} {recall:.4}",
            pct(&mut times, 0.5),
            pct(&mut times, 0.99)
        );
        let (Some(peer), Some(ef)) = (&peer, ef) else {
            continue;
        };
        let mut times = Vec::with_capacity(QUERIES);
        let mut found = 0;
        for (q, want) in queries.chunks_exact(DIMS).zip(&truth) {
            let t = Instant::now();
            let qn = rag_ann::kernel::normalised(q, DIMS).expect("finite query");
            let out = peer.search(&qn, K, ef);
            times.push(t.elapsed());
            found += out.iter().filter(|key| want.contains(key)).count();
        }
        let recall = found as f64 / (QUERIES * K) as f64;
        println!(
            "  hnsw_rs      p50 {:>9.2?}  p99 {:>9.2?}  recall@{K} {recall:.4}",
            pct(&mut times, 0.5),
            pct(&mut times, 0.99)
        );
    }
    filtered(&flat, &hnsw, &queries);
}

fn filtered(flat: &FlatIndex<u64>, hnsw: &HnswIndex<u64>, queries: &[f32]) {
    for every in [2u64, 10, 100] {
        let keep = move |key: u64| key.is_multiple_of(every);
        let mut times = Vec::with_capacity(QUERIES);
        let mut found = 0;
        let mut exact_answers = 0;
        for q in queries.chunks_exact(DIMS) {
            let want = flat
                .search(&Query::new(q, K).filter(&keep))
                .expect("valid query");
            let t = Instant::now();
            let out = hnsw
                .search(&Query::new(q, K).filter(&keep))
                .expect("valid query");
            times.push(t.elapsed());
            exact_answers += usize::from(out.kind == rag_ann::IndexKind::Exact);
            found += out
                .hits
                .iter()
                .filter(|h| want.hits.iter().any(|w| w.key == h.key))
                .count();
        }
        let recall = found as f64 / (QUERIES * K) as f64;
        println!(
            "hnsw, filter keeping 1 in {every:<3}  p50 {:>9.2?}  p99 {:>9.2?}  recall@{K} {recall:.4}  (exact fallback {exact_answers} of {QUERIES})",
            pct(&mut times, 0.5),
            pct(&mut times, 0.99)
        );
    }
}

fn pct(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}
