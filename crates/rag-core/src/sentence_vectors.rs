//! [`SentenceVectors`]: the vectors of one passage's sentences, held as
//! int8 codes with a scale per sentence, and their best cosine with a
//! question (max-sim).
//!
//! A passage of several sentences is embedded as a whole and, beside that,
//! sentence by sentence; the dense path scores its best candidates by a mix
//! of the two cosines. Codes take a quarter of the bytes of `f32`s, and on
//! the development set (SciFact train) ranking by int8 sentence vectors
//! scored as by full-precision ones (docs/quality.md).

/// The sentence vectors of one passage.
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceVectors {
    dims: usize,
    /// Per sentence: its unit vector ≈ `scale × codes`.
    scales: Vec<f32>,
    codes: Vec<i8>,
}

/// Bytes before the scales: dims and count, `u32` little-endian each.
const HEADER: usize = 8;

impl SentenceVectors {
    /// Quantises `vectors` (each normalised to unit length first). `None`
    /// when there are none, their lengths differ, or one is zero or not finite.
    pub fn quantise(vectors: &[Vec<f32>]) -> Option<Self> {
        let dims = vectors.first()?.len();
        if dims == 0 {
            return None;
        }
        let mut scales = Vec::with_capacity(vectors.len());
        let mut codes = Vec::with_capacity(vectors.len() * dims);
        for v in vectors {
            if v.len() != dims || !v.iter().all(|x| x.is_finite()) {
                return None;
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let largest = v.iter().fold(0f32, |m, x| m.max(x.abs())) / norm;
            if norm == 0.0 || largest == 0.0 {
                return None;
            }
            let scale = largest / 127.0;
            scales.push(scale);
            codes.extend(
                v.iter()
                    .map(|x| (x / norm / scale).round().clamp(-127.0, 127.0) as i8),
            );
        }
        Some(SentenceVectors {
            dims,
            scales,
            codes,
        })
    }

    /// Sentences held.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// Whether none are held (never true of a decoded or quantised value).
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Dimensions of each vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The best cosine of a sentence with `query`, a unit vector of the
    /// same dimensions (`None` when the dimensions differ).
    pub fn best_cosine(&self, query: &[f32]) -> Option<f32> {
        self.cosines(query)?.into_iter().reduce(f32::max)
    }

    /// The cosine of each vector held with `query`, a unit vector of the
    /// same dimensions, in order (`None` when the dimensions differ).
    pub fn cosines(&self, query: &[f32]) -> Option<Vec<f32>> {
        if query.len() != self.dims {
            return None;
        }
        Some(
            self.codes
                .chunks_exact(self.dims)
                .zip(&self.scales)
                .map(|(codes, scale)| {
                    scale
                        * codes
                            .iter()
                            .zip(query)
                            .map(|(c, q)| f32::from(*c) * q)
                            .sum::<f32>()
                })
                .collect(),
        )
    }

    /// The stored form: dims and count (`u32` LE), the scales (`f32` LE),
    /// then the codes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.scales.len() * 4 + self.codes.len());
        out.extend_from_slice(&(self.dims as u32).to_le_bytes());
        out.extend_from_slice(&(self.scales.len() as u32).to_le_bytes());
        for s in &self.scales {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend(self.codes.iter().map(|c| *c as u8));
        out
    }

    /// Reads [`SentenceVectors::to_bytes`]; `None` for anything else.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let word = |i: usize| -> Option<usize> {
            let b: [u8; 4] = bytes.get(i..i + 4)?.try_into().ok()?;
            Some(u32::from_le_bytes(b) as usize)
        };
        let (dims, n) = (word(0)?, word(4)?);
        let codes_at = n.checked_mul(4)?.checked_add(HEADER)?;
        let total = n.checked_mul(dims)?.checked_add(codes_at)?;
        if dims == 0 || n == 0 || bytes.len() != total {
            return None;
        }
        let scales: Vec<f32> = bytes[HEADER..codes_at]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if !scales.iter().all(|s| s.is_finite() && *s > 0.0) {
            return None;
        }
        let codes = bytes[codes_at..].iter().map(|b| *b as i8).collect();
        Some(SentenceVectors {
            dims,
            scales,
            codes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SentenceVectors;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn the_best_cosine_is_that_of_the_closest_sentence_within_quantisation_error() {
        let a = vec![1.0, 0.0, 0.0, 0.0];
        let b = vec![0.6, 0.8, 0.0, 0.0];
        let c = vec![0.0, 0.0, 3.0, 4.0];
        let s = SentenceVectors::quantise(&[a, b, c]).unwrap();
        assert_eq!(s.len(), 3);
        let q = unit(&[0.0, 1.0, 0.0, 0.1]);
        let exact = [0.0f32, 0.8 / 1.01f32.sqrt(), 0.08 / 1.01f32.sqrt()];
        let best = s.best_cosine(&q).unwrap();
        assert!((best - exact[1]).abs() < 0.01, "{best}");
        assert_eq!(s.best_cosine(&[1.0, 0.0]), None);
    }

    #[test]
    fn bytes_round_trip_and_damaged_bytes_are_refused() {
        let s = SentenceVectors::quantise(&[vec![0.5, -0.25, 1.0], vec![-1.0, 0.1, 0.0]]).unwrap();
        let bytes = s.to_bytes();
        assert_eq!(SentenceVectors::from_bytes(&bytes), Some(s));
        assert_eq!(SentenceVectors::from_bytes(&bytes[..bytes.len() - 1]), None);
        assert_eq!(SentenceVectors::from_bytes(&[]), None);
        let mut huge = bytes.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(SentenceVectors::from_bytes(&huge), None);
        let mut bad_scale = bytes;
        bad_scale[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        assert_eq!(SentenceVectors::from_bytes(&bad_scale), None);
    }

    #[test]
    fn zero_mismatched_or_missing_vectors_are_refused() {
        assert_eq!(SentenceVectors::quantise(&[]), None);
        assert_eq!(SentenceVectors::quantise(&[vec![0.0, 0.0]]), None);
        assert_eq!(
            SentenceVectors::quantise(&[vec![1.0], vec![1.0, 0.0]]),
            None
        );
        assert_eq!(SentenceVectors::quantise(&[vec![f32::NAN, 1.0]]), None);
    }
}
