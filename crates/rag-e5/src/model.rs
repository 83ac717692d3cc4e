//! Parsing of the `E5S1` model file and the encoder's forward pass.

use rustc_hash::FxHashMap;

use crate::kernels::{
    add_layer_norm, dequantize_row, exp_neg, gelu, matmul_q4, QuantActs, Q4_BLOCK_BYTES, QK,
};
use crate::reader::{f32_vec, Reader};
use crate::tokenizer::E5Tokenizer;
use crate::E5Error;

/// The file format version this crate reads.
pub(crate) const FORMAT_VERSION: u32 = 1;

const DTYPE_F32: u8 = 0;
const DTYPE_Q4_0: u8 = 1;

/// Hyper-parameters from the model file's header.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ModelConfig {
    /// Hidden size (384 for e5-small).
    pub hidden: usize,
    /// Number of encoder layers (12).
    pub layers: usize,
    /// Number of attention heads (12).
    pub heads: usize,
    /// Feed-forward inner size (1536).
    pub ffn: usize,
    /// Rows of the word-embedding matrix (250,037).
    pub vocab_rows: usize,
    /// Maximum sequence length including `<s>` and `</s>` (512).
    pub max_positions: usize,
    /// Rows of the token-type embedding (2; only row 0 is used).
    pub type_vocab: usize,
    /// Layer-norm epsilon (1e-12).
    pub layer_norm_eps: f32,
}

impl ModelConfig {
    /// Content tokens per window: `max_positions - 2`.
    pub fn window_tokens(&self) -> usize {
        self.max_positions - 2
    }

    /// Size of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }
}

/// A Q4_0 matrix that stays inside the model's byte buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Q4Matrix {
    offset: usize,
    rows: usize,
    cols: usize,
}

impl Q4Matrix {
    fn row_bytes(&self) -> usize {
        self.cols / QK * Q4_BLOCK_BYTES
    }

    fn bytes<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        &data[self.offset..self.offset + self.rows * self.row_bytes()]
    }

    fn row<'a>(&self, data: &'a [u8], r: usize) -> &'a [u8] {
        let rb = self.row_bytes();
        &data[self.offset + r * rb..self.offset + (r + 1) * rb]
    }
}

#[derive(Debug)]
pub(crate) struct Layer {
    q: Q4Matrix,
    q_b: Vec<f32>,
    k: Q4Matrix,
    k_b: Vec<f32>,
    v: Q4Matrix,
    v_b: Vec<f32>,
    ao: Q4Matrix,
    ao_b: Vec<f32>,
    aln_w: Vec<f32>,
    aln_b: Vec<f32>,
    fi: Q4Matrix,
    fi_b: Vec<f32>,
    fo: Q4Matrix,
    fo_b: Vec<f32>,
    oln_w: Vec<f32>,
    oln_b: Vec<f32>,
}

/// The parsed weights. Q4_0 matrices are views into `data`; the small f32
/// vectors are decoded into owned vectors.
#[derive(Debug)]
pub(crate) struct Weights {
    pub(crate) config: ModelConfig,
    data: Vec<u8>,
    word: Q4Matrix,
    pos: Vec<f32>,
    type0: Vec<f32>,
    eln_w: Vec<f32>,
    eln_b: Vec<f32>,
    layers: Vec<Layer>,
}

struct DirEntry {
    dtype: u8,
    elems: u64,
    offset: u64,
    nbytes: u64,
}

/// Reads a positive header field, bounded so that all size arithmetic stays
/// far from overflow.
fn header_field(r: &mut Reader<'_>, field: &'static str) -> Result<usize, E5Error> {
    let value = r.i32(field)?;
    if value <= 0 {
        return Err(E5Error::InvalidHeader {
            field,
            value: i64::from(value),
            reason: "must be positive",
        });
    }
    Ok(value as usize)
}

fn check(
    cond: bool,
    field: &'static str,
    value: usize,
    reason: &'static str,
) -> Result<(), E5Error> {
    if cond {
        Ok(())
    } else {
        Err(E5Error::InvalidHeader {
            field,
            value: value as i64,
            reason,
        })
    }
}

/// Parses a complete model image. On success the returned weights own
/// `data`; the tokenizer copies what it needs.
pub(crate) fn parse(data: Vec<u8>) -> Result<(Weights, E5Tokenizer), E5Error> {
    if data.len() < 4 || &data[..4] != b"E5S1" {
        return Err(E5Error::BadMagic {
            found: data[..data.len().min(4)].to_vec(),
        });
    }
    let mut r = Reader::new(&data, 4);
    let version = r.u32("header version")?;
    if version != FORMAT_VERSION {
        return Err(E5Error::UnsupportedVersion {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let hidden = header_field(&mut r, "hidden")?;
    let layers = header_field(&mut r, "layers")?;
    let heads = header_field(&mut r, "heads")?;
    let ffn = header_field(&mut r, "ffn")?;
    let vocab_rows = header_field(&mut r, "vocab")?;
    let max_positions = header_field(&mut r, "max_positions")?;
    let type_vocab = header_field(&mut r, "type_vocab")?;
    let eps = r.f32("header layer-norm epsilon")?;
    let qk = r.i32("header quantisation block size")?;

    check(
        hidden % QK == 0 && hidden <= 8192,
        "hidden",
        hidden,
        "must be a multiple of 32 and at most 8192",
    )?;
    check(
        hidden % heads == 0,
        "heads",
        heads,
        "must divide the hidden size",
    )?;
    check(
        ffn % QK == 0 && ffn <= 65536,
        "ffn",
        ffn,
        "must be a multiple of 32 and at most 65536",
    )?;
    check(layers <= 256, "layers", layers, "must be at most 256")?;
    check(
        (3..=65536).contains(&max_positions),
        "max_positions",
        max_positions,
        "must be in 3..=65536",
    )?;
    check(
        vocab_rows <= 16_000_000,
        "vocab",
        vocab_rows,
        "must be at most 16,000,000",
    )?;
    check(
        type_vocab <= 1024,
        "type_vocab",
        type_vocab,
        "must be at most 1024",
    )?;
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(E5Error::InvalidHeader {
            field: "layer_norm_eps",
            value: eps as i64,
            reason: "must be finite and non-negative",
        });
    }
    if qk != QK as i32 {
        return Err(E5Error::InvalidHeader {
            field: "qk",
            value: i64::from(qk),
            reason: "only Q4_0 blocks of 32 weights are supported",
        });
    }
    let config = ModelConfig {
        hidden,
        layers,
        heads,
        ffn,
        vocab_rows,
        max_positions,
        type_vocab,
        layer_norm_eps: eps,
    };

    let tokenizer = E5Tokenizer::parse(&mut r)?;
    if tokenizer.vocab_size() > vocab_rows {
        return Err(E5Error::InvalidHeader {
            field: "vocab",
            value: vocab_rows as i64,
            reason: "is smaller than the tokenizer's piece count",
        });
    }

    // Tensor directory.
    let ndir = r.i32("tensor directory count")?;
    if ndir < 0 {
        return Err(E5Error::InvalidHeader {
            field: "tensor directory count",
            value: i64::from(ndir),
            reason: "must not be negative",
        });
    }
    let mut dir: FxHashMap<String, DirEntry> = FxHashMap::default();
    for _ in 0..ndir {
        let name_len = usize::from(r.u16("tensor name length")?);
        let name = String::from_utf8_lossy(r.bytes(name_len, "tensor name")?).into_owned();
        let entry = DirEntry {
            dtype: r.u8("tensor dtype")?,
            elems: u64::from(r.u32("tensor element count")?),
            offset: r.u64("tensor offset")?,
            nbytes: r.u64("tensor byte size")?,
        };
        if !is_known_tensor(&name, layers) {
            return Err(E5Error::UnknownTensor { name });
        }
        let end = entry.offset.checked_add(entry.nbytes);
        if end.is_none_or(|end| end > data.len() as u64) {
            return Err(E5Error::TensorOutOfBounds {
                name,
                offset: entry.offset,
                nbytes: entry.nbytes,
                len: data.len(),
            });
        }
        if dir.contains_key(&name) {
            return Err(E5Error::DuplicateTensor { name });
        }
        dir.insert(name, entry);
    }

    let take = |name: &str, dtype: u8, rows: usize, cols: usize| -> Result<usize, E5Error> {
        let entry = dir.get(name).ok_or_else(|| E5Error::MissingTensor {
            name: name.to_owned(),
        })?;
        if entry.dtype != dtype {
            return Err(E5Error::WrongDtype {
                name: name.to_owned(),
                expected: dtype,
                found: entry.dtype,
            });
        }
        let elems = (rows * cols) as u64;
        let bytes = if dtype == DTYPE_F32 {
            elems * 4
        } else {
            elems / QK as u64 * Q4_BLOCK_BYTES as u64
        };
        if entry.elems != elems || entry.nbytes != bytes {
            return Err(E5Error::WrongShape {
                name: name.to_owned(),
                expected_elems: elems,
                expected_bytes: bytes,
                found_elems: entry.elems,
                found_bytes: entry.nbytes,
            });
        }
        Ok(entry.offset as usize)
    };
    let f32s = |name: &str, rows: usize, cols: usize| -> Result<Vec<f32>, E5Error> {
        let off = take(name, DTYPE_F32, rows, cols)?;
        Ok(f32_vec(&data[off..off + rows * cols * 4]))
    };
    let q4 = |name: &str, rows: usize, cols: usize| -> Result<Q4Matrix, E5Error> {
        Ok(Q4Matrix {
            offset: take(name, DTYPE_Q4_0, rows, cols)?,
            rows,
            cols,
        })
    };

    let word = q4("emb.word", vocab_rows, hidden)?;
    let pos = f32s("emb.pos", max_positions, hidden)?;
    let mut type0 = f32s("emb.type", type_vocab, hidden)?;
    type0.truncate(hidden);
    let eln_w = f32s("emb.ln.w", 1, hidden)?;
    let eln_b = f32s("emb.ln.b", 1, hidden)?;
    let mut layer_vec = Vec::with_capacity(layers);
    for l in 0..layers {
        let n = |suffix: &str| format!("l{l}.{suffix}");
        layer_vec.push(Layer {
            q: q4(&n("q.w"), hidden, hidden)?,
            q_b: f32s(&n("q.b"), 1, hidden)?,
            k: q4(&n("k.w"), hidden, hidden)?,
            k_b: f32s(&n("k.b"), 1, hidden)?,
            v: q4(&n("v.w"), hidden, hidden)?,
            v_b: f32s(&n("v.b"), 1, hidden)?,
            ao: q4(&n("ao.w"), hidden, hidden)?,
            ao_b: f32s(&n("ao.b"), 1, hidden)?,
            aln_w: f32s(&n("aln.w"), 1, hidden)?,
            aln_b: f32s(&n("aln.b"), 1, hidden)?,
            fi: q4(&n("fi.w"), ffn, hidden)?,
            fi_b: f32s(&n("fi.b"), 1, ffn)?,
            fo: q4(&n("fo.w"), hidden, ffn)?,
            fo_b: f32s(&n("fo.b"), 1, hidden)?,
            oln_w: f32s(&n("oln.w"), 1, hidden)?,
            oln_b: f32s(&n("oln.b"), 1, hidden)?,
        });
    }

    let weights = Weights {
        config,
        data,
        word,
        pos,
        type0,
        eln_w,
        eln_b,
        layers: layer_vec,
    };
    Ok((weights, tokenizer))
}

/// Whether `name` is one of the tensors of a model with `layers` layers.
fn is_known_tensor(name: &str, layers: usize) -> bool {
    const GLOBAL: [&str; 5] = ["emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b"];
    const PER_LAYER: [&str; 16] = [
        "q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w", "aln.b", "fi.w", "fi.b",
        "fo.w", "fo.b", "oln.w", "oln.b",
    ];
    if GLOBAL.contains(&name) {
        return true;
    }
    let Some(rest) = name.strip_prefix('l') else {
        return false;
    };
    let Some((index, suffix)) = rest.split_once('.') else {
        return false;
    };
    let valid_index = !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
        && (index == "0" || !index.starts_with('0'))
        && index.parse::<usize>().is_ok_and(|i| i < layers);
    valid_index && PER_LAYER.contains(&suffix)
}

impl Weights {
    /// Bytes held by the model: the file image (which contains the 4-bit
    /// weights) plus the decoded f32 vectors.
    pub(crate) fn heap_bytes(&self) -> usize {
        let layer_f32: usize = self
            .layers
            .iter()
            .map(|l| {
                l.q_b.len()
                    + l.k_b.len()
                    + l.v_b.len()
                    + l.ao_b.len()
                    + l.aln_w.len()
                    + l.aln_b.len()
                    + l.fi_b.len()
                    + l.fo_b.len()
                    + l.oln_w.len()
                    + l.oln_b.len()
            })
            .sum();
        let f32s =
            self.pos.len() + self.type0.len() + self.eln_w.len() + self.eln_b.len() + layer_f32;
        self.data.capacity() + 4 * f32s
    }

    /// Runs the encoder over a batch of segments and writes each segment's
    /// mean-pooled (not yet normalised) final hidden state into `out`.
    ///
    /// `ids` holds the concatenated token ids of all segments (each already
    /// framed by `<s>` and `</s>` and at most `max_positions` long);
    /// `bounds[s]..bounds[s + 1]` is segment `s`. Attention never crosses a
    /// segment boundary and every other operation is per token, so the
    /// result for a segment does not depend on what it is batched with.
    pub(crate) fn forward(&self, ids: &[u32], bounds: &[usize], out: &mut [f32]) {
        let cfg = &self.config;
        let h = cfg.hidden;
        let ff = cfg.ffn;
        let t_len = ids.len();
        let mut x = vec![0.0f32; t_len * h];
        let mut q = vec![0.0f32; t_len * h];
        let mut k = vec![0.0f32; t_len * h];
        let mut v = vec![0.0f32; t_len * h];
        let mut ctx = vec![0.0f32; t_len * h];
        let mut proj = vec![0.0f32; t_len * h];
        let mut mid = vec![0.0f32; t_len * ff];
        let mut acts = QuantActs::default();

        // Embeddings: word + (position + type 0), then layer norm.
        for seg in bounds.windows(2) {
            for (p, t) in (seg[0]..seg[1]).enumerate() {
                let row = &mut x[t * h..(t + 1) * h];
                dequantize_row(self.word.row(&self.data, ids[t] as usize), row);
                let pos = &self.pos[p * h..(p + 1) * h];
                for ((r, &pv), &tv) in row.iter_mut().zip(pos).zip(&self.type0) {
                    *r += pv + tv;
                }
            }
        }
        add_layer_norm(&mut x, None, &self.eln_w, &self.eln_b, cfg.layer_norm_eps);

        for layer in &self.layers {
            acts.quantize(&x, h);
            matmul_q4(layer.q.bytes(&self.data), h, &layer.q_b, &acts, &mut q);
            matmul_q4(layer.k.bytes(&self.data), h, &layer.k_b, &acts, &mut k);
            matmul_q4(layer.v.bytes(&self.data), h, &layer.v_b, &acts, &mut v);
            attention(cfg, bounds, &q, &k, &v, &mut ctx);
            acts.quantize(&ctx, h);
            matmul_q4(layer.ao.bytes(&self.data), h, &layer.ao_b, &acts, &mut proj);
            add_layer_norm(
                &mut x,
                Some(&proj),
                &layer.aln_w,
                &layer.aln_b,
                cfg.layer_norm_eps,
            );

            acts.quantize(&x, h);
            matmul_q4(layer.fi.bytes(&self.data), ff, &layer.fi_b, &acts, &mut mid);
            for m in &mut mid {
                *m = gelu(*m);
            }
            acts.quantize(&mid, ff);
            matmul_q4(layer.fo.bytes(&self.data), h, &layer.fo_b, &acts, &mut proj);
            add_layer_norm(
                &mut x,
                Some(&proj),
                &layer.oln_w,
                &layer.oln_b,
                cfg.layer_norm_eps,
            );
        }

        // Mean pooling over every token of the segment, specials included.
        for (seg, o) in bounds.windows(2).zip(out.chunks_exact_mut(h)) {
            o.fill(0.0);
            for t in seg[0]..seg[1] {
                for (a, &b) in o.iter_mut().zip(&x[t * h..(t + 1) * h]) {
                    *a += b;
                }
            }
            let inv = 1.0 / (seg[1] - seg[0]) as f32;
            for a in o.iter_mut() {
                *a *= inv;
            }
        }
    }
}

/// Scaled dot-product attention of every head, restricted to each segment.
///
/// For each segment and head the keys are copied transposed (`[head_dim][len]`)
/// and the values contiguously (`[len][head_dim]`), so that both the score
/// computation and the weighted sum of values are long contiguous
/// multiply-add loops that vectorise.
#[inline(never)]
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn attention(
    cfg: &ModelConfig,
    bounds: &[usize],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    ctx: &mut [f32],
) {
    let h = cfg.hidden;
    let hd = cfg.head_dim();
    let scale = 1.0 / (hd as f32).sqrt();
    let max_len = bounds.windows(2).map(|s| s[1] - s[0]).max().unwrap_or(0);
    let mut kt = vec![0.0f32; hd * max_len];
    let mut vh = vec![0.0f32; max_len * hd];
    let mut scores = vec![0.0f32; max_len];
    for seg in bounds.windows(2) {
        let (s0, len) = (seg[0], seg[1] - seg[0]);
        for head in 0..cfg.heads {
            let off = head * hd;
            for s in 0..len {
                let row = (s0 + s) * h + off;
                for e in 0..hd {
                    kt[e * len + s] = k[row + e];
                }
                vh[s * hd..(s + 1) * hd].copy_from_slice(&v[row..row + hd]);
            }
            for t in s0..s0 + len {
                let qh = &q[t * h + off..t * h + off + hd];
                let sc = &mut scores[..len];
                let kt = &kt[..hd * len];
                if hd == HEAD_DIM {
                    scores_blocked(qh, kt, scale, sc);
                } else {
                    sc.fill(0.0);
                    for (e, &qe) in qh.iter().enumerate() {
                        let qe = qe * scale;
                        for (o, &kv) in sc.iter_mut().zip(&kt[e * len..(e + 1) * len]) {
                            *o += qe * kv;
                        }
                    }
                }
                let max = sc.iter().fold(-1e30f32, |m, &x| m.max(x));
                for p in sc.iter_mut() {
                    *p = exp_neg(*p - max);
                }
                let inv = 1.0 / sum_f32(sc);
                let ch = &mut ctx[t * h + off..t * h + off + hd];
                if hd == HEAD_DIM {
                    weighted_values(sc, &vh[..len * hd], inv, ch);
                } else {
                    ch.fill(0.0);
                    for (s, &p) in sc.iter().enumerate() {
                        let w = p * inv;
                        for (c, &vv) in ch.iter_mut().zip(&vh[s * hd..(s + 1) * hd]) {
                            *c += w * vv;
                        }
                    }
                }
            }
        }
    }
}

/// The head dimension of multilingual-e5-small (384 / 12), for which
/// [`attention`] has register-blocked loops; other sizes take plain loops.
const HEAD_DIM: usize = 32;

/// `sc[s] = scale * <q, k_s>` for every key `s`, with the keys transposed
/// (`kt[e * len + s]`, `len = sc.len()`). Thirty-two scores are accumulated
/// at a time in registers over the head's dimensions, instead of reading and
/// writing every score once per dimension.
#[inline(always)]
fn scores_blocked(q: &[f32], kt: &[f32], scale: f32, sc: &mut [f32]) {
    const B: usize = 32;
    let len = sc.len();
    let q: &[f32; HEAD_DIM] = q.try_into().expect("one head of the query");
    let mut s0 = 0;
    while s0 + B <= len {
        let mut acc = [0.0f32; B];
        for (e, &qe) in q.iter().enumerate() {
            let k: &[f32; B] = kt[e * len + s0..][..B].try_into().expect("a block of keys");
            for l in 0..B {
                acc[l] += qe * k[l];
            }
        }
        for (o, a) in sc[s0..s0 + B].iter_mut().zip(acc) {
            *o = a * scale;
        }
        s0 += B;
    }
    for (s, o) in sc.iter_mut().enumerate().skip(s0) {
        let mut acc = 0.0f32;
        for (e, &qe) in q.iter().enumerate() {
            acc += qe * kt[e * len + s];
        }
        *o = acc * scale;
    }
}

/// `out = inv * sum_s p[s] * v_s` over the rows `v_s` of `v` (`HEAD_DIM`
/// wide), with the output held in registers (two sets of partial sums, for
/// even and odd `s`).
#[inline(always)]
fn weighted_values(p: &[f32], v: &[f32], inv: f32, out: &mut [f32]) {
    let mut even = [0.0f32; HEAD_DIM];
    let mut odd = [0.0f32; HEAD_DIM];
    let mut rows = v.chunks_exact(2 * HEAD_DIM);
    let mut ps = p.chunks_exact(2);
    for (pair, w) in (&mut rows).zip(&mut ps) {
        let (a, b) = pair.split_at(HEAD_DIM);
        for l in 0..HEAD_DIM {
            even[l] += w[0] * a[l];
            odd[l] += w[1] * b[l];
        }
    }
    if let ([w], last) = (ps.remainder(), rows.remainder()) {
        for l in 0..HEAD_DIM {
            even[l] += w * last[l];
        }
    }
    for (l, o) in out.iter_mut().enumerate() {
        *o = (even[l] + odd[l]) * inv;
    }
}

/// Sum of a slice with eight independent partial sums (vectorisable).
#[inline(always)]
fn sum_f32(x: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = x.len() / 8;
    for c in 0..chunks {
        for l in 0..8 {
            lanes[l] += x[c * 8 + l];
        }
    }
    for i in chunks * 8..x.len() {
        lanes[i % 8] += x[i];
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}
