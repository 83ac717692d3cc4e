//! BM25 scoring over the index.

use crate::filter::Filter;
use crate::index::{LexicalIndex, FIELDS, GRAMS, WORD_FIELDS};
use rag_core::{AnalyzedQuery, Bm25Params, FieldMode, Hit, PathKind, RankedList, TokenKind};

/// A query term with a weight (1 for the query's own terms, less for
/// expansions); `gram` terms are Chinese character bigrams, scored in the
/// bigram field.
#[derive(Debug, Clone)]
pub(crate) struct WeightedTerm {
    pub id: u32,
    pub weight: f32,
    pub gram: bool,
}

/// Lucene's BM25 idf, always positive.
#[inline]
pub fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

#[inline]
fn saturate(tf: f32, len: f32, avg: f32, k1: f32, b: f32) -> f32 {
    tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len / avg))
}

impl LexicalIndex {
    /// Scores every passage containing at least one term; returns the best `k`
    /// that pass the filter as (ordinal, score), best first, ties by ordinal.
    pub(crate) fn score_terms(
        &self,
        terms: &[WeightedTerm],
        params: &Bm25Params,
        filter: &Filter,
        k: usize,
    ) -> Vec<(u32, f64)> {
        let n = self.text_count as f32;
        let mut acc = vec![0f32; self.text_count as usize];
        let mut touched: Vec<u32> = Vec::new();
        let mut add = |ord: u32, v: f32| {
            let slot = &mut acc[ord as usize];
            if *slot == 0.0 && v > 0.0 {
                touched.push(ord);
            }
            *slot += v;
        };
        for wt in terms {
            let term = &self.terms[wt.id as usize];
            if wt.gram {
                if params.ngram_weight <= 0.0 || term.df[GRAMS] == 0 {
                    continue;
                }
                let w = wt.weight * params.ngram_weight * idf(n, term.df[GRAMS] as f32);
                for p in term.postings.iter().filter(|p| p.tf[GRAMS] > 0) {
                    let len = self.lengths[p.ord as usize][GRAMS] as f32;
                    add(
                        p.ord,
                        w * saturate(
                            p.tf[GRAMS] as f32,
                            len,
                            self.avg_len[GRAMS],
                            params.k1,
                            params.b,
                        ),
                    );
                }
                continue;
            }
            match params.fields {
                FieldMode::Flat => {
                    if term.word_df == 0 {
                        continue;
                    }
                    let w = wt.weight * idf(n, term.word_df as f32);
                    let avg = self.avg_len[FIELDS];
                    for p in &term.postings {
                        let tf: f32 = p.tf[..WORD_FIELDS].iter().map(|t| *t as f32).sum();
                        if tf == 0.0 {
                            continue;
                        }
                        let len: u32 = self.lengths[p.ord as usize][..WORD_FIELDS].iter().sum();
                        add(
                            p.ord,
                            w * saturate(tf, len as f32, avg, params.k1, params.b),
                        );
                    }
                }
                FieldMode::MultiField { title, body, tags } => {
                    let fw = [title, body, tags];
                    let idfs: [f32; WORD_FIELDS] =
                        std::array::from_fn(|f| idf(n, term.df[f] as f32));
                    for p in &term.postings {
                        let len = &self.lengths[p.ord as usize];
                        let mut s = 0.0;
                        for f in 0..WORD_FIELDS {
                            if p.tf[f] > 0 && fw[f] > 0.0 {
                                s += fw[f]
                                    * idfs[f]
                                    * saturate(
                                        p.tf[f] as f32,
                                        len[f] as f32,
                                        self.avg_len[f],
                                        params.k1,
                                        params.b,
                                    );
                            }
                        }
                        add(p.ord, wt.weight * s);
                    }
                }
            }
        }
        let mut scored: Vec<(u32, f64)> = touched
            .into_iter()
            .filter(|o| acc[*o as usize] > 0.0 && filter.allows(&self.passages[*o as usize]))
            .map(|o| (o, acc[o as usize] as f64))
            .collect();
        top_k(&mut scored, k);
        scored
    }

    /// Turns scored ordinals into a ranked list, recording which of `terms` each hit contains.
    pub(crate) fn ranked(
        &self,
        path: PathKind,
        scored: Vec<(u32, f64)>,
        terms: &[WeightedTerm],
        notes: Vec<String>,
    ) -> RankedList {
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, (ord, score))| {
                let mut matched: Vec<String> = terms
                    .iter()
                    .filter(|t| {
                        self.terms[t.id as usize]
                            .postings
                            .binary_search_by_key(&ord, |p| p.ord)
                            .is_ok()
                    })
                    .map(|t| self.terms[t.id as usize].text.to_string())
                    .collect();
                matched.dedup();
                Hit {
                    id: self.passages[ord as usize].id,
                    rank: i as u32 + 1,
                    score,
                    matched,
                }
            })
            .collect();
        RankedList { path, hits, notes }
    }

    /// The query's own terms that exist in the vocabulary, with multiplicity.
    pub(crate) fn query_terms(&self, q: &AnalyzedQuery) -> Vec<WeightedTerm> {
        q.tokens
            .iter()
            .filter_map(|t| {
                self.term_id(&t.text).map(|id| WeightedTerm {
                    id,
                    weight: 1.0,
                    gram: t.kind == TokenKind::HanBigram,
                })
            })
            .collect()
    }

    /// BM25 with OR semantics: any query term may match.
    pub fn bm25(
        &self,
        q: &AnalyzedQuery,
        k: usize,
        params: &Bm25Params,
        filter: &Filter,
    ) -> RankedList {
        let terms = self.query_terms(q);
        let mut notes = Vec::new();
        let unknown: Vec<&str> = q
            .tokens
            .iter()
            .filter(|t| self.visible_term_id(&t.text, filter).is_none())
            .map(|t| t.text.as_str())
            .collect();
        if !unknown.is_empty() {
            notes.push(format!("not in the vocabulary: {}", unknown.join(", ")));
        }
        let scored = self.score_terms(&terms, params, filter, k);
        self.ranked(PathKind::Bm25, scored, &terms, notes)
    }
}

/// Keeps the best `k` by score (ties: lower ordinal first), sorted.
pub(crate) fn top_k(scored: &mut Vec<(u32, f64)>, k: usize) {
    let cmp = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > k && k > 0 {
        scored.select_nth_unstable_by(k - 1, cmp);
        scored.truncate(k);
    }
    scored.sort_unstable_by(cmp);
    scored.truncate(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn scores_are_finite_and_rise_with_tf(tf in 1u16..1000, len in 1u32..10_000, avg in 1.0f32..5000.0, k1 in 0.0f32..5.0, b in 0.0f32..=1.0) {
            let len = len.max(tf as u32);
            let s1 = saturate(tf as f32, len as f32, avg, k1, b);
            let s2 = saturate(tf as f32 + 1.0, len as f32, avg, k1, b);
            prop_assert!(s1.is_finite() && s1 >= 0.0);
            // Monotone in exact arithmetic; near saturation (k1 → 0) both round
            // to k1 + 1 within a few ulps.
            prop_assert!(s2 >= s1 * (1.0 - 4.0 * f32::EPSILON), "{s1} {s2}");
        }

        #[test]
        fn idf_positive_and_decreasing(n in 1u32..1_000_000, df in 1u32..1_000_000) {
            let df = df.min(n);
            let a = idf(n as f32, df as f32);
            prop_assert!(a > 0.0 && a.is_finite());
            if df < n {
                prop_assert!(idf(n as f32, (df + 1) as f32) <= a);
            }
        }
    }

    #[test]
    fn top_k_keeps_best() {
        let mut v = vec![(0, 1.0), (1, 3.0), (2, 2.0), (3, 3.0)];
        top_k(&mut v, 2);
        assert_eq!(v, vec![(1, 3.0), (3, 3.0)]);
    }
}
