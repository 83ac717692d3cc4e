//! Approximate search with a Hierarchical Navigable Small World graph.
//!
//! The graph itself comes from the `hnsw_rs` crate. This module adds what the
//! engine needs around it: input validation and normalisation, caller keys,
//! removal, filtering, and scores identical to those of exact search.

use crate::error::{AnnError, Result};
use crate::flat::FlatIndex;
use crate::kernel;
use crate::search::{Hit, IndexKind, Query, SearchOutcome, VectorSearcher};
use hnsw_rs::anndists::dist::Distance;
use hnsw_rs::hnsw::Hnsw;
use std::fmt;
use std::hash::Hash;

/// `hnsw_rs` allocates per-point neighbour tables for this many layers at most.
const MAX_LAYERS: usize = 16;

/// Below this many vectors a parallel build is not worth the thread hand-offs.
const PARALLEL_BUILD_MIN: usize = 2_048;

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
    /// When a query has a filter, the search width is raised to at least
    /// `k * filter_overfetch` so that enough matching candidates are met.
    pub filter_overfetch: usize,
    /// The graph is rebuilt when removed vectors exceed this fraction of its nodes
    /// (and number at least 256).
    pub rebuild_tombstone_ratio: f32,
    /// Whether bulk builds use all cores through rayon.
    pub parallel_build: bool,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self {
            m: 16,
            ef_construction: 64,
            ef_search: 96,
            filter_overfetch: 8,
            rebuild_tombstone_ratio: 0.2,
            parallel_build: true,
        }
    }
}

impl HnswParams {
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

/// Cosine distance between unit vectors, `1 - dot`, using this crate's kernel.
///
/// `hnsw_rs`'s own `DistDot` sums sequentially and asserts that the distance is
/// not negative, which rounding can violate for (near-)identical unit vectors; we
/// clamp instead.
#[derive(Debug, Clone, Copy, Default)]
struct CosineDistance;

impl Distance<f32> for CosineDistance {
    #[inline]
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - kernel::dot(a, b)).max(0.0)
    }
}

type Graph = Hnsw<'static, f32, CosineDistance>;

/// An approximate nearest-neighbour index: an HNSW graph over a [`FlatIndex`].
///
/// * **Storage.** The vectors stay in a [`FlatIndex`], which is the source of truth
///   for keys, scores, rebuilds and serialisation. `hnsw_rs` keeps its own copy of
///   every vector, so memory is about twice that of the flat index plus the links.
/// * **Scores.** Hits are rescored with the exact kernel, so a vector gets the same
///   score from this index as from [`FlatIndex`].
/// * **Removal.** Removed vectors become tombstones that the graph still walks
///   through but never returns. Once they exceed
///   [`HnswParams::rebuild_tombstone_ratio`] of the nodes, [`remove`](Self::remove)
///   compacts the storage and rebuilds the graph, which costs as much as a bulk
///   build; call it off the async runtime.
/// * **Filtering.** The filter (and the tombstone check) is applied *during* the
///   walk: non-matching nodes still guide navigation but never enter the result
///   list. With a filter the search width is raised to `k * filter_overfetch`.
///   If the walk still yields fewer than `k` hits (a very selective filter, or a
///   tiny graph), the query falls back to an exact scan over the matching rows,
///   which is cheap precisely because few rows match; the outcome then reports
///   [`IndexKind::Exact`].
pub struct HnswIndex<K = u64> {
    params: HnswParams,
    store: FlatIndex<K>,
    graph: Graph,
}

impl<K: Copy + Eq + Hash> HnswIndex<K> {
    /// An empty index for vectors of `dims` dimensions.
    pub fn new(dims: usize, params: HnswParams) -> Result<Self> {
        Self::build(FlatIndex::new(dims)?, params)
    }

    /// Builds the graph over every live vector of `store` (in parallel when
    /// [`HnswParams::parallel_build`] is set). The store is compacted first.
    pub fn build(mut store: FlatIndex<K>, params: HnswParams) -> Result<Self> {
        params.validate()?;
        store.compact();
        let graph = build_graph(&store, &params);
        Ok(Self {
            params,
            store,
            graph,
        })
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

    /// Adds `vector` under `key`, replacing any vector already stored for `key`.
    pub fn add(&mut self, key: K, vector: &[f32]) -> Result<()> {
        let ordinal = self.store.add_row(key, vector)?;
        self.graph
            .insert_slice((self.store.row(ordinal), ordinal as usize));
        self.maybe_rebuild();
        Ok(())
    }

    /// Adds many vectors at once, inserting them into the graph in parallel when
    /// [`HnswParams::parallel_build`] is set. On a validation error the vectors
    /// before the offending one have been added.
    pub fn extend<'v>(&mut self, items: impl IntoIterator<Item = (K, &'v [f32])>) -> Result<()> {
        let first_new = self.store.rows();
        let mut result = Ok(());
        for (key, vector) in items {
            if let Err(e) = self.store.add_row(key, vector) {
                result = Err(e);
                break;
            }
        }
        let new_rows = first_new as u32..self.store.rows() as u32;
        insert_rows(&self.graph, &self.store, new_rows, &self.params);
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
        self.graph = build_graph(&self.store, &self.params);
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
        let mut ef = query.ef.unwrap_or(self.params.ef_search).max(k);
        if query.filter.is_some() {
            ef = ef.max(k.saturating_mul(self.params.filter_overfetch));
        }
        let store = &self.store;
        let user_filter = query.filter;
        let accept = |id: &usize| {
            let ordinal = *id as u32;
            store.is_live(ordinal) && user_filter.is_none_or(|keep| keep(store.key(ordinal)))
        };
        // Without tombstones or a caller filter, skip the per-candidate callback.
        let neighbours = if user_filter.is_none() && store.tombstones() == 0 {
            self.graph.search(&q, k, ef)
        } else {
            self.graph.search_filter(&q, k, ef, Some(&accept))
        };
        if neighbours.len() < k {
            // The walk did not find enough acceptable nodes; an exact scan over the
            // matching rows is both correct and, in that situation, cheap.
            let hits = store.scan(&q, k, user_filter);
            return Ok(SearchOutcome {
                hits,
                kind: IndexKind::Exact,
            });
        }
        let mut hits: Vec<Hit<K>> = neighbours
            .iter()
            .map(|n| {
                let ordinal = n.d_id as u32;
                Hit {
                    key: store.key(ordinal),
                    score: kernel::dot(&q, store.row(ordinal)),
                }
            })
            .collect();
        // Rescoring can reorder near-ties; keep the promise of descending scores.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(SearchOutcome {
            hits,
            kind: IndexKind::Hnsw,
        })
    }
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

/// A fresh graph over all live rows of `store`.
fn build_graph<K: Copy + Eq + Hash>(store: &FlatIndex<K>, params: &HnswParams) -> Graph {
    let graph = Hnsw::new(
        params.m,
        store.rows().max(1024),
        MAX_LAYERS,
        params.ef_construction,
        CosineDistance,
    );
    insert_rows(&graph, store, 0..store.rows() as u32, params);
    graph
}

/// Inserts the live rows in `ordinals` into `graph`, using their ordinals as ids.
fn insert_rows<K: Copy + Eq + Hash>(
    graph: &Graph,
    store: &FlatIndex<K>,
    ordinals: std::ops::Range<u32>,
    params: &HnswParams,
) {
    let batch: Vec<(&[f32], usize)> = ordinals
        .filter(|&o| store.is_live(o))
        .map(|o| (store.row(o), o as usize))
        .collect();
    if params.parallel_build && batch.len() >= PARALLEL_BUILD_MIN {
        graph.parallel_insert_slice(&batch);
    } else {
        for item in batch {
            graph.insert_slice(item);
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
    fn duplicate_vectors_do_not_panic() {
        // hnsw_rs's own dot distance asserts on rounding for identical unit vectors.
        let mut index = HnswIndex::<u64>::new(3, HnswParams::default()).unwrap();
        for key in 0..100 {
            index.add(key, &[0.1, 0.7, 0.3]).unwrap();
        }
        let got = index.search(&Query::new(&[0.1, 0.7, 0.3], 5)).unwrap();
        assert_eq!(got.hits.len(), 5);
        assert!(got.hits.iter().all(|h| (h.score - 1.0).abs() < 1e-6));
    }
}
