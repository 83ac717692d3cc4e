//! Scaled dot-product attention, per sequence of a packed batch.

use crate::kernels::exp_neg;
use crate::model::ModelConfig;

/// Scaled dot-product attention of every head, restricted to each segment.
///
/// For each segment and head the keys are copied transposed (`[head_dim][len]`)
/// and the values contiguously (`[len][head_dim]`), so that both the score
/// computation and the weighted sum of values are long contiguous
/// multiply-add loops that vectorise.
#[inline(never)]
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma"
))]
pub(crate) fn attention(
    cfg: &ModelConfig,
    bounds: &[usize],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    ctx: &mut [f32],
) {
    let h = cfg.hidden;
    let hd = cfg.head_dim();
    let scale = 1.0 / (hd as f32).sqrt();
    let max_len = bounds.windows(2).map(|s| s[1] - s[0]).max().unwrap_or(0);
    let mut kt = vec![0.0f32; hd * max_len];
    let mut vh = vec![0.0f32; max_len * hd];
    let mut scores = vec![0.0f32; max_len];
    for seg in bounds.windows(2) {
        let (s0, len) = (seg[0], seg[1] - seg[0]);
        for head in 0..cfg.heads {
            let off = head * hd;
            for s in 0..len {
                let row = (s0 + s) * h + off;
                for e in 0..hd {
                    kt[e * len + s] = k[row + e];
                }
                vh[s * hd..(s + 1) * hd].copy_from_slice(&v[row..row + hd]);
            }
            for t in s0..s0 + len {
                let qh = &q[t * h + off..t * h + off + hd];
                let sc = &mut scores[..len];
                let kt = &kt[..hd * len];
                if hd == HEAD_DIM {
                    scores_blocked(qh, kt, scale, sc);
                } else {
                    sc.fill(0.0);
                    for (e, &qe) in qh.iter().enumerate() {
                        let qe = qe * scale;
                        for (o, &kv) in sc.iter_mut().zip(&kt[e * len..(e + 1) * len]) {
                            *o += qe * kv;
                        }
                    }
                }
                let max = max_f32(sc);
                for p in sc.iter_mut() {
                    *p = exp_neg(*p - max);
                }
                let inv = 1.0 / sum_f32(sc);
                let ch = &mut ctx[t * h + off..t * h + off + hd];
                if hd == HEAD_DIM {
                    weighted_values(sc, &vh[..len * hd], inv, ch);
                } else {
                    ch.fill(0.0);
                    for (s, &p) in sc.iter().enumerate() {
                        let w = p * inv;
                        for (c, &vv) in ch.iter_mut().zip(&vh[s * hd..(s + 1) * hd]) {
                            *c += w * vv;
                        }
                    }
                }
            }
        }
    }
}

/// The head dimension of multilingual-e5-small (384 / 12), for which
/// [`attention`] has register-blocked loops; other sizes take plain loops.
const HEAD_DIM: usize = 32;

/// `sc[s] = scale * <q, k_s>` for every key `s`, with the keys transposed
/// (`kt[e * len + s]`, `len = sc.len()`). Blocks of 64 keys (then 16, then
/// one at a time) are accumulated in registers over the head's dimensions,
/// instead of reading and writing every score once per dimension; 64 keys
/// make four independent 512-bit sums, enough to hide the latency of the
/// additions. Every score is summed over the dimensions in order, whatever
/// the block size.
#[inline(always)]
fn scores_blocked(q: &[f32], kt: &[f32], scale: f32, sc: &mut [f32]) {
    let q: &[f32; HEAD_DIM] = q.try_into().expect("one head of the query");
    let len = sc.len();
    let mut s0 = 0;
    while s0 + 64 <= len {
        score_block::<64>(q, kt, len, s0, scale, sc);
        s0 += 64;
    }
    while s0 + 16 <= len {
        score_block::<16>(q, kt, len, s0, scale, sc);
        s0 += 16;
    }
    while s0 < len {
        score_block::<1>(q, kt, len, s0, scale, sc);
        s0 += 1;
    }
}

/// Scores of keys `s0..s0 + B` (see [`scores_blocked`]).
#[inline(always)]
fn score_block<const B: usize>(
    q: &[f32; HEAD_DIM],
    kt: &[f32],
    len: usize,
    s0: usize,
    scale: f32,
    sc: &mut [f32],
) {
    let mut acc = [0.0f32; B];
    for (e, &qe) in q.iter().enumerate() {
        let k: &[f32; B] = kt[e * len + s0..][..B].try_into().expect("a block of keys");
        for l in 0..B {
            acc[l] += qe * k[l];
        }
    }
    for (o, a) in sc[s0..s0 + B].iter_mut().zip(acc) {
        *o = a * scale;
    }
}

/// `out = inv * sum_s p[s] * v_s` over the rows `v_s` of `v` (`HEAD_DIM`
/// wide), with the output held in registers (two sets of partial sums, for
/// even and odd `s`).
#[inline(always)]
fn weighted_values(p: &[f32], v: &[f32], inv: f32, out: &mut [f32]) {
    let mut even = [0.0f32; HEAD_DIM];
    let mut odd = [0.0f32; HEAD_DIM];
    let mut rows = v.chunks_exact(2 * HEAD_DIM);
    let mut ps = p.chunks_exact(2);
    for (pair, w) in (&mut rows).zip(&mut ps) {
        let (a, b) = pair.split_at(HEAD_DIM);
        for l in 0..HEAD_DIM {
            even[l] += w[0] * a[l];
            odd[l] += w[1] * b[l];
        }
    }
    if let ([w], last) = (ps.remainder(), rows.remainder()) {
        for l in 0..HEAD_DIM {
            even[l] += w * last[l];
        }
    }
    for (l, o) in out.iter_mut().enumerate() {
        *o = (even[l] + odd[l]) * inv;
    }
}

/// Maximum of a slice (at least -1e30) with sixteen independent lanes
/// (vectorisable, unlike a sequential `fold` of `f32::max`).
#[inline(always)]
fn max_f32(x: &[f32]) -> f32 {
    let mut lanes = [-1e30f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = if v > *l { v } else { *l };
        }
    }
    for (l, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        *l = if v > *l { v } else { *l };
    }
    lanes
        .iter()
        .fold(-1e30f32, |m, &v| if v > m { v } else { m })
}

/// Sum of a slice with eight independent partial sums (vectorisable).
#[inline(always)]
fn sum_f32(x: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = x.len() / 8;
    for c in 0..chunks {
        for l in 0..8 {
            lanes[l] += x[c * 8 + l];
        }
    }
    for i in chunks * 8..x.len() {
        lanes[i % 8] += x[i];
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}
