//! Sentence embeddings as an input: this crate never runs a model itself.
//!
//! The engine either implements [`SentenceEmbedder`] over its embedder or
//! embeds the texts a check needs beforehand (for example those returned by
//! [`crate::support::support_texts`]) and hands them over as
//! [`PrecomputedEmbeddings`]. All texts of one check must be embedded the
//! same way (for e5: the same `query: ` role for both sides, since sentence
//! similarity is symmetric).

use std::collections::HashMap;

/// Turns sentences into vectors.
pub trait SentenceEmbedder {
    /// One vector per text, in order; `Err` with a reason when it cannot.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// Vectors computed ahead of time, looked up by exact text.
#[derive(Debug, Clone, Default)]
pub struct PrecomputedEmbeddings {
    vectors: HashMap<String, Vec<f32>>,
}

impl PrecomputedEmbeddings {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Texts paired with their vectors.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, Vec<f32>)>) -> Self {
        PrecomputedEmbeddings {
            vectors: pairs.into_iter().collect(),
        }
    }

    /// Adds one.
    pub fn insert(&mut self, text: impl Into<String>, vector: Vec<f32>) {
        self.vectors.insert(text.into(), vector);
    }

    /// Number of texts.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

impl SentenceEmbedder for PrecomputedEmbeddings {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        texts
            .iter()
            .map(|t| {
                self.vectors.get(*t).cloned().ok_or_else(|| {
                    format!(
                        "no precomputed vector for {:?}",
                        t.chars().take(40).collect::<String>()
                    )
                })
            })
            .collect()
    }
}

/// Cosine similarity; 0 for empty, zero or mismatched vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Embeds `texts` and checks the answer's shape.
pub(crate) fn embed_checked(
    embedder: &dyn SentenceEmbedder,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>, String> {
    let v = embedder.embed(texts)?;
    if v.len() != texts.len() {
        return Err(format!("{} vectors for {} texts", v.len(), texts.len()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_and_lookup() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
        let p = PrecomputedEmbeddings::from_pairs([("a".to_string(), vec![1.0])]);
        assert_eq!(p.embed(&["a"]).unwrap(), vec![vec![1.0]]);
        assert!(p.embed(&["b"]).is_err());
    }
}
