//! Fusion of any number of ranked lists into one, with explanations.
//!
//! Two rules ([`FusionRule`](rag_core::FusionRule)), both over the same
//! per-path weights and λ split ([`FusionParams::effective_weight`]):
//!
//! - [`rrf`]: weighted reciprocal rank fusion, score(d) = Σ_i w_i / (k + rank_i(d)).
//! - [`convex`]: a convex combination of normalised path scores,
//!   score(d) = Σ_i w_i · n_i(d) (lexical scores over their best, cosine
//!   min-max between the best and the score at rank [`convex::DEPTH`]).
//!
//! Every fused hit keeps, per path, its rank, the path's own score, the
//! effective weight and its contribution; the contributions add up to the
//! fused score. Scores are also reported normalised by the maximum possible
//! value over the paths that returned candidates, so a threshold keeps its
//! meaning when paths or weights change.
//!
//! ```
//! use rag_core::{FusionParams, Hit, PassageId, FaqId, PathKind, RankedList};
//! use rag_fusion::Fusion;
//! use rag_core::Fuser;
//! let id = PassageId::Faq(FaqId::generate());
//! let list = |path| RankedList { path, hits: vec![Hit { id, rank: 1, score: 1.0, matched: vec![] }], notes: vec![] };
//! let fuser = Fusion::new(FusionParams::default());
//! let fused = fuser.fuse(&[list(PathKind::Bm25), list(PathKind::Substring)]);
//! assert_eq!(fused.hits.len(), 1);
//! assert!((fused.hits[0].normalized - 1.0).abs() < 1e-12);
//! ```

pub mod convex;
mod rank;
pub mod rrf;

use rag_core::{Fused, Fuser, FusionParams, FusionRule, PathKind, RankedList};

/// The fuser of a query: the rule and parameters it was resolved with.
#[derive(Debug, Clone)]
pub struct Fusion {
    params: FusionParams,
}

impl Fusion {
    /// A fuser with these parameters (validated by the caller).
    pub fn new(params: FusionParams) -> Self {
        Fusion { params }
    }
}

impl Fuser for Fusion {
    fn fuse(&self, lists: &[RankedList]) -> Fused {
        fuse(lists, &self.params)
    }
}

/// Fuses `lists` with `params` by the rule they name. Ties are broken by the
/// best rank in any path, then by the order in which the passage first
/// appeared, so the output is deterministic.
pub fn fuse(lists: &[RankedList], params: &FusionParams) -> Fused {
    // The convex rule combines lexical and dense evidence; lexical paths
    // alone are fused by their ranks (as lexical mode was tuned).
    let dense = lists
        .iter()
        .any(|l| l.path == PathKind::Dense && !l.hits.is_empty());
    match params.rule {
        FusionRule::Convex if dense => convex::fuse(lists, params),
        _ => rrf::fuse(lists, params),
    }
}

/// The effective weight of each list: paths that returned nothing take no
/// share of the weight.
pub(crate) fn weights(lists: &[RankedList], params: &FusionParams) -> Vec<f64> {
    let running: Vec<PathKind> = lists
        .iter()
        .filter(|l| !l.hits.is_empty())
        .map(|l| l.path)
        .collect();
    lists
        .iter()
        .map(|l| {
            if l.hits.is_empty() {
                0.0
            } else {
                params.effective_weight(l.path, &running)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rag_core::{DropReason, PassageId};
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
            let params = FusionParams { rule: FusionRule::Rrf, k, lexical_interpolation: lambda, top_k, ..FusionParams::default() };
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
        fn permutation_invariant(spec in lists_strategy(), convex in any::<bool>()) {
            let pool = ids(40);
            let lists = build(&spec, &pool);
            let mut reversed = lists.clone();
            reversed.reverse();
            let rule = if convex { FusionRule::Convex } else { FusionRule::Rrf };
            let params = FusionParams { rule, top_k: 100, weights: PathWeights { bm25: 1.0, substring: 1.0, fuzzy: 1.0, synonym: 1.0, fact: 1.0, translated: 1.0, dense: 1.0, second_dense: 1.0 }, ..FusionParams::default() };
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
            let fused = fuse(&lists, &FusionParams { rule: FusionRule::Rrf, top_k: 1000, ..FusionParams::default() });
            // Within one path, a better rank gives a larger contribution.
            for hit in &fused.hits {
                for c in &hit.contributions {
                    let worse = c.weight / (60.0 + c.rank as f64 + 1.0);
                    prop_assert!(c.rrf >= worse);
                }
            }
        }

        #[test]
        fn convex_contributions_add_up_and_are_monotone(spec in lists_strategy(), lambda in proptest::option::of(0.0f64..=1.0), top_k in 1usize..50, step in 0.01f64..5.0) {
            let pool = ids(40);
            let mut lists = build(&spec, &pool);
            // The convex rule runs when the dense path took part.
            lists[0].path = PathKind::Dense;
            prop_assume!(!lists[0].hits.is_empty());
            // Uneven score gaps: scores fall by `step` times the rank.
            for l in &mut lists {
                for h in &mut l.hits {
                    h.score = 100.0 - step * (h.rank as f64).powi(2);
                }
            }
            let params = FusionParams { rule: FusionRule::Convex, lexical_interpolation: lambda, top_k, ..FusionParams::default() };
            let fused = fuse(&lists, &params);
            let max: f64 = fused.max_score;
            for hit in &fused.hits {
                let sum: f64 = hit.contributions.iter().map(|c| c.rrf).sum();
                prop_assert!((sum - hit.score).abs() <= 1e-12 * hit.score.max(1.0));
                for c in &hit.contributions {
                    let n = c.normalized_score.unwrap();
                    prop_assert!((0.0..=1.0).contains(&n));
                    prop_assert!((c.rrf - c.weight * n).abs() <= 1e-12);
                    if c.rank == 1 { prop_assert!(n == 1.0); }
                }
                prop_assert!(hit.normalized >= 0.0 && hit.normalized <= 1.0);
                prop_assert!(hit.score <= max + 1e-12);
            }
            prop_assert!(fused.hits.windows(2).all(|w| w[0].score >= w[1].score));
            // Within one path, a better rank never has a smaller normalised score.
            for l in &lists {
                let n = convex::normalize(l.path, &l.hits);
                prop_assert!(n.windows(2).all(|w| w[0] >= w[1]));
            }
        }
    }

    #[test]
    fn convex_reads_score_gaps_that_rrf_cannot_see() {
        // Path A: p0 far ahead of p1; path B: p1 barely ahead of p0.
        let pool = ids(25);
        let list = |path, scores: Vec<(usize, f64)>| RankedList {
            path,
            hits: scores
                .into_iter()
                .enumerate()
                .map(|(r, (i, s))| Hit {
                    id: pool[i],
                    rank: r as u32 + 1,
                    score: s,
                    matched: vec![],
                })
                .collect(),
            notes: vec![],
        };
        let tail = |from: f64| (2..22).map(move |i| (i, from - i as f64 * 0.01));
        let a = list(
            PathKind::Bm25,
            [(0, 30.0), (1, 10.0)]
                .into_iter()
                .chain(tail(9.0))
                .collect(),
        );
        let b = list(
            PathKind::Dense,
            [(1, 0.900), (0, 0.899)]
                .into_iter()
                .chain(tail(0.85))
                .collect(),
        );
        let params = |rule| FusionParams {
            rule,
            lexical_interpolation: Some(0.5),
            ..FusionParams::default()
        };
        let rrf = fuse(&[a.clone(), b.clone()], &params(FusionRule::Rrf));
        let convex = fuse(&[a, b], &params(FusionRule::Convex));
        // RRF sees a tie broken by first appearance; convex sees p0's lead.
        assert_eq!(convex.hits[0].id, pool[0]);
        assert!(convex.hits[0].score > convex.hits[1].score + 0.1);
        assert!((rrf.hits[0].score - rrf.hits[1].score).abs() < 1e-12);
    }

    #[test]
    fn normalisation_handles_flat_and_short_lists() {
        let pool = ids(3);
        let hits = |scores: &[f64]| -> Vec<Hit> {
            scores
                .iter()
                .enumerate()
                .map(|(r, s)| Hit {
                    id: pool[r],
                    rank: r as u32 + 1,
                    score: *s,
                    matched: vec![],
                })
                .collect()
        };
        let d = PathKind::Dense;
        assert_eq!(convex::normalize(d, &hits(&[5.0])), vec![1.0]);
        assert_eq!(convex::normalize(d, &hits(&[2.0, 2.0])), vec![1.0, 1.0]);
        assert_eq!(
            convex::normalize(d, &hits(&[4.0, 3.0, 2.0])),
            vec![1.0, 0.5, 0.0]
        );
        assert_eq!(
            convex::normalize(PathKind::Bm25, &hits(&[4.0, 3.0, 2.0])),
            vec![1.0, 0.75, 0.5]
        );
        assert!(convex::normalize(d, &[]).is_empty());
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
    fn the_second_embedder_shares_the_dense_side_by_weight() {
        let mut params = FusionParams {
            lexical_interpolation: Some(0.4),
            ..FusionParams::default()
        };
        params.weights.second_dense = 3.0;
        let running = [PathKind::Bm25, PathKind::Dense, PathKind::SecondDense];
        let of = |p| params.effective_weight(p, &running);
        assert!((of(PathKind::Dense) - 0.6 * 0.25).abs() < 1e-12);
        assert!((of(PathKind::SecondDense) - 0.6 * 0.75).abs() < 1e-12);
        assert!((of(PathKind::Bm25) - 0.4).abs() < 1e-12);
        // Not running: dense keeps the whole side, whatever its weight.
        let without = [PathKind::Bm25, PathKind::Dense];
        params.weights.dense = 0.2;
        assert!((params.effective_weight(PathKind::Dense, &without) - 0.6).abs() < 1e-12);
        assert_eq!(
            params.effective_weight(PathKind::SecondDense, &without),
            0.0
        );
        // Normalised as the dense path is: min-max at rank DEPTH.
        let h: Vec<Hit> = ids(3)
            .into_iter()
            .zip([0.9, 0.7, 0.5])
            .enumerate()
            .map(|(r, (id, score))| Hit {
                id,
                rank: r as u32 + 1,
                score,
                matched: vec![],
            })
            .collect();
        assert_eq!(
            convex::normalize(PathKind::SecondDense, &h),
            convex::normalize(PathKind::Dense, &h)
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

    #[test]
    fn a_path_weighted_zero_decides_no_tie() {
        let pool = ids(3);
        let list = |path, members: &[usize]| RankedList {
            path,
            hits: members
                .iter()
                .enumerate()
                .map(|(r, &i)| Hit {
                    id: pool[i],
                    rank: r as u32 + 1,
                    score: 10.0 - r as f64,
                    matched: vec![],
                })
                .collect(),
            notes: vec![],
        };
        let weights = PathWeights {
            bm25: 0.0,
            substring: 1.0,
            ..PathWeights::default()
        };
        for rule in [FusionRule::Rrf, FusionRule::Convex] {
            let params = FusionParams {
                rule,
                weights,
                ..FusionParams::default()
            };
            // BM25 alone, weighted 0: every score is 0 and its order counts
            // for nothing (ids decide), though its ranks are explained.
            let fused = fuse(&[list(PathKind::Bm25, &[2, 1, 0])], &params);
            let order: Vec<PassageId> = fused.hits.iter().map(|h| h.id).collect();
            assert_eq!(order, pool, "{rule:?}");
            assert!(fused.hits.iter().all(|h| h.score == 0.0));
            assert_eq!(fused.hits[0].contributions[0].rank, 3);
            // A weighted path's candidate comes first; the rest stay by id.
            let fused = fuse(
                &[
                    list(PathKind::Bm25, &[2, 1, 0]),
                    list(PathKind::Substring, &[1]),
                ],
                &params,
            );
            let order: Vec<PassageId> = fused.hits.iter().map(|h| h.id).collect();
            assert_eq!(order, vec![pool[1], pool[0], pool[2]], "{rule:?}");
        }
    }
}
