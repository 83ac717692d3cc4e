//! The AVX-512 BF16 kernel (`vdpbf16ps`).

use super::{Bf16Acts, Bf16Matrix};
use crate::int8::TILE_N;
use std::arch::x86_64::*;

/// Whether this CPU has AVX-512 F, BW and BF16 (detected once).
pub(super) fn has_avx512_bf16() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    })
}

/// Tokens per register block.
const BLOCK_T: usize = 4;
/// Tiles of 16 channels per register block: 12 accumulators, 3 weight
/// registers and a broadcast, the shape that kept the int8 kernel out of
/// spills.
const BLOCK_G: usize = 3;

/// [`super::matmul_bf16`] with `vdpbf16ps`: blocks of up to four tokens
/// times 48 channels accumulated in registers over the whole input width.
///
/// # Panics
///
/// If the CPU lacks AVX-512 BF16, or the shapes disagree.
pub(super) fn matmul(w: &Bf16Matrix, x: &Bf16Acts, y: &mut [f32]) {
    assert!(has_avx512_bf16(), "the bf16 kernel needs AVX-512 BF16");
    w.check_shapes(x, y);
    // SAFETY: the CPU has the features the function is compiled for
    // (asserted above) and `check_shapes` asserted every size the kernel's
    // pointer arithmetic relies on.
    unsafe { matmul_bf16(w, x, y) }
}

/// # Safety
///
/// The CPU has AVX-512 F, BW and BF16 and `w.check_shapes(x, y)` holds.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn matmul_bf16(w: &Bf16Matrix, x: &Bf16Acts, y: &mut [f32]) {
    let tiles = w.np / TILE_N;
    let groups = tiles.div_ceil(BLOCK_G);
    let mut nt = 0;
    for gi in 0..groups {
        let g = (tiles - nt).div_ceil(groups - gi);
        let mut t = 0;
        while t < x.rows {
            let n = (x.rows - t).min(BLOCK_T);
            // SAFETY: t + n <= x.rows and nt + g <= tiles; the caller's
            // contract covers the rest.
            unsafe {
                match (n, g) {
                    (1, 1) => block::<1, 1>(w, x, y, t, nt),
                    (1, 2) => block::<1, 2>(w, x, y, t, nt),
                    (1, 3) => block::<1, 3>(w, x, y, t, nt),
                    (2, 1) => block::<2, 1>(w, x, y, t, nt),
                    (2, 2) => block::<2, 2>(w, x, y, t, nt),
                    (2, 3) => block::<2, 3>(w, x, y, t, nt),
                    (3, 1) => block::<3, 1>(w, x, y, t, nt),
                    (3, 2) => block::<3, 2>(w, x, y, t, nt),
                    (3, 3) => block::<3, 3>(w, x, y, t, nt),
                    (4, 1) => block::<4, 1>(w, x, y, t, nt),
                    (4, 2) => block::<4, 2>(w, x, y, t, nt),
                    (4, 3) => block::<4, 3>(w, x, y, t, nt),
                    _ => unreachable!("at most {BLOCK_T} tokens and {BLOCK_G} tiles per block"),
                }
            }
            t += n;
        }
        nt += g;
    }
}

/// The 32 bf16 lanes of a 512-bit integer vector.
#[target_feature(enable = "avx512f")]
#[inline]
fn as_bh(x: __m512i) -> __m512bh {
    // SAFETY: both are plain 64-byte vectors; every bit pattern is valid.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(x) }
}

/// Tokens `t0..t0 + T` times channel tiles `nt0..nt0 + G`.
///
/// # Safety
///
/// As [`matmul_bf16`], plus `t0 + T <= x.rows` and `nt0 + G <= w.np / 16`.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[inline]
unsafe fn block<const T: usize, const G: usize>(
    w: &Bf16Matrix,
    x: &Bf16Acts,
    y: &mut [f32],
    t0: usize,
    nt0: usize,
) {
    debug_assert!(t0 + T <= x.rows && (nt0 + G) * TILE_N <= w.np);
    let pairs = w.kp / 2;
    // Each tile's rows are contiguous: `pairs` rows of 32 values.
    let stream = pairs * 32;
    let wp = w.data.as_ptr();
    let ap = x.data.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); G]; T];
    for s in 0..pairs {
        let mut wv = [as_bh(_mm512_setzero_si512()); G];
        for (g, v) in wv.iter_mut().enumerate() {
            // SAFETY: (nt0 + g) * stream + s * 32 + 32 <= np * kp, the
            // length of `w.data`.
            *v = as_bh(unsafe { _mm512_loadu_si512(wp.add((nt0 + g) * stream + s * 32).cast()) });
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: (t0 + i) * kp + 2 * s + 2 <= rows * kp, the length
            // of `x.data`.
            let a = unsafe {
                ap.add((t0 + i) * x.kp + 2 * s)
                    .cast::<i32>()
                    .read_unaligned()
            };
            let a = as_bh(_mm512_set1_epi32(a));
            for (acc, &wv) in acc.iter_mut().zip(&wv) {
                *acc = _mm512_dpbf16_ps(*acc, a, wv);
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
            let bias: &[f32; TILE_N] = w.bias[o0..o0 + TILE_N].try_into().expect("16 channels");
            let out = &mut row[o0..end];
            // SAFETY: the load reads exactly the 16 biases; the masked
            // store writes only the first `out.len()` (at most 16) lanes.
            unsafe {
                let r = _mm512_add_ps(_mm512_loadu_ps(bias.as_ptr()), acc);
                let mask = (1u32 << out.len()) - 1;
                _mm512_mask_storeu_ps(out.as_mut_ptr(), mask as u16, r);
            }
        }
    }
}
