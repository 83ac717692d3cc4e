//! The size-adaptive index: exact below a threshold, HNSW above it.

use crate::error::{AnnError, Result};
use crate::flat::FlatIndex;
use crate::hnsw::{HnswIndex, HnswParams};
use crate::search::{IndexKind, Query, SearchOutcome, VectorSearcher};
use std::hash::Hash;

/// When to switch between exact and approximate search, and how to build the graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorIndexParams {
    /// With at least this many live vectors the index builds and uses an HNSW graph;
    /// below half of it, the graph is dropped again. The gap keeps an index that
    /// hovers around the threshold from rebuilding over and over.
    pub hnsw_threshold: usize,
    /// The graph's parameters.
    pub hnsw: HnswParams,
}

impl Default for VectorIndexParams {
    fn default() -> Self {
        Self {
            hnsw_threshold: 20_000,
            hnsw: HnswParams::default(),
        }
    }
}

impl VectorIndexParams {
    /// Checks every parameter against its valid range.
    pub fn validate(&self) -> Result<()> {
        if self.hnsw_threshold < 2 {
            return Err(AnnError::InvalidParam {
                name: "hnsw_threshold",
                value: self.hnsw_threshold as f64,
                expected: "at least 2",
            });
        }
        self.hnsw.validate()
    }
}

#[derive(Debug)]
enum Inner<K> {
    Exact(FlatIndex<K>),
    Hnsw(Box<HnswIndex<K>>),
}

/// A vector index that searches exhaustively while that is fast and exact, and
/// switches to an HNSW graph once it holds [`VectorIndexParams::hnsw_threshold`]
/// vectors.
///
/// Exact search over 20,000 vectors of 384 dimensions takes a few milliseconds
/// and is always right, so small knowledge bases never pay for a graph or lose
/// recall. Every search reports which index answered in
/// [`SearchOutcome::kind`].
///
/// Crossing the threshold builds the graph inside the call to [`add`](Self::add)
/// or [`extend`](Self::extend) that crosses it; that call takes as long as a bulk
/// build. Load data in bulk with [`from_flat`](Self::from_flat) or
/// [`extend`](Self::extend), and call mutating methods off the async runtime.
#[derive(Debug)]
pub struct VectorIndex<K = u64> {
    params: VectorIndexParams,
    inner: Inner<K>,
}

impl<K: Copy + Eq + Hash> VectorIndex<K> {
    /// An empty index for vectors of `dims` dimensions.
    pub fn new(dims: usize, params: VectorIndexParams) -> Result<Self> {
        Self::from_flat(FlatIndex::new(dims)?, params)
    }

    /// Wraps already loaded vectors, building a graph if there are enough of them.
    pub fn from_flat(flat: FlatIndex<K>, params: VectorIndexParams) -> Result<Self> {
        params.validate()?;
        let mut index = Self {
            params,
            inner: Inner::Exact(flat),
        };
        index.adapt()?;
        Ok(index)
    }

    /// The parameters.
    pub fn params(&self) -> &VectorIndexParams {
        &self.params
    }

    /// Which index currently answers searches.
    pub fn kind(&self) -> IndexKind {
        match &self.inner {
            Inner::Exact(_) => IndexKind::Exact,
            Inner::Hnsw(_) => IndexKind::Hnsw,
        }
    }

    /// The vector storage (for iteration, lookups and serialisation).
    pub fn store(&self) -> &FlatIndex<K> {
        match &self.inner {
            Inner::Exact(flat) => flat,
            Inner::Hnsw(hnsw) => hnsw.store(),
        }
    }

    /// Gives the vector storage back, dropping any graph.
    pub fn into_store(self) -> FlatIndex<K> {
        match self.inner {
            Inner::Exact(flat) => flat,
            Inner::Hnsw(hnsw) => (*hnsw).into_store(),
        }
    }

    /// The dimension of the vectors.
    pub fn dims(&self) -> usize {
        self.store().dims()
    }

    /// The number of live vectors.
    pub fn len(&self) -> usize {
        self.store().len()
    }

    /// Whether no live vector is stored.
    pub fn is_empty(&self) -> bool {
        self.store().is_empty()
    }

    /// Whether `key` is stored.
    pub fn contains(&self, key: K) -> bool {
        self.store().contains(key)
    }

    /// Adds `vector` under `key`, replacing any vector already stored for `key`.
    pub fn add(&mut self, key: K, vector: &[f32]) -> Result<()> {
        match &mut self.inner {
            Inner::Exact(flat) => flat.add(key, vector)?,
            Inner::Hnsw(hnsw) => hnsw.add(key, vector)?,
        }
        self.adapt()
    }

    /// Adds many vectors; when this crosses the threshold the graph is built once
    /// at the end rather than grown one vector at a time.
    pub fn extend<'v>(&mut self, items: impl IntoIterator<Item = (K, &'v [f32])>) -> Result<()> {
        let result = match &mut self.inner {
            Inner::Exact(flat) => items.into_iter().try_for_each(|(k, v)| flat.add(k, v)),
            Inner::Hnsw(hnsw) => hnsw.extend(items),
        };
        self.adapt()?;
        result
    }

    /// Removes `key`. Returns whether it was present.
    pub fn remove(&mut self, key: K) -> bool {
        let removed = match &mut self.inner {
            Inner::Exact(flat) => flat.remove(key),
            Inner::Hnsw(hnsw) => hnsw.remove(key),
        };
        if removed {
            // Dropping the graph cannot fail.
            let _ = self.adapt();
        }
        removed
    }

    /// The closest vectors to the query, best first, and which index answered.
    pub fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>> {
        match &self.inner {
            Inner::Exact(flat) => flat.search(query),
            Inner::Hnsw(hnsw) => hnsw.search(query),
        }
    }

    /// The graph of an HNSW index without tombstones, as bytes for
    /// [`with_graph`](Self::with_graph); `None` for exact search.
    pub fn encode_graph(&self) -> Option<Vec<u8>> {
        match &self.inner {
            Inner::Exact(_) => None,
            Inner::Hnsw(h) => h.encode_graph(),
        }
    }

    /// Wraps vectors read back from bytes with their stored graph, so that
    /// nothing is built: the graph is used when the size calls for one and
    /// the bytes fit the vectors; otherwise (or when `graph` is `None`) this
    /// is [`from_flat`](Self::from_flat).
    pub fn with_graph(
        flat: FlatIndex<K>,
        params: VectorIndexParams,
        graph: Option<&[u8]>,
    ) -> Result<Self> {
        params.validate()?;
        let flat = match graph.filter(|_| flat.len() >= params.hnsw_threshold) {
            Some(bytes) => match HnswIndex::with_graph(flat, params.hnsw, bytes) {
                Ok(h) => {
                    return Ok(Self {
                        params,
                        inner: Inner::Hnsw(Box::new(h)),
                    })
                }
                Err((_, flat)) => flat,
            },
            None => flat,
        };
        Self::from_flat(flat, params)
    }

    /// Moves between exact and HNSW search as the size requires.
    fn adapt(&mut self) -> Result<()> {
        let len = self.len();
        let promote = matches!(self.inner, Inner::Exact(_)) && len >= self.params.hnsw_threshold;
        let demote = matches!(self.inner, Inner::Hnsw(_)) && len < self.params.hnsw_threshold / 2;
        if !(promote || demote) {
            return Ok(());
        }
        // A throwaway placeholder lets us move the storage out of `self.inner`.
        let dims = self.dims();
        let placeholder = Inner::Exact(FlatIndex::new(dims)?);
        let store = match std::mem::replace(&mut self.inner, placeholder) {
            Inner::Exact(flat) => flat,
            Inner::Hnsw(hnsw) => (*hnsw).into_store(),
        };
        self.inner = if promote {
            Inner::Hnsw(Box::new(HnswIndex::build(store, self.params.hnsw)?))
        } else {
            Inner::Exact(store)
        };
        Ok(())
    }
}

impl<K: Copy + Eq + Hash> VectorSearcher<K> for VectorIndex<K> {
    fn dims(&self) -> usize {
        VectorIndex::dims(self)
    }
    fn len(&self) -> usize {
        VectorIndex::len(self)
    }
    fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>> {
        VectorIndex::search(self, query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::ClusteredVectors;

    #[test]
    fn switches_kind_at_the_threshold_with_hysteresis() {
        let params = VectorIndexParams {
            hnsw_threshold: 3_000,
            ..VectorIndexParams::default()
        };
        let mut data = ClusteredVectors::new(24, 8, 0.8, 5);
        let mut index = VectorIndex::<u64>::new(24, params).unwrap();
        for key in 0..2_999u64 {
            index.add(key, &data.sample()).unwrap();
        }
        let q = data.sample();
        assert_eq!(index.kind(), IndexKind::Exact);
        assert_eq!(
            index.search(&Query::new(&q, 5)).unwrap().kind,
            IndexKind::Exact
        );
        index.add(2_999, &data.sample()).unwrap();
        assert_eq!(index.kind(), IndexKind::Hnsw);
        assert_eq!(
            index.search(&Query::new(&q, 5)).unwrap().kind,
            IndexKind::Hnsw
        );
        // Below the threshold but above half of it, the graph stays.
        for key in 0..1_400u64 {
            assert!(index.remove(key));
        }
        assert_eq!(index.kind(), IndexKind::Hnsw);
        for key in 1_400..1_600u64 {
            assert!(index.remove(key));
        }
        assert_eq!(index.kind(), IndexKind::Exact);
        assert_eq!(index.len(), 1_400);
        assert!(index.store().tombstones() < 1_600);
    }

    #[test]
    fn bulk_extend_builds_once_and_from_flat_decides() {
        let params = VectorIndexParams {
            hnsw_threshold: 2_000,
            ..VectorIndexParams::default()
        };
        let mut data = ClusteredVectors::new(16, 4, 0.8, 6);
        let rows = data.matrix(2_500);
        let mut index = VectorIndex::<u64>::new(16, params).unwrap();
        index
            .extend(
                rows.chunks_exact(16)
                    .enumerate()
                    .map(|(i, v)| (i as u64, v)),
            )
            .unwrap();
        assert_eq!(index.kind(), IndexKind::Hnsw);
        assert_eq!(index.len(), 2_500);
        let flat = index.into_store();
        let again = VectorIndex::from_flat(flat, params).unwrap();
        assert_eq!(again.kind(), IndexKind::Hnsw);
        assert!(VectorIndex::<u64>::new(
            16,
            VectorIndexParams {
                hnsw_threshold: 0,
                ..params
            }
        )
        .is_err());
    }
}
