//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while loading an `E5S1` model file.
///
/// Embedding itself cannot fail once a model is loaded: every failure mode is
/// detected by the parser, which validates all offsets, sizes and shapes up
/// front so that the forward pass never indexes out of bounds.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum E5Error {
    /// The file does not start with the `E5S1` magic bytes.
    #[error("bad magic: expected \"E5S1\", found {found:02x?}")]
    BadMagic {
        /// The first bytes of the buffer (fewer than four if it is shorter).
        found: Vec<u8>,
    },

    /// The file declares a format version this crate does not understand.
    #[error("unsupported model file version {found} (this crate reads version {expected})")]
    UnsupportedVersion {
        /// The version in the header.
        found: u32,
        /// The version this crate reads.
        expected: u32,
    },

    /// A read ran past the end of the buffer.
    #[error("model file truncated while reading {what}: need {needed} bytes at offset {offset}, but the file has {len} bytes")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Byte offset where the read started.
        offset: usize,
        /// Number of bytes the read needed.
        needed: usize,
        /// Total length of the buffer.
        len: usize,
    },

    /// A header field has a value the forward pass cannot work with.
    #[error("invalid header field {field} = {value}: {reason}")]
    InvalidHeader {
        /// The field name.
        field: &'static str,
        /// The value found.
        value: i64,
        /// Why it is rejected.
        reason: &'static str,
    },

    /// The tokenizer section is inconsistent.
    #[error("invalid tokenizer section: {reason}")]
    InvalidTokenizer {
        /// What is wrong.
        reason: String,
    },

    /// The tensor directory names a tensor this crate does not know.
    #[error("unknown tensor {name:?} in the tensor directory")]
    UnknownTensor {
        /// The tensor name.
        name: String,
    },

    /// The tensor directory names the same tensor twice.
    #[error("tensor {name:?} appears twice in the tensor directory")]
    DuplicateTensor {
        /// The tensor name.
        name: String,
    },

    /// A tensor the forward pass needs is not in the directory.
    #[error("tensor {name:?} is missing from the tensor directory")]
    MissingTensor {
        /// The tensor name.
        name: String,
    },

    /// A tensor has an unexpected element type.
    #[error("tensor {name:?} has dtype {found}, expected {expected} (0 = f32, 1 = Q4_0)")]
    WrongDtype {
        /// The tensor name.
        name: String,
        /// The dtype code this crate expects.
        expected: u8,
        /// The dtype code found.
        found: u8,
    },

    /// A tensor has an unexpected number of elements or bytes.
    #[error("tensor {name:?} has the wrong shape: expected {expected_elems} elements ({expected_bytes} bytes), found {found_elems} elements ({found_bytes} bytes)")]
    WrongShape {
        /// The tensor name.
        name: String,
        /// The element count implied by the header's hyper-parameters.
        expected_elems: u64,
        /// The byte size implied by the header's hyper-parameters.
        expected_bytes: u64,
        /// The element count in the directory.
        found_elems: u64,
        /// The byte size in the directory.
        found_bytes: u64,
    },

    /// A tensor's data lies (partly) outside the buffer.
    #[error("tensor {name:?} data [{offset}, {offset}+{nbytes}) lies outside the {len}-byte file")]
    TensorOutOfBounds {
        /// The tensor name.
        name: String,
        /// Absolute offset of the data.
        offset: u64,
        /// Byte size of the data.
        nbytes: u64,
        /// Total length of the buffer.
        len: usize,
    },

    /// The requested matrix kernel tier cannot run on this CPU (or, for
    /// AMX, the operating system refused the tile registers).
    #[error("the {kernel} embedder kernel is not supported on this machine (the best one here is {best})", best = crate::Kernel::best())]
    KernelUnsupported {
        /// The tier that was asked for.
        kernel: crate::Kernel,
    },

    /// Reading the model file failed (only from [`crate::E5Model::load`]).
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The path that was read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
