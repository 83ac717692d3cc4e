//! Tests of `kernels.rs` (a file of their own to keep that one short).

use super::*;

use crate::test_rng::Lcg;

fn f32_to_f16_bits(v: f32) -> u16 {
    // Only for normal values in f16 range, which is all the tests use.
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xFF) as i32 - 127 + 15;
    let man = ((bits >> 13) & 0x3FF) as u16;
    sign | ((exp as u16) << 10) | man
}

fn random_q4_matrix(rng: &mut Lcg, rows: usize, cols: usize) -> Vec<u8> {
    let mut w = Vec::with_capacity(rows * cols / QK * Q4_BLOCK_BYTES);
    for _ in 0..rows * cols / QK {
        let d = 0.001 + (rng.uniform().abs() * 0.05);
        w.extend_from_slice(&f32_to_f16_bits(d).to_le_bytes());
        for _ in 0..16 {
            w.push((rng.next_u32() & 0xFF) as u8);
        }
    }
    w
}

#[test]
fn f16_conversion_matches_known_values() {
    assert_eq!(f16_to_f32(0x3C00), 1.0);
    assert_eq!(f16_to_f32(0xC000), -2.0);
    assert_eq!(f16_to_f32(0x7BFF), 65504.0);
    assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(f16_to_f32(0x03FF), 1023.0 * 2f32.powi(-24));
    assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
    assert!(f16_to_f32(0x7C00).is_infinite());
    assert!(f16_to_f32(0x7E00).is_nan());
}

#[test]
fn fast_matmul_matches_scalar_reference() {
    let mut rng = Lcg(42);
    for &(rows, nout, nin) in &[(1, 8, 32), (3, 13, 64), (17, 384, 384), (5, 40, 1536)] {
        let w = random_q4_matrix(&mut rng, nout, nin);
        let bias: Vec<f32> = (0..nout).map(|_| rng.uniform()).collect();
        let x: Vec<f32> = (0..rows * nin).map(|_| rng.uniform() * 3.0).collect();
        let mut acts = QuantActs::default();
        acts.quantize(&x, nin);
        let mut fast = vec![0.0; rows * nout];
        let mut slow = vec![0.0; rows * nout];
        matmul_q4_portable(&w, nout, &bias, &acts, &mut fast);
        matmul_q4_scalar(&w, nout, &bias, &acts, &mut slow);
        for (a, b) in fast.iter().zip(&slow) {
            // Same operations in the same order: results are identical.
            assert_eq!(a.to_bits(), b.to_bits(), "{a} vs {b}");
        }
        // The kernel in use (AVX2 where the CPU has it) sums in another
        // order: equal up to rounding.
        let mut used = vec![0.0; rows * nout];
        matmul_q4(Kernel::Auto, &w, nout, &bias, &acts, &mut used);
        for (a, b) in used.iter().zip(&slow) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
        // And both approximate the f32 product of the dequantised values.
        let mut row = vec![0.0; nin];
        for o in 0..nout {
            dequantize_row(
                &w[o * nin / QK * Q4_BLOCK_BYTES..(o + 1) * nin / QK * Q4_BLOCK_BYTES],
                &mut row,
            );
            for t in 0..rows {
                let exact: f32 = bias[o]
                    + row
                        .iter()
                        .zip(&x[t * nin..(t + 1) * nin])
                        .map(|(a, b)| a * b)
                        .sum::<f32>();
                let scale: f32 = row.iter().map(|v| v.abs()).sum::<f32>() * 3.0 / 127.0;
                assert!((fast[t * nout + o] - exact).abs() <= scale + 1e-4);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_kernel_matches_the_scalar_reference_at_the_extremes() {
    if !x86::has_avx2_fma() {
        eprintln!("no AVX2 and FMA on this CPU: the portable kernel is used");
        return;
    }
    let mut rng = Lcg(7);
    // Weights -8 and 7, activations +-127 and 0, every token count from
    // 1 to 9 (the kernel works in groups of four).
    for rows in 1..=9 {
        let (nout, nin) = (5, 96);
        let mut w = random_q4_matrix(&mut rng, nout, nin);
        for block in w.chunks_exact_mut(Q4_BLOCK_BYTES).step_by(2) {
            block[2..].fill(0x70); // low nibble 0 (-8), high nibble 7 (7)
        }
        let bias: Vec<f32> = (0..nout).map(|_| rng.uniform()).collect();
        let x: Vec<f32> = (0..rows * nin)
            .map(|i| match i % 3 {
                0 => 5.0,
                1 => -5.0,
                _ => rng.uniform(),
            })
            .collect();
        let mut acts = QuantActs::default();
        acts.quantize(&x, nin);
        assert!(acts.q8.contains(&127) && acts.q8.contains(&-127));
        let mut fast = vec![0.0; rows * nout];
        let mut slow = vec![0.0; rows * nout];
        x86::matmul_q4_avx2(&w, nout, &bias, &acts, &mut fast);
        matmul_q4_scalar(&w, nout, &bias, &acts, &mut slow);
        for (a, b) in fast.iter().zip(&slow) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
}

#[test]
fn layer_norm_matches_the_f64_reference() {
    let mut rng = Lcg(11);
    // Widths below, at and off a multiple of the 16 lanes; 1..17 rows;
    // large offsets and spreads (a sum that loses bits when done
    // carelessly), and constant rows (zero variance).
    for (h, rows, offset, spread) in [
        (384, 17, 0.0, 1.0),
        (384, 3, 50.0, 0.01),
        (17, 5, -3.0, 40.0),
        (7, 1, 0.0, 1.0),
        (1536, 2, 1e3, 1e3),
        (48, 4, 2.5, 0.0),
    ] {
        let w: Vec<f32> = (0..h).map(|_| 1.0 + rng.uniform()).collect();
        let b: Vec<f32> = (0..h).map(|_| rng.uniform()).collect();
        let x: Vec<f32> = (0..rows * h)
            .map(|_| offset + spread * rng.uniform())
            .collect();
        let y: Vec<f32> = (0..rows * h).map(|_| spread * rng.uniform()).collect();
        for with_y in [false, true] {
            let mut got = x.clone();
            add_layer_norm(&mut got, with_y.then_some(&y[..]), &w, &b, 1e-12);
            for t in 0..rows {
                let row: Vec<f64> = (0..h)
                    .map(|i| {
                        f64::from(x[t * h + i]) + if with_y { f64::from(y[t * h + i]) } else { 0.0 }
                    })
                    .collect();
                let mean = row.iter().sum::<f64>() / h as f64;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h as f64;
                for i in 0..h {
                    let want =
                        (row[i] - mean) / (var + 1e-12).sqrt() * f64::from(w[i]) + f64::from(b[i]);
                    let a = f64::from(got[t * h + i]);
                    // Relative to the row's spread: what f32 can hold of
                    // a value that is offset by 1000 spreads.
                    let tol = 1e-5 * (1.0 + mean.abs() / var.sqrt().max(1e-30)).min(1e4);
                    assert!(
                        (a - want).abs() <= tol
                            || var == 0.0 && (a - f64::from(b[i])).abs() <= 1e-6,
                        "h {h} row {t} col {i}: {a} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn quantisation_rounds_half_to_even_and_handles_zero_blocks() {
    let mut x = vec![0.0f32; 64];
    x[0] = 127.0;
    x[1] = 0.5;
    x[2] = 1.5;
    x[3] = -2.5;
    let mut acts = QuantActs::default();
    acts.quantize(&x, 64);
    assert_eq!(&acts.q[..4], &[127, 0, 2, -2]);
    assert_eq!(acts.d, vec![1.0, 0.0]);
    assert!(acts.q[32..].iter().all(|&q| q == 0));
}

fn erf_series(x: f64) -> f64 {
    // Maclaurin series; accurate to ~1e-12 for |x| <= 4 in f64.
    let mut sum = 0.0;
    let mut term = x;
    let mut n = 0.0;
    while term.abs() > 1e-17 || n < 5.0 {
        sum += term / (2.0 * n + 1.0);
        n += 1.0;
        term *= -x * x / n;
        if n > 200.0 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn exp_neg_is_accurate() {
    let mut worst = 0.0f64;
    for i in 0..=87_000 {
        let x = -(i as f32) / 1000.0;
        let exact = f64::from(x).exp();
        let rel = ((f64::from(exp_neg(x)) - exact) / exact).abs();
        worst = worst.max(rel);
    }
    assert!(worst < 5e-7, "max relative error {worst}");
    assert_eq!(exp_neg(0.0), 1.0);
    assert_eq!(exp_neg(3.0), 1.0);
    assert!(exp_neg(-1000.0) > 0.0 && exp_neg(-1000.0) < 1e-37);
}

#[test]
fn erf_is_accurate() {
    let mut worst = 0.0f64;
    for i in -4000..=4000 {
        let x = i as f64 / 1000.0;
        let err = (f64::from(erf(x as f32)) - erf_series(x)).abs();
        worst = worst.max(err);
    }
    assert!(worst < 1e-6, "max erf error {worst}");
    assert_eq!(erf(10.0), 1.0);
    assert_eq!(erf(-10.0), -1.0);
}

#[test]
fn requantised_q4_rows_keep_their_largest_weight() {
    // One row of two Q4_0 blocks: scale 0.5, nibbles 0 (-8) and 15 (7);
    // the second block has scale 0.25.
    let mut q4 = Vec::new();
    for (d, byte) in [(0x3800u16, 0xF0u8), (0x3400, 0x31)] {
        q4.extend_from_slice(&d.to_le_bytes());
        q4.extend(std::iter::repeat_n(byte, 16));
    }
    let m = int8_from_q4(&q4, 1, 64, &[0.5]);
    let s = 4.0f32 / 127.0;
    assert_eq!(m.get(0, 0), -127); // -8 * 0.5 = -4 = -amax
    assert_eq!(m.get(0, 16), rag_gemm::int8::round_q(3.5 / s) as i8);
    assert_eq!(m.get(0, 32), rag_gemm::int8::round_q(-7.0 * 0.25 / s) as i8);
    assert_eq!((m.nout(), m.nin()), (1, 64));
}
