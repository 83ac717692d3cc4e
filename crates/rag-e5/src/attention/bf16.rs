//! Attention with bf16 dot products (`vdpbf16ps`, AVX-512 BF16), the
//! attention of the AVX-512 tier on CPUs that have it (AMD Zen 4 and
//! newer, Intel Cooper Lake and Sapphire Rapids and newer).
//!
//! Queries (with the `1 / sqrt(d)` scale folded in), keys, values and the
//! unnormalised softmax weights are rounded to bf16 (round to nearest
//! even); every product is summed in f32, and the softmax itself (maximum,
//! exponentials, their sum) stays f32. One `vdpbf16ps` does 32
//! multiply-adds where an f32 FMA does 16, so both the scores and the
//! weighted sum of values take half the instructions of [`super::attention`].
//! The layouts put pairs of the summed dimension in each 32-bit lane:
//! keys as `[d / 2][lenp]` pairs of dimensions, values as `[lenp / 2][d]`
//! pairs of keys, the weights as pairs of keys.

use super::HEAD_DIM;
use crate::model::ModelConfig;
use std::arch::x86_64::*;

/// Whether this CPU has AVX-512 F, BW, VL and BF16 and FMA (detected
/// once).
pub(crate) fn has_avx512_bf16() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512bf16")
            && std::arch::is_x86_feature_detected!("fma")
    })
}

/// Keys are padded to a multiple of this many: one conversion of 32
/// weights to bf16, two vectors of scores.
const PAD: usize = 32;
/// Pairs of dimensions per head.
const PAIRS: usize = HEAD_DIM / 2;
/// Query rows per block (each key and value vector loaded once for them).
const ROWS: usize = 4;

/// `f32` to bf16 bits, rounded to nearest even (inputs are finite).
fn bf16(x: f32) -> u32 {
    let b = x.to_bits();
    (b.wrapping_add(0x7FFF + ((b >> 16) & 1))) >> 16
}

/// Two values as one lane of bf16 pairs (`lo` in the low half).
fn pair(lo: f32, hi: f32) -> u32 {
    bf16(lo) | (bf16(hi) << 16)
}

/// [`super::attention`] with bf16 products: the same contract (each
/// segment attends only to itself; `q`, `k`, `v` and `ctx` are
/// `tokens x hidden`).
///
/// # Panics
///
/// If the CPU lacks AVX-512 BF16, the head size is not 32, or the shapes
/// disagree.
pub(crate) fn attention(
    cfg: &ModelConfig,
    bounds: &[usize],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    ctx: &mut [f32],
) {
    assert!(has_avx512_bf16(), "bf16 attention needs AVX-512 BF16");
    assert_eq!(cfg.head_dim(), HEAD_DIM, "bf16 attention needs heads of 32");
    let n = bounds.last().copied().unwrap_or(0) * cfg.hidden;
    assert!(bounds.windows(2).all(|s| s[0] <= s[1]));
    assert!(q.len() == n && k.len() == n && v.len() == n && ctx.len() == n);
    // SAFETY: the CPU has the features the function is compiled for, and
    // the shapes its pointer arithmetic relies on were asserted above.
    unsafe { attention_bf16(cfg, bounds, q, k, v, ctx) }
}

/// Reusable buffers of one call, sized for the longest segment.
struct Buffers {
    /// Keys as pairs of dimensions: `kp[j * lenp + s]`.
    kp: Vec<u32>,
    /// Values as pairs of keys: `vp[i * HEAD_DIM + e]` holds keys `2i` and
    /// `2i + 1` of dimension `e`.
    vp: Vec<u32>,
    /// Scores, then weights, of a block of rows: `sc[r * lenp + s]`.
    sc: Vec<f32>,
    /// The weights as bf16 pairs of keys: `pb[r * lenp / 2 + i]`.
    pb: Vec<u32>,
}

/// # Safety
///
/// The CPU has AVX-512 F, BW, VL, BF16 and FMA; the head size is 32 and
/// `q`, `k`, `v`, `ctx` hold `bounds.last() * hidden` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,fma")]
unsafe fn attention_bf16(
    cfg: &ModelConfig,
    bounds: &[usize],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    ctx: &mut [f32],
) {
    let h = cfg.hidden;
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let max_len = bounds.windows(2).map(|s| s[1] - s[0]).max().unwrap_or(0);
    let max_lenp = max_len.div_ceil(PAD) * PAD;
    let mut buf = Buffers {
        kp: vec![0; PAIRS * max_lenp],
        vp: vec![0; max_lenp / 2 * HEAD_DIM],
        sc: vec![0.0; ROWS * max_lenp],
        pb: vec![0; ROWS * max_lenp / 2],
    };
    for seg in bounds.windows(2) {
        let (s0, len) = (seg[0], seg[1] - seg[0]);
        let lenp = len.div_ceil(PAD) * PAD;
        for head in 0..cfg.heads {
            let off = head * HEAD_DIM;
            // SAFETY: the caller's contract (the shapes) and the buffers'
            // sizes (for lenp keys).
            unsafe { pack(&mut buf, k, v, s0, len, lenp, h, off) };
            let mut t = 0;
            while t < len {
                let rows = (len - t).min(ROWS);
                let qrow = |r: usize| (s0 + t + r) * h + off;
                // SAFETY: rows <= ROWS, t + rows <= len, and the buffers
                // are sized for lenp; the caller's contract covers q, ctx.
                unsafe {
                    match rows {
                        1 => block::<1>(&mut buf, q, ctx, qrow, len, lenp, scale),
                        2 => block::<2>(&mut buf, q, ctx, qrow, len, lenp, scale),
                        3 => block::<3>(&mut buf, q, ctx, qrow, len, lenp, scale),
                        4 => block::<4>(&mut buf, q, ctx, qrow, len, lenp, scale),
                        _ => unreachable!("at most {ROWS} rows per block"),
                    }
                }
                t += rows;
            }
        }
    }
}

/// Packs one head of a segment's keys (`kp`, pairs of dimensions,
/// transposed) and values (`vp`, pairs of keys) as bf16, zero past `len`.
///
/// # Safety
///
/// As [`attention_bf16`]; the segment's rows `s0..s0 + len` are within `k`
/// and `v`, and `buf` is sized for `lenp` keys.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn pack(
    buf: &mut Buffers,
    k: &[f32],
    v: &[f32],
    s0: usize,
    len: usize,
    lenp: usize,
    h: usize,
    off: usize,
) {
    let row = |x: &[f32], s: usize| -> [f32; HEAD_DIM] {
        if s < len {
            let o = (s0 + s) * h + off;
            x[o..o + HEAD_DIM].try_into().expect("one head")
        } else {
            [0.0; HEAD_DIM]
        }
    };
    // Keys: one conversion makes a key's 16 pairs of dimensions; they are
    // stored one per row of `kp`.
    let mut lanes = [0u32; PAIRS];
    for s in 0..lenp {
        let key = row(k, s);
        // SAFETY: `key` holds 32 floats, `lanes` 16 lanes.
        unsafe {
            let packed = _mm512_cvtne2ps_pbh(
                _mm512_loadu_ps(key.as_ptr().add(16)),
                _mm512_loadu_ps(key.as_ptr()),
            );
            _mm512_storeu_si512(lanes.as_mut_ptr().cast(), as_si(packed));
        }
        for (j, &l) in lanes.iter().enumerate() {
            buf.kp[j * lenp + s] = l;
        }
    }
    // Values: keys 2i and 2i + 1 of each dimension in one lane.
    for i in 0..lenp / 2 {
        let (a, b) = (row(v, 2 * i), row(v, 2 * i + 1));
        let out = &mut buf.vp[i * HEAD_DIM..(i + 1) * HEAD_DIM];
        for half in 0..2 {
            // SAFETY: 16 floats from offset 16 * half of 32-float arrays;
            // 16 lanes stored at offset 16 * half of the 32 of `out`.
            unsafe {
                let lo = widen(_mm512_cvtneps_pbh(_mm512_loadu_ps(
                    a.as_ptr().add(16 * half),
                )));
                let hi = widen(_mm512_cvtneps_pbh(_mm512_loadu_ps(
                    b.as_ptr().add(16 * half),
                )));
                let lane = _mm512_or_si512(lo, _mm512_slli_epi32::<16>(hi));
                _mm512_storeu_si512(out.as_mut_ptr().add(16 * half).cast(), lane);
            }
        }
    }
}

/// 16 bf16 values zero-extended to the low halves of 16 lanes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
#[inline]
fn widen(x: __m256bh) -> __m512i {
    // SAFETY: both are plain 32-byte vectors; every bit pattern is valid.
    let x = unsafe { std::mem::transmute::<__m256bh, __m256i>(x) };
    _mm512_cvtepu16_epi32(x)
}

/// `x[s] = e^(x[s] - max x)` in place; returns `1 / sum_s x[s]` (the
/// softmax of [`super::attention`], with the sum in 16 lanes).
#[inline(always)]
fn softmax16(x: &mut [f32]) -> f32 {
    let max = super::max_f32(x);
    for p in x.iter_mut() {
        *p = crate::kernels::exp_neg(*p - max);
    }
    let mut lanes = [0.0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
    for (l, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        *l += v;
    }
    1.0 / lanes.iter().sum::<f32>()
}

/// Attention of `R` query rows (starting at `qrow(r)` in `q` and `ctx`)
/// over the `len` keys packed in `buf` (padded to `lenp`).
///
/// # Safety
///
/// As [`attention_bf16`]; `buf` holds the packed keys and values of a
/// segment of `len` keys padded to `lenp`, and every `qrow(r) + 32` is
/// within `q` and `ctx`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,fma")]
#[inline]
unsafe fn block<const R: usize>(
    buf: &mut Buffers,
    q: &[f32],
    ctx: &mut [f32],
    qrow: impl Fn(usize) -> usize,
    len: usize,
    lenp: usize,
    scale: f32,
) {
    // The scaled queries as bf16 pairs of dimensions.
    let qp: [[u32; PAIRS]; R] = std::array::from_fn(|r| {
        let o = qrow(r);
        std::array::from_fn(|j| pair(q[o + 2 * j] * scale, q[o + 2 * j + 1] * scale))
    });
    let kp = buf.kp.as_ptr();
    let sc = buf.sc.as_mut_ptr();
    // Scores, 32 keys at a time: two accumulators per row.
    for s0 in (0..lenp).step_by(PAD) {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for j in 0..PAIRS {
            // SAFETY: j * lenp + s0 + 32 <= PAIRS * lenp <= kp.len().
            let (k0, k1) = unsafe {
                (
                    as_bh(_mm512_loadu_si512(kp.add(j * lenp + s0).cast())),
                    as_bh(_mm512_loadu_si512(kp.add(j * lenp + s0 + 16).cast())),
                )
            };
            for (acc, qp) in acc.iter_mut().zip(&qp) {
                let qb = as_bh(_mm512_set1_epi32(qp[j] as i32));
                acc[0] = _mm512_dpbf16_ps(acc[0], qb, k0);
                acc[1] = _mm512_dpbf16_ps(acc[1], qb, k1);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: r * lenp + s0 + 32 <= R * lenp <= sc.len().
            unsafe {
                _mm512_storeu_ps(sc.add(r * lenp + s0), acc[0]);
                _mm512_storeu_ps(sc.add(r * lenp + s0 + 16), acc[1]);
            }
        }
    }
    // The softmax in f32; the padded keys get weight 0. Then the weights as
    // bf16 pairs of keys.
    let mut inv = [0.0f32; R];
    for (r, inv) in inv.iter_mut().enumerate() {
        let row = &mut buf.sc[r * lenp..(r + 1) * lenp];
        *inv = softmax16(&mut row[..len]);
        row[len..].fill(0.0);
        let pb = &mut buf.pb[r * lenp / 2..(r + 1) * lenp / 2];
        for (c, out) in row.chunks_exact(PAD).zip(pb.chunks_exact_mut(PAD / 2)) {
            // SAFETY: `c` holds 32 floats and `out` 16 lanes (64 bytes).
            unsafe {
                let lo = _mm512_loadu_ps(c.as_ptr());
                let hi = _mm512_loadu_ps(c.as_ptr().add(16));
                let packed = _mm512_cvtne2ps_pbh(hi, lo);
                _mm512_storeu_si512(out.as_mut_ptr().cast(), as_si(packed));
            }
        }
    }
    // Weighted values: pairs of keys, 32 dimensions in two accumulators
    // per row. Pairs past the last key carry weight 0.
    let vp = buf.vp.as_ptr();
    let pb = buf.pb.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for i in 0..len.div_ceil(2) {
        // SAFETY: i * 32 + 32 <= lenp / 2 * 32 <= vp.len().
        let (v0, v1) = unsafe {
            (
                as_bh(_mm512_loadu_si512(vp.add(i * HEAD_DIM).cast())),
                as_bh(_mm512_loadu_si512(vp.add(i * HEAD_DIM + 16).cast())),
            )
        };
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: r * lenp / 2 + i < R * lenp / 2 <= pb.len().
            let w = unsafe { *pb.add(r * lenp / 2 + i) };
            let w = as_bh(_mm512_set1_epi32(w as i32));
            acc[0] = _mm512_dpbf16_ps(acc[0], w, v0);
            acc[1] = _mm512_dpbf16_ps(acc[1], w, v1);
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let o = qrow(r);
        let out = &mut ctx[o..o + HEAD_DIM];
        let s = _mm512_set1_ps(inv[r]);
        // SAFETY: `out` holds 32 floats.
        unsafe {
            _mm512_storeu_ps(out.as_mut_ptr(), _mm512_mul_ps(acc[0], s));
            _mm512_storeu_ps(out.as_mut_ptr().add(16), _mm512_mul_ps(acc[1], s));
        }
    }
}

/// The 32 bf16 lanes of a 512-bit integer vector.
#[target_feature(enable = "avx512f")]
#[inline]
fn as_bh(x: __m512i) -> __m512bh {
    // SAFETY: both are plain 64-byte vectors; every bit pattern is valid.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(x) }
}

/// The bits of a bf16 vector as a 512-bit integer vector.
#[target_feature(enable = "avx512f")]
#[inline]
fn as_si(x: __m512bh) -> __m512i {
    // SAFETY: as in `as_bh`.
    unsafe { std::mem::transmute::<__m512bh, __m512i>(x) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::tests::{config, reference};
    use crate::test_rng::Lcg;

    /// Within bf16's rounding of the f64 reference on edge lengths (1 to
    /// 17 keys, around the padding of 32, several segments long before
    /// short), with extreme values; each segment alone gives the same bits
    /// as in the batch.
    #[test]
    fn bf16_attention_is_close_to_the_f64_reference() {
        if !has_avx512_bf16() {
            eprintln!("SKIPPED: this CPU lacks AVX-512 BF16");
            return;
        }
        let cfg = config(96, 3);
        let mut rng = Lcg(9);
        let mut cases: Vec<(Vec<usize>, f32)> = (1..=17).map(|l| (vec![l], 1.0)).collect();
        cases.push((vec![65, 3, 64, 31, 33, 1, 130], 1.0));
        cases.push((vec![9, 40], 6.0));
        cases.push((vec![5, 16], 0.0));
        for (lens, amp) in cases {
            let mut bounds = vec![0];
            for &l in &lens {
                bounds.push(bounds.last().unwrap() + l);
            }
            let n = bounds.last().unwrap() * cfg.hidden;
            let mut gen = |_| rng.uniform() * amp;
            let q: Vec<f32> = (0..n).map(&mut gen).collect();
            let k: Vec<f32> = (0..n).map(&mut gen).collect();
            let v: Vec<f32> = (0..n).map(&mut gen).collect();
            let mut ctx = vec![f32::NAN; n];
            attention(&cfg, &bounds, &q, &k, &v, &mut ctx);
            let want = reference(&cfg, &bounds, &q, &k, &v);
            // bf16 keeps 8 significant bits: errors of a few 1e-3 of the
            // values' size, more when sharp softmaxes amplify the scores'.
            // With large values (scores in the hundreds) the scores'
            // rounding moves sharp softmaxes; what must hold there is that
            // each output stays a weighted mean of the values: finite and
            // within their range (plus bf16's rounding of the values).
            for (i, (&a, &b)) in ctx.iter().zip(&want).enumerate() {
                if amp <= 1.0 {
                    assert!(
                        (f64::from(a) - b).abs() <= 0.02,
                        "lengths {lens:?}, amplitude {amp}: output {i}: {a} vs {b}"
                    );
                } else {
                    assert!(a.is_finite() && a.abs() <= amp * 1.01, "output {i}: {a}");
                }
            }
            let h = cfg.hidden;
            for (s, seg) in bounds.windows(2).enumerate() {
                let r = seg[0] * h..seg[1] * h;
                let mut alone = vec![0.0; r.len()];
                let (qs, ks, vs) = (&q[r.clone()], &k[r.clone()], &v[r.clone()]);
                attention(&cfg, &[0, lens[s]], qs, ks, vs, &mut alone);
                assert!(alone
                    .iter()
                    .zip(&ctx[r])
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }
}
