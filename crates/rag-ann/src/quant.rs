//! int8 scalar quantisation of unit vectors, for the graph walk.
//!
//! Every component is mapped to `round(x / step)` clamped to `-127..=127`,
//! with one `step` per index chosen from the data: the 99.99th percentile of
//! the absolute components divided by 127, so a rare outlier is clipped
//! instead of wasting the range of all the others. A vector then costs one
//! byte per dimension instead of four, and the similarity of two codes is an
//! integer dot product ([`dot_i8`]) that orders pairs almost as the exact
//! cosine does. The graph walk uses codes only; the candidates it returns are
//! rescored with the full-precision vectors, so scores stay exact.

/// The step used when there is nothing to fit it on: unit vectors of a few
/// hundred dimensions rarely have components above 0.3.
const DEFAULT_STEP: f32 = 0.3 / 127.0;

/// Components sampled at most when the step is fitted.
const FIT_SAMPLE: usize = 1 << 20;

/// The int8 codes of a set of vectors, one row per ordinal.
#[derive(Clone, Debug, PartialEq)]
pub struct Codes {
    dims: usize,
    step: f32,
    data: Vec<i8>,
}

impl Codes {
    /// Empty codes with the step fitted on `rows` (normalised vectors of
    /// `dims` components each, concatenated).
    pub fn fitted(dims: usize, rows: &[f32]) -> Self {
        Codes {
            dims,
            step: fit_step(rows),
            data: Vec::new(),
        }
    }

    /// Empty codes with a given step (read back from bytes).
    pub fn with_step(dims: usize, step: f32) -> Self {
        let step = if step.is_finite() && step > 0.0 {
            step
        } else {
            DEFAULT_STEP
        };
        Codes {
            dims,
            step,
            data: Vec::new(),
        }
    }

    /// The quantisation step.
    pub fn step(&self) -> f32 {
        self.step
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.data.len() / self.dims.max(1)
    }

    /// Appends the code of `vector` as the next row.
    pub fn push(&mut self, vector: &[f32]) {
        let step = self.step;
        self.data.extend(vector.iter().map(|&x| quantise(x, step)));
    }

    /// Appends already quantised rows.
    pub fn extend_raw(&mut self, codes: &[i8]) {
        self.data.extend_from_slice(codes);
    }

    /// The code of a vector that is not stored (a query).
    pub fn encode(&self, vector: &[f32]) -> Vec<i8> {
        vector.iter().map(|&x| quantise(x, self.step)).collect()
    }

    /// The code in row `ordinal`.
    #[inline]
    pub fn row(&self, ordinal: u32) -> &[i8] {
        let start = ordinal as usize * self.dims;
        &self.data[start..start + self.dims]
    }

    /// All rows, concatenated.
    pub fn raw(&self) -> &[i8] {
        &self.data
    }

    /// The similarity of two stored rows.
    #[inline]
    pub fn sim(&self, a: u32, b: u32) -> i32 {
        dot_i8(self.row(a), self.row(b))
    }

    /// The approximate cosine that an integer similarity stands for.
    pub fn cosine(&self, sim: i32) -> f32 {
        sim as f32 * self.step * self.step
    }
}

#[inline]
fn quantise(x: f32, step: f32) -> i8 {
    // `as` saturates and maps NaN to 0; vectors are checked finite on entry.
    (x / step).round().clamp(-127.0, 127.0) as i8
}

/// The step for these rows: their 99.99th percentile absolute component / 127.
fn fit_step(rows: &[f32]) -> f32 {
    if rows.is_empty() {
        return DEFAULT_STEP;
    }
    let stride = rows.len().div_ceil(FIT_SAMPLE).max(1);
    let mut sample: Vec<f32> = rows.iter().step_by(stride).map(|x| x.abs()).collect();
    let at = ((sample.len() - 1) as f64 * 0.9999).round() as usize;
    let (_, q, _) = sample.select_nth_unstable_by(at, f32::total_cmp);
    let top = *q;
    if top.is_finite() && top > 0.0 {
        top / 127.0
    } else {
        DEFAULT_STEP
    }
}

/// Lanes of [`dot_i8`]: sixteen independent `i32` sums.
const LANES: usize = 16;

/// Dot product of two int8 codes, written to autovectorise (widening
/// multiply-adds). Codes are at most 4,096 long, so the sum cannot overflow.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    let mut acc = [0i32; LANES];
    for (x, y) in ca.zip(cb) {
        let x: &[i8; LANES] = x.try_into().expect("chunks_exact yields full chunks");
        let y: &[i8; LANES] = y.try_into().expect("chunks_exact yields full chunks");
        for ((s, &p), &q) in acc.iter_mut().zip(x).zip(y) {
            *s += i32::from(i16::from(p) * i16::from(q));
        }
    }
    acc.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel;
    use crate::synthetic::ClusteredVectors;

    fn scalar(a: &[i8], b: &[i8]) -> i32 {
        a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
    }

    #[test]
    fn integer_dot_matches_the_scalar_sum_on_every_length_and_extreme() {
        for len in [0usize, 1, 7, 15, 16, 17, 31, 33, 384, 1023, 4096] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37 + 11) % 255) as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| ((i * 91 + 3) % 255) as i8).collect();
            assert_eq!(dot_i8(&a, &b), scalar(&a, &b), "len {len}");
            let lo = vec![-128i8; len];
            assert_eq!(dot_i8(&lo, &lo), scalar(&lo, &lo));
            let hi = vec![127i8; len];
            assert_eq!(dot_i8(&lo, &hi), scalar(&lo, &hi));
        }
    }

    #[test]
    fn codes_keep_cosines_close_and_clip_outliers() {
        let dims = 384;
        let mut data = ClusteredVectors::new(dims, 20, 1.0, 4);
        let mut rows = Vec::new();
        for _ in 0..500 {
            kernel::push_normalised(&mut rows, &data.sample(), dims).unwrap();
        }
        let mut codes = Codes::fitted(dims, &rows);
        for r in rows.chunks_exact(dims) {
            codes.push(r);
        }
        assert_eq!(codes.rows(), 500);
        let mut worst = 0.0f32;
        for i in 0..100u32 {
            let j = (i * 7 + 3) % 500;
            let exact = kernel::dot(
                &rows[i as usize * dims..][..dims],
                &rows[j as usize * dims..][..dims],
            );
            worst = worst.max((codes.cosine(codes.sim(i, j)) - exact).abs());
        }
        assert!(worst < 0.02, "int8 cosine error {worst}");
        // A component far beyond the fitted range saturates instead of wrapping.
        let mut v = vec![0.0f32; dims];
        v[0] = 1.0;
        v[1] = -1.0;
        let c = codes.encode(&v);
        assert_eq!((c[0], c[1], c[2]), (127, -127, 0));
        assert_eq!(Codes::with_step(4, f32::NAN).step(), DEFAULT_STEP);
        assert_eq!(Codes::fitted(4, &[]).step(), DEFAULT_STEP);
    }
}
