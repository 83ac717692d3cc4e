//! The error type of this crate.

use thiserror::Error;

/// Everything that can go wrong while building, searching or decoding a vector index.
///
/// Every variant describes a problem with the caller's input (a vector, a parameter
/// or a byte buffer); this crate performs no I/O, so there are no internal failures
/// to report.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum AnnError {
    /// A vector does not have the dimension the index was created with.
    #[error("vector has {got} dimensions; the index expects {expected}")]
    WrongDimension {
        /// The dimension of the index.
        expected: usize,
        /// The dimension of the vector that was passed in.
        got: usize,
    },
    /// A vector contains a NaN or an infinity.
    #[error("vector component {index} is not a finite number")]
    NonFinite {
        /// The position of the first offending component.
        index: usize,
    },
    /// A vector has zero length and therefore no direction to compare.
    #[error("vector has zero length and cannot be normalised")]
    ZeroVector,
    /// A parameter is outside its valid range.
    #[error("invalid parameter {name} = {value}: expected {expected}")]
    InvalidParam {
        /// The parameter's name.
        name: &'static str,
        /// The value that was given.
        value: f64,
        /// A description of the valid range.
        expected: &'static str,
    },
    /// The index already holds the largest number of rows its `u32` ordinals can address.
    #[error("the index is full: it cannot hold more than {max} vectors")]
    CapacityExceeded {
        /// The largest number of rows.
        max: usize,
    },
    /// A serialised buffer does not start with this crate's magic bytes.
    #[error("not a ragscope vector buffer (bad magic bytes)")]
    BadMagic,
    /// A serialised buffer was written by a format version this build cannot read.
    #[error("vector buffer has format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The version found in the header.
        found: u16,
        /// The version this build reads and writes.
        supported: u16,
    },
    /// A serialised buffer was produced by a different embedding model.
    #[error("vectors were embedded with model {found:?}, but model {expected:?} is configured")]
    ModelMismatch {
        /// The model id the caller expects.
        expected: String,
        /// The model id recorded in the buffer.
        found: String,
    },
    /// A model id is empty, too long to serialise, or not valid UTF-8.
    #[error("invalid model id: {reason}")]
    InvalidModelId {
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A serialised buffer ends before the data its header announces.
    #[error("vector buffer is truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the header promises.
        needed: usize,
        /// Bytes actually present.
        available: usize,
    },
    /// A serialised buffer has bytes after its checksum.
    #[error("vector buffer has {extra} unexpected trailing bytes")]
    TrailingBytes {
        /// Number of bytes after the end of the data.
        extra: usize,
    },
    /// A serialised buffer's checksum does not match its contents.
    #[error("vector buffer checksum mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    ChecksumMismatch {
        /// The checksum written in the buffer.
        stored: u64,
        /// The checksum of the bytes read.
        computed: u64,
    },
    /// A serialised key does not fit the index's key type.
    #[error("stored key {key} does not fit the index's key type")]
    KeyOutOfRange {
        /// The stored key.
        key: u64,
    },
    /// A serialised buffer holds the same key twice.
    #[error("vector buffer holds key {key} more than once")]
    DuplicateKey {
        /// The repeated key.
        key: u64,
    },
    /// A serialised graph or index section is inconsistent.
    #[error("index bytes are damaged: {0}")]
    Corrupt(String),
}

/// Result alias with [`AnnError`].
pub type Result<T, E = AnnError> = std::result::Result<T, E>;
