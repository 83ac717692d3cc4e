//! Distance kernels and vector preparation.
//!
//! Vectors are L2-normalised when they enter an index, so cosine similarity is a
//! plain dot product and the only kernel the hot loop needs is [`dot`].
//!
//! # Why there is no hand-written AVX2 path
//!
//! The workspace forbids `unsafe` code. Calling a `#[target_feature]` function or a
//! `std::arch` intrinsic from code compiled without that feature is `unsafe`, so a
//! runtime-dispatched AVX2/FMA kernel cannot be written here. Instead [`dot`] is
//! shaped so that LLVM vectorises it on its own: sixteen independent accumulators
//! over `chunks_exact(16)` become four SSE registers on baseline x86-64 (two AVX
//! registers when built with `-C target-cpu=x86-64-v3` or `native`, four NEON
//! registers on aarch64). Independent accumulators also break the loop-carried
//! dependency of a sequential sum, which is what lets the CPU overlap the
//! multiply-adds. [`dot_scalar`] is the reference every fast path is tested against.

use crate::error::{AnnError, Result};

/// Number of independent accumulators (and the chunk width) of [`dot`].
const LANES: usize = 16;

/// Dot product of two equally long slices, written to autovectorise.
///
/// If the slices differ in length, the extra elements of the longer one are
/// ignored; indexes always check dimensions before they call this.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let chunks_a = a.chunks_exact(LANES);
    let chunks_b = b.chunks_exact(LANES);
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut acc = [0.0f32; LANES];
    for (ca, cb) in chunks_a.zip(chunks_b) {
        // Fixed-size arrays let the compiler drop every bounds check and keep the
        // accumulators in registers.
        let ca: &[f32; LANES] = ca.try_into().expect("chunks_exact yields full chunks");
        let cb: &[f32; LANES] = cb.try_into().expect("chunks_exact yields full chunks");
        for ((s, x), y) in acc.iter_mut().zip(ca).zip(cb) {
            *s += x * y;
        }
    }
    // A pairwise reduction keeps rounding error low and is itself vectorisable.
    let mut width = LANES / 2;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    acc[0] + tail
}

/// Sequential dot product: the reference the fast kernel is tested against.
pub fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        sum += x * y;
    }
    sum
}

/// Checks a vector's dimension and components and returns its Euclidean norm.
///
/// The norm is accumulated in `f64`, so components as large as `f32::MAX` do not
/// overflow it.
pub fn checked_norm(vector: &[f32], dims: usize) -> Result<f64> {
    if vector.len() != dims {
        return Err(AnnError::WrongDimension {
            expected: dims,
            got: vector.len(),
        });
    }
    let mut sum = 0.0f64;
    for (index, &x) in vector.iter().enumerate() {
        if !x.is_finite() {
            return Err(AnnError::NonFinite { index });
        }
        sum += f64::from(x) * f64::from(x);
    }
    let norm = sum.sqrt();
    // A norm whose reciprocal overflows cannot be normalised into finite numbers.
    if norm == 0.0 || !(1.0 / norm).is_finite() {
        return Err(AnnError::ZeroVector);
    }
    Ok(norm)
}

/// Appends the unit-length version of `vector` to `out` after validating it.
///
/// On error nothing is appended.
pub fn push_normalised(out: &mut Vec<f32>, vector: &[f32], dims: usize) -> Result<()> {
    let norm = checked_norm(vector, dims)?;
    let inv = 1.0 / norm;
    out.extend(vector.iter().map(|&x| (f64::from(x) * inv) as f32));
    Ok(())
}

/// Returns the unit-length version of `vector` after validating it.
pub fn normalised(vector: &[f32], dims: usize) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(dims);
    push_normalised(&mut out, vector, dims)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SplitMix64;

    #[test]
    fn fast_dot_matches_scalar_for_many_lengths() {
        let mut rng = SplitMix64::new(7);
        for len in (0..=300).chain([383, 384, 385, 511, 512, 767, 768, 1024, 1536, 3072]) {
            for _ in 0..4 {
                let a: Vec<f32> = (0..len).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
                let b: Vec<f32> = (0..len).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
                let fast = dot(&a, &b);
                let reference = dot_scalar(&a, &b);
                // Rounding grows with the magnitude of the summed terms, so the
                // tolerance is relative to that magnitude (and absolute below 1).
                let magnitude: f32 = a.iter().zip(&b).map(|(x, y)| (x * y).abs()).sum();
                let tol = 1e-5 * magnitude.max(1.0);
                assert!(
                    (fast - reference).abs() <= tol,
                    "len {len}: fast {fast} vs scalar {reference} (tolerance {tol})"
                );
            }
        }
    }

    #[test]
    fn fast_dot_of_unit_vectors_matches_scalar_absolutely() {
        let mut rng = SplitMix64::new(11);
        for len in 1..=1100 {
            let a = normalised(&rng.gaussian_vec(len), len).unwrap();
            let b = normalised(&rng.gaussian_vec(len), len).unwrap();
            assert!(
                (dot(&a, &b) - dot_scalar(&a, &b)).abs() <= 1e-5,
                "len {len}"
            );
            assert!((dot(&a, &a) - 1.0).abs() <= 1e-5, "len {len}");
        }
    }

    #[test]
    fn normalisation_rejects_bad_vectors() {
        assert_eq!(normalised(&[0.0, 0.0], 2), Err(AnnError::ZeroVector));
        assert_eq!(
            normalised(&[1.0, f32::NAN], 2),
            Err(AnnError::NonFinite { index: 1 })
        );
        assert_eq!(
            normalised(&[f32::INFINITY], 1),
            Err(AnnError::NonFinite { index: 0 })
        );
        assert_eq!(
            normalised(&[1.0, 2.0, 3.0], 2),
            Err(AnnError::WrongDimension {
                expected: 2,
                got: 3
            })
        );
        // Subnormal inputs still have a direction.
        let tiny = normalised(&[1e-40, 0.0], 2).unwrap();
        assert!((tiny[0] - 1.0).abs() < 1e-6);
        // Huge inputs do not overflow the norm.
        let huge = normalised(&[f32::MAX, f32::MAX], 2).unwrap();
        assert!((dot(&huge, &huge) - 1.0).abs() < 1e-6);
    }
}
