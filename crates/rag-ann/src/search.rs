//! The search contract shared by every index: queries, hits and the searcher trait.

use crate::error::Result;
use std::fmt;

/// Which index answered a search. The engine reports it in its recall event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IndexKind {
    /// An exhaustive scan: the results are the true nearest neighbours.
    Exact,
    /// An HNSW graph walk: the results are approximate.
    Hnsw,
}

impl IndexKind {
    /// A stable snake_case name for events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexKind::Exact => "exact",
            IndexKind::Hnsw => "hnsw",
        }
    }
}

impl fmt::Display for IndexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One search result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit<K> {
    /// The caller's key of the vector.
    pub key: K,
    /// Cosine similarity between the query and the vector, in `[-1, 1]`; higher is closer.
    pub score: f32,
}

/// The hits of a search, best first, and the index that produced them.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome<K> {
    /// At most `k` hits, sorted by descending score.
    pub hits: Vec<Hit<K>>,
    /// Which index answered.
    pub kind: IndexKind,
}

/// A search request: the query vector, how many hits, and optional knobs.
///
/// ```
/// use rag_ann::Query;
/// let wanted = |key: u64| key % 2 == 0;
/// let q = Query::new(&[0.1, 0.2, 0.3], 10).ef(128).filter(&wanted);
/// assert_eq!(q.k(), 10);
/// ```
#[derive(Clone, Copy)]
pub struct Query<'a, K> {
    pub(crate) vector: &'a [f32],
    pub(crate) k: usize,
    pub(crate) ef: Option<usize>,
    pub(crate) filter: Option<&'a dyn Fn(K) -> bool>,
}

impl<'a, K> Query<'a, K> {
    /// A query for the `k` vectors closest to `vector` (which need not be normalised).
    pub fn new(vector: &'a [f32], k: usize) -> Self {
        Self {
            vector,
            k,
            ef: None,
            filter: None,
        }
    }

    /// Overrides the HNSW search width for this query; exact search ignores it.
    pub fn ef(mut self, ef: usize) -> Self {
        self.ef = Some(ef);
        self
    }

    /// Only keys for which `filter` returns `true` may appear in the results.
    pub fn filter(mut self, filter: &'a dyn Fn(K) -> bool) -> Self {
        self.filter = Some(filter);
        self
    }

    /// The number of hits asked for.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The query vector as given.
    pub fn vector(&self) -> &'a [f32] {
        self.vector
    }
}

impl<K> fmt::Debug for Query<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Query")
            .field("dims", &self.vector.len())
            .field("k", &self.k)
            .field("ef", &self.ef)
            .field("filtered", &self.filter.is_some())
            .finish()
    }
}

/// Anything that answers nearest-neighbour queries over keyed vectors.
///
/// Implemented by [`FlatIndex`](crate::FlatIndex), [`HnswIndex`](crate::HnswIndex)
/// and the size-adaptive [`VectorIndex`](crate::VectorIndex).
pub trait VectorSearcher<K> {
    /// The dimension of the vectors.
    fn dims(&self) -> usize;
    /// The number of live (not removed) vectors.
    fn len(&self) -> usize;
    /// Whether the index holds no live vector.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The closest vectors to the query, best first.
    fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>>;
}
