//! Numeric kernels: Q4_0 weights times Q8_0-quantised activations, layer
//! normalisation and GELU.
//!
//! The matrix products follow the reference engine's numerics: activations
//! are quantised per 32-element block to signed bytes with a per-block scale
//! (`amax / 127`, round half to even), weights stay in their 4-bit Q4_0
//! blocks, and each output is `bias + sum_b (d_w[b] * d_a[b]) * <w_b, a_b>`
//! with an exact integer block dot product.
//!
//! Everything is safe Rust. The fast kernel is written for LLVM's
//! auto-vectoriser: each weight row is unpacked once into a small 16-bit
//! buffer that stays in L1 and is applied to every token, and the
//! block dot product works on fixed-size `[i16; 32]` arrays so that it
//! compiles to packed multiply-add instructions (`pmaddwd` on the x86-64
//! baseline, `vpmaddwd` on 256 or 512 bits when AVX2 or AVX-512 is enabled).

use crate::Kernel;

/// Elements per quantisation block.
pub(crate) const QK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 16 bytes of nibbles.
pub(crate) const Q4_BLOCK_BYTES: usize = 18;

/// Converts an IEEE 754 binary16 value to `f32` (exactly; every f16 value is
/// representable as an f32).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1F);
    let man = u32::from(h & 0x3FF);
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal f16: value = man * 2^-24, which is a normal f32.
            let value = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -value } else { value };
        }
    } else if exp == 31 {
        sign | 0x7F80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// The scale of a Q4_0 block.
fn block_scale(block: &[u8]) -> f32 {
    f16_to_f32(u16::from_le_bytes([block[0], block[1]]))
}

/// Dequantises one Q4_0 row (`out.len()` weights) to `f32`.
pub(crate) fn dequantize_row(row: &[u8], out: &mut [f32]) {
    for (block, o) in row
        .chunks_exact(Q4_BLOCK_BYTES)
        .zip(out.chunks_exact_mut(QK))
    {
        let d = block_scale(block);
        for j in 0..16 {
            let q = block[2 + j];
            o[j] = f32::from(i16::from(q & 0x0F) - 8) * d;
            o[j + 16] = f32::from(i16::from(q >> 4) - 8) * d;
        }
    }
}

/// Re-quantises the Q4_0 matrix `q4` (`nout` rows of `nin / 32` blocks)
/// to int8 per output channel for the AMX tier: each row is dequantised
/// and quantised again with scale `max |w| / 127`.
pub(crate) fn int8_from_q4(q4: &[u8], nout: usize, nin: usize, bias: &[f32]) -> rag_gemm::I8Matrix {
    let row_bytes = nin / QK * Q4_BLOCK_BYTES;
    assert_eq!(q4.len(), nout * row_bytes, "Q4_0 matrix size");
    let mut w = vec![0f32; nout * nin];
    for (packed, out) in q4.chunks_exact(row_bytes).zip(w.chunks_exact_mut(nin)) {
        dequantize_row(packed, out);
    }
    rag_gemm::I8Matrix::from_f32(&w, nout, nin, bias)
}

/// Activations quantised per 32-element block (ggml's Q8_0 layout, split
/// into separate value and scale arrays).
#[derive(Default)]
pub(crate) struct QuantActs {
    /// `rows * cols` quantised values in `-128..=127`, stored as `i16` so
    /// the kernel needs no sign extension.
    pub(crate) q: Vec<i16>,
    /// The same values as signed bytes, for the AVX2 kernel.
    pub(crate) q8: Vec<i8>,
    /// `rows * cols / 32` block scales.
    pub(crate) d: Vec<f32>,
    /// `rows * cols / 32` sums of each block's quantised values (the
    /// offset the AVX-512 kernel's unsigned weights need).
    pub(crate) bsum: Vec<i32>,
    pub(crate) cols: usize,
}

impl QuantActs {
    /// Quantises `x`, a row-major matrix with `cols` columns.
    pub(crate) fn quantize(&mut self, x: &[f32], cols: usize) {
        self.cols = cols;
        self.q.clear();
        self.q.resize(x.len(), 0);
        self.q8.clear();
        self.q8.resize(x.len(), 0);
        self.d.clear();
        self.d.resize(x.len() / QK, 0.0);
        self.bsum.clear();
        self.bsum.resize(x.len() / QK, 0);
        if !crate::q4_vnni::quantize_blocks(
            x,
            &mut self.q,
            &mut self.q8,
            &mut self.d,
            &mut self.bsum,
        ) {
            quantize_blocks(x, &mut self.q, &mut self.q8, &mut self.d, &mut self.bsum);
        }
    }

    /// Number of rows.
    pub(crate) fn rows(&self) -> usize {
        self.q.len().checked_div(self.cols).unwrap_or(0)
    }
}

/// The loop of [`QuantActs::quantize`], on fixed-size blocks so that it
/// vectorises (the block maximum in 16 lanes instead of a sequential fold),
/// compiled for AVX-512 and AVX2 as well as the baseline.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma"
))]
pub(crate) fn quantize_blocks(
    x: &[f32],
    q: &mut [i16],
    q8: &mut [i8],
    d: &mut [f32],
    bsum: &mut [i32],
) {
    for ((((xb, qb), q8b), d), bsum) in x
        .chunks_exact(QK)
        .zip(q.chunks_exact_mut(QK))
        .zip(q8.chunks_exact_mut(QK))
        .zip(d.iter_mut())
        .zip(bsum.iter_mut())
    {
        let xb: &[f32; QK] = xb.try_into().expect("a block");
        let qb: &mut [i16; QK] = qb.try_into().expect("a block");
        let q8b: &mut [i8; QK] = q8b.try_into().expect("a block");
        let mut lanes = [0.0f32; 16];
        for half in xb.chunks_exact(16) {
            for (l, &v) in lanes.iter_mut().zip(half) {
                let a = v.abs();
                *l = if a > *l { a } else { *l };
            }
        }
        let amax = lanes.iter().fold(0.0f32, |m, &v| if v > m { v } else { m });
        let scale = amax / 127.0;
        let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        // Round half to even, like C's `lrintf` in the default rounding
        // mode, clamped to -128..=127: adding 1.5 * 2^23 makes the FPU round
        // to an integer, which then sits in the low mantissa bits (exact in
        // the clamped range); reading it from there instead of a saturating
        // cast keeps the loop vectorised (and needs no `roundps`, which the
        // x86-64 baseline lacks).
        const MAGIC: f32 = 12_582_912.0;
        let mut r = [0i32; QK];
        for (r, &v) in r.iter_mut().zip(xb) {
            let m = (v * inv).clamp(-128.0, 127.0) + MAGIC;
            *r = m.to_bits() as i32 - MAGIC.to_bits() as i32;
        }
        for ((q, q8), &r) in qb.iter_mut().zip(q8b.iter_mut()).zip(&r) {
            *q = r as i16;
            // |v * inv| <= 127, so the value fits a signed byte.
            *q8 = r as i8;
        }
        *bsum = r.iter().sum();
        *d = scale;
    }
}

/// Integer dot product of two 32-element blocks (`w` and `a` have at least
/// `QK` elements). The operands are 16-bit and the sum is kept in eight
/// independent lanes, a shape that LLVM's SLP vectoriser turns into packed
/// multiply-adds (`pmaddwd`) with no sign extension.
#[inline(always)]
fn dot_block(w: &[i16], a: &[i16]) -> i32 {
    let w = &w[..QK];
    let a = &a[..QK];
    let mut lanes = [0i32; 8];
    for c in 0..QK / 8 {
        for l in 0..8 {
            // Wrapping arithmetic cannot overflow here (|w * a| <= 1024),
            // and it keeps overflow checks of debug builds from blocking
            // vectorisation.
            lanes[l] = lanes[l]
                .wrapping_add(i32::from(w[c * 8 + l]).wrapping_mul(i32::from(a[c * 8 + l])));
        }
    }
    lanes.iter().fold(0i32, |acc, &l| acc.wrapping_add(l))
}

/// Dot product of one unpacked weight row with one quantised activation row:
/// `sum_b (wd[b] * ad[b]) * <w_b, a_b>`.
///
/// The loop is index-based on purpose. With iterator adaptors (`zip` of
/// `chunks_exact`), and also with variants that share each weight block
/// between four tokens or each activation block between two rows, LLVM left
/// the block products scalar when the crate is built with several codegen
/// units (the default), which made the kernel about 3x slower.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // The index shape is what vectorises.
fn dot_row(w: &[i16], wd: &[f32], a: &[i16], ad: &[f32]) -> f32 {
    let nb = wd.len();
    let n = nb * QK;
    let w = &w[..n];
    let a = &a[..n];
    let ad = &ad[..nb];
    // Four partial sums (block b goes to sum b % 4) break the dependency
    // chain of floating-point additions, which otherwise bounds the speed.
    let mut acc = [0.0f32; 4];
    let groups = nb / 4;
    for g in 0..groups {
        for k in 0..4 {
            let b = g * 4 + k;
            let o = b * QK;
            acc[k] += (wd[b] * ad[b]) * dot_block(&w[o..o + QK], &a[o..o + QK]) as f32;
        }
    }
    for b in groups * 4..nb {
        let o = b * QK;
        acc[b % 4] += (wd[b] * ad[b]) * dot_block(&w[o..o + QK], &a[o..o + QK]) as f32;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Unpacks one Q4_0 row into 16-bit weights in `-8..=7` plus block scales.
fn unpack_row(row: &[u8], w: &mut [i16], wd: &mut [f32]) {
    for ((block, o), d) in row
        .chunks_exact(Q4_BLOCK_BYTES)
        .zip(w.chunks_exact_mut(QK))
        .zip(wd.iter_mut())
    {
        *d = block_scale(block);
        let qs: &[u8; 16] = block[2..]
            .try_into()
            .expect("a Q4_0 block has 16 nibble bytes");
        let (lo, hi) = o.split_at_mut(16);
        for j in 0..16 {
            lo[j] = i16::from(qs[j] & 0x0F) - 8;
            hi[j] = i16::from(qs[j] >> 4) - 8;
        }
    }
}

/// `y[t, o] = bias[o] + sum_i W[o, i] * x[t, i]` for the quantised
/// activations `x` (`rows` x `nin`) and the Q4_0 matrix `w` (`nout` x `nin`,
/// row-major), writing the row-major `rows` x `nout` result into `y`.
///
/// On x86-64 CPUs with AVX2 and FMA (checked once, at run time) the work is
/// done by [`x86::matmul_q4_avx2`]; elsewhere by the portable kernel.
///
/// `kernel` forces the portable kernel when it is [`Kernel::Portable`];
/// any other value takes the AVX2 kernel where the CPU has it.
pub(crate) fn matmul_q4(
    kernel: Kernel,
    w: &[u8],
    nout: usize,
    bias: &[f32],
    x: &QuantActs,
    y: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if kernel != Kernel::Portable && x86::has_avx2_fma() {
        x86::matmul_q4_avx2(w, nout, bias, x, y);
        return;
    }
    let _ = kernel;
    matmul_q4_portable(w, nout, bias, x, y);
}

/// Whether this CPU has AVX2 and FMA (the [`Kernel::Avx2`] tier).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2_fma() -> bool {
    x86::has_avx2_fma()
}

/// The portable kernel of [`matmul_q4`], in safe Rust for LLVM's
/// auto-vectoriser. Each weight row is unpacked once into a 16-bit buffer
/// that stays in L1 and is then applied to all tokens.
pub(crate) fn matmul_q4_portable(
    w: &[u8],
    nout: usize,
    bias: &[f32],
    x: &QuantActs,
    y: &mut [f32],
) {
    let nin = x.cols;
    let nb = nin / QK;
    let row_bytes = nb * Q4_BLOCK_BYTES;
    let rows = x.rows();
    debug_assert_eq!(w.len(), nout * row_bytes);
    debug_assert_eq!(y.len(), rows * nout);
    let mut wrow = vec![0i16; nin];
    let mut wd = vec![0f32; nb];
    for (o, (packed, &b)) in w.chunks_exact(row_bytes).zip(bias).enumerate() {
        unpack_row(packed, &mut wrow, &mut wd);
        row_times_acts(&wrow, &wd, x, b, o, nout, y);
    }
}

/// Applies one unpacked weight row (output `o`) to every token. Kept out of
/// line so that the call overhead is paid once per row rather than once per
/// row and token.
#[inline(never)]
fn row_times_acts(
    w: &[i16],
    wd: &[f32],
    x: &QuantActs,
    bias: f32,
    o: usize,
    nout: usize,
    y: &mut [f32],
) {
    let nb = wd.len();
    let nin = nb * QK;
    for t in 0..x.rows() {
        let a = &x.q[t * nin..(t + 1) * nin];
        let ad = &x.d[t * nb..(t + 1) * nb];
        y[t * nout + o] = bias + dot_row(w, wd, a, ad);
    }
}

/// Straightforward scalar version of [`matmul_q4`], reading the packed
/// nibbles directly. It is the specification the fast kernel is tested
/// against.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn matmul_q4_scalar(w: &[u8], nout: usize, bias: &[f32], x: &QuantActs, y: &mut [f32]) {
    let nin = x.cols;
    let nb = nin / QK;
    let row_bytes = nb * Q4_BLOCK_BYTES;
    for t in 0..x.rows() {
        for o in 0..nout {
            // Block b adds into partial sum b % 4; the partial sums are
            // combined pairwise at the end.
            let mut acc = [0.0f32; 4];
            for b in 0..nb {
                let block = &w[o * row_bytes + b * Q4_BLOCK_BYTES..][..Q4_BLOCK_BYTES];
                let mut isum = 0i32;
                for j in 0..16 {
                    let q = block[2 + j];
                    let w_lo = i32::from(q & 0x0F) - 8;
                    let w_hi = i32::from(q >> 4) - 8;
                    isum += w_lo * i32::from(x.q[t * nin + b * QK + j]);
                    isum += w_hi * i32::from(x.q[t * nin + b * QK + j + 16]);
                }
                acc[b % 4] += (block_scale(block) * x.d[t * nb + b]) * isum as f32;
            }
            y[t * nout + o] = bias[o] + ((acc[0] + acc[1]) + (acc[2] + acc[3]));
        }
    }
}

/// The AVX2 kernel, the one place of the crate with `unsafe` code.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use super::{block_scale, QuantActs, Q4_BLOCK_BYTES, QK};
    use std::arch::x86_64::*;

    /// Whether this CPU has AVX2 and FMA (detected once).
    pub(crate) fn has_avx2_fma() -> bool {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        })
    }

    /// [`super::matmul_q4`] with 256-bit integer multiply-adds, the way the
    /// reference engine computes it: per block, the 4-bit weights (as bytes
    /// in `-8..=7`) times the 8-bit activations with `vpmaddubsw` (absolute
    /// weights times activations carrying the weights' signs) and
    /// `vpmaddwd`, converted to floats and accumulated with the two block
    /// scales in eight lanes by FMA; one horizontal sum per output. Each
    /// weight row is unpacked once and applied to the tokens four at a time.
    ///
    /// The integer block products are exact, as in the portable kernel; the
    /// floating-point sums run in another order, so results differ from it
    /// in the last bits.
    ///
    /// # Panics
    ///
    /// If the CPU lacks AVX2 or FMA, or the shapes disagree.
    pub(crate) fn matmul_q4_avx2(
        w: &[u8],
        nout: usize,
        bias: &[f32],
        x: &QuantActs,
        y: &mut [f32],
    ) {
        assert!(has_avx2_fma(), "the AVX2 kernel needs AVX2 and FMA");
        let nin = x.cols;
        let nb = nin / QK;
        let rows = x.rows();
        assert_eq!(nin % QK, 0);
        assert_eq!(w.len(), nout * nb * Q4_BLOCK_BYTES);
        assert_eq!(y.len(), rows * nout);
        assert_eq!(x.q8.len(), rows * nin);
        assert_eq!(x.d.len(), rows * nb);
        assert!(bias.len() >= nout);
        // SAFETY: the CPU has AVX2 and FMA (asserted above). Every pointer
        // the kernel reads or writes through comes from a bounds-checked
        // slice or array of at least the 32 bytes accessed.
        unsafe { matmul(w, nout, bias, x, y) }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn matmul(w: &[u8], nout: usize, bias: &[f32], x: &QuantActs, y: &mut [f32]) {
        let nin = x.cols;
        let nb = nin / QK;
        let row_bytes = nb * Q4_BLOCK_BYTES;
        let rows = x.rows();
        let mut qw = vec![[0i8; QK]; nb];
        let mut aw = vec![[0i8; QK]; nb];
        let mut wd = vec![0f32; nb];
        let low = _mm_set1_epi8(0x0F);
        let eight = _mm256_set1_epi8(8);
        for (o, packed) in w.chunks_exact(row_bytes).enumerate() {
            for (b, block) in packed.chunks_exact(Q4_BLOCK_BYTES).enumerate() {
                wd[b] = block_scale(block);
                let nibbles: &[u8; 16] = block[2..].try_into().expect("16 nibble bytes");
                // SAFETY: reads the 16 bytes of a 16-byte array.
                let raw = unsafe { _mm_loadu_si128(nibbles.as_ptr().cast()) };
                let lo = _mm_and_si128(raw, low);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), low);
                // Element j is the low nibble of byte j, element j + 16 its high nibble.
                let q = _mm256_sub_epi8(_mm256_set_m128i(hi, lo), eight);
                // SAFETY: each store writes the 32 bytes of a 32-byte array.
                unsafe {
                    _mm256_storeu_si256(qw[b].as_mut_ptr().cast(), q);
                    _mm256_storeu_si256(aw[b].as_mut_ptr().cast(), _mm256_sign_epi8(q, q));
                }
            }
            let mut t = 0;
            while t + 4 <= rows {
                // SAFETY: this function's own features, t + 4 <= rows.
                let sums = unsafe { dot_tokens::<4>(&qw, &aw, &wd, x, t) };
                for (n, s) in sums.into_iter().enumerate() {
                    y[(t + n) * nout + o] = bias[o] + s;
                }
                t += 4;
            }
            while t < rows {
                // SAFETY: as above, t < rows.
                let [s] = unsafe { dot_tokens::<1>(&qw, &aw, &wd, x, t) };
                y[t * nout + o] = bias[o] + s;
                t += 1;
            }
        }
    }

    /// One unpacked weight row (`qw` the signed weights, `aw` their absolute
    /// values, `wd` the block scales) times the activations of tokens
    /// `t0..t0 + N`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_tokens<const N: usize>(
        qw: &[[i8; QK]],
        aw: &[[i8; QK]],
        wd: &[f32],
        x: &QuantActs,
        t0: usize,
    ) -> [f32; N] {
        let nb = wd.len();
        let nin = nb * QK;
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); N];
        for b in 0..nb {
            // SAFETY: each load reads the 32 bytes of a 32-byte array.
            let (wq, wa) = unsafe {
                (
                    _mm256_loadu_si256(qw[b].as_ptr().cast()),
                    _mm256_loadu_si256(aw[b].as_ptr().cast()),
                )
            };
            for (n, acc) in acc.iter_mut().enumerate() {
                let t = t0 + n;
                let a: &[i8; QK] = x.q8[t * nin + b * QK..][..QK]
                    .try_into()
                    .expect("a block of activations");
                // SAFETY: reads the 32 bytes of a 32-byte array.
                let a = unsafe { _mm256_loadu_si256(a.as_ptr().cast()) };
                // |w| * (a * sign(w)) = w * a, in pairs of bytes summed to 16
                // bits (at most 2 * 8 * 127: no saturation), then to 32 bits.
                let pairs = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(a, wq));
                let sums = _mm256_madd_epi16(pairs, ones);
                let scale = _mm256_set1_ps(wd[b] * x.d[t * nb + b]);
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, *acc);
            }
        }
        let mut out = [0f32; N];
        for (o, v) in out.iter_mut().zip(acc) {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
            *o = _mm_cvtss_f32(s);
        }
        out
    }
}

/// `x = LayerNorm(x + y)` row by row (`y = None`: `x = LayerNorm(x)`),
/// with the reference's two-pass mean and variance. The sums run in 16
/// independent lanes (one 512-bit vector), which vectorises; a sequential
/// sum does not (each addition waits for the previous one), and the order
/// changes the result only in the last bits.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma"
))]
pub(crate) fn add_layer_norm(x: &mut [f32], y: Option<&[f32]>, w: &[f32], b: &[f32], eps: f32) {
    let h = w.len();
    for (t, row) in x.chunks_exact_mut(h).enumerate() {
        if let Some(y) = y {
            for (r, &v) in row.iter_mut().zip(&y[t * h..(t + 1) * h]) {
                *r += v;
            }
        }
        let mean = lane_sum(row, |v| v) / h as f32;
        let var = lane_sum(row, |v| (v - mean) * (v - mean)) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((r, &wi), &bi) in row.iter_mut().zip(w).zip(b) {
            *r = (*r - mean) * inv * wi + bi;
        }
    }
}

/// `sum_i f(x[i])` in 16 lanes (element `i` to lane `i % 16`), the lanes
/// added pairwise at the end.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += f(v);
        }
    }
    for (l, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        *l += f(v);
    }
    let mut n = 16;
    while n > 1 {
        n /= 2;
        for i in 0..n {
            lanes[i] += lanes[i + n];
        }
    }
    lanes[0]
}

/// `e^x` for `x <= 0` (larger inputs are clamped to 0, inputs below -87 to
/// -87), with a relative error of about 2e-7.
///
/// Written without branches or library calls so that loops over slices
/// vectorise: `x = n ln 2 + r` with `|r| <= ln 2 / 2`, `e^r` from its Taylor
/// polynomial of degree 7, and `2^n` built directly in the exponent bits.
#[inline(always)]
pub(crate) fn exp_neg(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: rounds to an integer
    const LN2_HI: f32 = 0.693_145_75; // ln 2 split into an exact high part
    const LN2_LO: f32 = 1.428_606_8e-6; // and the remainder
    let x = x.clamp(-87.0, 0.0);
    let shifted = x * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted - MAGIC;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // n is an integer in -126..=0 here, so the biased exponent is in
    // 1..=127. It is read from the low mantissa bits of `shifted` rather
    // than with a saturating `as i32`, which LLVM does not vectorise.
    let ni = (shifted.to_bits() as i32) - 0x4B40_0000;
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    p * scale
}

/// The error function, Abramowitz & Stegun formula 7.1.26 (absolute error
/// below 1.5e-7 in exact arithmetic, about 5e-7 in f32, far under the
/// resolution that matters after 8-bit activation quantisation).
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_8;
    const A4: f32 = -1.453_152_1;
    const A5: f32 = 1.061_405_4;
    let ax = x.abs();
    let t = 1.0 / (1.0 + P * ax);
    let poly = ((((A5 * t + A4) * t + A3) * t + A2) * t + A1) * t;
    let y = 1.0 - poly * exp_neg(-ax * ax);
    y.copysign(x)
}

/// GELU with the exact (erf) formulation, as BERT uses.
#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// [`gelu`] of every element, compiled for the widest vectors the CPU has.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma"
))]
pub(crate) fn gelu_in_place(x: &mut [f32]) {
    for v in x {
        *v = gelu(*v);
    }
}

#[cfg(test)]
#[path = "kernels_tests.rs"]
mod tests;
