//! Ordering fused candidates and cutting them by threshold and `top_k`,
//! shared by both rules.

use rag_core::{Contribution, DropReason, Dropped, Fused, FusedHit, FusionParams, PassageId};
use rustc_hash::FxHashMap;

/// Contributions gathered per passage, in the order passages first appeared.
#[derive(Default)]
pub(crate) struct Gathered {
    order: Vec<PassageId>,
    by_id: FxHashMap<PassageId, Vec<Contribution>>,
    /// When each passage first appeared in a path of positive weight.
    first_weighted: FxHashMap<PassageId, usize>,
    weighted_adds: usize,
}

impl Gathered {
    /// Adds one path's contribution to a passage.
    pub(crate) fn add(&mut self, id: PassageId, contribution: Contribution) {
        if contribution.weight > 0.0 {
            self.first_weighted.entry(id).or_insert(self.weighted_adds);
            self.weighted_adds += 1;
        }
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
    /// broken by the best rank in any path of positive weight, then by first
    /// appearance in such a path, then by id: a path weighted 0 is listed in
    /// the explanations but decides nothing, not even a tie.
    pub(crate) fn finish(mut self, max_score: f64, params: &FusionParams) -> Fused {
        let first_weighted = std::mem::take(&mut self.first_weighted);
        let mut all: Vec<(usize, FusedHit)> = self
            .order
            .into_iter()
            .map(|id| {
                let first_seen = first_weighted.get(&id).copied().unwrap_or(usize::MAX);
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
                .then_with(|| a.id.cmp(&b.id))
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
        .filter(|c| c.weight > 0.0)
        .map(|c| c.rank)
        .min()
        .unwrap_or(u32::MAX)
}
