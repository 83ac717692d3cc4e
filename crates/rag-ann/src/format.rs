//! The byte format in which the store persists vectors.
//!
//! This module only turns an index into bytes and back; writing them to a file,
//! a database blob or anywhere else is the caller's job. A reader refuses bytes
//! produced by a different embedding model or with a different dimension, so a
//! model change can never silently mix incompatible vectors.
//!
//! # Layout (version 1, all integers little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `RSCPVEC\0` |
//! | 2 | format version (`1`) |
//! | 2 | reserved, zero |
//! | 4 | dimension `d` |
//! | 8 | vector count `n` |
//! | 2 | model id length `m` |
//! | `m` | model id, UTF-8 |
//! | `n × (8 + 4d)` | per vector: the key as `u64`, then `d` × `f32` (normalised) |
//! | 8 | checksum: FNV-1a-64 over all preceding bytes, fed 8 bytes at a time |
//!
//! The matrix is written as rows in index order, so a reader can map it back into
//! one contiguous buffer without reshaping.
//!
//! ```
//! use rag_ann::{format, FlatIndex};
//! let mut index = FlatIndex::<u64>::new(2)?;
//! index.add(42, &[3.0, 4.0])?;
//! let bytes = format::encode(&index, "bge-small-zh-v1.5")?;
//! let back: FlatIndex<u64> = format::decode(&bytes, "bge-small-zh-v1.5", 2)?;
//! assert_eq!(back.vector(42), Some(&[0.6f32, 0.8][..]));
//! assert!(format::decode::<u64>(&bytes, "other-model", 2).is_err());
//! # Ok::<(), rag_ann::AnnError>(())
//! ```

use crate::error::{AnnError, Result};
use crate::flat::{FlatIndex, MAX_DIMS};
use std::hash::Hash;

/// The first eight bytes of every vector buffer.
pub const MAGIC: [u8; 8] = *b"RSCPVEC\0";

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;

/// The longest model id the format can record, in bytes.
pub const MAX_MODEL_ID_LEN: usize = 1024;

const FIXED_HEADER_LEN: usize = 8 + 2 + 2 + 4 + 8 + 2;
const CHECKSUM_LEN: usize = 8;

/// What a buffer's header says about its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorsHeader {
    /// The format version.
    pub version: u16,
    /// The embedding model that produced the vectors.
    pub model_id: String,
    /// The dimension of the vectors.
    pub dims: usize,
    /// The number of vectors.
    pub count: usize,
    /// Where the vector records start.
    header_len: usize,
}

/// Serialises the live vectors of `index` together with the model id.
///
/// Keys are stored as `u64`; every key type that converts into one can be saved.
pub fn encode<K>(index: &FlatIndex<K>, model_id: &str) -> Result<Vec<u8>>
where
    K: Copy + Eq + Hash + Into<u64>,
{
    check_model_id(model_id)?;
    let dims = index.dims();
    let count = index.len();
    let record = 8 + 4 * dims;
    let mut out =
        Vec::with_capacity(FIXED_HEADER_LEN + model_id.len() + count * record + CHECKSUM_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(dims as u32).to_le_bytes());
    out.extend_from_slice(&(count as u64).to_le_bytes());
    out.extend_from_slice(&(model_id.len() as u16).to_le_bytes());
    out.extend_from_slice(model_id.as_bytes());
    for (key, vector) in index.iter() {
        out.extend_from_slice(&key.into().to_le_bytes());
        for x in vector {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    let checksum = fnv1a64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    Ok(out)
}

/// Reads only the header, for instance to report what a stored file contains.
pub fn read_header(bytes: &[u8]) -> Result<VectorsHeader> {
    let fixed = take(bytes, 0, FIXED_HEADER_LEN)?;
    if fixed[..8] != MAGIC {
        return Err(AnnError::BadMagic);
    }
    let version = u16::from_le_bytes([fixed[8], fixed[9]]);
    if version != FORMAT_VERSION {
        return Err(AnnError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let dims = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
    let count = u64::from_le_bytes(fixed[16..24].try_into().expect("8 bytes"));
    let model_len = u16::from_le_bytes([fixed[24], fixed[25]]) as usize;
    let model_bytes = take(bytes, FIXED_HEADER_LEN, model_len)?;
    let model_id = std::str::from_utf8(model_bytes)
        .map_err(|_| AnnError::InvalidModelId {
            reason: "the stored model id is not UTF-8",
        })?
        .to_owned();
    let count = usize::try_from(count).map_err(|_| AnnError::Truncated {
        needed: usize::MAX,
        available: bytes.len(),
    })?;
    Ok(VectorsHeader {
        version,
        model_id,
        dims,
        count,
        header_len: FIXED_HEADER_LEN + model_len,
    })
}

/// Deserialises a buffer written by [`encode`] into a fresh [`FlatIndex`].
///
/// Fails with [`AnnError::ModelMismatch`] or [`AnnError::WrongDimension`] when the
/// buffer was produced by another model or with another dimension than the caller
/// expects, and with a format error when the bytes are damaged.
pub fn decode<K>(
    bytes: &[u8],
    expected_model_id: &str,
    expected_dims: usize,
) -> Result<FlatIndex<K>>
where
    K: Copy + Eq + Hash + TryFrom<u64>,
{
    let header = read_header(bytes)?;
    if header.model_id != expected_model_id {
        return Err(AnnError::ModelMismatch {
            expected: expected_model_id.to_owned(),
            found: header.model_id,
        });
    }
    if header.dims != expected_dims {
        return Err(AnnError::WrongDimension {
            expected: expected_dims,
            got: header.dims,
        });
    }
    if header.dims == 0 || header.dims > MAX_DIMS {
        return Err(AnnError::InvalidParam {
            name: "dims",
            value: header.dims as f64,
            expected: "1..=65536",
        });
    }
    // Check the total length before allocating anything the header asks for.
    let record = 8 + 4 * header.dims;
    let needed = header
        .count
        .checked_mul(record)
        .and_then(|body| body.checked_add(header.header_len + CHECKSUM_LEN))
        .ok_or(AnnError::Truncated {
            needed: usize::MAX,
            available: bytes.len(),
        })?;
    if bytes.len() < needed {
        return Err(AnnError::Truncated {
            needed,
            available: bytes.len(),
        });
    }
    if bytes.len() > needed {
        return Err(AnnError::TrailingBytes {
            extra: bytes.len() - needed,
        });
    }
    let body_end = needed - CHECKSUM_LEN;
    let stored = u64::from_le_bytes(bytes[body_end..].try_into().expect("8 bytes"));
    let computed = fnv1a64(&bytes[..body_end]);
    if stored != computed {
        return Err(AnnError::ChecksumMismatch { stored, computed });
    }
    let mut index = FlatIndex::with_capacity(header.dims, header.count)?;
    let mut vector = vec![0.0f32; header.dims];
    for rec in bytes[header.header_len..body_end].chunks_exact(record) {
        let raw_key = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
        let key = K::try_from(raw_key).map_err(|_| AnnError::KeyOutOfRange { key: raw_key })?;
        for (x, b) in vector.iter_mut().zip(rec[8..].chunks_exact(4)) {
            *x = f32::from_le_bytes(b.try_into().expect("4 bytes"));
        }
        if index.contains(key) {
            return Err(AnnError::DuplicateKey { key: raw_key });
        }
        index.add(key, &vector)?;
    }
    Ok(index)
}

fn check_model_id(model_id: &str) -> Result<()> {
    if model_id.is_empty() {
        return Err(AnnError::InvalidModelId {
            reason: "the model id is empty",
        });
    }
    if model_id.len() > MAX_MODEL_ID_LEN {
        return Err(AnnError::InvalidModelId {
            reason: "the model id is longer than 1024 bytes",
        });
    }
    Ok(())
}

fn take(bytes: &[u8], start: usize, len: usize) -> Result<&[u8]> {
    bytes.get(start..start + len).ok_or(AnnError::Truncated {
        needed: start + len,
        available: bytes.len(),
    })
}

/// The checksum this format uses, for callers that wrap its buffers in their
/// own files: FNV-1a-64, fed one little-endian 64-bit word at a time (then
/// the tail bytes), which is eight times faster than the byte-wise original
/// and just as good at catching torn or truncated writes.
pub fn checksum(bytes: &[u8]) -> u64 {
    fnv1a64(bytes)
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    for w in words {
        hash = (hash ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))).wrapping_mul(PRIME);
    }
    for &b in tail {
        hash = (hash ^ u64::from(b)).wrapping_mul(PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SplitMix64;

    fn sample(n: u64, dims: usize) -> FlatIndex<u64> {
        let mut rng = SplitMix64::new(n);
        let mut index = FlatIndex::new(dims).unwrap();
        for key in 0..n {
            index.add(key * 10, &rng.gaussian_vec(dims)).unwrap();
        }
        index.remove(10);
        index
    }

    #[test]
    fn round_trip_preserves_keys_and_vectors() {
        let index = sample(300, 24);
        let bytes = encode(&index, "m3e-base").unwrap();
        let header = read_header(&bytes).unwrap();
        assert_eq!(
            (header.model_id.as_str(), header.dims, header.count),
            ("m3e-base", 24, 299)
        );
        let back: FlatIndex<u64> = decode(&bytes, "m3e-base", 24).unwrap();
        assert_eq!(back.len(), index.len());
        for (key, v) in index.iter() {
            let w = back.vector(key).unwrap();
            assert!(v.iter().zip(w).all(|(a, b)| (a - b).abs() < 1e-6));
        }
        assert!(!back.contains(10));
        // Narrower key types work while the keys fit.
        assert!(decode::<u32>(&bytes, "m3e-base", 24).is_ok());
    }

    #[test]
    fn refuses_mismatches_and_damage() {
        let bytes = encode(&sample(20, 8), "model-a").unwrap();
        assert_eq!(
            decode::<u64>(&bytes, "model-b", 8).unwrap_err(),
            AnnError::ModelMismatch {
                expected: "model-b".into(),
                found: "model-a".into()
            }
        );
        assert_eq!(
            decode::<u64>(&bytes, "model-a", 16).unwrap_err(),
            AnnError::WrongDimension {
                expected: 16,
                got: 8
            }
        );
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert_eq!(
            decode::<u64>(&bad, "model-a", 8).unwrap_err(),
            AnnError::BadMagic
        );
        let mut bad = bytes.clone();
        bad[8] = 9;
        assert!(matches!(
            decode::<u64>(&bad, "model-a", 8),
            Err(AnnError::UnsupportedVersion { found: 9, .. })
        ));
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x40;
        assert!(matches!(
            decode::<u64>(&bad, "model-a", 8),
            Err(AnnError::ChecksumMismatch { .. })
        ));
        assert!(matches!(
            decode::<u64>(&bytes[..bytes.len() - 1], "model-a", 8),
            Err(AnnError::Truncated { .. })
        ));
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            decode::<u64>(&long, "model-a", 8).unwrap_err(),
            AnnError::TrailingBytes { extra: 1 }
        );
        assert!(matches!(
            decode::<u64>(&bytes[..5], "model-a", 8),
            Err(AnnError::Truncated { .. })
        ));
        assert!(encode(&sample(1, 2), "").is_err());
    }

    #[test]
    fn keys_that_do_not_fit_are_refused() {
        let mut index = FlatIndex::<u64>::new(2).unwrap();
        index.add(u64::from(u32::MAX) + 1, &[1.0, 0.0]).unwrap();
        let bytes = encode(&index, "m").unwrap();
        assert_eq!(
            decode::<u32>(&bytes, "m", 2).unwrap_err(),
            AnnError::KeyOutOfRange {
                key: u64::from(u32::MAX) + 1
            }
        );
    }
}
