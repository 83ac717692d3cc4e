//! The AVX-512 VNNI int8 kernel (`vpdpbusd`), and the AVX-512 epilogue the
//! AMX kernel shares.

use super::{I8Acts, I8Matrix, TILE_N};
use std::arch::x86_64::*;

/// Whether this CPU has AVX-512 F, BW and VNNI (detected once).
pub fn has_avx512_vnni() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    })
}

/// Tokens per register block.
const BLOCK_T: usize = 6;
/// Tiles of 16 channels per register block: `BLOCK_T * BLOCK_G`
/// accumulators plus `BLOCK_G` weight registers and one broadcast.
///
/// Measured on AMD Zen 4 (int8 multiply-adds per second of this kernel on
/// 2,048 x 384 x 384 and 2,048 x 384 x 1,536 products): 6 x 4 blocks ran
/// at 79 and 79 G (LLVM spills some of the 24 accumulators: 6 x 4 and
/// 4 x 6 were both slow), 4 x 4 at 220 and 225 G, 6 x 3 at 222 and 228 G,
/// 4 x 5 at 200 and 220 G, about the rate of one 512-bit `vpdpbusd` per
/// cycle.
const BLOCK_G: usize = 3;

/// [`super::matmul_i8_scalar`] with `vpdpbusd`: blocks of up to six tokens
/// times 48 channels are accumulated in registers over the whole input
/// width, then finished with [`finish16`].
///
/// # Panics
///
/// If the CPU lacks AVX-512 VNNI, or the shapes disagree.
pub(crate) fn matmul(w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    assert!(has_avx512_vnni(), "the AVX-512 kernel needs AVX-512 VNNI");
    w.check_shapes(x, y);
    // SAFETY: the CPU has the features the function is compiled for
    // (asserted above) and `check_shapes` asserted every size the kernel's
    // pointer arithmetic relies on.
    unsafe { matmul_vnni(w, x, y) }
}

/// # Safety
///
/// The CPU has AVX-512 F, BW and VNNI and `w.check_shapes(x, y)` holds.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn matmul_vnni(w: &I8Matrix, x: &I8Acts, y: &mut [f32]) {
    let tiles = w.np / TILE_N;
    // Groups of at most BLOCK_G tiles, as even as possible (24 tiles in
    // groups of 5 make 5, 5, 5, 5 and 4), so that no group is much narrower
    // than the rest.
    let groups = tiles.div_ceil(BLOCK_G);
    let mut nt = 0;
    for gi in 0..groups {
        let g = (tiles - nt).div_ceil(groups - gi);
        let mut t = 0;
        while t < x.rows {
            let n = (x.rows - t).min(BLOCK_T);
            // SAFETY: t + n <= x.rows and nt + g <= tiles; the caller's
            // contract covers the rest.
            match n {
                1 => unsafe { block_t::<1>(g, w, x, y, t, nt) },
                2 => unsafe { block_t::<2>(g, w, x, y, t, nt) },
                3 => unsafe { block_t::<3>(g, w, x, y, t, nt) },
                4 => unsafe { block_t::<4>(g, w, x, y, t, nt) },
                5 => unsafe { block_t::<5>(g, w, x, y, t, nt) },
                6 => unsafe { block_t::<6>(g, w, x, y, t, nt) },
                _ => unreachable!("at most {BLOCK_T} tokens per block"),
            }
            t += n;
        }
        nt += g;
    }
}

/// [`block`] for `g` (at most [`BLOCK_G`]) tiles.
///
/// # Safety
///
/// As [`block`].
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn block_t<const T: usize>(
    g: usize,
    w: &I8Matrix,
    x: &I8Acts,
    y: &mut [f32],
    t0: usize,
    nt0: usize,
) {
    // SAFETY: the caller's contract, with G = g.
    match g {
        1 => unsafe { block::<T, 1>(w, x, y, t0, nt0) },
        2 => unsafe { block::<T, 2>(w, x, y, t0, nt0) },
        3 => unsafe { block::<T, 3>(w, x, y, t0, nt0) },
        _ => unreachable!("at most {BLOCK_G} tiles per block"),
    }
}

/// Tokens `t0..t0 + T` times channel tiles `nt0..nt0 + G`.
///
/// # Safety
///
/// As [`matmul_vnni`], plus `t0 + T <= x.rows` and `nt0 + G <= w.np / 16`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn block<const T: usize, const G: usize>(
    w: &I8Matrix,
    x: &I8Acts,
    y: &mut [f32],
    t0: usize,
    nt0: usize,
) {
    debug_assert!(t0 + T <= x.rows && (nt0 + G) * TILE_N <= w.np);
    let steps = w.kp / 4;
    // Each tile's rows are contiguous: `steps` rows of 64 bytes.
    let stream = steps * 64;
    let wp = w.data.as_ptr();
    let ap = x.u.as_ptr();
    let mut acc = [[_mm512_setzero_si512(); G]; T];
    for s in 0..steps {
        let mut wv = [_mm512_setzero_si512(); G];
        for (g, v) in wv.iter_mut().enumerate() {
            // SAFETY: (nt0 + g) * stream + s * 64 + 64 <= np * kp, the
            // length of `w.data`.
            *v = unsafe { _mm512_loadu_si512(wp.add((nt0 + g) * stream + s * 64).cast()) };
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: (t0 + i) * kp + s * 4 + 4 <= rows * kp <= `x.u.len()`.
            let a = unsafe {
                ap.add((t0 + i) * x.kp + s * 4)
                    .cast::<i32>()
                    .read_unaligned()
            };
            let a = _mm512_set1_epi32(a);
            for (acc, &wv) in acc.iter_mut().zip(&wv) {
                *acc = _mm512_dpbusd_epi32(*acc, a, wv);
            }
        }
    }
    let nout = w.nout;
    for (i, acc) in acc.iter().enumerate() {
        let t = t0 + i;
        let row = &mut y[t * nout..(t + 1) * nout];
        for (g, &acc) in acc.iter().enumerate() {
            let o0 = (nt0 + g) * TILE_N;
            let end = (o0 + TILE_N).min(nout);
            finish16(acc, w, o0, x.scale[t], &mut row[o0..end]);
        }
    }
}

/// Finishes 16 channels `o0..o0 + 16` of one token from their offset
/// accumulators: `bias + (sa * sw) * (acc - comp)` (the formula of
/// [`super::finish`], in the same order), storing the first `out.len()`
/// (at most 16) values.
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn finish16(acc: __m512i, w: &I8Matrix, o0: usize, sa: f32, out: &mut [f32]) {
    let comp: &[i32; TILE_N] = w.comp[o0..o0 + TILE_N].try_into().expect("16 channels");
    let sw: &[f32; TILE_N] = w.scale[o0..o0 + TILE_N].try_into().expect("16 channels");
    let bias: &[f32; TILE_N] = w.bias[o0..o0 + TILE_N].try_into().expect("16 channels");
    assert!(out.len() <= TILE_N);
    // SAFETY: each load reads exactly the 64 bytes of a 16-element array;
    // the masked store writes only the first `out.len()` lanes.
    unsafe {
        let comp = _mm512_loadu_si512(comp.as_ptr().cast());
        let sw = _mm512_loadu_ps(sw.as_ptr());
        let bias = _mm512_loadu_ps(bias.as_ptr());
        let f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, comp));
        let r = _mm512_add_ps(
            bias,
            _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(sa), sw), f),
        );
        let mask = (1u32 << out.len()) - 1;
        _mm512_mask_storeu_ps(out.as_mut_ptr(), mask as u16, r);
    }
}
