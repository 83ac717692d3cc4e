//! The encoder's linear layers, `x · Wᵀ + b`, in the model's precision.
//!
//! f32 products go through `ndarray` (the `matrixmultiply` crate's SIMD
//! sgemm), or, for a few rows, through a dot product per weight row. The
//! packed precisions run on `rag-gemm`'s kernels: int8 per channel with
//! activations quantised per token in two parts, or bf16.

use ndarray::linalg::general_mat_mul;
use ndarray::{Array1, Array2, ArrayView2, Axis};
use rag_gemm::{matmul_bf16, matmul_i8, Bf16Acts, Bf16Matrix, I8Acts, I8Matrix};

use crate::error::BertError;
use crate::precision::{Precision, Tiers};
use crate::weights::Tensors;

/// The exponent of the int8 weights' column smoothing: input column `k` of
/// the weights is divided by `c_k = (max_o |w[o, k]|)^SMOOTHING` before the
/// per-channel quantisation, and the activations are multiplied by `c_k`,
/// which leaves the product unchanged and moves part of the weights'
/// outlier columns into the activations, whose two-part quantisation has
/// about 15 bits to spare (the idea of SmoothQuant, without calibration
/// data). Measured on all-MiniLM-L6-v2's fixture, every product in int8
/// (minimum / mean cosine to sentence-transformers): exponent 0 (plain
/// per-channel) 0.99649 / 0.99936, 0.3 0.99859, 0.4 0.99885 / 0.99964,
/// 0.5 0.99878, 0.6 0.99869, 0.7 0.99856, 1 0.99527.
const SMOOTHING: f32 = 0.4;

/// A linear layer's weights in one of the precisions.
enum Weights {
    /// `[out, in]`, as PyTorch stores it.
    F32(Array2<f32>),
    /// Weights with each input column divided by `smooth[k]` and quantised
    /// per channel; activations are multiplied by `smooth` before their
    /// quantisation.
    Int8 {
        m: I8Matrix,
        tier: rag_gemm::Int8Tier,
        smooth: Vec<f32>,
    },
    Bf16(Bf16Matrix, rag_gemm::Bf16Tier),
}

pub(crate) struct Linear {
    weight: Weights,
    bias: Array1<f32>,
}

impl Linear {
    pub(crate) fn load(
        t: &Tensors<'_>,
        base: &str,
        out: usize,
        inp: usize,
    ) -> Result<Self, BertError> {
        Ok(Linear {
            weight: Weights::F32(
                Array2::from_shape_vec((out, inp), t.get(&format!("{base}.weight"), &[out, inp])?)
                    .map_err(|e| BertError::Weights(e.to_string()))?,
            ),
            bias: Array1::from(t.get(&format!("{base}.bias"), &[out])?),
        })
    }

    fn f32_weight(&self) -> &Array2<f32> {
        match &self.weight {
            Weights::F32(w) => w,
            _ => unreachable!("layers are stacked before they are packed"),
        }
    }

    /// Stacks linear layers with the same input into one (f32 layers, at
    /// load).
    pub(crate) fn concat(parts: [Linear; 3]) -> Linear {
        let weights: Vec<_> = parts.iter().map(|p| p.f32_weight().view()).collect();
        let biases: Vec<_> = parts.iter().map(|p| p.bias.view()).collect();
        Linear {
            weight: Weights::F32(
                ndarray::concatenate(Axis(0), &weights).expect("same input width"),
            ),
            bias: ndarray::concatenate(Axis(0), &biases).expect("one-dimensional"),
        }
    }

    /// Repacks f32 weights into `precision` on `tiers` (the f32 copy is
    /// dropped). A layer already packed is left as it is.
    pub(crate) fn pack(&mut self, precision: Precision, tiers: Tiers) {
        let Weights::F32(w) = &self.weight else {
            return;
        };
        let (out, inp) = w.dim();
        let w = w.as_standard_layout();
        let w = w.as_slice().expect("standard layout");
        let bias = self.bias.as_slice().expect("contiguous");
        self.weight = match precision {
            Precision::F32 => return,
            Precision::Int8 => {
                let mut smooth = vec![0f32; inp];
                for row in w.chunks_exact(inp) {
                    for (s, &v) in smooth.iter_mut().zip(row) {
                        *s = s.max(v.abs());
                    }
                }
                for s in &mut smooth {
                    *s = if *s > 0.0 { s.powf(SMOOTHING) } else { 1.0 };
                }
                let scaled: Vec<f32> = w
                    .chunks_exact(inp)
                    .flat_map(|row| row.iter().zip(&smooth).map(|(v, s)| v / s))
                    .collect();
                Weights::Int8 {
                    m: I8Matrix::from_f32(&scaled, out, inp, bias),
                    tier: tiers.int8,
                    smooth,
                }
            }
            Precision::Bf16 => Weights::Bf16(Bf16Matrix::from_f32(w, out, inp, bias), tiers.bf16),
        };
    }

    /// Heap bytes of the weights.
    pub(crate) fn heap_bytes(&self) -> usize {
        4 * self.bias.len()
            + match &self.weight {
                Weights::F32(w) => 4 * w.len(),
                Weights::Int8 { m, smooth, .. } => m.heap_bytes() + 4 * smooth.len(),
                Weights::Bf16(m, _) => m.heap_bytes(),
            }
    }

    /// `x · Wᵀ + b` for `x` of shape `[tokens, in]`.
    pub(crate) fn forward(&self, x: ArrayView2<'_, f32>) -> Array2<f32> {
        let out = self.bias.len();
        let rows = x.nrows();
        match &self.weight {
            Weights::F32(w) if rows <= SMALL_BATCH_ROWS => self.forward_few(w, x),
            Weights::F32(w) => {
                let mut y = Array2::from_shape_fn((rows, out), |(_, j)| self.bias[j]);
                general_mat_mul(1.0, &x, &w.t(), 1.0, &mut y);
                y
            }
            Weights::Int8 { m, tier, smooth } => {
                let x = x.as_standard_layout();
                let x: Vec<f32> = x
                    .as_slice()
                    .expect("standard layout")
                    .chunks_exact(m.nin())
                    .flat_map(|row| row.iter().zip(smooth).map(|(v, s)| v * s))
                    .collect();
                let x = &x[..];
                let mut acts = I8Acts::default();
                let mut resid = Vec::new();
                acts.quantize_split(x, m.nin(), &mut resid);
                // Rows 0..n of the product are the main parts, n..2n the
                // residual parts; each carries the bias once.
                let n = rows * out;
                let mut parts = vec![0f32; 2 * n];
                matmul_i8(*tier, m, &acts, &mut parts);
                let (hi, lo) = parts.split_at(n);
                let mut y = Array2::<f32>::zeros((rows, out));
                rag_gemm::combine_split(
                    y.as_slice_mut().expect("standard layout"),
                    hi,
                    lo,
                    self.bias.as_slice().expect("contiguous"),
                );
                y
            }
            Weights::Bf16(m, tier) => {
                let x = x.as_standard_layout();
                let mut acts = Bf16Acts::default();
                acts.quantize(x.as_slice().expect("standard layout"), m.nin());
                let mut y = Array2::<f32>::zeros((rows, out));
                matmul_bf16(*tier, m, &acts, y.as_slice_mut().expect("standard layout"));
                y
            }
        }
    }

    /// The f32 product for a few rows: each weight row is read once and
    /// dotted with every input row, without the packing copy of the weights
    /// that a general matrix product makes (which dominates for short
    /// queries).
    fn forward_few(&self, weight: &Array2<f32>, x: ArrayView2<'_, f32>) -> Array2<f32> {
        let x = x.as_standard_layout();
        let rows: Vec<&[f32]> = x
            .rows()
            .into_iter()
            .map(|r| r.to_slice().expect("standard layout"))
            .collect();
        let mut y = Array2::<f32>::zeros((rows.len(), self.bias.len()));
        let weight = weight.as_standard_layout();
        few_rows(
            weight.as_slice().expect("standard layout"),
            self.bias.as_slice().expect("contiguous"),
            &rows,
            y.as_slice_mut().expect("standard layout"),
        );
        y
    }
}

/// `y[i][j] = <rows[i], weight[j]> + bias[j]` with `weight` row-major
/// (`bias.len()` rows). Compiled twice, for the x86-64 baseline and for AVX2
/// with FMA; the better one is picked at run time.
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn few_rows(weight: &[f32], bias: &[f32], rows: &[&[f32]], y: &mut [f32]) {
    let out = bias.len();
    let width = weight.len() / out.max(1);
    for (j, (w, b)) in weight.chunks_exact(width.max(1)).zip(bias).enumerate() {
        for (i, row) in rows.iter().enumerate() {
            y[i * out + j] = dot8(row, w) + b;
        }
    }
}

/// Inputs with at most this many rows (tokens) skip the general matrix
/// product; see [`Linear::forward_few`].
const SMALL_BATCH_ROWS: usize = 16;

/// Dot product with eight independent accumulators, which the compiler turns
/// into SIMD lanes (eight wide where [`few_rows`] runs compiled for AVX2).
#[inline(always)]
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks_a = a.chunks_exact(8);
    let chunks_b = b.chunks_exact(8);
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for k in 0..8 {
            acc[k] += ca[k] * cb[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every precision and tier against the f32 product of the same
    /// weights: within 1% of the output scale (the weights' rounding
    /// dominates: per channel to 8 bits, or to bf16's 8-bit significand);
    /// a wrong kernel is off by the order of the outputs themselves.
    #[test]
    fn packed_layers_approximate_the_f32_layer() {
        let (out, inp) = (40, 70);
        let mut state = 17u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        };
        let w: Vec<f32> = (0..out * inp).map(|_| next()).collect();
        let b: Vec<f32> = (0..out).map(|_| next()).collect();
        let f32_layer = || Linear {
            weight: Weights::F32(Array2::from_shape_vec((out, inp), w.clone()).unwrap()),
            bias: Array1::from(b.clone()),
        };
        for rows in [1, 5, 17, 40] {
            let x = Array2::from_shape_fn((rows, inp), |_| next() * 3.0);
            let want = f32_layer().forward(x.view());
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            let mut tiers = vec![Tiers::portable()];
            if Tiers::best() != Tiers::portable() {
                tiers.push(Tiers::best());
            }
            for t in tiers {
                for (precision, tol) in [(Precision::Int8, 1e-2), (Precision::Bf16, 1e-2)] {
                    let mut layer = f32_layer();
                    layer.pack(precision, t);
                    assert!(layer.heap_bytes() < f32_layer().heap_bytes());
                    let got = layer.forward(x.view());
                    let err = got
                        .iter()
                        .zip(&want)
                        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                    assert!(
                        err <= tol * scale,
                        "{precision} on {t:?}, {rows} rows: max error {err} of {scale}"
                    );
                }
            }
        }
    }
}
