//! BM25 scoring over the index.

use crate::filter::Filter;
use crate::index::{LexicalIndex, Ref, FIELDS, GRAMS, WORD_FIELDS};
use rag_core::{AnalyzedQuery, Bm25Params, FieldMode, Hit, PathKind, RankedList, TokenKind};

/// A query term with a weight (1 for the query's own terms, less for
/// expansions); `gram` terms are Chinese character bigrams, scored in the
/// bigram field.
#[derive(Debug, Clone)]
pub(crate) struct WeightedTerm {
    pub text: Box<str>,
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
    /// Scores every live passage containing at least one term; returns the
    /// best `k` that pass the filter, best first, ties by passage id.
    /// Statistics (passages, document frequencies, average lengths) are
    /// those of the live passages, so the scores do not depend on how the
    /// passages are spread over segments.
    pub(crate) fn score_terms(
        &self,
        terms: &[WeightedTerm],
        params: &Bm25Params,
        filter: &Filter,
        k: usize,
    ) -> Vec<(Ref, f64)> {
        let n = self.text_count as f32;
        let avg_len = self.avg_len();
        let mut offsets = Vec::with_capacity(self.segments.len());
        let mut total = 0usize;
        for seg in &self.segments {
            offsets.push(total);
            total += seg.len();
        }
        let mut acc = vec![0f32; total];
        let mut touched: Vec<Ref> = Vec::new();
        for wt in terms {
            let Some(stats) = self.term_stats(&wt.text) else {
                continue;
            };
            for (si, seg) in self.segments.iter().enumerate() {
                let Some(term) = seg.term(&wt.text) else {
                    continue;
                };
                let dead = &self.dead[si];
                let base = offsets[si];
                let mut add = |ord: u32, v: f32| {
                    let slot = &mut acc[base + ord as usize];
                    if *slot == 0.0 && v > 0.0 {
                        touched.push(Ref {
                            seg: si as u32,
                            ord,
                        });
                    }
                    *slot += v;
                };
                let live = seg.postings(term).filter(|p| !dead.contains(p.ord));
                if wt.gram {
                    if params.ngram_weight <= 0.0 || stats.df[GRAMS] == 0 {
                        continue;
                    }
                    let w = wt.weight * params.ngram_weight * idf(n, stats.df[GRAMS] as f32);
                    for p in live.filter(|p| p.tf[GRAMS] > 0) {
                        let len = seg.lengths[p.ord as usize][GRAMS] as f32;
                        add(
                            p.ord,
                            w * saturate(
                                p.tf[GRAMS] as f32,
                                len,
                                avg_len[GRAMS],
                                params.k1,
                                params.b,
                            ),
                        );
                    }
                    continue;
                }
                match params.fields {
                    FieldMode::Flat => {
                        if stats.word_df == 0 {
                            continue;
                        }
                        let w = wt.weight * idf(n, stats.word_df as f32);
                        let avg = avg_len[FIELDS];
                        for p in live {
                            let tf: f32 = p.tf[..WORD_FIELDS].iter().map(|t| *t as f32).sum();
                            if tf == 0.0 {
                                continue;
                            }
                            let len: u32 = seg.lengths[p.ord as usize][..WORD_FIELDS].iter().sum();
                            add(
                                p.ord,
                                w * saturate(tf, len as f32, avg, params.k1, params.b),
                            );
                        }
                    }
                    FieldMode::MultiField { title, body, tags } => {
                        let fw = [title, body, tags];
                        let idfs: [f32; WORD_FIELDS] =
                            std::array::from_fn(|f| idf(n, stats.df[f] as f32));
                        for p in live {
                            let len = &seg.lengths[p.ord as usize];
                            let mut s = 0.0;
                            for f in 0..WORD_FIELDS {
                                if p.tf[f] > 0 && fw[f] > 0.0 {
                                    s += fw[f]
                                        * idfs[f]
                                        * saturate(
                                            p.tf[f] as f32,
                                            len[f] as f32,
                                            avg_len[f],
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
        }
        let mut scored: Vec<(Ref, f64)> = touched
            .into_iter()
            .map(|r| (r, acc[offsets[r.seg as usize] + r.ord as usize]))
            .filter(|(r, v)| *v > 0.0 && filter.allows(self.meta_at(*r)))
            .map(|(r, v)| (r, v as f64))
            .collect();
        top_k(&mut scored, k, |r| self.meta_at(*r).id);
        scored
    }

    /// Turns scored passages into a ranked list, recording which of `terms` each hit contains.
    pub(crate) fn ranked(
        &self,
        path: PathKind,
        scored: Vec<(Ref, f64)>,
        terms: &[WeightedTerm],
        notes: Vec<String>,
    ) -> RankedList {
        // Which terms each hit contains: one walk of each term's postings
        // per segment, against the hits of that segment in ordinal order.
        let mut contains = vec![vec![false; terms.len()]; scored.len()];
        for (si, seg) in self.segments.iter().enumerate() {
            let mut here: Vec<(u32, usize)> = scored
                .iter()
                .enumerate()
                .filter(|(_, (r, _))| r.seg as usize == si)
                .map(|(i, (r, _))| (r.ord, i))
                .collect();
            if here.is_empty() {
                continue;
            }
            here.sort_unstable();
            for (ti, t) in terms.iter().enumerate() {
                let Some(term) = seg.term(&t.text) else {
                    continue;
                };
                let mut postings = seg.postings(term).peekable();
                for &(ord, hit) in &here {
                    while postings.next_if(|p| p.ord < ord).is_some() {}
                    match postings.peek() {
                        Some(p) if p.ord == ord => contains[hit][ti] = true,
                        Some(_) => {}
                        None => break,
                    }
                }
            }
        }
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, (r, score))| {
                let seg = &self.segments[r.seg as usize];
                let mut matched: Vec<String> = terms
                    .iter()
                    .zip(&contains[i])
                    .filter(|(_, c)| **c)
                    .map(|(t, _)| t.text.to_string())
                    .collect();
                matched.dedup();
                Hit {
                    id: seg.passages[r.ord as usize].id,
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
            .filter(|t| self.segments.iter().any(|s| s.term(&t.text).is_some()))
            .map(|t| WeightedTerm {
                text: t.text.as_str().into(),
                weight: 1.0,
                gram: t.kind == TokenKind::HanBigram,
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
            .filter(|t| !self.term_visible(&t.text, filter))
            .map(|t| t.text.as_str())
            .collect();
        if !unknown.is_empty() {
            notes.push(format!("not in the vocabulary: {}", unknown.join(", ")));
        }
        let scored = self.score_terms(&terms, params, filter, k);
        self.ranked(PathKind::Bm25, scored, &terms, notes)
    }
}

/// Keeps the best `k` by score (ties: the smaller key first), sorted. The
/// key is the passage id, so the order does not depend on write history.
pub(crate) fn top_k<T, K: Ord>(scored: &mut Vec<(T, f64)>, k: usize, key: impl Fn(&T) -> K) {
    let cmp =
        |a: &(T, f64), b: &(T, f64)| b.1.total_cmp(&a.1).then_with(|| key(&a.0).cmp(&key(&b.0)));
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
        top_k(&mut v, 2, |o| *o);
        assert_eq!(v, vec![(1, 3.0), (3, 3.0)]);
    }
}
