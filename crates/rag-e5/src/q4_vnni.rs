//! The AVX-512 VNNI kernel for the file's 4-bit weights: the reference
//! engine's numerics (Q4_0 weights with one scale per 32-value block times
//! Q8_0 activations with one scale per 32-value block, an exact integer dot
//! product per block) computed with `vpdpbusd`.
//!
//! At load every Q4_0 matrix is repacked into [`Q4Vnni`]: for each tile of
//! 16 output channels and each block of 32 inputs, eight 64-byte steps
//! (16 channels times 4 consecutive inputs, the operand shape of
//! `vpdpbusd`) of the raw nibbles `q` in `0..=15` as unsigned bytes, and the
//! 16 channels' block scales. The weight of the file is `(q - 8) * d`, so a
//! block's integer sum `sum q * a` over the signed activation bytes `a`
//! starts from `-8 * sum a` (per token and block, from
//! [`QuantActs::bsum`]) and is then exactly `sum (q - 8) * a`. Each block's
//! sum becomes a float once, `acc += (d_w * d_a) * sum`, as in the
//! reference. Keeping the block scales (instead of re-quantising each
//! channel to int8, which the `rag_gemm::int8` tier does) keeps the weights
//! exact, and per-block activation scales keep outlier channels from
//! coarsening a whole token: fidelity matches the AVX2 tier's without a
//! second activation part.

use crate::kernels::{f16_to_f32, QuantActs, Q4_BLOCK_BYTES, QK};

/// Output channels per tile (the 32-bit lanes of a 512-bit register).
pub(crate) const TILE_N: usize = 16;
/// Bytes of one tile's block: 8 steps of 16 channels times 4 inputs.
const BLOCK_BYTES: usize = QK * TILE_N;

/// A Q4_0 matrix (`nout` x `nin`) repacked for [`matmul`], with its bias.
#[derive(Debug)]
pub(crate) struct Q4Vnni {
    nout: usize,
    nin: usize,
    /// Tiles of 16 channels (the last one padded with zero-scale channels).
    tiles: usize,
    /// `tiles * nb * BLOCK_BYTES` nibble values as bytes, tile-major, then
    /// block, then step, then channel, then input.
    q: Vec<u8>,
    /// `tiles * nb * 16` block scales, tile-major, then block, then channel.
    d: Vec<f32>,
    /// `tiles * 16` biases (zero on padded channels).
    bias: Vec<f32>,
}

impl Q4Vnni {
    /// Repacks the row-major Q4_0 matrix `w` (`nout` rows of `nin / 32`
    /// blocks) with its `bias`.
    pub(crate) fn from_q4(w: &[u8], nout: usize, nin: usize, bias: &[f32]) -> Self {
        assert!(nin.is_multiple_of(QK) && bias.len() == nout);
        let nb = nin / QK;
        let row_bytes = nb * Q4_BLOCK_BYTES;
        assert_eq!(w.len(), nout * row_bytes);
        let tiles = nout.div_ceil(TILE_N);
        // Padded channels: nibble 8 (weight 0) and scale 0.
        let mut q = vec![8u8; tiles * nb * BLOCK_BYTES];
        let mut d = vec![0.0f32; tiles * nb * TILE_N];
        let mut padded_bias = vec![0.0f32; tiles * TILE_N];
        padded_bias[..nout].copy_from_slice(bias);
        for o in 0..nout {
            let (tile, c) = (o / TILE_N, o % TILE_N);
            for b in 0..nb {
                let block = &w[o * row_bytes + b * Q4_BLOCK_BYTES..][..Q4_BLOCK_BYTES];
                d[(tile * nb + b) * TILE_N + c] =
                    f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
                let base = (tile * nb + b) * BLOCK_BYTES;
                for j in 0..16 {
                    // Low nibbles are inputs 0..16 of the block, high ones
                    // inputs 16..32.
                    for (i, nibble) in [(j, block[2 + j] & 0x0F), (j + 16, block[2 + j] >> 4)] {
                        q[base + (i / 4) * 64 + c * 4 + i % 4] = nibble;
                    }
                }
            }
        }
        Self {
            nout,
            nin,
            tiles,
            q,
            d,
            bias: padded_bias,
        }
    }

    /// Bytes held by the repacked weights.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.q.capacity() + 4 * (self.d.capacity() + self.bias.capacity())
    }

    /// The weight `(q - 8)` of channel `o` at input `i`, and its block scale.
    fn get(&self, o: usize, i: usize) -> (i32, f32) {
        let nb = self.nin / QK;
        let (tile, c, b, k) = (o / TILE_N, o % TILE_N, i / QK, i % QK);
        let blk = tile * nb + b;
        let q = self.q[blk * BLOCK_BYTES + (k / 4) * 64 + c * 4 + k % 4];
        (i32::from(q) - 8, self.d[blk * TILE_N + c])
    }

    fn check_shapes(&self, x: &QuantActs, y: &[f32]) {
        assert_eq!(x.cols, self.nin, "input width");
        let rows = x.rows();
        assert_eq!(x.q8.len(), rows * self.nin);
        assert_eq!(x.d.len(), rows * (self.nin / QK));
        assert_eq!(x.bsum.len(), rows * (self.nin / QK));
        assert_eq!(y.len(), rows * self.nout, "output size");
        assert_eq!(self.q.len(), self.tiles * (self.nin / QK) * BLOCK_BYTES);
        assert_eq!(self.d.len(), self.tiles * (self.nin / QK) * TILE_N);
        assert_eq!(self.bias.len(), self.tiles * TILE_N);
    }
}

/// `y = x * W^T + b` (`rows` x `nout`, row-major): with `vpdpbusd` where
/// the CPU has AVX-512 VNNI, else with [`matmul_scalar`].
pub(crate) fn matmul(w: &Q4Vnni, x: &QuantActs, y: &mut [f32]) {
    w.check_shapes(x, y);
    #[cfg(target_arch = "x86_64")]
    if rag_gemm::int8::has_avx512_vnni() {
        x86::matmul(w, x, y);
        return;
    }
    matmul_scalar(w, x, y);
}

/// The specification: per output, `bias + sum_b (d_w * d_a) * <w_b, a_b>`
/// over the blocks in order, each block's term added by one fused
/// multiply-add, in plain scalar Rust; the kernel gives the same bits.
pub(crate) fn matmul_scalar(w: &Q4Vnni, x: &QuantActs, y: &mut [f32]) {
    w.check_shapes(x, y);
    let nb = w.nin / QK;
    for t in 0..x.rows() {
        for o in 0..w.nout {
            let mut acc = 0.0f32;
            for b in 0..nb {
                let mut isum = 0i32;
                let mut dw = 0.0;
                for k in b * QK..(b + 1) * QK {
                    let (q, d) = w.get(o, k);
                    dw = d;
                    isum += q * i32::from(x.q8[t * w.nin + k]);
                }
                // One fused multiply-add per block, like the kernel's.
                acc = (dw * x.d[t * nb + b]).mul_add(isum as f32, acc);
            }
            y[t * w.nout + o] = w.bias[o] + acc;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use super::{Q4Vnni, BLOCK_BYTES, TILE_N};
    use crate::kernels::{QuantActs, QK};
    use std::arch::x86_64::*;

    /// Tokens per register block.
    const BLOCK_T: usize = 4;
    /// Tiles of 16 channels per register block: `BLOCK_T * BLOCK_G` integer
    /// and as many float accumulators, `BLOCK_G` weight and scale
    /// registers, one broadcast.
    const BLOCK_G: usize = 3;

    /// [`super::matmul`] on AVX-512 VNNI: blocks of up to four tokens times
    /// 48 channels, each block's integer sums in registers and turned into
    /// floats once per 32 inputs.
    ///
    /// # Panics
    ///
    /// If the CPU lacks AVX-512 VNNI, or the shapes disagree.
    pub(super) fn matmul(w: &Q4Vnni, x: &QuantActs, y: &mut [f32]) {
        assert!(
            rag_gemm::int8::has_avx512_vnni(),
            "the AVX-512 kernel needs AVX-512 VNNI"
        );
        w.check_shapes(x, y);
        // SAFETY: the CPU has the features the kernel is compiled for and
        // `check_shapes` asserted every size its pointer arithmetic uses.
        unsafe { matmul_vnni(w, x, y) }
    }

    /// # Safety
    ///
    /// The CPU has AVX-512 F, BW and VNNI and `w.check_shapes(x, y)` holds.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn matmul_vnni(w: &Q4Vnni, x: &QuantActs, y: &mut [f32]) {
        let rows = x.rows();
        let groups = w.tiles.div_ceil(BLOCK_G);
        let mut nt = 0;
        for gi in 0..groups {
            // Groups as even as possible, none much narrower than the rest.
            let g = (w.tiles - nt).div_ceil(groups - gi);
            // Token blocks as even as possible too (20 tokens make 5, 5, 5
            // and 5, not 6, 6, 6 and 2): a narrow block loads the weights
            // for few tokens.
            let tblocks = rows.div_ceil(BLOCK_T);
            let mut t = 0;
            for bi in 0..tblocks {
                let n = (rows - t).div_ceil(tblocks - bi);
                // SAFETY: t + n <= rows and nt + g <= tiles; the caller's
                // contract covers the rest.
                unsafe {
                    match g {
                        1 => block_g::<1>(n, w, x, y, t, nt),
                        2 => block_g::<2>(n, w, x, y, t, nt),
                        3 => block_g::<3>(n, w, x, y, t, nt),
                        _ => unreachable!("at most {BLOCK_G} tiles per block"),
                    }
                }
                t += n;
            }
            nt += g;
        }
    }

    /// [`super::quantize_blocks`] on AVX-512: per block, the largest
    /// magnitude by a vector maximum (a NaN is skipped, as the portable
    /// loop skips it), the values scaled, clamped and rounded half to even
    /// by the same float operations, then narrowed to bytes and 16-bit
    /// values with `vpmovdb` and `vpmovdw`.
    ///
    /// # Panics
    ///
    /// If the CPU lacks AVX-512 F and BW, or the sizes disagree.
    pub(super) fn quantize_blocks(
        x: &[f32],
        q: &mut [i16],
        q8: &mut [i8],
        d: &mut [f32],
        bsum: &mut [i32],
    ) {
        assert!(rag_gemm::int8::has_avx512_vnni(), "needs AVX-512");
        let blocks = x.len() / QK;
        assert!(x.len() == blocks * QK && q.len() == x.len() && q8.len() == x.len());
        assert!(d.len() == blocks && bsum.len() == blocks);
        // SAFETY: the CPU has the features; every length was asserted.
        unsafe { quantize_avx512(x, q, q8, d, bsum) }
    }

    /// # Safety
    ///
    /// The CPU has AVX-512 F and BW; `x`, `q` and `q8` hold `32 * n` values
    /// and `d` and `bsum` `n`.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn quantize_avx512(
        x: &[f32],
        q: &mut [i16],
        q8: &mut [i8],
        d: &mut [f32],
        bsum: &mut [i32],
    ) {
        const MAGIC: f32 = 12_582_912.0;
        let sign = _mm512_set1_epi32(0x7FFF_FFFF);
        let lo = _mm512_set1_ps(-128.0);
        let hi = _mm512_set1_ps(127.0);
        let magic = _mm512_set1_ps(MAGIC);
        let magic_bits = _mm512_set1_epi32(MAGIC.to_bits() as i32);
        for b in 0..d.len() {
            // SAFETY: b * 32 + 32 <= x.len() = q.len() = q8.len().
            unsafe {
                let xp = x.as_ptr().add(b * QK);
                let v0 = _mm512_loadu_ps(xp);
                let v1 = _mm512_loadu_ps(xp.add(16));
                let a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), sign));
                let a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), sign));
                // `max(a, m)` returns `m` when `a` is NaN: NaN is skipped.
                let m = _mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps()));
                let amax = _mm512_reduce_max_ps(m);
                let scale = amax / 127.0;
                let inv = _mm512_set1_ps(if scale > 0.0 { 1.0 / scale } else { 0.0 });
                let round = |v: __m512| {
                    // max(lo, t) and min(hi, ·) keep a NaN, as `clamp` does.
                    let t = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_mul_ps(v, inv)));
                    _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(t, magic)), magic_bits)
                };
                let r0 = round(v0);
                let r1 = round(v1);
                let qp = q.as_mut_ptr().add(b * QK);
                _mm256_storeu_si256(qp.cast(), _mm512_cvtepi32_epi16(r0));
                _mm256_storeu_si256(qp.add(16).cast(), _mm512_cvtepi32_epi16(r1));
                let q8p = q8.as_mut_ptr().add(b * QK);
                _mm_storeu_si128(q8p.cast(), _mm512_cvtepi32_epi8(r0));
                _mm_storeu_si128(q8p.add(16).cast(), _mm512_cvtepi32_epi8(r1));
                bsum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(r0, r1));
                d[b] = scale;
            }
        }
    }

    /// [`block`] for `n` (at most [`BLOCK_T`]) tokens.
    ///
    /// # Safety
    ///
    /// As [`block`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn block_g<const G: usize>(
        n: usize,
        w: &Q4Vnni,
        x: &QuantActs,
        y: &mut [f32],
        t0: usize,
        nt0: usize,
    ) {
        // SAFETY: the caller's contract, with T = n.
        unsafe {
            match n {
                1 => block::<1, G>(w, x, y, t0, nt0),
                2 => block::<2, G>(w, x, y, t0, nt0),
                3 => block::<3, G>(w, x, y, t0, nt0),
                4 => block::<4, G>(w, x, y, t0, nt0),
                5 => block::<5, G>(w, x, y, t0, nt0),
                6 => block::<6, G>(w, x, y, t0, nt0),
                7 => block::<7, G>(w, x, y, t0, nt0),
                8 => block::<8, G>(w, x, y, t0, nt0),
                _ => unreachable!("at most {BLOCK_T} tokens per block"),
            }
        }
    }

    /// Tokens `t0..t0 + T` times channel tiles `nt0..nt0 + G`.
    ///
    /// # Safety
    ///
    /// As [`matmul_vnni`], plus `t0 + T <= x.rows()` and
    /// `nt0 + G <= w.tiles`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn block<const T: usize, const G: usize>(
        w: &Q4Vnni,
        x: &QuantActs,
        y: &mut [f32],
        t0: usize,
        nt0: usize,
    ) {
        debug_assert!(t0 + T <= x.rows() && nt0 + G <= w.tiles);
        let nb = w.nin / QK;
        let qp = w.q.as_ptr();
        let dp = w.d.as_ptr();
        let ap = x.q8.as_ptr();
        let mut facc = [[_mm512_setzero_ps(); G]; T];
        for b in 0..nb {
            let mut iacc = [[_mm512_setzero_si512(); G]; T];
            for (i, acc) in iacc.iter_mut().enumerate() {
                // The block's integer sum starts at -8 * sum a, the offset of
                // the unsigned nibbles.
                let start = _mm512_set1_epi32(-8 * x.bsum[(t0 + i) * nb + b]);
                *acc = [start; G];
            }
            for s in 0..QK / 4 {
                let mut wv = [_mm512_setzero_si512(); G];
                for (g, v) in wv.iter_mut().enumerate() {
                    // SAFETY: ((nt0 + g) * nb + b) * BLOCK_BYTES + s * 64 + 64
                    // <= tiles * nb * BLOCK_BYTES, the length of `w.q`.
                    *v = unsafe {
                        _mm512_loadu_si512(
                            qp.add(((nt0 + g) * nb + b) * BLOCK_BYTES + s * 64).cast(),
                        )
                    };
                }
                for (i, acc) in iacc.iter_mut().enumerate() {
                    // SAFETY: (t0 + i) * nin + b * 32 + s * 4 + 4 <= rows * nin,
                    // the length of `x.q8`.
                    let a = unsafe {
                        ap.add((t0 + i) * w.nin + b * QK + s * 4)
                            .cast::<i32>()
                            .read_unaligned()
                    };
                    let a = _mm512_set1_epi32(a);
                    for (acc, &wv) in acc.iter_mut().zip(&wv) {
                        *acc = _mm512_dpbusd_epi32(*acc, wv, a);
                    }
                }
            }
            let mut dv = [_mm512_setzero_ps(); G];
            for (g, v) in dv.iter_mut().enumerate() {
                // SAFETY: ((nt0 + g) * nb + b) * 16 + 16 <= tiles * nb * 16,
                // the length of `w.d`.
                *v = unsafe { _mm512_loadu_ps(dp.add(((nt0 + g) * nb + b) * TILE_N)) };
            }
            for (i, (facc, iacc)) in facc.iter_mut().zip(&iacc).enumerate() {
                let da = _mm512_set1_ps(x.d[(t0 + i) * nb + b]);
                for ((f, &acc), &dv) in facc.iter_mut().zip(iacc).zip(&dv) {
                    *f = _mm512_fmadd_ps(_mm512_mul_ps(dv, da), _mm512_cvtepi32_ps(acc), *f);
                }
            }
        }
        for (i, facc) in facc.iter().enumerate() {
            let t = t0 + i;
            let row = &mut y[t * w.nout..(t + 1) * w.nout];
            for (g, &f) in facc.iter().enumerate() {
                let o0 = (nt0 + g) * TILE_N;
                let bias: &[f32; TILE_N] = w.bias[o0..o0 + TILE_N].try_into().expect("16 channels");
                let n = (w.nout - o0).min(TILE_N);
                let out = &mut row[o0..o0 + n];
                // SAFETY: the load reads exactly the 16 biases; the masked
                // store writes only the first `n <= 16` lanes of `out`.
                unsafe {
                    let r = _mm512_add_ps(_mm512_loadu_ps(bias.as_ptr()), f);
                    let mask = ((1u32 << n) - 1) as u16;
                    _mm512_mask_storeu_ps(out.as_mut_ptr(), mask, r);
                }
            }
        }
    }
}

/// Quantises `x` per 32-value block into `q`, `q8`, `d` and `bsum` with
/// AVX-512 where the CPU has it (the same bits as the portable loop of
/// [`crate::kernels`]), returning false when it does not.
pub(crate) fn quantize_blocks(
    x: &[f32],
    q: &mut [i16],
    q8: &mut [i8],
    d: &mut [f32],
    bsum: &mut [i32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if rag_gemm::int8::has_avx512_vnni() {
        x86::quantize_blocks(x, q, q8, d, bsum);
        return true;
    }
    let _ = (x, q, q8, d, bsum);
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Lcg;

    /// A random Q4_0 matrix; `extreme` uses only the nibbles 0, 8 and 15
    /// and large scales.
    fn random_q4(rng: &mut Lcg, nout: usize, nin: usize, extreme: bool) -> Vec<u8> {
        let mut w = Vec::with_capacity(nout * nin / QK * Q4_BLOCK_BYTES);
        for _ in 0..nout * nin / QK {
            let d: f32 = if extreme {
                4.0
            } else {
                0.001 + rng.uniform().abs() * 0.05
            };
            w.extend_from_slice(&f32_to_f16(d).to_le_bytes());
            for _ in 0..16 {
                let nib = |rng: &mut Lcg| {
                    if extreme {
                        [0u8, 15, 8, 15][(rng.next_u32() % 4) as usize]
                    } else {
                        (rng.next_u32() % 16) as u8
                    }
                };
                let (lo, hi) = (nib(rng), nib(rng));
                w.push(lo | (hi << 4));
            }
        }
        w
    }

    /// f32 to f16 for the test's scales (normal values only).
    fn f32_to_f16(v: f32) -> u16 {
        let bits = v.to_bits();
        let exp = ((bits >> 23) & 0xFF) as i32 - 127 + 15;
        assert!((1..31).contains(&exp));
        (((bits >> 16) & 0x8000) | ((exp as u32) << 10) | ((bits >> 13) & 0x3FF)) as u16
    }

    fn random_acts(rng: &mut Lcg, rows: usize, nin: usize, extreme: bool) -> QuantActs {
        let x: Vec<f32> = (0..rows * nin)
            .map(|i| {
                if extreme {
                    [5.0, -5.0, 0.0, 1e-3][i % 4]
                } else {
                    rng.uniform() * 4.0
                }
            })
            .collect();
        let mut acts = QuantActs::default();
        acts.quantize(&x, nin);
        acts
    }

    /// The AVX-512 quantisation gives the portable loop's bits: random
    /// values, zero blocks, huge and tiny magnitudes, subnormals, and values
    /// that round half-way.
    #[test]
    fn avx512_quantisation_matches_the_portable_loop() {
        let mut rng = Lcg(3);
        let specials = [
            0.0f32, -0.0, 1e30, -1e30, 1e-30, 1e-42, -1e-42, 0.5, -0.5, 1.5, 2.5, 127.0, -128.0,
        ];
        let mut x: Vec<f32> = (0..32 * 40).map(|_| rng.uniform() * 10.0).collect();
        x[..32].fill(0.0);
        for (i, v) in x[32..32 * 4].iter_mut().enumerate() {
            *v = specials[i % specials.len()];
        }
        // Half-way cases: the block maximum 127 makes the scale 1.
        for (i, v) in x[32 * 4..32 * 5].iter_mut().enumerate() {
            *v = if i == 0 { 127.0 } else { i as f32 - 16.5 };
        }
        let n = x.len();
        let (mut q, mut q8, mut d, mut bs) = (
            vec![0i16; n],
            vec![0i8; n],
            vec![0f32; n / QK],
            vec![0i32; n / QK],
        );
        let (mut q_, mut q8_, mut d_, mut bs_) = (q.clone(), q8.clone(), d.clone(), bs.clone());
        crate::kernels::quantize_blocks(&x, &mut q, &mut q8, &mut d, &mut bs);
        if !quantize_blocks(&x, &mut q_, &mut q8_, &mut d_, &mut bs_) {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        assert_eq!(q, q_);
        assert_eq!(q8, q8_);
        assert_eq!(bs, bs_);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&d), bits(&d_));
    }

    /// The repacking keeps every weight and scale of the file.
    #[test]
    fn repacking_keeps_every_weight() {
        let mut rng = Lcg(7);
        let (nout, nin) = (37, 96);
        let w = random_q4(&mut rng, nout, nin, false);
        let m = Q4Vnni::from_q4(&w, nout, nin, &vec![0.0; nout]);
        let mut row = vec![0.0f32; nin];
        for o in 0..nout {
            let bytes = nin / QK * Q4_BLOCK_BYTES;
            crate::kernels::dequantize_row(&w[o * bytes..(o + 1) * bytes], &mut row);
            for (i, &v) in row.iter().enumerate() {
                let (q, d) = m.get(o, i);
                assert_eq!(q as f32 * d, v, "channel {o}, input {i}");
            }
        }
    }

    /// The kernel against the scalar specification on edge shapes: every
    /// token count 1..=17, channel counts that are and are not multiples of
    /// 16 (and of the three-tile groups), one to many blocks, and extreme
    /// values.
    #[test]
    fn kernel_matches_the_scalar_reference() {
        let mut rng = Lcg(11);
        let mut shapes: Vec<(usize, usize, usize)> = (1..=17).map(|m| (m, 48, 96)).collect();
        shapes.extend([
            (5, 16, 32),
            (7, 17, 64),
            (9, 40, 384),
            (13, 100, 160),
            (33, 384, 384),
            (6, 1536, 384),
            (11, 384, 1536),
        ]);
        for &(rows, nout, nin) in &shapes {
            for extreme in [false, true] {
                let w = random_q4(&mut rng, nout, nin, extreme);
                let bias: Vec<f32> = (0..nout).map(|_| rng.uniform()).collect();
                let m = Q4Vnni::from_q4(&w, nout, nin, &bias);
                let x = random_acts(&mut rng, rows, nin, extreme);
                let mut want = vec![0.0f32; rows * nout];
                matmul_scalar(&m, &x, &mut want);
                // Stale values must be overwritten.
                let mut got = vec![f32::NAN; rows * nout];
                matmul(&m, &x, &mut got);
                for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        e.to_bits(),
                        "{rows}x{nout}x{nin} extreme={extreme}: output {i}: {g} vs {e}"
                    );
                }
            }
        }
    }

    /// The kernel equals the portable 4-bit kernel of the reference
    /// numerics (up to the order of float additions).
    #[test]
    fn kernel_matches_the_portable_q4_kernel() {
        let mut rng = Lcg(5);
        for &(rows, nout, nin) in &[(3, 384, 384), (21, 48, 1536)] {
            let w = random_q4(&mut rng, nout, nin, false);
            let bias: Vec<f32> = (0..nout).map(|_| rng.uniform()).collect();
            let m = Q4Vnni::from_q4(&w, nout, nin, &bias);
            let x = random_acts(&mut rng, rows, nin, false);
            let mut want = vec![0.0f32; rows * nout];
            crate::kernels::matmul_q4_portable(&w, nout, &bias, &x, &mut want);
            let mut got = vec![0.0f32; rows * nout];
            matmul(&m, &x, &mut got);
            for (&g, &e) in got.iter().zip(&want) {
                assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{g} vs {e}");
            }
        }
    }
}
