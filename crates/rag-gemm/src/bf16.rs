//! bf16 matrix products: AVX-512 BF16 (`vdpbf16ps`) and a portable kernel.
//!
//! Weights and activations are rounded to bfloat16 (round to nearest even;
//! 8 significant bits, the f32 exponent range), every product of two bf16
//! values is exact in f32, and the products are summed in f32. The error
//! is the rounding of the two operands (relative 2^-9 each) plus f32
//! summation; no per-channel or per-token scale is involved, so outliers
//! cost nothing, which is why bf16 is the exact-leaning choice next to
//! int8.
//!
//! Layout: per tile of 16 output channels, one 64-byte row per pair of
//! input positions (`[n][2]` bf16: channel `n`, positions `2s, 2s + 1`),
//! the B operand of `vdpbf16ps` (and, 16 rows at a time, of AMX's
//! `tdpbf16ps`). Activations are stored per token as pairs, so one 32-bit
//! broadcast feeds a whole tile.
//!
//! The kernels sum in different orders (`vdpbf16ps` adds two products per
//! lane per step), so tiers agree to f32 rounding, not bit for bit; the
//! tests bound every tier's error against an f64 sum of the same bf16
//! operands.

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx512;

use crate::int8::TILE_N;

/// Input positions per packed row group: pairs fill 64 bytes per tile row,
/// and widths are padded to 32 positions (one AMX tile row of bf16).
pub const BF16_K: usize = 32;

/// Whether this CPU has AVX-512 F, BW and BF16 (always false off x86-64).
pub fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512::has_avx512_bf16()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `f32` to bf16 bits, rounded to nearest even. NaN stays NaN (quiet);
/// infinities and values that round past the largest bf16 become
/// infinities, as in any float rounding.
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

/// bf16 bits to `f32` (exact).
#[inline(always)]
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Which kernel runs [`matmul_bf16`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bf16Tier {
    /// AVX-512 BF16 (`vdpbf16ps`: 32 multiply-adds per instruction).
    Avx512,
    /// Safe Rust: the bf16 operands widened to f32 and summed with sixteen
    /// lanes per tile, for LLVM's auto-vectoriser.
    Portable,
}

impl Bf16Tier {
    /// Every tier, fastest first.
    pub const ALL: [Bf16Tier; 2] = [Bf16Tier::Avx512, Bf16Tier::Portable];

    /// Whether this CPU runs the tier.
    pub fn is_supported(self) -> bool {
        match self {
            Bf16Tier::Avx512 => has_avx512_bf16(),
            Bf16Tier::Portable => true,
        }
    }

    /// The fastest supported tier.
    pub fn best() -> Bf16Tier {
        Self::ALL
            .into_iter()
            .find(|t| t.is_supported())
            .unwrap_or(Bf16Tier::Portable)
    }

    /// The tier's name (`"avx512"`, `"portable"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Bf16Tier::Avx512 => "avx512",
            Bf16Tier::Portable => "portable",
        }
    }
}

/// A weight matrix rounded to bf16, in the tile layout of the module
/// documentation.
#[derive(Debug, Clone)]
pub struct Bf16Matrix {
    pub(crate) nout: usize,
    pub(crate) nin: usize,
    /// `nout` rounded up to a multiple of 16.
    pub(crate) np: usize,
    /// `nin` rounded up to a multiple of [`BF16_K`].
    pub(crate) kp: usize,
    /// `np * kp` values: tile `nt`'s `kp / 2` rows of 32 values start at
    /// `nt * kp * 16`; padding is zero.
    pub(crate) data: Vec<u16>,
    /// Bias per channel (`np` values; 0 in the padding).
    pub(crate) bias: Vec<f32>,
}

impl Bf16Matrix {
    /// Rounds the row-major f32 matrix `w` (`nout` rows of `nin`) to bf16
    /// and packs it with its bias.
    pub fn from_f32(w: &[f32], nout: usize, nin: usize, bias: &[f32]) -> Self {
        assert_eq!(w.len(), nout * nin, "f32 matrix size");
        assert!(bias.len() >= nout, "one bias per channel");
        let np = nout.div_ceil(TILE_N) * TILE_N;
        let kp = nin.div_ceil(BF16_K).max(1) * BF16_K;
        let mut m = Bf16Matrix {
            nout,
            nin,
            np,
            kp,
            data: vec![0; np * kp],
            bias: vec![0.0; np],
        };
        for o in 0..nout {
            for k in 0..nin {
                let i = m.index(o, k);
                m.data[i] = to_bf16(w[o * nin + k]);
            }
            m.bias[o] = bias[o];
        }
        m
    }

    #[inline(always)]
    fn index(&self, o: usize, k: usize) -> usize {
        ((o / TILE_N) * (self.kp / 2) + k / 2) * 32 + (o % TILE_N) * 2 + k % 2
    }

    /// Weight `(o, k)` as it is stored.
    pub fn get(&self, o: usize, k: usize) -> f32 {
        from_bf16(self.data[self.index(o, k)])
    }

    /// Output channels.
    pub fn nout(&self) -> usize {
        self.nout
    }

    /// Input positions.
    pub fn nin(&self) -> usize {
        self.nin
    }

    /// Heap bytes of the packed matrix.
    pub fn heap_bytes(&self) -> usize {
        2 * self.data.capacity() + 4 * self.bias.capacity()
    }

    /// Asserts that `x` and `y` fit this matrix: the contract every kernel
    /// relies on before it touches memory through raw pointers.
    pub fn check_shapes(&self, x: &Bf16Acts, y: &[f32]) {
        assert_eq!(x.cols, self.nin, "activation width");
        assert_eq!(x.kp, self.kp, "padded activation width");
        assert_eq!(x.data.len(), x.rows * x.kp, "activation buffer");
        assert_eq!(y.len(), x.rows * self.nout, "output size");
        assert_eq!(self.np % TILE_N, 0);
        assert!(self.kp.is_multiple_of(BF16_K) && self.kp > 0);
        assert_eq!(self.data.len(), self.np * self.kp, "packed weights");
        assert_eq!(self.bias.len(), self.np);
    }
}

/// Activations rounded to bf16, one padded row per token.
#[derive(Debug, Default, Clone)]
pub struct Bf16Acts {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    /// `cols` rounded up to a multiple of [`BF16_K`].
    pub(crate) kp: usize,
    /// `rows * kp` values (zero in the padding).
    pub(crate) data: Vec<u16>,
}

impl Bf16Acts {
    /// Rounds `x`, a row-major matrix with `cols` columns.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        assert!(cols > 0 && x.len().is_multiple_of(cols));
        self.cols = cols;
        self.rows = x.len() / cols;
        self.kp = cols.div_ceil(BF16_K) * BF16_K;
        self.data.clear();
        self.data.resize(self.rows * self.kp, 0);
        round_rows(x, cols, self.kp, &mut self.data);
    }

    /// Tokens (rows) last rounded.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn round_rows(x: &[f32], cols: usize, kp: usize, out: &mut [u16]) {
    for (row, o) in x.chunks_exact(cols).zip(out.chunks_exact_mut(kp)) {
        for (o, &v) in o.iter_mut().zip(row) {
            *o = to_bf16(v);
        }
    }
}

/// `y = x * w^T + bias` (`y` is `x.rows x w.nout`, row-major) on the given
/// tier.
///
/// # Panics
///
/// If the shapes disagree ([`Bf16Matrix::check_shapes`]) or the CPU lacks
/// the tier.
pub fn matmul_bf16(tier: Bf16Tier, w: &Bf16Matrix, x: &Bf16Acts, y: &mut [f32]) {
    match tier {
        #[cfg(target_arch = "x86_64")]
        Bf16Tier::Avx512 => avx512::matmul(w, x, y),
        #[cfg(not(target_arch = "x86_64"))]
        Bf16Tier::Avx512 => panic!("the avx512 bf16 tier needs x86-64"),
        Bf16Tier::Portable => matmul_portable(w, x, y),
    }
}

#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma"))]
fn matmul_portable(w: &Bf16Matrix, x: &Bf16Acts, y: &mut [f32]) {
    w.check_shapes(x, y);
    let pairs = w.kp / 2;
    for t in 0..x.rows {
        let a = &x.data[t * x.kp..(t + 1) * x.kp];
        let row = &mut y[t * w.nout..(t + 1) * w.nout];
        for (nt, tile) in w.data.chunks_exact(pairs * 32).enumerate() {
            let mut acc = [0f32; TILE_N];
            for (s, wr) in tile.chunks_exact(32).enumerate() {
                let (a0, a1) = (from_bf16(a[2 * s]), from_bf16(a[2 * s + 1]));
                for (lane, wq) in acc.iter_mut().zip(wr.chunks_exact(2)) {
                    *lane += a0 * from_bf16(wq[0]) + a1 * from_bf16(wq[1]);
                }
            }
            let o0 = nt * TILE_N;
            for (i, &acc) in acc.iter().enumerate().take(w.nout.saturating_sub(o0)) {
                row[o0 + i] = w.bias[o0 + i] + acc;
            }
        }
    }
}

/// The reference of the bf16 kernels: the same bf16 operands, summed in
/// f64 (so it differs from every tier by f32 summation only).
pub fn matmul_bf16_reference(w: &Bf16Matrix, x: &Bf16Acts, y: &mut [f64]) {
    w.check_shapes(x, &vec![0.0; x.rows * w.nout]);
    for t in 0..x.rows {
        for o in 0..w.nout {
            let acc: f64 = (0..w.nin)
                .map(|k| f64::from(from_bf16(x.data[t * x.kp + k])) * f64::from(w.get(o, k)))
                .sum();
            y[t * w.nout + o] = f64::from(w.bias[o]) + acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Lcg;

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3F80);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to
        // the even 1 + 2^-6.
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3F82);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(f32::MAX)), f32::INFINITY);
        assert_eq!(to_bf16(0.0), 0);
    }

    fn shapes() -> Vec<(usize, usize, usize)> {
        let mut s: Vec<(usize, usize, usize)> = (1..=17).map(|m| (m, 48, 96)).collect();
        s.extend([
            (33, 40, 64),
            (5, 384, 384),
            (29, 1536, 384),
            (19, 384, 1536),
            (3, 17, 31),
            (2, 80, 1),
            (64, 64, 128),
        ]);
        s
    }

    /// Each tier against the f64 reference: every output within the f32
    /// summation bound `nin * 2^-23 * sum |a_k w_k|` (plus the bias's
    /// rounding), on random values and on extremes (large, tiny, zero).
    fn check_tier(tier: Bf16Tier) {
        if !tier.is_supported() {
            eprintln!(
                "SKIPPED: the bf16 {} tier is not supported on this CPU",
                tier.as_str()
            );
            return;
        }
        let mut rng = Lcg(7);
        for extreme in [false, true] {
            for (rows, nout, nin) in shapes() {
                let value = |rng: &mut Lcg, i: usize| {
                    if extreme {
                        [3.0e4f32, -3.0e4, 1.0e-3, 0.0, -1.5][i % 5] * (1.0 + rng.uniform() * 0.1)
                    } else {
                        rng.uniform() * 2.0
                    }
                };
                let wf: Vec<f32> = (0..nout * nin).map(|i| value(&mut rng, i)).collect();
                let bias: Vec<f32> = (0..nout).map(|_| rng.uniform()).collect();
                let xf: Vec<f32> = (0..rows * nin).map(|i| value(&mut rng, i + 2)).collect();
                let w = Bf16Matrix::from_f32(&wf, nout, nin, &bias);
                let mut x = Bf16Acts::default();
                x.quantize(&xf, nin);
                let mut want = vec![0.0f64; rows * nout];
                matmul_bf16_reference(&w, &x, &mut want);
                let mut got = vec![f32::NAN; rows * nout];
                matmul_bf16(tier, &w, &x, &mut got);
                for t in 0..rows {
                    for o in 0..nout {
                        let mag: f64 = (0..nin)
                            .map(|k| {
                                (f64::from(from_bf16(x.data[t * x.kp + k]))
                                    * f64::from(w.get(o, k)))
                                .abs()
                            })
                            .sum::<f64>()
                            + f64::from(bias[o].abs());
                        let bound = (nin as f64 + 2.0) * f64::from(f32::EPSILON) * mag + 1e-30;
                        let (g, r) = (f64::from(got[t * nout + o]), want[t * nout + o]);
                        assert!(
                            (g - r).abs() <= bound,
                            "bf16 {} rows {rows} nout {nout} nin {nin} extreme {extreme}: \
                             ({t}, {o}): {g} vs {r} (bound {bound})",
                            tier.as_str()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn avx512_kernel_matches_the_reference() {
        check_tier(Bf16Tier::Avx512);
    }

    #[test]
    fn portable_kernel_matches_the_reference() {
        check_tier(Bf16Tier::Portable);
    }

    #[test]
    fn packing_keeps_every_weight_and_pads_with_zero() {
        let w: Vec<f32> = (0..3 * 5).map(|i| i as f32 - 7.0).collect();
        let m = Bf16Matrix::from_f32(&w, 3, 5, &[1.0, 2.0, 3.0]);
        assert_eq!((m.np, m.kp), (16, 32));
        for o in 0..3 {
            for k in 0..5 {
                assert_eq!(m.get(o, k), w[o * 5 + k]);
            }
        }
        let stored: usize = m.data.iter().filter(|&&v| v != 0).count();
        assert_eq!(stored, w.iter().filter(|&&v| v != 0.0).count());
        assert_eq!(&m.bias[..4], &[1.0, 2.0, 3.0, 0.0]);
    }
}
