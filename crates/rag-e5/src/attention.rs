//! Scaled dot-product attention, per sequence of a packed batch.

use crate::kernels::exp_neg;
use crate::model::ModelConfig;
use crate::Kernel;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod bf16;

/// How the products inside attention are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precision {
    /// f32 throughout ([`attention`]).
    F32,
    /// bf16 products summed in f32, on AVX-512 BF16 (`bf16::attention`).
    Bf16,
}

impl Precision {
    /// The attention of the tier `kernel`: bf16 on the AVX-512 tier where
    /// the CPU has AVX-512 BF16 (fidelity measured in `tests/tiers.rs`),
    /// f32 everywhere else, including the AMX tier, whose per-channel int8
    /// weights leave less room.
    pub(crate) fn for_kernel(kernel: Kernel, cfg: &ModelConfig) -> Self {
        #[cfg(target_arch = "x86_64")]
        if kernel == Kernel::Avx512 && cfg.head_dim() == HEAD_DIM && bf16::has_avx512_bf16() {
            return Precision::Bf16;
        }
        let _ = (kernel, cfg);
        Precision::F32
    }
}

/// [`attention`] in the given precision.
pub(crate) fn attention_in(
    precision: Precision,
    cfg: &ModelConfig,
    bounds: &[usize],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    ctx: &mut [f32],
) {
    match precision {
        #[cfg(target_arch = "x86_64")]
        Precision::Bf16 => bf16::attention(cfg, bounds, q, k, v, ctx),
        _ => attention(cfg, bounds, q, k, v, ctx),
    }
}

/// Scaled dot-product attention of every head, restricted to each segment.
///
/// For each segment and head the keys are copied transposed
/// (`[head_dim][lenp]`, each row padded with zeros to `lenp`, `len` rounded
/// up to a multiple of [`KEY_PAD`]) and the values contiguously
/// (`[len][head_dim]`), so that both the score computation and the weighted
/// sum of values are long contiguous multiply-add loops that vectorise. The
/// padding lets the scores of the last keys be computed a full vector at a
/// time like the others (the padded scores are computed and ignored).
/// Queries go four at a time ([`scores_rows4`], [`weighted_values4`]), so
/// each vector of keys or values read from L2 serves four queries; on AMD
/// Zen 4 this took attention from 2.6 to 2.0 s on 30 SciFact passages. Each
/// output is computed with the same operations in the same order whether
/// its query is in a block of four or alone.
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
    let max_lenp = max_len.div_ceil(KEY_PAD) * KEY_PAD;
    let mut kt = vec![0.0f32; hd * max_lenp];
    let mut vh = vec![0.0f32; max_len * hd];
    let mut scores = vec![0.0f32; 4 * max_lenp];
    for seg in bounds.windows(2) {
        let (s0, len) = (seg[0], seg[1] - seg[0]);
        let lenp = len.div_ceil(KEY_PAD) * KEY_PAD;
        let kt = &mut kt[..hd * lenp];
        // The padding stays zero for every head (only keys 0..len are
        // written below).
        for row in kt.chunks_exact_mut(lenp) {
            row[len..].fill(0.0);
        }
        for head in 0..cfg.heads {
            let off = head * hd;
            for s in 0..len {
                let row = (s0 + s) * h + off;
                for e in 0..hd {
                    kt[e * lenp + s] = k[row + e];
                }
                vh[s * hd..(s + 1) * hd].copy_from_slice(&v[row..row + hd]);
            }
            let kt = &*kt;
            let mut t = s0;
            while t < s0 + len {
                if hd == HEAD_DIM && t + 4 <= s0 + len {
                    // Four queries at once: each key and value vector is
                    // loaded once for the four. Every score and output is
                    // computed as on the one-query path below.
                    let qs: [&[f32; HEAD_DIM]; 4] = std::array::from_fn(|i| {
                        let o = (t + i) * h + off;
                        q[o..o + HEAD_DIM]
                            .try_into()
                            .expect("one head of the query")
                    });
                    let block = &mut scores[..4 * lenp];
                    scores_rows4(qs, kt, lenp, scale, block);
                    let mut inv = [0.0f32; 4];
                    for (i, row) in inv.iter_mut().zip(block.chunks_exact_mut(lenp)) {
                        *i = softmax_unnormalised(&mut row[..len]);
                    }
                    let out = weighted_values4(block, lenp, len, &vh[..len * hd], inv);
                    for (i, o) in out.iter().enumerate() {
                        let c = (t + i) * h + off;
                        ctx[c..c + HEAD_DIM].copy_from_slice(o);
                    }
                    t += 4;
                    continue;
                }
                let qh = &q[t * h + off..t * h + off + hd];
                if hd == HEAD_DIM {
                    scores_blocked(qh, kt, scale, &mut scores[..lenp]);
                } else {
                    let sc = &mut scores[..len];
                    sc.fill(0.0);
                    for (e, &qe) in qh.iter().enumerate() {
                        let qe = qe * scale;
                        for (o, &kv) in sc.iter_mut().zip(&kt[e * lenp..e * lenp + len]) {
                            *o += qe * kv;
                        }
                    }
                }
                let sc = &mut scores[..len];
                let inv = softmax_unnormalised(sc);
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
                t += 1;
            }
        }
    }
}

/// `x[s] = e^(x[s] - max x)` in place; returns `1 / sum_s x[s]`.
#[inline(always)]
fn softmax_unnormalised(x: &mut [f32]) -> f32 {
    let max = max_f32(x);
    for p in x.iter_mut() {
        *p = exp_neg(*p - max);
    }
    1.0 / sum_f32(x)
}

/// [`weighted_values`] for four rows of weights (`p[r * lenp + s]`,
/// `s < len`) at once: each pair of value rows is loaded once for the four,
/// and every output is summed exactly as in [`weighted_values`].
#[inline(always)]
fn weighted_values4(
    p: &[f32],
    lenp: usize,
    len: usize,
    v: &[f32],
    inv: [f32; 4],
) -> [[f32; HEAD_DIM]; 4] {
    let (p0, p1, p2, p3) = (
        &p[..len],
        &p[lenp..lenp + len],
        &p[2 * lenp..2 * lenp + len],
        &p[3 * lenp..3 * lenp + len],
    );
    let mut e0 = [0.0f32; HEAD_DIM];
    let mut e1 = [0.0f32; HEAD_DIM];
    let mut e2 = [0.0f32; HEAD_DIM];
    let mut e3 = [0.0f32; HEAD_DIM];
    let mut o0 = [0.0f32; HEAD_DIM];
    let mut o1 = [0.0f32; HEAD_DIM];
    let mut o2 = [0.0f32; HEAD_DIM];
    let mut o3 = [0.0f32; HEAD_DIM];
    let pairs = len / 2;
    for i in 0..pairs {
        let s = 2 * i;
        let a: &[f32; HEAD_DIM] = v[s * HEAD_DIM..][..HEAD_DIM]
            .try_into()
            .expect("a value row");
        let b: &[f32; HEAD_DIM] = v[(s + 1) * HEAD_DIM..][..HEAD_DIM]
            .try_into()
            .expect("a value row");
        let (w0, w1, w2, w3) = (p0[s], p1[s], p2[s], p3[s]);
        let (x0, x1, x2, x3) = (p0[s + 1], p1[s + 1], p2[s + 1], p3[s + 1]);
        for l in 0..HEAD_DIM {
            e0[l] += w0 * a[l];
            o0[l] += x0 * b[l];
            e1[l] += w1 * a[l];
            o1[l] += x1 * b[l];
            e2[l] += w2 * a[l];
            o2[l] += x2 * b[l];
            e3[l] += w3 * a[l];
            o3[l] += x3 * b[l];
        }
    }
    if len % 2 == 1 {
        let s = len - 1;
        let last: &[f32; HEAD_DIM] = v[s * HEAD_DIM..][..HEAD_DIM]
            .try_into()
            .expect("a value row");
        let (w0, w1, w2, w3) = (p0[s], p1[s], p2[s], p3[s]);
        for l in 0..HEAD_DIM {
            e0[l] += w0 * last[l];
            e1[l] += w1 * last[l];
            e2[l] += w2 * last[l];
            e3[l] += w3 * last[l];
        }
    }
    let mut out = [[0.0f32; HEAD_DIM]; 4];
    for l in 0..HEAD_DIM {
        out[0][l] = (e0[l] + o0[l]) * inv[0];
        out[1][l] = (e1[l] + o1[l]) * inv[1];
        out[2][l] = (e2[l] + o2[l]) * inv[2];
        out[3][l] = (e3[l] + o3[l]) * inv[3];
    }
    out
}

/// Keys are padded to a multiple of this many (one 512-bit vector of
/// scores).
const KEY_PAD: usize = 16;

/// The head dimension of multilingual-e5-small (384 / 12), for which
/// [`attention`] has register-blocked loops; other sizes take plain loops.
const HEAD_DIM: usize = 32;

/// `sc[s] = scale * <q, k_s>` for every key `s`, with the keys transposed
/// (`kt[e * len + s]`, `len = sc.len()`, padded keys included). Blocks of
/// 64 keys (then 16, then one at a time, which the padding to [`KEY_PAD`]
/// keys avoids) are accumulated in registers over the head's dimensions,
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

/// [`scores_blocked`] for four queries at once (`sc[r * lenp + s]`): blocks
/// of 32 keys times four queries in eight vector accumulators, each key
/// vector loaded once for the four; every score is summed as in
/// [`score_block`].
#[inline(always)]
fn scores_rows4(q: [&[f32; HEAD_DIM]; 4], kt: &[f32], lenp: usize, scale: f32, sc: &mut [f32]) {
    let (r0, rest) = sc.split_at_mut(lenp);
    let (r1, rest) = rest.split_at_mut(lenp);
    let (r2, r3) = rest.split_at_mut(lenp);
    let mut s0 = 0;
    while s0 + 32 <= lenp {
        let mut a0 = [0.0f32; 32];
        let mut a1 = [0.0f32; 32];
        let mut a2 = [0.0f32; 32];
        let mut a3 = [0.0f32; 32];
        for e in 0..HEAD_DIM {
            let k: &[f32; 32] = kt[e * lenp + s0..][..32].try_into().expect("32 keys");
            let (q0, q1, q2, q3) = (q[0][e], q[1][e], q[2][e], q[3][e]);
            for l in 0..32 {
                a0[l] += q0 * k[l];
                a1[l] += q1 * k[l];
                a2[l] += q2 * k[l];
                a3[l] += q3 * k[l];
            }
        }
        for (row, a) in [
            (&mut *r0, a0),
            (&mut *r1, a1),
            (&mut *r2, a2),
            (&mut *r3, a3),
        ] {
            for (o, v) in row[s0..s0 + 32].iter_mut().zip(a) {
                *o = v * scale;
            }
        }
        s0 += 32;
    }
    if s0 < lenp {
        for (qr, row) in q.iter().zip([r0, r1, r2, r3]) {
            score_block::<16>(qr, kt, lenp, s0, scale, row);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Lcg(u64);
    impl Lcg {
        fn uniform(&mut self) -> f32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
    }

    pub(super) fn config(hidden: usize, heads: usize) -> ModelConfig {
        ModelConfig {
            hidden,
            layers: 1,
            heads,
            ffn: 4 * hidden,
            vocab_rows: 1,
            max_positions: 512,
            type_vocab: 1,
            layer_norm_eps: 1e-12,
        }
    }

    /// Plain attention in f64: the specification (also of `bf16`).
    pub(super) fn reference(
        cfg: &ModelConfig,
        bounds: &[usize],
        q: &[f32],
        k: &[f32],
        v: &[f32],
    ) -> Vec<f64> {
        let (h, hd) = (cfg.hidden, cfg.head_dim());
        let scale = 1.0 / (hd as f64).sqrt();
        let mut out = vec![0.0f64; q.len()];
        for seg in bounds.windows(2) {
            for head in 0..cfg.heads {
                let off = head * hd;
                for t in seg[0]..seg[1] {
                    let scores: Vec<f64> = (seg[0]..seg[1])
                        .map(|s| {
                            (0..hd)
                                .map(|e| {
                                    f64::from(q[t * h + off + e]) * f64::from(k[s * h + off + e])
                                })
                                .sum::<f64>()
                                * scale
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let p: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let sum: f64 = p.iter().sum();
                    for e in 0..hd {
                        out[t * h + off + e] = (seg[0]..seg[1])
                            .zip(&p)
                            .map(|(s, &w)| w * f64::from(v[s * h + off + e]))
                            .sum::<f64>()
                            / sum;
                    }
                }
            }
        }
        out
    }

    fn check(cfg: &ModelConfig, lens: &[usize], amplitude: f32, rng: &mut Lcg) {
        let h = cfg.hidden;
        let mut bounds = vec![0];
        for &l in lens {
            bounds.push(bounds.last().unwrap() + l);
        }
        let n = *bounds.last().unwrap() * h;
        let mut gen = |_| rng.uniform() * amplitude;
        let q: Vec<f32> = (0..n).map(&mut gen).collect();
        let k: Vec<f32> = (0..n).map(&mut gen).collect();
        let v: Vec<f32> = (0..n).map(&mut gen).collect();
        let mut ctx = vec![f32::NAN; n];
        attention(cfg, &bounds, &q, &k, &v, &mut ctx);
        let want = reference(cfg, &bounds, &q, &k, &v);
        for (i, (&a, &b)) in ctx.iter().zip(&want).enumerate() {
            let tol = 2e-5 * f64::from(amplitude).max(1.0);
            assert!(
                (f64::from(a) - b).abs() <= tol,
                "hidden {h}, lengths {lens:?}, amplitude {amplitude}: output {i}: {a} vs {b}"
            );
        }
        // Each segment alone gives bit for bit what it gives in the batch.
        for (s, seg) in bounds.windows(2).enumerate() {
            let r = seg[0] * h..seg[1] * h;
            let mut alone = vec![0.0; r.len()];
            attention(
                cfg,
                &[0, lens[s]],
                &q[r.clone()],
                &k[r.clone()],
                &v[r.clone()],
                &mut alone,
            );
            assert!(alone
                .iter()
                .zip(&ctx[r])
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }

    #[test]
    fn attention_matches_the_f64_reference_on_edge_shapes() {
        let mut rng = Lcg(3);
        // e5-small's head size (the register-blocked path) and an odd one.
        for cfg in [config(384, 12), config(40, 4)] {
            for len in 1..=17 {
                check(&cfg, &[len], 1.0, &mut rng);
            }
            // Several segments, long before short (stale padding), lengths
            // around the blocks of 16 and 64 keys.
            check(&cfg, &[65, 3, 64, 17, 1, 130], 1.0, &mut rng);
            // Extreme values: scores in the hundreds (a one-hot softmax,
            // exponents clamped), and all-zero inputs.
            check(&cfg, &[9, 33], 8.0, &mut rng);
            check(&cfg, &[5, 16], 0.0, &mut rng);
        }
    }
}
