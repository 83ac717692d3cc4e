//! Convex combination of normalised path scores (the score-aware fusion
//! analysed by Bruch, Gai and Ingber, 2023): score(d) = Σ_i w_i · n_i(d).
//!
//! n_i puts each path's scores on [0, 1] by what they mean. Lexical scores
//! (BM25, key-term coverage, trigram similarity, …) are never negative: they
//! are divided by the path's best score, so a candidate far ahead of the
//! rest of its list takes most of the path's weight and a close race shares
//! it. Cosine similarities of one model sit in a narrow band whose floor
//! depends on the model and the question: they are min-max normalised
//! between the best score (1) and the score at rank [`DEPTH`] (0; lower
//! scores are clipped to 0), so the engine asks the dense path for at least
//! DEPTH candidates under this rule. Unlike RRF, which sees ranks only, the
//! rule reads how confident each path is for this question. A passage
//! missing from a path scores 0 there. The choice among normalisations was
//! made on development sets (docs/quality.md).

use crate::rank::Gathered;
use rag_core::{Contribution, Fused, FusionParams, Hit, PathKind, RankedList};

/// The rank whose dense score is normalised to 0.
pub const DEPTH: usize = 50;

/// The normalised score of each hit of one path's list (in rank order).
pub fn normalize(path: PathKind, hits: &[Hit]) -> Vec<f64> {
    let Some(hi) = hits.iter().map(|h| h.score).reduce(f64::max) else {
        return Vec::new();
    };
    let lo = match path {
        PathKind::Dense | PathKind::SecondDense => hits[hits.len().min(DEPTH) - 1].score,
        _ => 0.0,
    };
    let span = hi - lo;
    hits.iter()
        .map(|h| {
            if span > 0.0 && span.is_finite() {
                ((h.score - lo) / span).clamp(0.0, 1.0)
            } else if h.score >= hi {
                1.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Fuses `lists` by the convex rule. The maximum possible score is Σ w_i
/// over the paths that returned candidates (first in every path).
pub fn fuse(lists: &[RankedList], params: &FusionParams) -> Fused {
    let weights = crate::weights(lists, params);
    let max_score: f64 = weights.iter().sum();
    let mut gathered = Gathered::default();
    for (list, &weight) in lists.iter().zip(&weights) {
        for (hit, n) in list.hits.iter().zip(normalize(list.path, &list.hits)) {
            gathered.add(
                hit.id,
                Contribution {
                    path: list.path,
                    rank: hit.rank,
                    path_score: hit.score,
                    weight,
                    rrf: weight * n,
                    normalized_score: Some(n),
                },
            );
        }
    }
    gathered.finish(max_score, params)
}
