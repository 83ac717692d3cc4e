//! Dense vector indexes for ragscope: exact search, HNSW, and their kernels.
//!
//! This crate is compute-only: no I/O, no async, no runtime. The engine calls it
//! from blocking threads and persists its bytes through the store.
//!
//! * [`FlatIndex`] scans one contiguous, L2-normalised matrix with an
//!   autovectorised dot product ([`kernel::dot`]) and a bounded heap. It is exact.
//! * [`HnswIndex`] puts an HNSW graph ([`graph`], walked over int8 codes from
//!   [`quant`]) over a [`FlatIndex`] for approximate search on large
//!   collections; candidates are rescored exactly, and the graph can be saved
//!   and read back without a rebuild.
//! * [`VectorIndex`] uses exact search below
//!   [`VectorIndexParams::hnsw_threshold`] vectors (20,000 by default) and HNSW
//!   above it; every [`SearchOutcome`] says which [`IndexKind`] answered.
//! * [`format`] turns an index into bytes tagged with the embedding model id and
//!   dimension, and refuses to read bytes of another model back; an index can
//!   read its vectors in place from such bytes when the caller shares them
//!   ([`SharedBytes`], e.g. a memory-mapped file), so full-precision vectors
//!   need not be held in memory.
//!
//! Vectors are normalised when they are added, so scores are cosine similarities
//! and keys are the caller's (any `Copy + Eq + Hash` type, `u64` by default).
//!
//! ```
//! use rag_ann::{IndexKind, Query, VectorIndex, VectorIndexParams};
//!
//! let mut index = VectorIndex::<u64>::new(4, VectorIndexParams::default())?;
//! index.add(1, &[1.0, 0.0, 0.0, 0.0])?;
//! index.add(2, &[0.0, 1.0, 0.0, 0.0])?;
//! index.add(3, &[0.7, 0.7, 0.0, 0.0])?;
//!
//! let only_odd = |key: u64| key % 2 == 1;
//! let out = index.search(&Query::new(&[1.0, 0.1, 0.0, 0.0], 2).filter(&only_odd))?;
//! assert_eq!(out.kind, IndexKind::Exact); // a small index is searched exhaustively
//! assert_eq!(out.hits.iter().map(|h| h.key).collect::<Vec<_>>(), [1, 3]);
//! assert!(out.hits[0].score > 0.99);
//!
//! // A vector of the wrong dimension is refused with a structured error.
//! assert!(matches!(
//!     index.add(4, &[1.0, 2.0]),
//!     Err(rag_ann::AnnError::WrongDimension { expected: 4, got: 2 })
//! ));
//! # Ok::<(), rag_ann::AnnError>(())
//! ```

pub mod error;
pub mod flat;
pub mod format;
mod graph;
pub mod hnsw;
pub mod kernel;
pub mod quant;
mod rows;
pub mod search;
pub mod synthetic;
mod topk;
pub mod vector_index;

pub use error::{AnnError, Result};
pub use flat::FlatIndex;
pub use hnsw::{HnswIndex, HnswParams};
pub use rows::SharedBytes;
pub use search::{Hit, IndexKind, Query, SearchOutcome, VectorSearcher};
pub use vector_index::{VectorIndex, VectorIndexParams};
