//! Parsing of the `E5S1` model file and the encoder's forward pass.

use rustc_hash::FxHashMap;

use crate::attention::{attention_in, Precision};
use crate::kernels::{
    add_layer_norm, dequantize_row, gelu_in_place, matmul_q4, QuantActs, Q4_BLOCK_BYTES, QK,
};
use crate::profile::{timed, Op, Stopwatch};
use crate::q4_vnni::Q4Vnni;
use crate::reader::{f32_vec, Reader};
use crate::tokenizer::E5Tokenizer;
use crate::{E5Error, Kernel};
use rag_gemm::int8::{matmul_i8, I8Acts, I8Matrix, Int8Tier};

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

/// One linear layer: the file's Q4_0 weights with their bias, plus the
/// repacking of the tier that runs (int8 per channel for AMX, the 4-bit
/// blocks in `vpdpbusd` order for AVX-512).
#[derive(Debug)]
pub(crate) struct Linear {
    w: Q4Matrix,
    b: Vec<f32>,
    i8: Option<I8Matrix>,
    vnni: Option<Q4Vnni>,
}

impl Linear {
    fn new(w: Q4Matrix, b: Vec<f32>) -> Self {
        Self {
            w,
            b,
            i8: None,
            vnni: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    ao: Linear,
    aln_w: Vec<f32>,
    aln_b: Vec<f32>,
    fi: Linear,
    fo: Linear,
    oln_w: Vec<f32>,
    oln_b: Vec<f32>,
}

impl Layer {
    fn linears_mut(&mut self) -> [&mut Linear; 6] {
        [
            &mut self.q,
            &mut self.k,
            &mut self.v,
            &mut self.ao,
            &mut self.fi,
            &mut self.fo,
        ]
    }

    fn linears(&self) -> [&Linear; 6] {
        [&self.q, &self.k, &self.v, &self.ao, &self.fi, &self.fo]
    }
}

/// Quantised activations in the format of the tier that runs.
#[derive(Default)]
struct Acts {
    q8: QuantActs,
    i8: I8Acts,
    resid: Vec<f32>,
    scratch: Vec<f32>,
    /// Whether `i8` holds two parts per token (see [`Weights::quantize`]).
    split: bool,
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
    /// The resolved matrix kernel tier (never [`Kernel::Auto`]).
    kernel: Kernel,
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
/// The weights are prepared for `kernel` (see [`Weights::set_kernel`]).
pub(crate) fn parse(data: Vec<u8>, kernel: Kernel) -> Result<(Weights, E5Tokenizer), E5Error> {
    let kernel = kernel.resolve()?;
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
            q: Linear::new(q4(&n("q.w"), hidden, hidden)?, f32s(&n("q.b"), 1, hidden)?),
            k: Linear::new(q4(&n("k.w"), hidden, hidden)?, f32s(&n("k.b"), 1, hidden)?),
            v: Linear::new(q4(&n("v.w"), hidden, hidden)?, f32s(&n("v.b"), 1, hidden)?),
            ao: Linear::new(
                q4(&n("ao.w"), hidden, hidden)?,
                f32s(&n("ao.b"), 1, hidden)?,
            ),
            aln_w: f32s(&n("aln.w"), 1, hidden)?,
            aln_b: f32s(&n("aln.b"), 1, hidden)?,
            fi: Linear::new(q4(&n("fi.w"), ffn, hidden)?, f32s(&n("fi.b"), 1, ffn)?),
            fo: Linear::new(q4(&n("fo.w"), hidden, ffn)?, f32s(&n("fo.b"), 1, hidden)?),
            oln_w: f32s(&n("oln.w"), 1, hidden)?,
            oln_b: f32s(&n("oln.b"), 1, hidden)?,
        });
    }

    let mut weights = Weights {
        config,
        data,
        word,
        pos,
        type0,
        eln_w,
        eln_b,
        layers: layer_vec,
        kernel: Kernel::Portable,
    };
    weights.set_kernel(kernel);
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
    /// weights), the decoded f32 vectors and, on the int8 tiers, the
    /// repacked weights.
    pub(crate) fn heap_bytes(&self) -> usize {
        let layer_bytes: usize = self
            .layers
            .iter()
            .map(|l| {
                let vectors = l.aln_w.len() + l.aln_b.len() + l.oln_w.len() + l.oln_b.len();
                let linear: usize = l
                    .linears()
                    .iter()
                    .map(|lin| {
                        4 * lin.b.len()
                            + lin.i8.as_ref().map_or(0, I8Matrix::heap_bytes)
                            + lin.vnni.as_ref().map_or(0, Q4Vnni::heap_bytes)
                    })
                    .sum();
                4 * vectors + linear
            })
            .sum();
        let f32s = self.pos.len() + self.type0.len() + self.eln_w.len() + self.eln_b.len();
        self.data.capacity() + 4 * f32s + layer_bytes
    }

    /// The matrix kernel tier in use.
    pub(crate) fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Switches to the resolved tier `kernel`: the AMX tier repacks every
    /// linear layer to int8 per channel, the AVX-512 tier to its 4-bit
    /// layout (once; about 21 MB for e5-small), the other tiers drop the
    /// repacked copies.
    pub(crate) fn set_kernel(&mut self, kernel: Kernel) {
        debug_assert!(kernel != Kernel::Auto);
        let data = &self.data;
        for layer in &mut self.layers {
            for lin in layer.linears_mut() {
                let (rows, cols) = (lin.w.rows, lin.w.cols);
                if !kernel.is_int8() {
                    lin.i8 = None;
                } else if lin.i8.is_none() {
                    lin.i8 = Some(crate::kernels::int8_from_q4(
                        lin.w.bytes(data),
                        rows,
                        cols,
                        &lin.b,
                    ));
                }
                if kernel != Kernel::Avx512 {
                    lin.vnni = None;
                } else if lin.vnni.is_none() {
                    lin.vnni = Some(Q4Vnni::from_q4(lin.w.bytes(data), rows, cols, &lin.b));
                }
            }
        }
        self.kernel = kernel;
    }

    /// Quantises `x` (`cols` columns) for the tier in use.
    ///
    /// On the int8 tiers `split` chooses the two-part quantisation
    /// ([`I8Acts::quantize_split`], twice the integer work) over one 8-bit
    /// part per token. Measured on the fixture (minimum / mean cosine to the
    /// reference vectors): one part everywhere 0.99835 / 0.99917, two parts
    /// everywhere 0.99913 / 0.99984, one part for the feed-forward input
    /// only 0.99921 / 0.99965 (the choice of [`Weights::forward`], 17 % less
    /// integer work); one part for the feed-forward and the attention
    /// output's inputs gave 0.99885; one part for one other product's input
    /// alone: the query, key and value input 0.99877, the feed-forward
    /// output's input 0.99894, the attention output's input 0.99909.
    fn quantize(&self, acts: &mut Acts, x: &[f32], cols: usize, split: bool) {
        timed(Op::Quantize, || {
            if self.kernel.is_int8() {
                acts.split = split;
                if acts.split {
                    acts.i8.quantize_split(x, cols, &mut acts.resid);
                } else {
                    acts.i8.quantize(x, cols);
                }
            } else {
                acts.q8.quantize(x, cols);
            }
        })
    }

    /// `y = x * W^T + b` for the activations last quantised by
    /// [`Weights::quantize`].
    fn linear(&self, lin: &Linear, acts: &mut Acts, y: &mut [f32]) {
        if let (Some(w), false) = (&lin.vnni, self.kernel.is_int8()) {
            timed(Op::Matmul, || crate::q4_vnni::matmul(w, &acts.q8, y));
            return;
        }
        match &lin.i8 {
            Some(w) if self.kernel.is_int8() && !acts.split => {
                timed(Op::Matmul, || matmul_i8(Int8Tier::Amx, w, &acts.i8, y));
            }
            Some(w) if self.kernel.is_int8() => {
                // Rows 0..n of the product are the main parts, n..2n the
                // residual parts; each carries the bias once.
                let n = y.len();
                acts.scratch.resize(2 * n, 0.0);
                timed(Op::Matmul, || {
                    matmul_i8(Int8Tier::Amx, w, &acts.i8, &mut acts.scratch[..2 * n])
                });
                let (hi, lo) = acts.scratch[..2 * n].split_at(n);
                timed(Op::Combine, || rag_gemm::combine_split(y, hi, lo, &lin.b));
            }
            _ => timed(Op::Matmul, || {
                matmul_q4(
                    self.kernel,
                    lin.w.bytes(&self.data),
                    lin.w.rows,
                    &lin.b,
                    &acts.q8,
                    y,
                )
            }),
        }
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
        let started = Stopwatch::start();
        let mut x = vec![0.0f32; t_len * h];
        let mut q = vec![0.0f32; t_len * h];
        let mut k = vec![0.0f32; t_len * h];
        let mut v = vec![0.0f32; t_len * h];
        let mut ctx = vec![0.0f32; t_len * h];
        let mut proj = vec![0.0f32; t_len * h];
        let mut mid = vec![0.0f32; t_len * ff];
        let mut acts = Acts::default();
        let precision = Precision::for_kernel(self.kernel, cfg);

        // Embeddings: word + (position + type 0), then layer norm.
        timed(Op::Embed, || {
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
        });
        timed(Op::LayerNorm, || {
            add_layer_norm(&mut x, None, &self.eln_w, &self.eln_b, cfg.layer_norm_eps)
        });

        for layer in &self.layers {
            self.quantize(&mut acts, &x, h, true);
            self.linear(&layer.q, &mut acts, &mut q);
            self.linear(&layer.k, &mut acts, &mut k);
            self.linear(&layer.v, &mut acts, &mut v);
            timed(Op::Attention, || {
                attention_in(precision, cfg, bounds, &q, &k, &v, &mut ctx)
            });
            self.quantize(&mut acts, &ctx, h, true);
            self.linear(&layer.ao, &mut acts, &mut proj);
            timed(Op::LayerNorm, || {
                add_layer_norm(
                    &mut x,
                    Some(&proj),
                    &layer.aln_w,
                    &layer.aln_b,
                    cfg.layer_norm_eps,
                )
            });

            self.quantize(&mut acts, &x, h, false);
            self.linear(&layer.fi, &mut acts, &mut mid);
            timed(Op::Gelu, || gelu_in_place(&mut mid));
            self.quantize(&mut acts, &mid, ff, true);
            self.linear(&layer.fo, &mut acts, &mut proj);
            timed(Op::LayerNorm, || {
                add_layer_norm(
                    &mut x,
                    Some(&proj),
                    &layer.oln_w,
                    &layer.oln_b,
                    cfg.layer_norm_eps,
                )
            });
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
        started.stop();
    }
}
