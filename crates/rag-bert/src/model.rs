//! The BERT encoder: embeddings, post-layer-norm transformer layers,
//! pooling; linear layers in the model's precision (`linear.rs`), the rest
//! in f32.
//!
//! Several sequences run through one forward pass without padding: their
//! tokens are stacked into one matrix for every linear layer (one matrix
//! product per layer for the whole batch), and attention is computed per
//! sequence, so no sequence sees another's tokens and no work is spent on
//! padding. Attention's products go through `ndarray`, which calls the
//! `matrixmultiply` crate's SIMD sgemm.

use ndarray::linalg::general_mat_mul;
use std::ops::Range;

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis, Slice};

use crate::config::{Activation, BertConfig, Pooling};
use crate::error::BertError;
use crate::linear::Linear;
use crate::precision::{Precision, Tiers};
use crate::weights::Tensors;

/// The sub-matrix `rows × cols` of a view. (ndarray's `s!` macro expands to
/// `unsafe` code, which this workspace forbids.)
fn block(
    mut m: ArrayView2<'_, f32>,
    rows: Range<usize>,
    cols: Range<usize>,
) -> ArrayView2<'_, f32> {
    m.slice_axis_inplace(Axis(0), Slice::from(rows));
    m.slice_axis_inplace(Axis(1), Slice::from(cols));
    m
}

fn block_mut(
    mut m: ArrayViewMut2<'_, f32>,
    rows: Range<usize>,
    cols: Range<usize>,
) -> ArrayViewMut2<'_, f32> {
    m.slice_axis_inplace(Axis(0), Slice::from(rows));
    m.slice_axis_inplace(Axis(1), Slice::from(cols));
    m
}

struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl LayerNorm {
    fn load(t: &Tensors<'_>, base: &str, width: usize, eps: f32) -> Result<Self, BertError> {
        let (weight, bias) = t.layer_norm(base, width)?;
        Ok(LayerNorm { weight, bias, eps })
    }

    /// Normalises every row of `x` in place.
    fn apply(&self, x: &mut Array2<f32>) {
        for mut row in x.rows_mut() {
            let row = row.as_slice_mut().expect("standard layout");
            let n = row.len() as f64;
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / n;
            let inv = 1.0 / (var + f64::from(self.eps)).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = ((f64::from(*v) - mean) * inv) as f32 * g + b;
            }
        }
    }
}

struct Layer {
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The word-embedding table (the largest tensor of a small model: 47 MB
/// in f32 for all-MiniLM-L6-v2): f32 as loaded, bf16 once the linear
/// layers are packed in bf16 (their inputs are rounded to bf16 anyway).
enum WordTable {
    F32(Array2<f32>),
    Bf16 { width: usize, rows: Vec<u16> },
}

impl WordTable {
    /// Heap bytes.
    fn heap_bytes(&self) -> usize {
        match self {
            WordTable::F32(a) => a.len() * 4,
            WordTable::Bf16 { rows, .. } => rows.len() * 2,
        }
    }
}

/// A loaded BERT encoder.
pub(crate) struct Encoder {
    config: BertConfig,
    word: WordTable,
    position: Array2<f32>,
    token_type: Array2<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    precision: Precision,
}

fn table(t: &Tensors<'_>, name: &str, rows: usize, width: usize) -> Result<Array2<f32>, BertError> {
    Array2::from_shape_vec((rows, width), t.get(name, &[rows, width])?)
        .map_err(|e| BertError::Weights(e.to_string()))
}

impl Encoder {
    pub(crate) fn load(config: &BertConfig, weights: &[u8]) -> Result<Self, BertError> {
        let t = Tensors::parse(weights)?;
        let h = config.hidden_size;
        let i = config.intermediate_size;
        let eps = config.layer_norm_eps;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let base = format!("encoder.layer.{l}");
            let q = Linear::load(&t, &format!("{base}.attention.self.query"), h, h)?;
            let k = Linear::load(&t, &format!("{base}.attention.self.key"), h, h)?;
            let v = Linear::load(&t, &format!("{base}.attention.self.value"), h, h)?;
            layers.push(Layer {
                qkv: Linear::concat([q, k, v]),
                attention_out: Linear::load(&t, &format!("{base}.attention.output.dense"), h, h)?,
                attention_norm: LayerNorm::load(
                    &t,
                    &format!("{base}.attention.output.LayerNorm"),
                    h,
                    eps,
                )?,
                intermediate: Linear::load(&t, &format!("{base}.intermediate.dense"), i, h)?,
                output: Linear::load(&t, &format!("{base}.output.dense"), h, i)?,
                output_norm: LayerNorm::load(&t, &format!("{base}.output.LayerNorm"), h, eps)?,
            });
        }
        let extra = format!(
            "encoder.layer.{}.attention.self.query.weight",
            config.num_hidden_layers
        );
        if t.get(&extra, &[h, h]).is_ok() {
            return Err(BertError::Inconsistent(format!(
                "the weights have more layers than num_hidden_layers = {}",
                config.num_hidden_layers
            )));
        }
        Ok(Encoder {
            config: config.clone(),
            word: WordTable::F32(table(
                &t,
                "embeddings.word_embeddings.weight",
                config.vocab_size,
                h,
            )?),
            position: table(
                &t,
                "embeddings.position_embeddings.weight",
                config.max_position_embeddings,
                h,
            )?,
            token_type: table(
                &t,
                "embeddings.token_type_embeddings.weight",
                config.type_vocab_size,
                h,
            )?,
            embedding_norm: LayerNorm::load(&t, "embeddings.LayerNorm", h, eps)?,
            layers,
            precision: Precision::F32,
        })
    }

    /// Repacks every linear layer into `precision` on `tiers`, from f32
    /// (the f32 weights are dropped).
    pub(crate) fn pack(&mut self, precision: Precision, tiers: Tiers) {
        debug_assert_eq!(self.precision, Precision::F32);
        for layer in &mut self.layers {
            layer.qkv.pack(precision, tiers);
            layer.attention_out.pack(precision, tiers);
            layer.intermediate.pack(precision, tiers);
            // The feed-forward output's weights do not survive int8 per
            // channel (see `Precision::Int8`): that product runs in bf16.
            let last = match precision {
                Precision::Int8 => Precision::Bf16,
                p => p,
            };
            layer.output.pack(last, tiers);
        }
        if precision == Precision::Bf16 {
            if let WordTable::F32(a) = &self.word {
                self.word = WordTable::Bf16 {
                    width: a.ncols(),
                    rows: a.iter().map(|x| rag_gemm::bf16::to_bf16(*x)).collect(),
                };
            }
        }
        self.precision = precision;
    }

    /// Heap bytes of the word-embedding table.
    pub(crate) fn word_table_bytes(&self) -> usize {
        self.word.heap_bytes()
    }

    /// The precision of the linear layers.
    pub(crate) fn precision(&self) -> Precision {
        self.precision
    }

    /// Heap bytes of the linear layers' weights.
    pub(crate) fn linear_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| {
                l.qkv.heap_bytes()
                    + l.attention_out.heap_bytes()
                    + l.intermediate.heap_bytes()
                    + l.output.heap_bytes()
            })
            .sum()
    }

    /// Runs sequences through the encoder and pools each into one vector.
    ///
    /// Every sequence must be non-empty, no longer than the position table
    /// allows, with ids below the vocabulary size and type ids below the
    /// type vocabulary size (the caller's tokenizer guarantees this).
    pub(crate) fn embed(
        &self,
        sequences: &[(&[u32], &[u32])],
        pooling: Pooling,
        normalize: bool,
    ) -> Vec<Vec<f32>> {
        let hidden = self.forward(sequences);
        let mut out = Vec::with_capacity(sequences.len());
        let mut start = 0;
        for (ids, _) in sequences {
            let rows = block(
                hidden.view(),
                start..start + ids.len(),
                0..self.config.hidden_size,
            );
            start += ids.len();
            let mut v: Vec<f32> = match pooling {
                Pooling::Cls => rows.row(0).to_vec(),
                Pooling::Mean => {
                    let mut sum = vec![0f64; self.config.hidden_size];
                    for row in rows.rows() {
                        for (s, &x) in sum.iter_mut().zip(row) {
                            *s += f64::from(x);
                        }
                    }
                    sum.iter().map(|s| (s / ids.len() as f64) as f32).collect()
                }
                Pooling::Max => rows
                    .columns()
                    .into_iter()
                    .map(|c| c.iter().copied().fold(f32::NEG_INFINITY, f32::max))
                    .collect(),
            };
            if normalize {
                let norm = v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
                // sentence-transformers divides by max(norm, 1e-12).
                let inv = 1.0 / norm.max(1e-12);
                for x in &mut v {
                    *x = (f64::from(*x) * inv) as f32;
                }
            }
            out.push(v);
        }
        out
    }

    /// The last hidden states of all tokens of all sequences, stacked.
    fn forward(&self, sequences: &[(&[u32], &[u32])]) -> Array2<f32> {
        let h = self.config.hidden_size;
        let total: usize = sequences.iter().map(|(ids, _)| ids.len()).sum();
        let mut x = Array2::<f32>::zeros((total, h));
        let mut r = 0;
        for (ids, type_ids) in sequences {
            for (p, (&id, &ty)) in ids.iter().zip(type_ids.iter()).enumerate() {
                let pos = self.position.row(p + self.config.position_offset);
                let typ = self.token_type.row(ty as usize);
                let mut row = x.row_mut(r);
                match &self.word {
                    WordTable::F32(table) => {
                        let word = table.row(id as usize);
                        for (j, v) in row.iter_mut().enumerate() {
                            *v = word[j] + pos[j] + typ[j];
                        }
                    }
                    WordTable::Bf16 { width, rows } => {
                        let word = &rows[id as usize * width..][..*width];
                        for (j, v) in row.iter_mut().enumerate() {
                            *v = rag_gemm::bf16::from_bf16(word[j]) + pos[j] + typ[j];
                        }
                    }
                }
                r += 1;
            }
        }
        self.embedding_norm.apply(&mut x);
        for layer in &self.layers {
            x = self.layer(layer, x, sequences);
        }
        x
    }

    fn layer(&self, layer: &Layer, x: Array2<f32>, sequences: &[(&[u32], &[u32])]) -> Array2<f32> {
        let h = self.config.hidden_size;
        let heads = self.config.num_attention_heads;
        let dh = h / heads;
        let scale = 1.0 / (dh as f32).sqrt();

        let qkv = layer.qkv.forward(x.view());
        let mut context = Array2::<f32>::zeros((x.nrows(), h));
        let mut start = 0;
        let mut scores = Array2::<f32>::zeros((0, 0));
        for (ids, _) in sequences {
            let n = ids.len();
            let rows = start..start + n;
            if scores.dim() != (n, n) {
                scores = Array2::zeros((n, n));
            }
            for head in 0..heads {
                let cols = head * dh..(head + 1) * dh;
                let q = block(qkv.view(), rows.clone(), cols.clone());
                let k = block(qkv.view(), rows.clone(), h + cols.start..h + cols.end);
                let v = block(
                    qkv.view(),
                    rows.clone(),
                    2 * h + cols.start..2 * h + cols.end,
                );
                general_mat_mul(scale, &q, &k.t(), 0.0, &mut scores);
                for mut row in scores.rows_mut() {
                    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0f32;
                    for s in row.iter_mut() {
                        *s = (*s - max).exp();
                        sum += *s;
                    }
                    let inv = 1.0 / sum;
                    row.mapv_inplace(|s| s * inv);
                }
                let mut out = block_mut(context.view_mut(), rows.clone(), cols);
                general_mat_mul(1.0, &scores, &v, 0.0, &mut out);
            }
            start += n;
        }

        let mut attended = layer.attention_out.forward(context.view());
        attended += &x;
        layer.attention_norm.apply(&mut attended);

        let mut inner = layer.intermediate.forward(attended.view());
        let act = self.config.hidden_act;
        inner.mapv_inplace(|v| activate(act, v));
        let mut out = layer.output.forward(inner.view());
        out += &attended;
        layer.output_norm.apply(&mut out);
        out
    }

    pub(crate) fn config(&self) -> &BertConfig {
        &self.config
    }
}

fn activate(act: Activation, x: f32) -> f32 {
    match act {
        Activation::Gelu => {
            let x = f64::from(x);
            (0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
        }
        Activation::GeluTanh => {
            let x = f64::from(x);
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044_715 * x * x * x);
            (0.5 * x * (1.0 + inner.tanh())) as f32
        }
        Activation::Relu => x.max(0.0),
    }
}

/// The error function, from the Chebyshev-fitted complementary error function
/// of Numerical Recipes (`erfcc`), whose fractional error is below 1.2e-7
/// everywhere: well within f32 precision for GELU.
fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Values of erf from standard tables.
        let table = [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
        ];
        for (x, want) in table {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 2e-7);
        }
        assert!((activate(Activation::Gelu, 1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((activate(Activation::Gelu, -3.0) - -0.004_049_7).abs() < 1e-6);
    }
}
