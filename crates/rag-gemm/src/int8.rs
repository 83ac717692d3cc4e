//! Int8 matrix products: AMX tiles, AVX-512 VNNI, and a portable kernel.
//!
//! Weights are quantised to signed bytes with one scale per output channel
//! (`max |w| / 127` of the row, round half to even, from f32 rows by
//! [`I8Matrix::from_f32`]), and stored in the layout all
//! kernels read: per tile of 16 output channels, one 64-byte row per group
//! of four input positions (`[n][4]` bytes: channel `n`, positions
//! `4s..4s + 4`). That is the B operand of AMX's `tdpbusd` (16 such rows
//! form a 16 x 64 tile) and, row by row, the signed operand of AVX-512's
//! `vpdpbusd`.
//!
//! Activations are quantised per token (row) to `-127..=127` with scale
//! `max |x| / 127` and stored offset by 128 as unsigned bytes, the unsigned
//! operand of both instructions; the offset is removed exactly with the
//! precomputed `128 * sum_k w[o, k]` of each channel. Every output is then
//!
//! ```text
//! y[t, o] = bias[o] + (sa[t] * sw[o]) * (sum_k qa[t, k] * qw[o, k])
//! ```
//!
//! with the integer sum exact (at most 1536 * 127 * 127 in magnitude, far
//! from `i32` overflow) and the same two float operations in every kernel,
//! so that all tiers give bit-identical results to [`matmul_i8_scalar`].
//!
//! The kernels `avx512` and `amx` hold this module's `unsafe` code, each
//! asserting CPU features and every shape before its intrinsics or
//! assembly run; [`Int8Tier::Portable`] is safe Rust.

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod amx;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx512;

#[cfg(target_arch = "x86_64")]
pub use amx::has_amx;
#[cfg(target_arch = "x86_64")]
pub use avx512::has_avx512_vnni;

/// Whether this CPU has AMX-INT8 and the process may use the tiles
/// (always false off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub fn has_amx() -> bool {
    false
}

/// Whether this CPU has AVX-512 VNNI (always false off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub fn has_avx512_vnni() -> bool {
    false
}

/// Which kernel runs [`matmul_i8`]; every tier gives bit-identical results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Int8Tier {
    /// AMX-INT8 tiles (`tdpbusd`), with the epilogue in AVX-512.
    Amx,
    /// AVX-512 VNNI (`vpdpbusd`).
    Avx512,
    /// Safe Rust in the tile order, for LLVM's auto-vectoriser.
    Portable,
}

impl Int8Tier {
    /// Every tier, fastest first.
    pub const ALL: [Int8Tier; 3] = [Int8Tier::Amx, Int8Tier::Avx512, Int8Tier::Portable];

    /// Whether this CPU (and, for AMX, the operating system) runs the tier.
    pub fn is_supported(self) -> bool {
        match self {
            Int8Tier::Amx => has_amx(),
            Int8Tier::Avx512 => has_avx512_vnni(),
            Int8Tier::Portable => true,
        }
    }

    /// The fastest supported tier.
    pub fn best() -> Int8Tier {
        Self::ALL
            .into_iter()
            .find(|t| t.is_supported())
            .unwrap_or(Int8Tier::Portable)
    }

    /// The tier's name (`"amx"`, `"avx512"`, `"portable"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Int8Tier::Amx => "amx",
            Int8Tier::Avx512 => "avx512",
            Int8Tier::Portable => "portable",
        }
    }
}

/// Output channels per tile (the columns of an AMX accumulator tile, the
/// 32-bit lanes of a 512-bit register).
pub const TILE_N: usize = 16;
/// Input positions per tile (64 bytes).
pub const TILE_K: usize = 64;
/// Tokens per tile (the rows of an AMX tile).
pub const TILE_M: usize = 16;

/// Rounds half to even and clamps to `-127..=127` (the symmetric range:
/// with `scale = amax / 127` the extreme values map to exactly +-127).
///
/// Adding 1.5 * 2^23 makes the FPU round to an integer, which then sits in
/// the low mantissa bits; reading it from there (instead of a saturating
/// `as i32`, which LLVM does not vectorise) keeps the quantisation loops
/// vectorised.
#[inline(always)]
pub fn round_q(v: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    ((v.clamp(-127.0, 127.0) + MAGIC).to_bits() as i32) - 0x4B40_0000
}

/// A weight matrix re-quantised to int8 per output channel, in the tile
/// layout described in the module documentation.
#[derive(Debug, Clone)]
pub struct I8Matrix {
    /// Output channels.
    pub(crate) nout: usize,
    /// Input positions.
    pub(crate) nin: usize,
    /// `nout` rounded up to a multiple of [`TILE_N`].
    pub(crate) np: usize,
    /// `nin` rounded up to a multiple of [`TILE_K`].
    pub(crate) kp: usize,
    /// `np * kp` bytes: for tile `nt` the `kp / 4` rows of 64 bytes start at
    /// `nt * kp * 16`; padding is zero.
    pub(crate) data: Vec<i8>,
    /// Per-channel scale (`np` values; 0 in the padding).
    pub(crate) scale: Vec<f32>,
    /// `128 * sum_k w[o, k]` per channel (`np` values).
    pub(crate) comp: Vec<i32>,
    /// Bias per channel (`np` values; 0 in the padding).
    pub(crate) bias: Vec<f32>,
}

impl I8Matrix {
    /// Quantises the row-major f32 matrix `w` (`nout` rows of `nin`) per
    /// output channel and packs it with its bias. A row of zeros gets scale
    /// 0 (and zero weights).
    pub fn from_f32(w: &[f32], nout: usize, nin: usize, bias: &[f32]) -> Self {
        assert_eq!(w.len(), nout * nin, "f32 matrix size");
        let mut q = vec![0i8; nout * nin];
        let mut scale = vec![0f32; nout];
        for ((row, out), s) in w
            .chunks_exact(nin.max(1))
            .zip(q.chunks_exact_mut(nin.max(1)))
            .zip(&mut scale)
        {
            let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            *s = amax / 127.0;
            if *s > 0.0 {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = round_q(v / *s) as i8;
                }
            }
        }
        Self::from_rows(&q, nout, nin, &scale, bias)
    }

    /// Packs the row-major int8 matrix `w` (`nout` x `nin`) with its
    /// per-channel scales and bias.
    pub fn from_rows(w: &[i8], nout: usize, nin: usize, scale: &[f32], bias: &[f32]) -> Self {
        assert_eq!(w.len(), nout * nin);
        assert!(scale.len() >= nout && bias.len() >= nout);
        let np = nout.div_ceil(TILE_N) * TILE_N;
        let kp = nin.div_ceil(TILE_K).max(1) * TILE_K;
        let mut m = Self {
            nout,
            nin,
            np,
            kp,
            data: vec![0; np * kp],
            scale: vec![0.0; np],
            comp: vec![0; np],
            bias: vec![0.0; np],
        };
        for o in 0..nout {
            let row = &w[o * nin..(o + 1) * nin];
            for (k, &v) in row.iter().enumerate() {
                let i = m.index(o, k);
                m.data[i] = v;
            }
            m.comp[o] = 128 * row.iter().map(|&v| i32::from(v)).sum::<i32>();
            m.scale[o] = scale[o];
            m.bias[o] = bias[o];
        }
        m
    }

    /// Output channels.
    pub fn nout(&self) -> usize {
        self.nout
    }

    /// Input positions.
    pub fn nin(&self) -> usize {
        self.nin
    }

    /// Index in `data` of weight `(o, k)`.
    #[inline(always)]
    fn index(&self, o: usize, k: usize) -> usize {
        ((o / TILE_N) * (self.kp / 4) + k / 4) * 64 + (o % TILE_N) * 4 + k % 4
    }

    /// Weight `(o, k)`.
    pub fn get(&self, o: usize, k: usize) -> i8 {
        self.data[self.index(o, k)]
    }

    /// Heap bytes of the packed matrix.
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity()
            + 4 * (self.scale.capacity() + self.comp.capacity() + self.bias.capacity())
    }

    /// Asserts that `x` and `y` fit this matrix: the contract every kernel
    /// relies on before it touches memory through raw pointers.
    pub fn check_shapes(&self, x: &I8Acts, y: &[f32]) {
        assert_eq!(x.cols, self.nin, "activation width");
        assert_eq!(x.kp, self.kp, "padded activation width");
        assert_eq!(x.rows_padded % TILE_M, 0);
        assert!(x.rows <= x.rows_padded);
        assert_eq!(x.u.len(), x.rows_padded * x.kp, "activation buffer");
        assert_eq!(x.scale.len(), x.rows, "activation scales");
        assert_eq!(y.len(), x.rows * self.nout, "output size");
        assert_eq!(self.np % TILE_N, 0);
        assert!(self.kp.is_multiple_of(TILE_K) && self.kp > 0);
        assert_eq!(self.data.len(), self.np * self.kp, "packed weights");
        assert_eq!(self.scale.len(), self.np);
        assert_eq!(self.comp.len(), self.np);
        assert_eq!(self.bias.len(), self.np);
    }
}

/// Activations quantised per token, offset to unsigned bytes.
#[derive(Debug, Default)]
pub struct I8Acts {
    /// Tokens.
    pub(crate) rows: usize,
    /// `rows` rounded up to a multiple of [`TILE_M`] (the padding rows are
    /// zero activations).
    pub(crate) rows_padded: usize,
    /// Values per token.
    pub(crate) cols: usize,
    /// `cols` rounded up to a multiple of [`TILE_K`].
    pub(crate) kp: usize,
    /// `rows_padded * kp` bytes, `q + 128` (128 in the padding).
    pub(crate) u: Vec<u8>,
    /// Per-token scale.
    pub(crate) scale: Vec<f32>,
}

impl I8Acts {
    /// Tokens (rows) last quantised.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Quantises `x`, a row-major matrix with `cols` columns.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        assert!(cols > 0 && x.len().is_multiple_of(cols));
        self.cols = cols;
        self.rows = x.len() / cols;
        self.rows_padded = self.rows.div_ceil(TILE_M) * TILE_M;
        self.kp = cols.div_ceil(TILE_K) * TILE_K;
        self.u.clear();
        self.u.resize(self.rows_padded * self.kp, 128);
        self.scale.clear();
        self.scale.resize(self.rows, 0.0);
        quantize_rows(x, cols, self.kp, &mut self.u, &mut self.scale);
    }
}

impl I8Acts {
    /// Quantises `x` in two parts, each per token: rows `0..n` hold `x`
    /// quantised as by [`I8Acts::quantize`], rows `n..2n` the rounding
    /// error of that quantisation, quantised again (`resid` is scratch
    /// space). A product with these `2n` rows gives, summed per token, the
    /// product with `x` at about 15-bit activation resolution.
    pub fn quantize_split(&mut self, x: &[f32], cols: usize, resid: &mut Vec<f32>) {
        assert!(cols > 0 && x.len().is_multiple_of(cols));
        let n = x.len() / cols;
        self.cols = cols;
        self.rows = 2 * n;
        self.rows_padded = self.rows.div_ceil(TILE_M) * TILE_M;
        self.kp = cols.div_ceil(TILE_K) * TILE_K;
        let kp = self.kp;
        self.u.clear();
        self.u.resize(self.rows_padded * kp, 128);
        self.scale.clear();
        self.scale.resize(self.rows, 0.0);
        let (hi, lo) = self.u.split_at_mut(n * kp);
        let (s_hi, s_lo) = self.scale.split_at_mut(n);
        quantize_rows(x, cols, kp, hi, s_hi);
        resid.clear();
        resid.resize(x.len(), 0.0);
        residual_rows(x, cols, kp, hi, s_hi, resid);
        quantize_rows(resid, cols, kp, &mut lo[..n * kp], s_lo);
    }
}

/// `y = hi + (lo - bias)` row by row (`bias.len()` columns): the output of
/// a product with [`I8Acts::quantize_split`] activations, whose rows
/// `0..n` (`hi`) and `n..2n` (`lo`) each carry the bias once.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
pub fn combine_split(y: &mut [f32], hi: &[f32], lo: &[f32], bias: &[f32]) {
    let n = bias.len();
    assert!(y.len() == hi.len() && y.len() == lo.len() && y.len().is_multiple_of(n.max(1)));
    for ((yr, hr), lr) in y
        .chunks_exact_mut(n)
        .zip(hi.chunks_exact(n))
        .zip(lo.chunks_exact(n))
    {
        for (((o, &a), &b), &c) in yr.iter_mut().zip(hr).zip(lr).zip(bias) {
            *o = a + (b - c);
        }
    }
}

/// `r = x - s * (u - 128)` row by row: what the quantisation lost.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn residual_rows(x: &[f32], cols: usize, kp: usize, u: &[u8], scale: &[f32], r: &mut [f32]) {
    for (((xr, ur), &s), rr) in x
        .chunks_exact(cols)
        .zip(u.chunks_exact(kp))
        .zip(scale)
        .zip(r.chunks_exact_mut(cols))
    {
        for ((o, &v), &q) in rr.iter_mut().zip(xr).zip(ur) {
            *o = v - s * (f32::from(q) - 128.0);
        }
    }
}

#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn quantize_rows(x: &[f32], cols: usize, kp: usize, u: &mut [u8], scale: &mut [f32]) {
    for ((row, out), s) in x
        .chunks_exact(cols)
        .zip(u.chunks_exact_mut(kp))
        .zip(scale.iter_mut())
    {
        let amax = abs_max(row);
        *s = amax / 127.0;
        let inv = if *s > 0.0 { 1.0 / *s } else { 0.0 };
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (round_q(v * inv) + 128) as u8;
        }
    }
}

/// `max |x|` with sixteen independent lanes (vectorisable; a sequential
/// `fold` of `f32::max` is not). NaN inputs are ignored.
#[inline(always)]
fn abs_max(x: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            let a = v.abs();
            *l = if a > *l { a } else { *l };
        }
    }
    for (l, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        let a = v.abs();
        *l = if a > *l { a } else { *l };
    }
    lanes.iter().fold(0f32, |m, &v| if v > m { v } else { m })
}

/// The one formula every kernel finishes an output with.
#[inline(always)]
pub fn finish(bias: f32, sa: f32, sw: f32, acc: i32) -> f32 {
    bias + (sa * sw) * acc as f32
}

/// `y = x * w^T + bias` (`y` is `x.rows x w.nout`, row-major) on the
/// given tier.
///
/// # Panics
///
/// If the shapes disagree ([`I8Matrix::check_shapes`]) or the CPU lacks
/// the tier.
pub fn matmul_i8(tier: Int8Tier, w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    match tier {
        #[cfg(target_arch = "x86_64")]
        Int8Tier::Amx => amx::matmul(w, x, y),
        #[cfg(target_arch = "x86_64")]
        Int8Tier::Avx512 => avx512::matmul(w, x, y),
        #[cfg(not(target_arch = "x86_64"))]
        Int8Tier::Amx | Int8Tier::Avx512 => panic!("the {} tier needs x86-64", tier.as_str()),
        Int8Tier::Portable => matmul_i8_portable(w, x, y),
    }
}

/// The portable tier: for each token and tile of 16 channels, sixteen
/// integer lanes summed over the packed rows (exact, so bit-identical to
/// the reference), compiled for AVX2 and the x86-64 baseline.
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn matmul_i8_portable(w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    w.check_shapes(x, y);
    let steps = w.kp / 4;
    for t in 0..x.rows {
        let a = &x.u[t * x.kp..(t + 1) * x.kp];
        let row = &mut y[t * w.nout..(t + 1) * w.nout];
        for (nt, tile) in w.data.chunks_exact(steps * 64).enumerate() {
            let mut acc = [0i32; TILE_N];
            for (s, wr) in tile.chunks_exact(64).enumerate() {
                let ak = &a[4 * s..4 * s + 4];
                for (lane, wq) in acc.iter_mut().zip(wr.chunks_exact(4)) {
                    *lane += i32::from(ak[0]) * i32::from(wq[0])
                        + i32::from(ak[1]) * i32::from(wq[1])
                        + i32::from(ak[2]) * i32::from(wq[2])
                        + i32::from(ak[3]) * i32::from(wq[3]);
                }
            }
            let o0 = nt * TILE_N;
            for (i, &acc) in acc.iter().enumerate().take(w.nout.saturating_sub(o0)) {
                let o = o0 + i;
                row[o] = finish(w.bias[o], x.scale[t], w.scale[o], acc - w.comp[o]);
            }
        }
    }
}

/// The specification of the int8 kernels, in plain scalar Rust.
pub fn matmul_i8_scalar(w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    w.check_shapes(x, y);
    for t in 0..x.rows {
        let a = &x.u[t * x.kp..t * x.kp + w.nin];
        for o in 0..w.nout {
            let acc: i32 = a
                .iter()
                .enumerate()
                .map(|(k, &u)| (i32::from(u) - 128) * i32::from(w.get(o, k)))
                .sum();
            y[t * w.nout + o] = finish(w.bias[o], x.scale[t], w.scale[o], acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rng::Lcg;

    /// A random int8 matrix with scales and bias; `extreme` uses only
    /// -127, 127 and 0.
    fn random_matrix(rng: &mut Lcg, nout: usize, nin: usize, extreme: bool) -> I8Matrix {
        let w: Vec<i8> = (0..nout * nin)
            .map(|_| {
                if extreme {
                    [-127i8, 127, 0, 127][(rng.next_u32() % 4) as usize]
                } else {
                    (rng.next_u32() % 255) as i32 as i8
                }
            })
            .map(|v| v.max(-127))
            .collect();
        let scale: Vec<f32> = (0..nout)
            .map(|_| 0.001 + rng.uniform().abs() * 0.01)
            .collect();
        let bias: Vec<f32> = (0..nout).map(|_| rng.uniform()).collect();
        I8Matrix::from_rows(&w, nout, nin, &scale, &bias)
    }

    fn random_acts(rng: &mut Lcg, rows: usize, nin: usize, extreme: bool) -> I8Acts {
        let x: Vec<f32> = (0..rows * nin)
            .map(|i| {
                if extreme {
                    [5.0, -5.0, 0.0][i % 3]
                } else {
                    rng.uniform() * 4.0
                }
            })
            .collect();
        let mut acts = I8Acts::default();
        acts.quantize(&x, nin);
        acts
    }

    /// Shapes: every token count 1..=17 (tile edges at 16), more tokens
    /// than a pair of tiles, channel counts that are and are not multiples
    /// of 16, and input widths that are not multiples of 64.
    fn shapes() -> Vec<(usize, usize, usize)> {
        let mut s: Vec<(usize, usize, usize)> = (1..=17).map(|m| (m, 48, 96)).collect();
        s.extend([
            (33, 40, 64),
            (5, 384, 384),
            (47, 1536, 384),
            (19, 384, 1536),
            (3, 17, 32),
            (2, 80, 160),
            (64, 64, 128),
        ]);
        s
    }

    /// Runs `kernel` against the scalar reference on random and extreme
    /// inputs; a tier the CPU lacks is reported as skipped.
    fn check_tier(kernel: Int8Tier) {
        if !kernel.is_supported() {
            eprintln!(
                "SKIPPED: the {} tier is not supported on this CPU",
                kernel.as_str()
            );
            return;
        }
        let name = kernel.as_str();
        let mut rng = Lcg(99);
        for extreme in [false, true] {
            for (rows, nout, nin) in shapes() {
                let w = random_matrix(&mut rng, nout, nin, extreme);
                let x = random_acts(&mut rng, rows, nin, extreme);
                let mut want = vec![0.0; rows * nout];
                let mut got = vec![f32::NAN; rows * nout];
                matmul_i8_scalar(&w, &x, &mut want);
                matmul_i8(kernel, &w, &x, &mut got);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{name} rows {rows} nout {nout} nin {nin} extreme {extreme}: \
                         output {i}: {a} vs {b}"
                    );
                }
            }
        }
        eprintln!("the {name} tier matches the scalar reference bit for bit");
    }

    #[test]
    fn avx512_kernel_matches_scalar_reference_exactly() {
        check_tier(Int8Tier::Avx512);
    }

    #[test]
    fn amx_kernel_matches_scalar_reference_exactly() {
        check_tier(Int8Tier::Amx);
    }

    #[test]
    fn portable_kernel_matches_scalar_reference_exactly() {
        check_tier(Int8Tier::Portable);
    }

    #[test]
    fn per_token_quantisation_is_symmetric_and_pads() {
        let mut x = vec![0.0f32; 2 * 70];
        x[0] = -3.0;
        x[1] = 1.4; // 1.4 * 127 / 3 = 59.27
        x[2] = 0.0117; // 0.0117 / (3 / 127) = 0.4953: rounds to 0
        x[70] = 0.0; // the second row is all zero
        let mut acts = I8Acts::default();
        acts.quantize(&x, 70);
        assert_eq!((acts.rows, acts.rows_padded, acts.kp), (2, 16, 128));
        assert_eq!(acts.scale, vec![3.0 / 127.0, 0.0]);
        assert_eq!(&acts.u[..3], &[1, 128 + 59, 128]);
        assert!(acts.u[128..].iter().all(|&u| u == 128));
        assert!(acts.u[70..128].iter().all(|&u| u == 128));
    }

    #[test]
    fn split_quantisation_recovers_about_fifteen_bits() {
        let mut rng = Lcg(5);
        let (rows, cols) = (3, 96);
        let mut x: Vec<f32> = (0..rows * cols).map(|_| rng.uniform()).collect();
        x[7] = 20.0; // an outlier sets the first part's scale of row 0
        let mut acts = I8Acts::default();
        let mut resid = Vec::new();
        acts.quantize_split(&x, cols, &mut resid);
        assert_eq!((acts.rows, acts.rows_padded, acts.kp), (6, 16, 128));
        for t in 0..rows {
            let (s1, s2) = (acts.scale[t], acts.scale[rows + t]);
            assert!(s2 <= s1 / 254.0 * 1.0001, "row {t}: {s1} {s2}");
            for k in 0..cols {
                let q1 = f32::from(acts.u[t * acts.kp + k]) - 128.0;
                let q2 = f32::from(acts.u[(rows + t) * acts.kp + k]) - 128.0;
                let err = (x[t * cols + k] - (s1 * q1 + s2 * q2)).abs();
                assert!(err <= s2 * 0.5001 + 1e-7, "row {t} col {k}: error {err}");
            }
        }
        // The padding rows and columns are zero activations.
        assert!(acts.u[6 * 128..].iter().all(|&u| u == 128));
        assert!((0..6).all(|r| acts.u[r * 128 + 96..(r + 1) * 128]
            .iter()
            .all(|&u| u == 128)));
    }

    #[test]
    fn f32_rows_are_quantised_per_channel() {
        let w = [-4.0f32, 3.5, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let m = I8Matrix::from_f32(&w, 2, 4, &[0.5, -1.0]);
        assert_eq!(m.scale[0], 4.0 / 127.0);
        assert_eq!(m.get(0, 0), -127);
        assert_eq!(m.get(0, 1), round_q(3.5 / (4.0 / 127.0)) as i8);
        assert_eq!(m.get(0, 3), round_q(1.0 / (4.0 / 127.0)) as i8);
        assert_eq!((m.scale[1], m.get(1, 0)), (0.0, 0));
        let sum: i32 = (0..4).map(|k| i32::from(m.get(0, k))).sum();
        assert_eq!(m.comp[0], 128 * sum);
        assert_eq!((m.np, m.kp, m.bias[0], m.bias[1]), (16, 64, 0.5, -1.0));
    }
}
