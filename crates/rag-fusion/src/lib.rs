//! Weighted reciprocal rank fusion (RRF) over any number of ranked lists.
//!
//! score(d) = Σ_i w_i / (k + rank_i(d)). Every fused hit keeps, per path, its
//! rank, the path's own score, the effective weight and the RRF contribution;
//! the contributions add up to the fused score. Scores are also reported
//! normalised by the maximum possible value Σ w_i / (k + 1) over the paths
//! that returned candidates, so a threshold keeps its meaning when paths or
//! weights change.
//!
//! ```
//! use rag_core::{FusionParams, Hit, PassageId, FaqId, PathKind, RankedList};
//! use rag_fusion::RrfFuser;
//! use rag_core::Fuser;
//! let id = PassageId::Faq(FaqId::generate());
//! let list = |path| RankedList { path, hits: vec![Hit { id, rank: 1, score: 1.0, matched: vec![] }], notes: vec![] };
//! let fuser = RrfFuser::new(FusionParams::default());
//! let fused = fuser.fuse(&[list(PathKind::Bm25), list(PathKind::Substring)]);
//! assert_eq!(fused.hits.len(), 1);
//! assert!((fused.hits[0].normalized - 1.0).abs() < 1e-12);
//! ```

use rag_core::{
    Contribution, DropReason, Dropped, Fused, FusedHit, Fuser, FusionParams, PassageId, PathKind,
    RankedList,
};
use rustc_hash::FxHashMap;

/// The RRF fuser.
#[derive(Debug, Clone)]
pub struct RrfFuser {
    params: FusionParams,
}

impl RrfFuser {
    /// A fuser with these parameters (validated by the caller).
    pub fn new(params: FusionParams) -> Self {
        RrfFuser { params }
    }
}

impl Fuser for RrfFuser {
    fn fuse(&self, lists: &[RankedList]) -> Fused {
        fuse(lists, &self.params)
    }
}

/// Fuses `lists` with `params`. Ties are broken by the best rank in any path,
/// then by the order in which the passage first appeared, so the output is
/// deterministic.
pub fn fuse(lists: &[RankedList], params: &FusionParams) -> Fused {
    // Paths that returned nothing take no share of the weight.
    let running: Vec<PathKind> = lists
        .iter()
        .filter(|l| !l.hits.is_empty())
        .map(|l| l.path)
        .collect();
    let weights: Vec<f64> = lists
        .iter()
        .map(|l| {
            if l.hits.is_empty() {
                0.0
            } else {
                params.effective_weight(l.path, &running)
            }
        })
        .collect();
    let max_score: f64 = weights.iter().map(|w| w / (params.k + 1.0)).sum();

    let mut order: Vec<PassageId> = Vec::new();
    let mut by_id: FxHashMap<PassageId, Vec<Contribution>> = FxHashMap::default();
    for (list, &weight) in lists.iter().zip(&weights) {
        for hit in &list.hits {
            let contribution = Contribution {
                path: list.path,
                rank: hit.rank,
                path_score: hit.score,
                weight,
                rrf: weight / (params.k + hit.rank as f64),
            };
            by_id
                .entry(hit.id)
                .or_insert_with(|| {
                    order.push(hit.id);
                    Vec::new()
                })
                .push(contribution);
        }
    }

    let mut all: Vec<(usize, FusedHit)> = order
        .into_iter()
        .enumerate()
        .map(|(first_seen, id)| {
            let contributions = by_id.remove(&id).unwrap_or_default();
            let score: f64 = contributions.iter().map(|c| c.rrf).sum();
            let normalized = if max_score > 0.0 {
                score / max_score
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

fn best_rank(hit: &FusedHit) -> u32 {
    hit.contributions
        .iter()
        .map(|c| c.rank)
        .min()
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rag_core::{FaqId, Hit, PathWeights};

    fn ids(n: usize) -> Vec<PassageId> {
        (0..n)
            .map(|i| PassageId::Faq(FaqId(uuid::Uuid::from_u128(i as u128 + 1))))
            .collect()
    }

    fn lists_strategy() -> impl Strategy<Value = Vec<(usize, Vec<usize>)>> {
        // Up to five paths, each a permutation prefix of up to 30 of 40 ids.
        proptest::collection::vec(
            (
                0usize..5,
                proptest::sample::subsequence((0..40).collect::<Vec<_>>(), 0..30).prop_shuffle(),
            ),
            1..5,
        )
    }

    fn build(spec: &[(usize, Vec<usize>)], pool: &[PassageId]) -> Vec<RankedList> {
        let mut used = Vec::new();
        spec.iter()
            .filter_map(|(p, members)| {
                let path = PathKind::LEXICAL[*p];
                if used.contains(&path) {
                    return None;
                }
                used.push(path);
                Some(RankedList {
                    path,
                    hits: members
                        .iter()
                        .enumerate()
                        .map(|(r, m)| Hit {
                            id: pool[*m],
                            rank: r as u32 + 1,
                            score: 100.0 - r as f64,
                            matched: vec![],
                        })
                        .collect(),
                    notes: vec![],
                })
            })
            .collect()
    }

    proptest! {
        #[test]
        fn contributions_add_up(spec in lists_strategy(), k in 0.0f64..200.0, lambda in proptest::option::of(0.0f64..=1.0), top_k in 1usize..50) {
            let pool = ids(40);
            let lists = build(&spec, &pool);
            let params = FusionParams { k, lexical_interpolation: lambda, top_k, ..FusionParams::default() };
            let fused = fuse(&lists, &params);
            for hit in &fused.hits {
                let sum: f64 = hit.contributions.iter().map(|c| c.rrf).sum();
                prop_assert!((sum - hit.score).abs() <= 1e-12 * hit.score.max(1.0));
                for c in &hit.contributions {
                    prop_assert!((c.rrf - c.weight / (k + c.rank as f64)).abs() <= 1e-12);
                }
                prop_assert!(hit.normalized >= 0.0 && hit.normalized <= 1.0 + 1e-9);
            }
            // Kept and dropped together are every distinct candidate, each once.
            let mut seen: Vec<PassageId> = fused.hits.iter().map(|h| h.id).chain(fused.dropped.iter().map(|d| d.id)).collect();
            let total = seen.len();
            seen.sort();
            seen.dedup();
            prop_assert_eq!(seen.len(), total);
            prop_assert!(fused.hits.len() <= top_k);
            // Fused order is by score.
            prop_assert!(fused.hits.windows(2).all(|w| w[0].score >= w[1].score));
        }

        #[test]
        fn permutation_invariant(spec in lists_strategy()) {
            let pool = ids(40);
            let lists = build(&spec, &pool);
            let mut reversed = lists.clone();
            reversed.reverse();
            let params = FusionParams { top_k: 100, weights: PathWeights { bm25: 1.0, substring: 1.0, fuzzy: 1.0, synonym: 1.0, fact: 1.0, dense: 1.0 }, ..FusionParams::default() };
            let a = fuse(&lists, &params);
            let b = fuse(&reversed, &params);
            let score_of = |f: &Fused, id: PassageId| f.hits.iter().find(|h| h.id == id).map(|h| h.score);
            for h in &a.hits {
                let other = score_of(&b, h.id).unwrap();
                prop_assert!((other - h.score).abs() <= 1e-12);
            }
        }

        #[test]
        fn better_rank_never_scores_lower(spec in lists_strategy()) {
            let pool = ids(40);
            let lists = build(&spec, &pool);
            let fused = fuse(&lists, &FusionParams { top_k: 1000, ..FusionParams::default() });
            // Within one path, a better rank gives a larger contribution.
            for hit in &fused.hits {
                for c in &hit.contributions {
                    let worse = c.weight / (60.0 + c.rank as f64 + 1.0);
                    prop_assert!(c.rrf >= worse);
                }
            }
        }
    }

    #[test]
    fn interpolation_splits_weight() {
        let params = FusionParams {
            lexical_interpolation: Some(0.25),
            ..FusionParams::default()
        };
        let running = [PathKind::Bm25, PathKind::Substring, PathKind::Dense];
        let w = params.weights;
        let lex_total = w.bm25 + w.substring;
        assert!((params.effective_weight(PathKind::Dense, &running) - 0.75).abs() < 1e-12);
        assert!(
            (params.effective_weight(PathKind::Bm25, &running) - 0.25 * w.bm25 / lex_total).abs()
                < 1e-12
        );
    }

    #[test]
    fn drops_are_explained() {
        let pool = ids(3);
        let list = RankedList {
            path: PathKind::Bm25,
            hits: pool
                .iter()
                .enumerate()
                .map(|(r, id)| Hit {
                    id: *id,
                    rank: r as u32 + 1,
                    score: 1.0,
                    matched: vec![],
                })
                .collect(),
            notes: vec![],
        };
        let fused = fuse(
            &[list],
            &FusionParams {
                top_k: 2,
                ..FusionParams::default()
            },
        );
        assert_eq!(fused.hits.len(), 2);
        assert_eq!(fused.dropped.len(), 1);
        assert_eq!(
            fused.dropped[0].reason,
            DropReason::TopK { rank: 3, top_k: 2 }
        );
    }
}
