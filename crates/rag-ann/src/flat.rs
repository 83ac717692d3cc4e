//! Exact search over one contiguous, normalised matrix.

use crate::error::{AnnError, Result};
use crate::kernel;
use crate::rows::Rows;
use crate::search::{Hit, IndexKind, Query, SearchOutcome, VectorSearcher};
use crate::topk::TopK;
use rustc_hash::FxHashMap;
use std::hash::Hash;

/// The largest dimension an index accepts. Real embedding models stay far below it;
/// the limit only stops absurd values from allocating gigabytes per row.
pub const MAX_DIMS: usize = 65_536;

/// The largest number of rows (live plus tombstoned) a [`FlatIndex`] can hold,
/// since rows are addressed by `u32` ordinals.
pub const MAX_ROWS: usize = u32::MAX as usize;

/// Tombstones are compacted away once there are at least this many of them...
const COMPACT_MIN_TOMBSTONES: usize = 1024;
/// ...and they make up at least this fraction of all rows.
const COMPACT_TOMBSTONE_RATIO: f64 = 0.25;

/// An exact nearest-neighbour index over L2-normalised vectors.
///
/// * All vectors live in one row-major matrix; row `i` holds the vector with
///   the dense `u32` ordinal `i`, and `keys[i]` is the caller's key for it. The
///   matrix is the index's own buffer, or bytes shared with the caller (a
///   memory-mapped file, see [`crate::format::decode_shared`]) that the first
///   change copies.
/// * Vectors are normalised when added, so cosine similarity is a dot product.
/// * Removal marks a row as a tombstone; rows are compacted once tombstones make up
///   a quarter of the matrix. Ordinals are therefore internal and never exposed.
/// * Adding a key that is present replaces its vector.
///
/// ```
/// use rag_ann::{FlatIndex, Query};
/// let mut index = FlatIndex::<u64>::new(3)?;
/// index.add(7, &[1.0, 0.0, 0.0])?;
/// index.add(8, &[0.0, 1.0, 0.0])?;
/// let out = index.search(&Query::new(&[0.9, 0.1, 0.0], 1))?;
/// assert_eq!(out.hits[0].key, 7);
/// # Ok::<(), rag_ann::AnnError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FlatIndex<K = u64> {
    dims: usize,
    vectors: Rows,
    keys: Vec<K>,
    live: Vec<bool>,
    ordinals: FxHashMap<K, u32>,
    tombstones: usize,
}

impl<K> FlatIndex<K> {
    /// The dimension of the vectors.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The number of live vectors.
    pub fn len(&self) -> usize {
        self.ordinals.len()
    }

    /// Whether no live vector is stored.
    pub fn is_empty(&self) -> bool {
        self.ordinals.is_empty()
    }

    /// The number of rows in the matrix, tombstones included.
    pub fn rows(&self) -> usize {
        self.keys.len()
    }

    /// The number of removed rows still occupying space.
    pub fn tombstones(&self) -> usize {
        self.tombstones
    }
}

impl<K: Copy + Eq + Hash> FlatIndex<K> {
    /// An empty index for vectors of `dims` dimensions.
    pub fn new(dims: usize) -> Result<Self> {
        Self::with_capacity(dims, 0)
    }

    /// An empty index with room for `capacity` vectors before it reallocates.
    pub fn with_capacity(dims: usize, capacity: usize) -> Result<Self> {
        if dims == 0 || dims > MAX_DIMS {
            return Err(AnnError::InvalidParam {
                name: "dims",
                value: dims as f64,
                expected: "1..=65536",
            });
        }
        Ok(Self {
            dims,
            vectors: Rows::Owned(Vec::with_capacity(capacity.saturating_mul(dims))),
            keys: Vec::with_capacity(capacity),
            live: Vec::with_capacity(capacity),
            ordinals: FxHashMap::with_capacity_and_hasher(capacity, Default::default()),
            tombstones: 0,
        })
    }

    /// An index over `rows` already normalised, row `i` under `keys[i]`,
    /// every row live. Refuses a repeated key or a matrix of another size.
    pub(crate) fn from_rows(dims: usize, keys: Vec<K>, rows: Rows) -> Result<Self>
    where
        K: Into<u64>,
    {
        let mut index = Self::with_capacity(dims, 0)?;
        if rows.as_slice().len() != keys.len().saturating_mul(dims) || keys.len() > MAX_ROWS {
            return Err(AnnError::Truncated {
                needed: keys.len().saturating_mul(dims),
                available: rows.as_slice().len(),
            });
        }
        index.ordinals.reserve(keys.len());
        for (ordinal, &key) in keys.iter().enumerate() {
            if index.ordinals.insert(key, ordinal as u32).is_some() {
                return Err(AnnError::DuplicateKey { key: key.into() });
            }
        }
        index.live = vec![true; keys.len()];
        index.keys = keys;
        index.vectors = rows;
        Ok(index)
    }

    /// Whether the vectors are read in place from bytes shared with the
    /// caller rather than held in the index's own buffer.
    pub fn is_shared(&self) -> bool {
        self.vectors.is_shared()
    }

    /// Bytes of heap the matrix takes (0 when it is shared).
    pub fn matrix_heap_bytes(&self) -> usize {
        self.vectors.heap_bytes()
    }

    /// Whether `key` is stored.
    pub fn contains(&self, key: K) -> bool {
        self.ordinals.contains_key(&key)
    }

    /// The stored (normalised) vector of `key`.
    pub fn vector(&self, key: K) -> Option<&[f32]> {
        self.ordinals.get(&key).map(|&o| self.row(o))
    }

    /// Live keys and their normalised vectors, in row order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &[f32])> + '_ {
        self.keys
            .iter()
            .zip(self.vectors.as_slice().chunks_exact(self.dims))
            .zip(&self.live)
            .filter(|(_, &live)| live)
            .map(|((&k, v), _)| (k, v))
    }

    /// Adds `vector` under `key`, replacing the vector already stored for `key`.
    ///
    /// The vector is validated (dimension, finiteness, non-zero length) and
    /// normalised; on error the index is unchanged.
    pub fn add(&mut self, key: K, vector: &[f32]) -> Result<()> {
        self.add_row(key, vector).map(|_| ())
    }

    /// Removes `key`. Returns whether it was present.
    ///
    /// The row becomes a tombstone, and the matrix is compacted when tombstones
    /// reach a quarter of all rows (and at least 1,024).
    pub fn remove(&mut self, key: K) -> bool {
        let removed = self.remove_keep_row(key);
        if removed && self.should_compact() {
            self.compact();
        }
        removed
    }

    /// Drops every tombstone and renumbers the remaining rows densely.
    pub fn compact(&mut self) {
        if self.tombstones == 0 {
            return;
        }
        let dims = self.dims;
        let vectors = self.vectors.to_mut();
        let mut write = 0usize;
        for read in 0..self.keys.len() {
            if !self.live[read] {
                continue;
            }
            if write != read {
                vectors.copy_within(read * dims..(read + 1) * dims, write * dims);
                self.keys[write] = self.keys[read];
                self.live[write] = true;
            }
            // Ordinals fit in u32 because rows never exceed MAX_ROWS.
            self.ordinals.insert(self.keys[write], write as u32);
            write += 1;
        }
        vectors.truncate(write * dims);
        self.keys.truncate(write);
        self.live.truncate(write);
        self.tombstones = 0;
    }

    /// Releases spare capacity after a bulk load or a compaction.
    pub fn shrink_to_fit(&mut self) {
        self.vectors.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.live.shrink_to_fit();
        self.ordinals.shrink_to_fit();
    }

    /// The `k` nearest live vectors to the query, by cosine similarity.
    pub fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>> {
        let q = kernel::normalised(query.vector, self.dims)?;
        let hits = self.scan(&q, query.k, query.filter);
        Ok(SearchOutcome {
            hits,
            kind: IndexKind::Exact,
        })
    }

    /// Exhaustive scan with an already normalised query.
    pub(crate) fn scan(
        &self,
        q: &[f32],
        k: usize,
        filter: Option<&dyn Fn(K) -> bool>,
    ) -> Vec<Hit<K>> {
        if k == 0 || self.is_empty() {
            return Vec::new();
        }
        let mut top = TopK::new(k.min(self.len()));
        let rows = self
            .vectors
            .as_slice()
            .chunks_exact(self.dims)
            .zip(&self.live)
            .zip(&self.keys);
        // Two loops, so the unfiltered scan carries no per-row indirect call.
        match filter {
            None => {
                for (ordinal, ((row, &live), _)) in rows.enumerate() {
                    if live {
                        top.push(kernel::dot(q, row), ordinal as u32);
                    }
                }
            }
            Some(keep) => {
                for (ordinal, ((row, &live), &key)) in rows.enumerate() {
                    if live && keep(key) {
                        top.push(kernel::dot(q, row), ordinal as u32);
                    }
                }
            }
        }
        top.into_sorted()
            .into_iter()
            .map(|s| Hit {
                key: self.keys[s.ordinal as usize],
                score: s.score,
            })
            .collect()
    }

    /// Adds a vector and returns its row ordinal, tombstoning any previous row of `key`.
    pub(crate) fn add_row(&mut self, key: K, vector: &[f32]) -> Result<u32> {
        if self.keys.len() >= MAX_ROWS {
            if self.tombstones == 0 {
                return Err(AnnError::CapacityExceeded { max: MAX_ROWS });
            }
            self.compact();
        }
        kernel::push_normalised(self.vectors.to_mut(), vector, self.dims)?;
        let ordinal = self.keys.len() as u32;
        self.keys.push(key);
        self.live.push(true);
        if let Some(old) = self.ordinals.insert(key, ordinal) {
            self.live[old as usize] = false;
            self.tombstones += 1;
        }
        Ok(ordinal)
    }

    /// Tombstones the row of `key` without ever compacting, so ordinals stay stable.
    pub(crate) fn remove_keep_row(&mut self, key: K) -> bool {
        match self.ordinals.remove(&key) {
            Some(ordinal) => {
                self.live[ordinal as usize] = false;
                self.tombstones += 1;
                true
            }
            None => false,
        }
    }

    pub(crate) fn should_compact(&self) -> bool {
        self.tombstones >= COMPACT_MIN_TOMBSTONES
            && self.tombstones as f64 >= COMPACT_TOMBSTONE_RATIO * self.keys.len() as f64
    }

    /// Every row (live or not), concatenated.
    pub(crate) fn raw_rows(&self) -> &[f32] {
        self.vectors.as_slice()
    }

    /// The normalised vector in row `ordinal`.
    #[inline]
    pub(crate) fn row(&self, ordinal: u32) -> &[f32] {
        let start = ordinal as usize * self.dims;
        &self.vectors.as_slice()[start..start + self.dims]
    }

    #[inline]
    pub(crate) fn is_live(&self, ordinal: u32) -> bool {
        self.live.get(ordinal as usize).copied().unwrap_or(false)
    }

    #[inline]
    pub(crate) fn key(&self, ordinal: u32) -> K {
        self.keys[ordinal as usize]
    }
}

impl<K: Copy + Eq + Hash> VectorSearcher<K> for FlatIndex<K> {
    fn dims(&self) -> usize {
        self.dims
    }
    fn len(&self) -> usize {
        self.ordinals.len()
    }
    fn search(&self, query: &Query<'_, K>) -> Result<SearchOutcome<K>> {
        FlatIndex::search(self, query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SplitMix64;
    use proptest::prelude::*;

    /// The obvious implementation: score everything, sort, truncate.
    fn brute_force(
        index: &FlatIndex<u64>,
        q: &[f32],
        k: usize,
        keep: &dyn Fn(u64) -> bool,
    ) -> Vec<(u64, f32)> {
        let qn = kernel::normalised(q, index.dims()).unwrap();
        let mut all: Vec<(u64, f32)> = index
            .iter()
            .filter(|(key, _)| keep(*key))
            .map(|(key, v)| (key, kernel::dot_scalar(&qn, v)))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(k);
        all
    }

    fn random_index(seed: u64, n: usize, dims: usize) -> FlatIndex<u64> {
        let mut rng = SplitMix64::new(seed);
        let mut index = FlatIndex::new(dims).unwrap();
        for key in 0..n as u64 {
            index.add(key * 3 + 1, &rng.gaussian_vec(dims)).unwrap();
        }
        index
    }

    #[test]
    fn matches_brute_force() {
        let index = random_index(1, 2_000, 48);
        let mut rng = SplitMix64::new(2);
        for _ in 0..50 {
            let q = rng.gaussian_vec(48);
            let got = index.search(&Query::new(&q, 10)).unwrap();
            assert_eq!(got.kind, IndexKind::Exact);
            let want = brute_force(&index, &q, 10, &|_| true);
            assert_eq!(got.hits.len(), want.len());
            for (h, (_, score)) in got.hits.iter().zip(&want) {
                assert!((h.score - score).abs() < 1e-5);
            }
            let got_keys: Vec<u64> = got.hits.iter().map(|h| h.key).collect();
            let want_keys: Vec<u64> = want.iter().map(|w| w.0).collect();
            assert_eq!(got_keys, want_keys);
        }
    }

    #[test]
    fn replace_remove_and_compact_keep_results_right() {
        let mut index = random_index(3, 3_000, 16);
        let mut rng = SplitMix64::new(4);
        // Replace a few keys, then remove most rows to force automatic compaction.
        for key in (1..300u64).map(|i| i * 3 + 1) {
            index.add(key, &rng.gaussian_vec(16)).unwrap();
        }
        assert_eq!(index.len(), 3_000);
        assert_eq!(index.tombstones(), 299);
        for i in 0..2_000u64 {
            assert!(index.remove(i * 3 + 1));
        }
        assert!(!index.remove(2));
        assert_eq!(index.len(), 1_000);
        assert!(
            index.tombstones() < index.rows(),
            "compaction should have run"
        );
        let q = rng.gaussian_vec(16);
        let got: Vec<u64> = index
            .search(&Query::new(&q, 20))
            .unwrap()
            .hits
            .iter()
            .map(|h| h.key)
            .collect();
        let want: Vec<u64> = brute_force(&index, &q, 20, &|_| true)
            .iter()
            .map(|w| w.0)
            .collect();
        assert_eq!(got, want);
        index.compact();
        assert_eq!(index.tombstones(), 0);
        assert_eq!(index.rows(), 1_000);
        let again: Vec<u64> = index
            .search(&Query::new(&q, 20))
            .unwrap()
            .hits
            .iter()
            .map(|h| h.key)
            .collect();
        assert_eq!(again, want);
    }

    #[test]
    fn rejects_bad_input_and_leaves_index_unchanged() {
        let mut index = FlatIndex::<u64>::new(3).unwrap();
        index.add(1, &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(
            index.add(2, &[1.0, 2.0]),
            Err(AnnError::WrongDimension {
                expected: 3,
                got: 2
            })
        );
        assert_eq!(index.add(2, &[0.0; 3]), Err(AnnError::ZeroVector));
        assert_eq!(
            index.add(1, &[1.0, f32::NAN, 0.0]),
            Err(AnnError::NonFinite { index: 1 })
        );
        assert_eq!(index.len(), 1);
        assert_eq!(index.rows(), 1);
        assert!(index.search(&Query::new(&[1.0, 0.0], 1)).is_err());
        assert!(FlatIndex::<u64>::new(0).is_err());
        let stored = index.vector(1).unwrap();
        assert!((kernel::dot(stored, stored) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn k_larger_than_len_and_zero_k() {
        let index = random_index(5, 5, 4);
        assert_eq!(
            index
                .search(&Query::new(&[1.0, 0.0, 0.0, 0.0], 100))
                .unwrap()
                .hits
                .len(),
            5
        );
        assert!(index
            .search(&Query::new(&[1.0, 0.0, 0.0, 0.0], 0))
            .unwrap()
            .hits
            .is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn results_are_sorted_and_respect_the_filter(
            seed in any::<u64>(),
            n in 0usize..300,
            dims in 1usize..40,
            k in 0usize..50,
            modulus in 1u64..7,
            removals in proptest::collection::vec(0u64..300, 0..60),
        ) {
            let mut index = random_index(seed, n, dims);
            for r in removals {
                index.remove(r * 3 + 1);
            }
            let q = SplitMix64::new(seed ^ 0xABCD).gaussian_vec(dims);
            // `u64::is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
            #[allow(clippy::manual_is_multiple_of)]
            let keep = |key: u64| key % modulus == 0;
            let out = index.search(&Query::new(&q, k).filter(&keep)).unwrap();
            let want = brute_force(&index, &q, k, &keep);
            prop_assert_eq!(out.hits.len(), want.len());
            for pair in out.hits.windows(2) {
                prop_assert!(pair[0].score >= pair[1].score);
            }
            for h in &out.hits {
                prop_assert!(keep(h.key));
                prop_assert!(index.contains(h.key));
                prop_assert!(h.score.is_finite() && h.score.abs() <= 1.0 + 1e-5);
            }
            for (h, w) in out.hits.iter().zip(&want) {
                prop_assert!((h.score - w.1).abs() < 1e-5);
            }
        }
    }
}
