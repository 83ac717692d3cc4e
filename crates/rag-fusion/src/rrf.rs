//! Weighted reciprocal rank fusion: score(d) = Σ_i w_i / (k + rank_i(d)).

use crate::rank::Gathered;
use rag_core::{Contribution, Fused, FusionParams, RankedList};

/// Fuses `lists` by weighted RRF. The maximum possible score is
/// Σ w_i / (k + 1) over the paths that returned candidates.
pub fn fuse(lists: &[RankedList], params: &FusionParams) -> Fused {
    let weights = crate::weights(lists, params);
    let max_score: f64 = weights.iter().map(|w| w / (params.k + 1.0)).sum();
    let mut gathered = Gathered::default();
    for (list, &weight) in lists.iter().zip(&weights) {
        for hit in &list.hits {
            gathered.add(
                hit.id,
                Contribution {
                    path: list.path,
                    rank: hit.rank,
                    path_score: hit.score,
                    weight,
                    rrf: weight / (params.k + hit.rank as f64),
                    normalized_score: None,
                },
            );
        }
    }
    gathered.finish(max_score, params)
}
