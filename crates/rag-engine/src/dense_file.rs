//! The dense index of a knowledge base as bytes, for its file next to the
//! lexical one (`<index_dir>/<kb id>.vec`).
//!
//! Each part is written as its passage ids, its dead ordinals, its vectors
//! (in [`rag_ann::format`]) and, for a graph part, the graph and its int8
//! codes, so a process starting over a large knowledge base reads the graph
//! instead of building it again. The file carries the commit sequence it
//! reflects; the engine uses it only beside a lexical index of the same
//! commit, and anything unreadable, damaged or of another embedding space is
//! refused (the index is then built from the store, which stays the source
//! of truth).
//!
//! # Layout (version 2, little-endian)
//!
//! magic `RSCPDNS\0`, version `u16`, reserved `u16`, seq `u64`, live,
//! missing and total `u64`, parts `u64`; then per part: passages `u64`,
//! each passage as a kind byte and 16 id bytes, dead ordinals `u64` and
//! each `u32`, vector bytes length `u64`, zero bytes up to the next
//! multiple of 64 from the file's start, and the vector bytes; graph bytes
//! length `u64` and bytes (0: none); then the checksum of all preceding
//! bytes ([`rag_ann::format::checksum`]).
//!
//! The vector bytes ([`rag_ann::format`]) start at a 64-byte boundary of
//! the file and keep their matrix at one too, so a memory-mapped file's
//! full-precision vectors are searched in place
//! ([`DenseIndex::decode_shared`]); only the graph and its int8 codes are
//! read into memory.

use crate::dense::{DenseIndex, Part};
use rag_ann::{SharedBytes, VectorIndex, VectorIndexParams};
use rag_core::{ChunkId, EmbeddingSpace, FactId, FaqId, PassageId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"RSCPDNS\0";
const VERSION: u16 = 2;
/// Vector bytes start at a multiple of this many bytes of the file.
const VECTORS_ALIGN: usize = 64;

/// Why stored dense bytes were refused.
#[derive(Debug, thiserror::Error)]
pub enum DenseFileError {
    /// Not a dense index file of this version.
    #[error("not a dense index file of version {VERSION}")]
    Format,
    /// The bytes end early, or the checksum does not match.
    #[error("the dense index file is damaged: {0}")]
    Damaged(String),
    /// The vectors are of another model or dimension.
    #[error(transparent)]
    Vectors(#[from] rag_ann::AnnError),
}

impl DenseIndex {
    /// The index as bytes, tagged with the commit `seq` it reflects.
    pub fn encode(&self, seq: u64) -> Result<Vec<u8>, rag_ann::AnnError> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        for v in [
            seq,
            self.live as u64,
            self.missing as u64,
            self.total as u64,
            self.parts.len() as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for (part, dead) in self.parts.iter().zip(&self.dead) {
            out.extend_from_slice(&(part.ids.len() as u64).to_le_bytes());
            for id in &part.ids {
                let (kind, uuid) = match id {
                    PassageId::Chunk(c) => (0u8, c.0),
                    PassageId::Faq(f) => (1, f.0),
                    PassageId::Fact(f) => (2, f.0),
                };
                out.push(kind);
                out.extend_from_slice(uuid.as_bytes());
            }
            let mut dead: Vec<u32> = dead.iter().copied().collect();
            dead.sort_unstable();
            out.extend_from_slice(&(dead.len() as u64).to_le_bytes());
            for d in dead {
                out.extend_from_slice(&d.to_le_bytes());
            }
            let vectors = rag_ann::format::encode(part.index.store(), &self.space.model_id)?;
            out.extend_from_slice(&(vectors.len() as u64).to_le_bytes());
            out.resize(out.len().next_multiple_of(VECTORS_ALIGN), 0);
            out.extend_from_slice(&vectors);
            let graph = part.index.encode_graph().unwrap_or_default();
            out.extend_from_slice(&(graph.len() as u64).to_le_bytes());
            out.extend_from_slice(&graph);
        }
        let sum = rag_ann::format::checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        Ok(out)
    }

    /// The commit sequence stored bytes reflect, read from the header only.
    pub fn encoded_seq(bytes: &[u8]) -> Option<u64> {
        if bytes.get(..8)? != MAGIC || bytes.get(8..10)? != VERSION.to_le_bytes() {
            return None;
        }
        Some(u64::from_le_bytes(bytes.get(12..20)?.try_into().ok()?))
    }

    /// Reads shared bytes written by [`encode`](Self::encode) (a mapped
    /// file) for vectors of `space`; returns the index and the commit it
    /// reflects. The full-precision vectors are searched in place where they
    /// are aligned, so only the pages a search touches become resident. The
    /// caller has checked the file's checksum (`mapped.rs` does, by reading
    /// it: through the mapping it would make every page resident).
    pub fn decode_shared(
        shared: &SharedBytes,
        space: &EmbeddingSpace,
        params: VectorIndexParams,
    ) -> Result<(DenseIndex, u64), DenseFileError> {
        let damaged = |why: &str| DenseFileError::Damaged(why.to_owned());
        let bytes = (**shared).as_ref();
        check_header(bytes)?;
        let body = &bytes[..bytes.len() - 8];
        let mut r = Reader {
            bytes: body,
            at: 12,
        };
        let seq = r.u64()?;
        let (live, missing, total, parts) = (r.len()?, r.len()?, r.len()?, r.len()?);
        let mut out_parts = Vec::with_capacity(parts.min(64));
        let mut out_dead = Vec::with_capacity(parts.min(64));
        let mut counted = 0usize;
        for _ in 0..parts {
            let n = r.len()?;
            let raw = r.take(n.checked_mul(17).ok_or_else(|| damaged("size"))?)?;
            let mut ids = Vec::with_capacity(n);
            for rec in raw.chunks_exact(17) {
                let uuid = uuid::Uuid::from_bytes(rec[1..].try_into().expect("16 bytes"));
                ids.push(match rec[0] {
                    0 => PassageId::Chunk(ChunkId(uuid)),
                    1 => PassageId::Faq(FaqId(uuid)),
                    2 => PassageId::Fact(FactId(uuid)),
                    _ => return Err(damaged("passage kind")),
                });
            }
            let dead_n = r.len()?;
            let mut dead = FxHashSet::default();
            for c in r
                .take(dead_n.checked_mul(4).ok_or_else(|| damaged("size"))?)?
                .chunks_exact(4)
            {
                let d = u32::from_le_bytes(c.try_into().expect("4 bytes"));
                if d as usize >= n {
                    return Err(damaged("dead ordinal out of range"));
                }
                dead.insert(d);
            }
            let vlen = r.len()?;
            r.take(r.at.next_multiple_of(VECTORS_ALIGN) - r.at)?;
            let start = r.at;
            r.take(vlen)?;
            // The file's checksum covers these bytes; theirs need not be
            // read (that would make every page of the vectors resident).
            let flat = rag_ann::format::decode_shared::<u32>(
                shared,
                start,
                vlen,
                &space.model_id,
                space.dims,
                false,
            )?;
            if flat.len() != n || (0..n as u32).any(|o| !flat.contains(o)) {
                return Err(damaged("vectors do not match the passages"));
            }
            let glen = r.len()?;
            let graph = r.take(glen)?;
            let index = VectorIndex::with_graph(flat, params, (glen > 0).then_some(graph))?;
            let ord_of: FxHashMap<PassageId, u32> = ids
                .iter()
                .enumerate()
                .map(|(i, id)| (*id, i as u32))
                .collect();
            counted += n - dead.len();
            let faqs = crate::dense::any_faq(&ids);
            out_parts.push(Arc::new(Part {
                ids,
                ord_of,
                index,
                faqs,
            }));
            out_dead.push(Arc::new(dead));
        }
        if r.at != body.len() {
            return Err(damaged("trailing bytes"));
        }
        if counted != live || live + missing != total {
            return Err(damaged("counts do not add up"));
        }
        Ok((
            DenseIndex {
                space: space.clone(),
                params,
                parts: out_parts,
                dead: out_dead,
                live,
                missing,
                total,
            },
            seq,
        ))
    }
}

fn check_header(bytes: &[u8]) -> Result<(), DenseFileError> {
    if bytes.len() < 8 + 4 + 40 + 8 || &bytes[..8] != MAGIC || bytes[8..10] != VERSION.to_le_bytes()
    {
        return Err(DenseFileError::Format);
    }
    Ok(())
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], DenseFileError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| DenseFileError::Damaged("truncated".into()))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, DenseFileError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A length: a `u64` that must fit in memory.
    fn len(&mut self) -> Result<usize, DenseFileError> {
        let v = self.u64()?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v <= self.bytes.len().saturating_mul(8))
            .ok_or_else(|| DenseFileError::Damaged("length out of range".into()))
    }
}
