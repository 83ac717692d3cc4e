//! Ordering fused candidates and cutting them by threshold and `top_k`,
//! shared by both rules.

use rag_core::{Contribution, DropReason, Dropped, Fused, FusedHit, FusionParams, PassageId};
use rustc_hash::FxHashMap;

/// Contributions gathered per passage, in the order passages first appeared.
#[derive(Default)]
pub(crate) struct Gathered {
    order: Vec<PassageId>,
    by_id: FxHashMap<PassageId, Vec<Contribution>>,
}

impl Gathered {
    /// Adds one path's contribution to a passage.
    pub(crate) fn add(&mut self, id: PassageId, contribution: Contribution) {
        let order = &mut self.order;
        self.by_id
            .entry(id)
            .or_insert_with(|| {
                order.push(id);
                Vec::new()
            })
            .push(contribution);
    }

    /// Scores (Σ contributions), orders and cuts the candidates. Ties are
    /// broken by the best rank in any path, then by first appearance.
    pub(crate) fn finish(mut self, max_score: f64, params: &FusionParams) -> Fused {
        let mut all: Vec<(usize, FusedHit)> = self
            .order
            .into_iter()
            .enumerate()
            .map(|(first_seen, id)| {
                let contributions = self.by_id.remove(&id).unwrap_or_default();
                let score: f64 = contributions.iter().map(|c| c.rrf).sum();
                let normalized = if max_score > 0.0 {
                    (score / max_score).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                (
                    first_seen,
                    FusedHit {
                        id,
                        rank: 0,
                        score,
                        normalized,
                        contributions,
                    },
                )
            })
            .collect();
        all.sort_by(|(fa, a), (fb, b)| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| best_rank(a).cmp(&best_rank(b)))
                .then_with(|| fa.cmp(fb))
        });

        let mut hits = Vec::new();
        let mut dropped = Vec::new();
        for (i, (_, mut hit)) in all.into_iter().enumerate() {
            hit.rank = i as u32 + 1;
            if hit.normalized < params.min_score {
                dropped.push(Dropped {
                    id: hit.id,
                    score: hit.score,
                    reason: DropReason::Threshold {
                        normalized: hit.normalized,
                        min_score: params.min_score,
                    },
                });
            } else if hits.len() >= params.top_k {
                dropped.push(Dropped {
                    id: hit.id,
                    score: hit.score,
                    reason: DropReason::TopK {
                        rank: hit.rank,
                        top_k: params.top_k,
                    },
                });
            } else {
                hits.push(hit);
            }
        }
        Fused {
            hits,
            dropped,
            max_score,
        }
    }
}

fn best_rank(hit: &FusedHit) -> u32 {
    hit.contributions
        .iter()
        .map(|c| c.rank)
        .min()
        .unwrap_or(u32::MAX)
}
