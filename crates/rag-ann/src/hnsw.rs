//! Approximate search with a Hierarchical Navigable Small World graph.
//!
//! The graph ([`crate::graph`]) is walked over int8 codes of the vectors
//! ([`crate::quant`]); the candidates it finds are rescored with the
//! full-precision vectors, so scores are identical to those of exact search.
//! This module adds what the engine needs around it: input validation and
//! normalisation, caller keys, removal, filtering and persistence.

use crate::error::{AnnError, Result};
use crate::flat::FlatIndex;
use crate::graph::Graph;
use crate::kernel;
use crate::quant::Codes;
use crate::search::{Hit, IndexKind, Query, SearchOutcome, VectorSearcher};
use std::fmt;
use std::hash::Hash;

/// The seed of the level draws: the same rows in the same order give the same graph.
const LEVEL_SEED: u64 = 0x5eed_a11c_e5e5_0001;

/// Similarity evaluations a bottom-layer walk may spend, per slot of its
/// candidate list and per link of a node; a selective filter that exhausts
/// it falls back to an exact scan of the matching rows.
const BUDGET_PER_EF_LINK: usize = 8;

/// Rows on which a filter is tried to estimate how much it lets through.
const FILTER_SAMPLE: usize = 64;

/// Rebuilding for a handful of removals is never worth it, whatever the ratio says.
const REBUILD_MIN_TOMBSTONES: usize = 256;

/// Knobs of the HNSW graph. See [`HnswParams::validate`] for the valid ranges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HnswParams {
    /// Links per node on the upper layers (twice as many on the bottom layer).
    /// Higher values raise recall and memory use. Typical: 12–48.
    pub m: usize,
    /// Width of the candidate list while inserting. Higher values build a better
    /// graph, more slowly.
    pub ef_construction: usize,
    /// Default width of the candidate list while searching; a query may override it
    /// with [`Query::ef`]. The effective width is never below `k`.
    pub ef_search: usize,
    /// The widest walk a filtered query gets, as a multiple of `k` (see
    /// the type's documentation on filtering).
    pub filter_overfetch: usize,
    /// The graph is rebuilt when removed vectors exceed this fraction of its nodes
    /// (and number at least 256).
    pub rebuild_tombstone_ratio: f32,
    /// Whether bulk builds (at least 1,024 new vectors beyond the first
    /// 1,024) insert on every core; a graph built on one thread is the
    /// same for the same rows.
    pub parallel_build: bool,
}

/// Graph size up to which a query's default width is `ef_search` itself.
const EF_BASE_NODES: f64 = 100_000.0;

impl Default for HnswParams {
    /// m 24 and ef_construction 128: at 300,000 clustered 384-d vectors,
    /// recall@10 at ef 96 is 0.9925 where m 16 and ef_construction 64 gave
    /// 0.8805 (m 32 and 200: 0.9975), for twice the build time (101 s
    /// against 51 s on two cores; docs/speed.md).
    fn default() -> Self {
        Self {
            m: 24,
            ef_construction: 128,
            ef_search: 96,
            filter_overfetch: 8,
            rebuild_tombstone_ratio: 0.2,
            parallel_build: true,
        }
    }
}

impl HnswParams {
    /// The search width used when a query asks for none, for a graph of
    /// `nodes`: `ef_search` up to 100,000 nodes, then growing as
    /// `nodes^0.75` (96 becomes 190 at 250,000 and 540 at 1,000,000). A
    /// larger graph needs a wider walk for the same recall: on clustered
    /// 384-d vectors with the default m and ef_construction, ef 96 gives
    /// recall@10 0.99 at 300,000 nodes but 0.89 at 1,000,000, where 256 and
    /// 512 give 0.977 and 0.992 (`examples/ann_bench.rs`); through the engine
    /// at 1,000,000, 382 (`nodes^0.6`) gave 0.9765 (docs/speed.md).
    pub fn ef_for(&self, nodes: usize) -> usize {
        let grow = (nodes as f64 / EF_BASE_NODES).max(1.0).powf(0.75);
        ((self.ef_search as f64 * grow).round() as usize).clamp(self.ef_search, 32_768)
    }

    /// Checks every parameter against its valid range.
    pub fn validate(&self) -> Result<()> {
        fn check(ok: bool, name: &'static str, value: f64, expected: &'static str) -> Result<()> {
            if ok {
                Ok(())
            } else {
                Err(AnnError::InvalidParam {
                    name,
                    value,
                    expected,
                })
            }
        }
        check((2..=128).contains(&self.m), "m", self.m as f64, "2..=128")?;
        check(
            (self.m..=4096).contains(&self.ef_construction),
            "ef_construction",
            self.ef_construction as f64,
            "m..=4096",
        )?;
        check(
            (1..=32_768).contains(&self.ef_search),
            "ef_search",
            self.ef_search as f64,
            "1..=32768",
        )?;
        check(
            (1..=64).contains(&self.filter_overfetch),
            "filter_overfetch",
            self.filter_overfetch as f64,
            "1..=64",
        )?;
        let ratio = self.rebuild_tombstone_ratio;
        check(
            ratio > 0.0 && ratio <= 1.0,
            "rebuild_tombstone_ratio",
            f64::from(ratio),
            "a fraction in (0, 1]",
        )?;
        Ok(())
    }
}

/// An approximate nearest-neighbour index: an HNSW graph over a [`FlatIndex`].
///
/// * **Storage.** The vectors stay in a [`FlatIndex`], which is the source of truth
///   for keys, scores, rebuilds and serialisation. The graph walks int8 codes of
///   them (one byte per dimension) and keeps `u32` links: about
///   `dims + 8·m` bytes per vector beside the flat index.
/// * **Scores.** The walk's candidates (the `ef` best by code similarity) are
///   rescored with the exact kernel, so a vector gets the same score from this
///   index as from [`FlatIndex`], and quantisation only affects which vectors
///   the walk meets.
/// * **Removal.** Removed vectors become tombstones that the graph still walks
///   through but never returns. Once they exceed
///   [`HnswParams::rebuild_tombstone_ratio`] of the nodes, [`remove`](Self::remove)
///   compacts the storage and rebuilds the graph, which costs as much as a bulk
///   build; call it off the async runtime.
/// * **Filtering.** The filter (and the tombstone check) is applied *during* the
///   walk: non-matching nodes still guide navigation but never enter the result
///   list. The filter is first tried on 64 rows spread over the index: when
///   it keeps under half of them the walk is widened (up to
///   `k * filter_overfetch`), when it keeps under 1 in 16 the query goes
///   straight to the exact scan below, and a walk that still finds fewer
///   than `k` matches is run again at the full width.
///   If the walk still yields fewer than `k` hits (a very selective filter, or a
///   tiny graph), the query falls back to an exact scan over the matching rows,
///   which is cheap precisely because few rows match; the outcome then reports
///   [`IndexKind::Exact`].
pub struct HnswIndex<K = u64> {
    params: HnswParams,
    store: FlatIndex<K>,
    codes: Codes,
    graph: Graph,
}

impl<K: Copy + Eq + Hash> HnswIndex<K> {
    /// An empty index for vectors of `dims` dimensions.
    pub fn new(dims: usize, params: HnswParams) -> Result<Self> {
        Self::build(FlatIndex::new(dims)?, params)
    }

    /// Builds the graph over every live vector of `store`. The store is
    /// compacted first.
    pub fn build(mut store: FlatIndex<K>, params: HnswParams) -> Result<Self> {
        params.validate()?;
        store.compact();
        let codes = Codes::fitted(store.dims(), store.raw_rows());
        let mut index = Self {
            params,
            graph: Graph::new(params.m, params.ef_construction, LEVEL_SEED),
            codes,
            store,
        };
        index.index_new_rows();
        Ok(index)
    }

    /// Codes and graph nodes for the rows added since the last call.
    fn index_new_rows(&mut self) {
        let first = self.graph.nodes();
        let count = self.store.rows() - first;
        for ordinal in first..self.store.rows() {
            self.codes.push(self.store.row(ordinal as u32));
        }
        let threads = if self.params.parallel_build {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            1
        };
        self.graph
            .insert_all(&self.codes, first as u32, count, threads);
    }

    /// The parameters the index was built with.
    pub fn params(&self) -> &HnswParams {
        &self.params
    }

    /// The dimension of the vectors.
    pub fn dims(&self) -> usize {
        self.store.dims()
    }

    /// The number of live vectors.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether no live vector is stored.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// The number of removed vectors still present in the graph.
    pub fn tombstones(&self) -> usize {
        self.store.tombstones()
    }

    /// The vector storage (for iteration, lookups and serialisation).
    pub fn store(&self) -> &FlatIndex<K> {
        &self.store
    }

    /// Gives the vector storage back, dropping the graph.
    pub fn into_store(self) -> FlatIndex<K> {
        self.store
    }

    /// Bytes held by the codes and the links (beside the flat index).
    pub fn graph_bytes(&self) -> usize {
        self.codes.raw().len() + self.graph.link_bytes() + self.graph.nodes()
    }

    /// Adds `vector` under `key`, replacing any vector already stored for `key`.
    pub fn add(&mut self, key: K, vector: &[f32]) -> Result<()> {
        self.store.add_row(key, vector)?;
        self.index_new_rows();
        self.maybe_rebuild();
        Ok(())
    }

    /// Adds many vectors at once. On a validation error the vectors before
    /// the offending one have been added.
    pub fn extend<'v>(&mut self, items: impl IntoIterator<Item = (K, &'v [f32])>) -> Result<()> {
        let mut result = Ok(());
        for (key, vector) in items {
            if let Err(e) = self.store.add_row(key, vector) {
                result = Err(e);
                break;
            }
        }
        self.index_new_rows();
        self.maybe_rebuild();
        result
    }

    /// Removes `key`. Returns whether it was present. May trigger a rebuild; see
    /// the type's documentation.
    pub fn remove(&mut self, key: K) -> bool {
        let removed = self.store.remove_keep_row(key);
        if removed {
            self.maybe_rebuild();
        }
        removed
    }

    /// Whether enough vectors were removed (or replaced) to warrant a rebuild.
    pub fn needs_rebuild(&self) -> bool {
        let dead = self.store.tombstones();
        dead >= REBUILD_MIN_TOMBSTONES
            && dead as f64
                >= f64::from(self.params.rebuild_tombstone_ratio) * self.store.rows() as f64
    }

    /// Compacts the storage and builds a fresh graph over the live vectors.
    pub fn rebuild(&mut self) {
        self.store.compact();
        self.codes = Codes::fitted(self.store.dims(), self.store.raw_rows());
        self.graph = Graph::new(self.params.m, self.params.ef_construction, LEVEL_SEED);
        self.index_new_rows();
    }

    fn maybe_rebuild(&mut self) {
        if self.needs_rebuild() {
            self.rebuild();
        }
    }

    /// The approximately `k` nearest live vectors to the query.
    pub fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>> {
        let q = kernel::normalised(query.vector, self.store.dims())?;
        let k = query.k.min(self.store.len());
        if k == 0 {
            return Ok(SearchOutcome {
                hits: Vec::new(),
                kind: IndexKind::Hnsw,
            });
        }
        let ef = query
            .ef
            .unwrap_or_else(|| self.params.ef_for(self.graph.nodes()))
            .max(k);
        let store = &self.store;
        let user_filter = query.filter;
        let accept = |ordinal: u32| {
            store.is_live(ordinal) && user_filter.is_none_or(|keep| keep(store.key(ordinal)))
        };
        // Without tombstones or a caller filter, skip the per-candidate callback.
        let accept: Option<&dyn Fn(u32) -> bool> =
            if user_filter.is_none() && store.tombstones() == 0 {
                None
            } else {
                Some(&accept)
            };
        let budget = |ef: usize| {
            ef.saturating_mul(2 * self.graph.m())
                .saturating_mul(BUDGET_PER_EF_LINK)
        };
        let qc = self.codes.encode(&q);
        // How much of the index the filter lets through, from a sample of
        // rows: a permissive filter walks as wide as no filter, a selective
        // one wider (up to `k * filter_overfetch`), a very selective one
        // (under 1 in 16) goes straight to an exact scan of its matches.
        let share = match accept {
            None => 1.0,
            Some(a) => {
                let rows = store.rows();
                let step = rows.div_ceil(FILTER_SAMPLE).max(1);
                let sampled = (0..rows).step_by(step).count().max(1);
                let kept = (0..rows).step_by(step).filter(|&o| a(o as u32)).count();
                kept as f64 / sampled as f64
            }
        };
        let wide = ef.max(k.saturating_mul(self.params.filter_overfetch));
        let ef = if share >= 0.5 {
            ef
        } else {
            ((ef as f64 / share.max(1e-9)).ceil() as usize).clamp(ef, wide)
        };
        let (mut found, mut cut) = if share < 1.0 / 16.0 {
            (Vec::new(), true)
        } else {
            self.graph.search(&self.codes, &qc, ef, accept, budget(ef))
        };
        if accept.is_some() && !cut && found.len() < k && wide > ef {
            // Fewer matches met than asked for: walk again, wider.
            (found, cut) = self
                .graph
                .search(&self.codes, &qc, wide, accept, budget(wide));
        }
        if found.len() < k || (cut && accept.is_some()) {
            // The walk did not find enough acceptable nodes, or its budget ran
            // out under a very selective filter; an exact scan over the
            // matching rows is both correct and, in that situation, cheap.
            let hits = store.scan(&q, k, user_filter);
            return Ok(SearchOutcome {
                hits,
                kind: IndexKind::Exact,
            });
        }
        let mut hits: Vec<(f32, u32)> = found
            .iter()
            .map(|n| (kernel::dot(&q, store.row(n.id)), n.id))
            .collect();
        // Exact scores decide the order; ties by ordinal, as the exact scan does.
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        hits.truncate(k);
        Ok(SearchOutcome {
            hits: hits
                .into_iter()
                .map(|(score, ordinal)| Hit {
                    key: store.key(ordinal),
                    score,
                })
                .collect(),
            kind: IndexKind::Hnsw,
        })
    }

    /// The graph and codes as bytes, for an index without tombstones (its
    /// row ordinals are then the order in which [`crate::format::encode`]
    /// writes the vectors); `None` when there are tombstones.
    pub fn encode_graph(&self) -> Option<Vec<u8>> {
        if self.store.tombstones() > 0 {
            return None;
        }
        let mut out = Vec::with_capacity(self.graph_bytes() + 64);
        out.extend_from_slice(&self.codes.step().to_le_bytes());
        out.extend(self.codes.raw().iter().map(|&c| c as u8));
        self.graph.encode(&mut out);
        Some(out)
    }

    /// An index over `store` (read back without tombstones) with the graph
    /// and codes of [`encode_graph`](Self::encode_graph), without building
    /// anything. Bytes that do not fit the store are refused, and the store
    /// is handed back with the error.
    #[allow(clippy::result_large_err)]
    pub fn with_graph(
        store: FlatIndex<K>,
        params: HnswParams,
        bytes: &[u8],
    ) -> std::result::Result<Self, (AnnError, FlatIndex<K>)> {
        match read_graph(&store, &params, bytes) {
            Ok((codes, graph)) => Ok(Self {
                params,
                store,
                codes,
                graph,
            }),
            Err(e) => Err((e, store)),
        }
    }
}

/// The codes and graph in `bytes`, checked against `store`.
fn read_graph<K: Copy + Eq + Hash>(
    store: &FlatIndex<K>,
    params: &HnswParams,
    bytes: &[u8],
) -> Result<(Codes, Graph)> {
    params.validate()?;
    let bad = |why: &str| AnnError::Corrupt(why.to_owned());
    if store.tombstones() > 0 {
        return Err(bad("a stored graph needs a compact vector store"));
    }
    let rows = store.rows();
    let dims = store.dims();
    let code_len = rows.checked_mul(dims).ok_or_else(|| bad("size"))?;
    let step = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(f32::from_le_bytes)
        .ok_or_else(|| bad("graph: truncated"))?;
    let raw = bytes
        .get(4..4 + code_len)
        .ok_or_else(|| bad("graph: codes truncated"))?;
    let mut codes = Codes::with_step(dims, step);
    codes.extend_raw(&raw.iter().map(|&b| b as i8).collect::<Vec<_>>());
    let (graph, used) = Graph::decode(&bytes[4 + code_len..])?;
    if 4 + code_len + used != bytes.len() {
        return Err(bad("graph: trailing bytes"));
    }
    if graph.nodes() != rows {
        return Err(bad("graph: node count differs from the vectors"));
    }
    Ok((codes, graph))
}

impl<K: Copy + Eq + Hash> VectorSearcher<K> for HnswIndex<K> {
    fn dims(&self) -> usize {
        self.store.dims()
    }
    fn len(&self) -> usize {
        self.store.len()
    }
    fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>> {
        HnswIndex::search(self, query)
    }
}

impl<K> fmt::Debug for HnswIndex<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HnswIndex")
            .field("params", &self.params)
            .field("dims", &self.store.dims())
            .field("len", &self.store.len())
            .field("tombstones", &self.store.tombstones())
            .finish_non_exhaustive()
    }
}

impl<K: Clone> Clone for HnswIndex<K> {
    fn clone(&self) -> Self {
        Self {
            params: self.params,
            store: self.store.clone(),
            codes: self.codes.clone(),
            graph: self.graph.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{ClusteredVectors, SplitMix64};

    fn keys_of(hits: &[Hit<u64>]) -> Vec<u64> {
        hits.iter().map(|h| h.key).collect()
    }

    #[test]
    fn default_width_grows_with_the_graph_only_past_100k_nodes() {
        let p = HnswParams::default();
        assert_eq!(p.ef_for(0), p.ef_search);
        assert_eq!(p.ef_for(100_000), p.ef_search);
        let widths: Vec<usize> = [200_000, 300_000, 1_000_000, 10_000_000]
            .iter()
            .map(|n| p.ef_for(*n))
            .collect();
        assert!(widths.windows(2).all(|w| w[0] < w[1]), "{widths:?}");
        assert_eq!(p.ef_for(1_000_000), 540);
        assert_eq!(p.ef_for(usize::MAX), 32_768);
    }

    #[test]
    fn params_validate() {
        assert!(HnswParams::default().validate().is_ok());
        let bad = HnswParams {
            m: 300,
            ..HnswParams::default()
        };
        assert!(matches!(
            bad.validate(),
            Err(AnnError::InvalidParam { name: "m", .. })
        ));
        let bad = HnswParams {
            ef_construction: 4,
            ..HnswParams::default()
        };
        assert!(matches!(
            bad.validate(),
            Err(AnnError::InvalidParam {
                name: "ef_construction",
                ..
            })
        ));
        let bad = HnswParams {
            rebuild_tombstone_ratio: 0.0,
            ..HnswParams::default()
        };
        assert!(bad.validate().is_err());
        assert!(HnswIndex::<u64>::new(
            8,
            HnswParams {
                ef_search: 0,
                ..HnswParams::default()
            }
        )
        .is_err());
    }

    #[test]
    fn index_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<HnswIndex<u64>>();
    }

    #[test]
    fn small_index_finds_exact_neighbours_and_handles_removal() {
        let dims = 32;
        let mut data = ClusteredVectors::new(dims, 10, 0.8, 9);
        let mut index = HnswIndex::<u64>::new(dims, HnswParams::default()).unwrap();
        let mut exact = FlatIndex::<u64>::new(dims).unwrap();
        for key in 0..3_000u64 {
            let v = data.sample();
            index.add(key, &v).unwrap();
            exact.add(key, &v).unwrap();
        }
        let mut rng = SplitMix64::new(1);
        // Remove a third of the keys: enough to trigger at least one rebuild.
        for _ in 0..1_000 {
            let key = rng.below(3_000) as u64;
            assert_eq!(index.remove(key), exact.remove(key));
        }
        assert_eq!(index.len(), exact.len());
        assert!(
            index.tombstones() < 1_000,
            "a rebuild should have dropped tombstones"
        );
        let mut agree = 0;
        for _ in 0..50 {
            let q = data.sample();
            let got = index.search(&Query::new(&q, 10).ef(200)).unwrap();
            let want = exact.search(&Query::new(&q, 10)).unwrap();
            for h in &got.hits {
                assert!(exact.contains(h.key), "removed key {} returned", h.key);
            }
            agree += keys_of(&got.hits)
                .iter()
                .filter(|k| keys_of(&want.hits).contains(k))
                .count();
        }
        assert!(
            agree as f64 / 500.0 >= 0.95,
            "recall {}",
            agree as f64 / 500.0
        );
    }

    #[test]
    fn filters_and_selective_filters_fall_back_to_exact() {
        let dims = 16;
        let mut data = ClusteredVectors::new(dims, 5, 0.8, 3);
        let store = {
            let mut s = FlatIndex::<u64>::new(dims).unwrap();
            for key in 0..4_000u64 {
                s.add(key, &data.sample()).unwrap();
            }
            s
        };
        let exact = store.clone();
        let index = HnswIndex::build(store, HnswParams::default()).unwrap();
        let q = data.sample();
        let even = |k: u64| k & 1 == 0;
        let got = index.search(&Query::new(&q, 10).filter(&even)).unwrap();
        assert_eq!(got.hits.len(), 10);
        assert!(got.hits.iter().all(|h| even(h.key)));
        // Only three keys match: the walk cannot find ten, so the exact scan answers.
        let rare = |k: u64| k == 5 || k == 500 || k == 3_999;
        let got = index.search(&Query::new(&q, 10).filter(&rare)).unwrap();
        assert_eq!(got.kind, IndexKind::Exact);
        let want = exact.search(&Query::new(&q, 10).filter(&rare)).unwrap();
        assert_eq!(got.hits, want.hits);
        // Scores agree with exact search for the same keys.
        let got = index.search(&Query::new(&q, 5)).unwrap();
        for h in &got.hits {
            let v = exact.vector(h.key).unwrap();
            let qn = kernel::normalised(&q, dims).unwrap();
            assert_eq!(h.score, kernel::dot(&qn, v));
        }
    }

    #[test]
    fn graph_bytes_round_trip_and_answer_the_same() {
        let dims = 32;
        let mut data = ClusteredVectors::new(dims, 6, 0.8, 11);
        let mut store = FlatIndex::<u64>::new(dims).unwrap();
        for key in 0..1_500u64 {
            store.add(key, &data.sample()).unwrap();
        }
        let index = HnswIndex::build(store, HnswParams::default()).unwrap();
        let bytes = index.encode_graph().unwrap();
        let vectors = crate::format::encode(index.store(), "m").unwrap();
        let back_store = crate::format::decode::<u64>(&vectors, "m", dims).unwrap();
        let back = HnswIndex::with_graph(back_store, HnswParams::default(), &bytes).unwrap();
        for _ in 0..20 {
            let q = data.sample();
            assert_eq!(
                index.search(&Query::new(&q, 10)).unwrap(),
                back.search(&Query::new(&q, 10)).unwrap()
            );
        }
        let small = crate::format::decode::<u64>(
            &crate::format::encode(&FlatIndex::<u64>::new(dims).unwrap(), "m").unwrap(),
            "m",
            dims,
        )
        .unwrap();
        assert!(HnswIndex::with_graph(small, HnswParams::default(), &bytes).is_err());
        let mut cut = bytes.clone();
        cut.pop();
        let again = crate::format::decode::<u64>(&vectors, "m", dims).unwrap();
        let (_, store) = HnswIndex::with_graph(again, HnswParams::default(), &cut).unwrap_err();
        assert_eq!(store.len(), 1_500);
        let mut removed = index.clone();
        removed.remove(3);
        assert!(removed.encode_graph().is_none());
    }

    #[test]
    fn duplicate_vectors_do_not_panic() {
        let mut index = HnswIndex::<u64>::new(3, HnswParams::default()).unwrap();
        for key in 0..100 {
            index.add(key, &[0.1, 0.7, 0.3]).unwrap();
        }
        let got = index.search(&Query::new(&[0.1, 0.7, 0.3], 5)).unwrap();
        assert_eq!(got.hits.len(), 5);
        assert!(got.hits.iter().all(|h| (h.score - 1.0).abs() < 1e-6));
    }
}
