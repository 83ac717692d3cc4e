//! The byte format in which the store persists vectors.
//!
//! This module only turns an index into bytes and back; writing them to a file,
//! a database blob or anywhere else is the caller's job. A reader refuses bytes
//! produced by a different embedding model or with a different dimension, so a
//! model change can never silently mix incompatible vectors.
//!
//! # Layout (version 2, all integers little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `RSCPVEC\0` |
//! | 2 | format version (`2`) |
//! | 2 | reserved, zero |
//! | 4 | dimension `d` |
//! | 8 | vector count `n` |
//! | 2 | model id length `m` |
//! | `m` | model id, UTF-8 |
//! | `8n` | the keys, as `u64`, in row order |
//! | 0–63 | zero bytes, so that the matrix starts at a multiple of 64 bytes from the buffer's start |
//! | `4nd` | the matrix: `n` rows of `d` × `f32` (normalised) |
//! | 8 | checksum: FNV-1a-64 over all preceding bytes, fed 8 bytes at a time |
//!
//! The matrix is one contiguous, aligned block, so a reader can use it in
//! place ([`decode_shared`]: a memory-mapped file placed at a 64-byte
//! boundary) or copy it into one buffer without reshaping ([`decode`]).
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
use crate::rows::{Rows, SharedBytes};
use std::hash::Hash;

/// The first eight bytes of every vector buffer.
pub const MAGIC: [u8; 8] = *b"RSCPVEC\0";

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 2;

/// The longest model id the format can record, in bytes.
pub const MAX_MODEL_ID_LEN: usize = 1024;

const FIXED_HEADER_LEN: usize = 8 + 2 + 2 + 4 + 8 + 2;
const CHECKSUM_LEN: usize = 8;
/// The matrix starts at a multiple of this many bytes from the buffer's start.
pub const MATRIX_ALIGN: usize = 64;

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
    let mut out = Vec::with_capacity(
        FIXED_HEADER_LEN + model_id.len() + count * (8 + 4 * dims) + MATRIX_ALIGN + CHECKSUM_LEN,
    );
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(dims as u32).to_le_bytes());
    out.extend_from_slice(&(count as u64).to_le_bytes());
    out.extend_from_slice(&(model_id.len() as u16).to_le_bytes());
    out.extend_from_slice(model_id.as_bytes());
    for (key, _) in index.iter() {
        out.extend_from_slice(&key.into().to_le_bytes());
    }
    out.resize(out.len().next_multiple_of(MATRIX_ALIGN), 0);
    for (_, vector) in index.iter() {
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

/// Deserialises a buffer written by [`encode`] into a fresh [`FlatIndex`]
/// with its own copy of the vectors.
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
    K: Copy + Eq + Hash + TryFrom<u64> + Into<u64>,
{
    let layout = Layout::read(bytes, expected_model_id, expected_dims, true)?;
    let keys = layout.keys(bytes)?;
    let mut matrix = Vec::with_capacity(layout.count * layout.dims);
    for (i, b) in bytes[layout.matrix_start..layout.matrix_end]
        .chunks_exact(4)
        .enumerate()
    {
        let x = f32::from_le_bytes(b.try_into().expect("4 bytes"));
        if !x.is_finite() {
            return Err(AnnError::NonFinite {
                index: i % layout.dims,
            });
        }
        matrix.push(x);
    }
    FlatIndex::from_rows(layout.dims, keys, Rows::Owned(matrix))
}

/// Like [`decode`], but the index reads its vectors in place from
/// `bytes[start..start + len]` (a buffer written by [`encode`] inside larger
/// shared bytes, such as a memory-mapped file) instead of copying them, so
/// only the rows a search touches need be resident.
///
/// With `verify_checksum` false the checksum is not recomputed (it would
/// read every page): the caller has checked the bytes already, for instance
/// while reading the file they were mapped from. The vectors themselves are
/// not read at all. Where the matrix cannot be used in place (misaligned,
/// or a big-endian CPU) it is copied, as [`decode`] does.
pub fn decode_shared<K>(
    bytes: &SharedBytes,
    start: usize,
    len: usize,
    expected_model_id: &str,
    expected_dims: usize,
    verify_checksum: bool,
) -> Result<FlatIndex<K>>
where
    K: Copy + Eq + Hash + TryFrom<u64> + Into<u64>,
{
    let all = (**bytes).as_ref();
    let end = start
        .checked_add(len)
        .filter(|&e| e <= all.len())
        .ok_or(AnnError::Truncated {
            needed: start.saturating_add(len),
            available: all.len(),
        })?;
    let buf = &all[start..end];
    let layout = Layout::read(buf, expected_model_id, expected_dims, verify_checksum)?;
    let keys = layout.keys(buf)?;
    match Rows::shared(
        bytes.clone(),
        start + layout.matrix_start,
        layout.count * layout.dims,
    ) {
        Some(rows) => FlatIndex::from_rows(layout.dims, keys, rows),
        None => decode(buf, expected_model_id, expected_dims),
    }
}

/// Where the parts of a checked buffer are.
struct Layout {
    dims: usize,
    count: usize,
    keys_start: usize,
    matrix_start: usize,
    matrix_end: usize,
}

impl Layout {
    fn read(
        bytes: &[u8],
        expected_model_id: &str,
        expected_dims: usize,
        verify: bool,
    ) -> Result<Self> {
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
        let too_big = AnnError::Truncated {
            needed: usize::MAX,
            available: bytes.len(),
        };
        let keys_end = header
            .count
            .checked_mul(8)
            .and_then(|k| k.checked_add(header.header_len))
            .ok_or(too_big.clone())?;
        let matrix_start = keys_end
            .checked_next_multiple_of(MATRIX_ALIGN)
            .ok_or(too_big.clone())?;
        let matrix_end = header
            .count
            .checked_mul(4 * header.dims)
            .and_then(|m| m.checked_add(matrix_start))
            .ok_or(too_big.clone())?;
        let needed = matrix_end.checked_add(CHECKSUM_LEN).ok_or(too_big)?;
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
        if verify {
            let stored = u64::from_le_bytes(bytes[matrix_end..].try_into().expect("8 bytes"));
            let computed = fnv1a64(&bytes[..matrix_end]);
            if stored != computed {
                return Err(AnnError::ChecksumMismatch { stored, computed });
            }
        }
        Ok(Layout {
            dims: header.dims,
            count: header.count,
            keys_start: header.header_len,
            matrix_start,
            matrix_end,
        })
    }

    fn keys<K: TryFrom<u64>>(&self, bytes: &[u8]) -> Result<Vec<K>> {
        bytes[self.keys_start..self.keys_start + 8 * self.count]
            .chunks_exact(8)
            .map(|b| {
                let raw = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                K::try_from(raw).map_err(|_| AnnError::KeyOutOfRange { key: raw })
            })
            .collect()
    }
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

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut sum = Checksum::new();
    sum.update(bytes);
    sum.finish()
}

/// [`checksum`] over bytes that arrive in pieces of any size, as a file is
/// read: the same value as [`checksum`] of the pieces concatenated.
#[derive(Debug, Clone)]
pub struct Checksum {
    hash: u64,
    pending: [u8; 8],
    filled: usize,
}

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

impl Checksum {
    /// The checksum of no bytes so far.
    pub fn new() -> Self {
        Checksum {
            hash: FNV_OFFSET,
            pending: [0; 8],
            filled: 0,
        }
    }

    /// Feeds the next bytes.
    pub fn update(&mut self, mut bytes: &[u8]) {
        if self.filled > 0 {
            let take = (8 - self.filled).min(bytes.len());
            self.pending[self.filled..self.filled + take].copy_from_slice(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled < 8 {
                return;
            }
            self.word(u64::from_le_bytes(self.pending));
            self.filled = 0;
        }
        let words = bytes.chunks_exact(8);
        let tail = words.remainder();
        for w in words {
            self.word(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        self.pending[..tail.len()].copy_from_slice(tail);
        self.filled = tail.len();
    }

    #[inline]
    fn word(&mut self, w: u64) {
        self.hash = (self.hash ^ w).wrapping_mul(FNV_PRIME);
    }

    /// The checksum of every byte fed.
    pub fn finish(self) -> u64 {
        let mut hash = self.hash;
        for &b in &self.pending[..self.filled] {
            hash = (hash ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        hash
    }
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
    fn checksum_in_pieces_equals_checksum_whole() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 251) as u8).collect();
        let whole = checksum(&bytes);
        for piece in [1, 3, 7, 8, 9, 64, 999] {
            let mut sum = Checksum::new();
            for chunk in bytes.chunks(piece) {
                sum.update(chunk);
            }
            assert_eq!(sum.finish(), whole, "pieces of {piece}");
        }
        assert_eq!(Checksum::new().finish(), checksum(&[]));
    }

    /// Bytes with 64-byte alignment, as a memory-mapped file's pages are.
    struct Aligned {
        blocks: Vec<[u64; 8]>,
        len: usize,
    }

    impl AsRef<[u8]> for Aligned {
        fn as_ref(&self) -> &[u8] {
            let all: &[u8] = bytemuck::cast_slice(&self.blocks);
            &all[..self.len]
        }
    }

    fn aligned(prefix: usize, buf: &[u8]) -> SharedBytes {
        let len = prefix + buf.len();
        let mut blocks = vec![[0u64; 8]; len.div_ceil(64)];
        let all: &mut [u8] = bytemuck::cast_slice_mut(&mut blocks);
        all[prefix..len].copy_from_slice(buf);
        std::sync::Arc::new(Aligned { blocks, len })
    }

    #[test]
    fn shared_decoding_reads_in_place_with_the_same_bits() {
        let index = sample(200, 24);
        let bytes = encode(&index, "m").unwrap();
        let copied: FlatIndex<u64> = decode(&bytes, "m", 24).unwrap();
        assert!(!copied.is_shared());
        // At a 64-byte boundary of the shared bytes the matrix is used in place.
        let shared = aligned(128, &bytes);
        let mapped: FlatIndex<u64> =
            decode_shared(&shared, 128, bytes.len(), "m", 24, true).unwrap();
        assert!(mapped.is_shared());
        assert_eq!(mapped.matrix_heap_bytes(), 0);
        for (key, v) in index.iter() {
            assert_eq!(mapped.vector(key).unwrap(), v, "bit for bit");
            assert_eq!(copied.vector(key).unwrap(), v);
        }
        let q = SplitMix64::new(9).gaussian_vec(24);
        let a = copied.search(&crate::Query::new(&q, 10)).unwrap().hits;
        let b = mapped.search(&crate::Query::new(&q, 10)).unwrap().hits;
        assert_eq!(a, b);
        // Two bytes off the boundary it cannot be: the vectors are copied.
        let shifted = aligned(2, &bytes);
        let copy: FlatIndex<u64> = decode_shared(&shifted, 2, bytes.len(), "m", 24, true).unwrap();
        assert!(!copy.is_shared());
        assert_eq!(copy.search(&crate::Query::new(&q, 10)).unwrap().hits, a);
        // A change copies the shared rows first and leaves the bytes alone.
        let mut changed = mapped.clone();
        changed.add(5_000, &q).unwrap();
        assert!(!changed.is_shared() && mapped.is_shared());
        assert_eq!(changed.len(), mapped.len() + 1);
        // Damage is caught when asked to verify, ranges are checked.
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 1;
        let bad = aligned(0, &bad);
        assert!(matches!(
            decode_shared::<u64>(&bad, 0, bytes.len(), "m", 24, true),
            Err(AnnError::ChecksumMismatch { .. })
        ));
        assert!(decode_shared::<u64>(&shared, 128, bytes.len() + 1, "m", 24, true).is_err());
        assert!(decode_shared::<u64>(&shared, usize::MAX, 2, "m", 24, true).is_err());
    }

    #[test]
    fn non_finite_values_are_refused_when_copied() {
        let mut index = FlatIndex::<u64>::new(2).unwrap();
        index.add(1, &[1.0, 0.0]).unwrap();
        let mut bytes = encode(&index, "m").unwrap();
        let end = bytes.len() - CHECKSUM_LEN;
        bytes[end - 4..end].copy_from_slice(&f32::NAN.to_le_bytes());
        let sum = checksum(&bytes[..end]);
        bytes[end..].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(
            decode::<u64>(&bytes, "m", 2).unwrap_err(),
            AnnError::NonFinite { index: 1 }
        );
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
