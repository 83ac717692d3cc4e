//! Top-k BM25 that skips what cannot reach the top k: MaxScore (Turtle
//! and Flood, 1995) over the segments' posting lists, with the block
//! bounds of `skip.rs` (as block-max indexes refine it).
//!
//! Passages are visited in ordinal order, one segment after another. Each
//! term has an upper bound of what it can add to any passage of the
//! segment. Sorted by that bound, the terms whose bounds together stay
//! below the score a passage needs to enter the top k (the k-th best so
//! far) are "non-essential": a passage holding none of the other terms
//! cannot enter, so only the other terms' lists propose candidates, and the
//! non-essential lists are only sought to each candidate, jumping over
//! whole blocks. Before a candidate is scored, the bounds of the blocks
//! holding it in every list are added up: when they fall short, every
//! passage up to the end of the shortest of those blocks is skipped. A
//! candidate is dropped as soon as what it has plus the bounds of the
//! blocks holding it in the lists not read yet falls short.
//!
//! The result equals scoring every posting: a candidate that is kept is
//! scored by adding its terms' scores in the query's term order, as the
//! exhaustive scorer does, so the sums are the same floating-point numbers;
//! bounds are compared with a margin for their own rounding; ties are
//! broken by passage id, so a passage that could tie the k-th is never
//! dropped.

use crate::bm25::{top_k, Scorer, WeightedTerm};
use crate::filter::Filter;
use crate::index::{LexicalIndex, Ref};
use crate::skip::Cursor;
use rag_core::PassageId;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Bounds are compared after this relative margin, so that their rounding
/// (they are summed in another order than scores are) never drops a
/// passage that belongs in the top k.
const SLACK: f32 = 1.0 + 1e-4;

/// A passage in the top k so far.
#[derive(Debug, Clone, Copy)]
struct Kept {
    score: f32,
    id: PassageId,
    r: Ref,
}

// Ordered worst first: the heap's top is the passage to drop next.
impl Ord for Kept {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Kept {}

/// The top k so far.
struct TopK {
    heap: BinaryHeap<Kept>,
    k: usize,
}

impl TopK {
    /// What a passage must reach to be considered: 0 until k are kept (a
    /// score must be positive), then the k-th score.
    fn threshold(&self) -> f32 {
        if self.heap.len() < self.k {
            0.0
        } else {
            self.heap.peek().map_or(0.0, |w| w.score)
        }
    }

    /// Whether a passage scoring at most `bound` cannot enter.
    fn out_of_reach(&self, bound: f32) -> bool {
        self.heap.len() >= self.k && bound * SLACK < self.threshold()
    }

    /// Whether `score` may enter, for some id (a tie with the k-th is
    /// settled by id: [`TopK::enters`]); the passage's record, a read from
    /// anywhere in memory, is fetched only then.
    fn may_enter(&self, score: f32) -> bool {
        score > 0.0
            && (self.heap.len() < self.k || self.heap.peek().is_none_or(|w| score >= w.score))
    }

    /// Whether `score` for `id` would enter.
    fn enters(&self, score: f32, id: PassageId) -> bool {
        if score <= 0.0 {
            return false;
        }
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.k => {
                score > worst.score || (score == worst.score && id < worst.id)
            }
            _ => true,
        }
    }

    fn push(&mut self, kept: Kept) {
        self.heap.push(kept);
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }
}

/// One term's list in one segment.
struct List<'a> {
    /// The term's place in the query (the order its score is added in).
    term: usize,
    /// Whether the term may propose a passage (see [`WeightedTerm`]).
    retrieves: bool,
    cursor: Cursor<'a>,
    scorer: Scorer,
    /// The most it adds to any passage of the segment.
    bound: f32,
    /// The last block bound asked for: its last ordinal and the bound.
    block: Option<(u32, f32)>,
}

impl List<'_> {
    /// The most the list adds to a passage from `ord` to the returned
    /// ordinal (`None`: to the end), by the block holding its first posting
    /// at or past `ord`; `ord` must not decrease between calls.
    fn block_bound(&mut self, ord: u32) -> (f32, Option<u32>) {
        if !self.cursor.has_entries() {
            return (self.bound, None);
        }
        if let Some((last, bound)) = self.block.filter(|(last, _)| *last >= ord) {
            return (bound, Some(last));
        }
        match self.cursor.block_at(ord) {
            Some(e) => {
                let bound = self.scorer.bound(&e).min(self.bound);
                self.block = Some((e.last, bound));
                (bound, Some(e.last))
            }
            // No posting at or past `ord`.
            None => (0.0, None),
        }
    }
}

impl LexicalIndex {
    /// [`LexicalIndex::score_terms`] with pruning; `scorers` are the terms'
    /// (all prunable).
    pub(crate) fn score_pruned(
        &self,
        terms: &[WeightedTerm],
        scorers: &[Option<Scorer>],
        filter: &Filter,
        k: usize,
    ) -> Vec<(Ref, f64)> {
        if k == 0 {
            return Vec::new();
        }
        let mut top = TopK {
            heap: BinaryHeap::with_capacity(k + 1),
            k,
        };
        // Per candidate: each term's score, added in term order at the end.
        let mut scores: Vec<Option<f32>> = vec![None; terms.len()];
        for (si, seg) in self.segments.iter().enumerate() {
            let dead = &self.dead[si];
            let mut lists: Vec<List<'_>> = Vec::new();
            for (i, (wt, scorer)) in terms.iter().zip(scorers).enumerate() {
                let (Some(scorer), Some(term)) = (scorer, seg.term(&wt.text)) else {
                    continue;
                };
                let cursor = seg.cursor(term);
                let bound = if cursor.entries().next().is_some() {
                    cursor
                        .entries()
                        .map(|e| scorer.bound(&e))
                        .fold(0.0, f32::max)
                } else {
                    // One block: its exact maximum.
                    let mut c = cursor.clone();
                    let mut best = 0f32;
                    while let Some(p) = c.current() {
                        if let Some(v) = scorer.score(&p.tf, &seg.lengths, p.ord as usize) {
                            best = best.max(v);
                        }
                        c.step();
                    }
                    best
                };
                lists.push(List {
                    term: i,
                    retrieves: wt.retrieves,
                    cursor,
                    scorer: *scorer,
                    bound,
                    block: None,
                });
            }
            // The lists of terms that do not retrieve (stop words) first,
            // as they are never essential, then ascending bounds: the
            // non-essential lists are a prefix.
            lists.sort_by(|a, b| {
                a.retrieves
                    .cmp(&b.retrieves)
                    .then(a.bound.total_cmp(&b.bound))
                    .then(a.term.cmp(&b.term))
            });
            let scoring_only = lists.iter().take_while(|l| !l.retrieves).count();
            let mut prefix = Vec::with_capacity(lists.len());
            let mut sum = 0f32;
            for l in &lists {
                sum += l.bound;
                prefix.push(sum);
            }
            let mut block = vec![0f32; lists.len()];
            // The last range of ordinals whose blocks were added up.
            let mut range: Option<(u32, f32)> = None;
            loop {
                // Lists [0, first) cannot lift a passage into the top k
                // on their own.
                let first = if top.heap.len() < k {
                    0
                } else {
                    prefix.iter().take_while(|b| top.out_of_reach(**b)).count()
                }
                .max(scoring_only);
                if first == lists.len() {
                    break;
                }
                let ord = lists[first..]
                    .iter()
                    .map(|l| l.cursor.ord())
                    .min()
                    .unwrap_or(u32::MAX);
                if ord == u32::MAX {
                    break;
                }
                // What any passage from `ord` to `upto` can score, by the
                // blocks holding that range in every list: when out of
                // reach, the whole range is skipped. The same blocks hold
                // every ordinal of the range, so the sum is kept until a
                // candidate lies past it.
                let (upto, reach) = match range {
                    Some((upto, reach)) if ord <= upto => (upto, reach),
                    _ => {
                        let mut upto = u32::MAX;
                        let mut reach = 0f32;
                        for l in lists.iter_mut() {
                            let (bound, last) = l.block_bound(ord);
                            reach += bound;
                            if let Some(last) = last {
                                upto = upto.min(last);
                            }
                        }
                        range = Some((upto, reach));
                        (upto, reach)
                    }
                };
                if top.out_of_reach(reach) {
                    if upto == u32::MAX {
                        break;
                    }
                    for l in &mut lists[first..] {
                        l.cursor.seek(upto.saturating_add(1));
                    }
                    #[cfg(test)]
                    tests::BLOCK_SKIPS.with(|n| n.set(n.get() + 1));
                    continue;
                }
                if !dead.contains(ord) {
                    let mut have = 0f32;
                    for l in &lists[first..] {
                        if let Some(p) = l.cursor.current().filter(|p| p.ord == ord) {
                            if let Some(v) = l.scorer.score(&p.tf, &seg.lengths, ord as usize) {
                                scores[l.term] = Some(v);
                                have += v;
                            }
                        }
                    }
                    // The blocks holding `ord` in the other lists bound
                    // what they can add.
                    let mut rest = 0f32;
                    for (b, l) in block.iter_mut().zip(&mut lists[..first]) {
                        *b = l.block_bound(ord).0;
                        rest += *b;
                    }
                    let mut reachable = !top.out_of_reach(have + rest);
                    for i in (0..first).rev() {
                        if !reachable {
                            break;
                        }
                        rest -= block[i];
                        let l = &mut lists[i];
                        l.cursor.seek(ord);
                        if let Some(p) = l.cursor.current().filter(|p| p.ord == ord) {
                            if let Some(v) = l.scorer.score(&p.tf, &seg.lengths, ord as usize) {
                                scores[l.term] = Some(v);
                                have += v;
                            }
                        }
                        reachable = !top.out_of_reach(have + rest.max(0.0));
                    }
                    if reachable {
                        let score = scores.iter().flatten().fold(0f32, |s, v| s + v);
                        if top.may_enter(score) {
                            let r = Ref {
                                seg: si as u32,
                                ord,
                            };
                            let meta = self.meta_at(r);
                            if top.enters(score, meta.id) && self.admits(filter, r) {
                                top.push(Kept {
                                    score,
                                    id: meta.id,
                                    r,
                                });
                            }
                        }
                    }
                    scores.iter_mut().for_each(|s| *s = None);
                }
                for l in &mut lists[first..] {
                    if l.cursor.ord() == ord {
                        l.cursor.step();
                    }
                }
            }
        }
        let mut out: Vec<(Ref, f64)> = top
            .heap
            .into_iter()
            .map(|kept| (kept.r, f64::from(kept.score)))
            .collect();
        top_k(&mut out, k, |r| self.meta_at(*r).id);
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::index::tests::faq;
    use crate::{Filter, LexicalIndex};
    use proptest::prelude::*;
    use rag_core::{Bm25Params, FieldMode, Filters, KbChanges, KbSnapshot, PassageId};
    use rag_text::Analyzer;

    /// Query and passage words; the last two are Chinese stop words, which
    /// score only passages another term finds.
    const WORDS: [&str; 14] = [
        "refund", "delivery", "account", "card", "password", "transfer", "fee", "limit", "退款",
        "转账", "密码", "额度", "怎么", "的",
    ];

    thread_local! {
        /// Ranges of passages skipped by their block bounds.
        pub(super) static BLOCK_SKIPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    const FILLER: [&str; 8] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];

    /// A passage of filler and query words (the first query words are
    /// common, so their lists span many blocks), some tagged.
    fn passage(seed: u64, i: usize) -> rag_core::Passage {
        passage_with(seed, i, 300)
    }

    fn passage_with(seed: u64, i: usize, strong_one_in: usize) -> rag_core::Passage {
        let mut x = seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        // Mostly long passages holding a query word or two among filler,
        // now and then a short one repeating a word: the few passages that
        // rank first, with whole blocks between them that cannot.
        let mut body: Vec<&str> = (0..15 + next(15))
            .map(|_| FILLER[next(FILLER.len())])
            .collect();
        for _ in 0..1 + next(2) {
            body.push(WORDS[next(WORDS.len()).min(next(WORDS.len()))]);
        }
        if next(strong_one_in) == 0 {
            body = vec![WORDS[next(WORDS.len())]; 2 + next(6)];
        }
        let title = FILLER[next(FILLER.len())];
        let mut p = faq(title, &body.join(" "));
        if next(3) == 0 {
            p.tags = vec!["vip".into()];
        }
        p
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn pruned_top_k_equals_scoring_every_posting(
            seed in any::<u64>(),
            writes in 0usize..4,
            query in proptest::collection::vec(0usize..WORDS.len(), 1..6),
            k in 1usize..8,
            multi in any::<bool>(),
            k1 in 0.0f32..3.0,
            b in 0.0f32..=1.0,
            ngram_weight in 0.0f32..2.0,
            tagged in any::<bool>(),
        ) {
            let analyzer = Analyzer::new();
            let passages: Vec<_> = (0..1500).map(|i| passage(seed, i)).collect();
            let mut index = LexicalIndex::build(
                &analyzer,
                &KbSnapshot { passages: passages.clone(), seq: 1, ..Default::default() },
            );
            // Later writes: new passages in new segments, and old ones
            // replaced or removed (dead where they were).
            for w in 0..writes {
                let mut upserted: Vec<_> = (0..150).map(|i| passage(seed + 1 + w as u64, i)).collect();
                let mut removed: Vec<PassageId> = Vec::new();
                for (j, p) in passages.iter().enumerate().skip(w).step_by(5) {
                    if j % 2 == 0 {
                        removed.push(p.id);
                    } else {
                        let mut again = passage(seed + 100, j);
                        again.id = p.id;
                        upserted.push(again);
                    }
                }
                upserted.sort_by_key(|p| p.id);
                removed.sort();
                let (next, _) = index.apply(&KbChanges {
                    seq: 2 + w as u64,
                    upserted,
                    removed,
                    ..Default::default()
                });
                index = next;
            }
            let text: Vec<&str> = query.iter().map(|w| WORDS[*w]).collect();
            let q = index.analyze_query(&text.join(" "));
            let terms = index.query_terms(&q);
            let params = Bm25Params {
                k1,
                b,
                fields: if multi {
                    FieldMode::MultiField { title: 2.0, body: 1.0, tags: 0.5 }
                } else {
                    FieldMode::Flat
                },
                ngram_weight,
            };
            let filter = if tagged {
                Filter::new(
                    &Filters { tags: vec!["vip".into()], ..Default::default() },
                    0,
                    &rag_core::Viewer::Everything,
                )
            } else {
                Filter::everything()
            };
            let key = |v: Vec<(crate::index::Ref, f64)>| {
                v.into_iter()
                    .map(|(r, s)| (index.meta_at(r).id, s.to_bits()))
                    .collect::<Vec<_>>()
            };
            let scorers = index.scorers(&terms, &params);
            prop_assert!(scorers.iter().flatten().all(crate::bm25::Scorer::prunable));
            let pruned = key(index.score_pruned(&terms, &scorers, &filter, k));
            let every = key(index.score_terms_exhaustive(&terms, &params, &filter, k));
            prop_assert_eq!(pruned, every);
        }
    }

    #[test]
    fn blocks_out_of_reach_are_skipped_and_the_top_k_kept() {
        let analyzer = Analyzer::new();
        let passages: Vec<_> = (0..4000).map(|i| passage_with(7, i, 1500)).collect();
        let index = LexicalIndex::build(
            &analyzer,
            &KbSnapshot {
                passages,
                seq: 1,
                ..Default::default()
            },
        );
        let params = Bm25Params::default();
        BLOCK_SKIPS.with(|n| n.set(0));
        for query in [
            "refund",
            "refund delivery",
            "account card fee",
            "password limit transfer",
        ] {
            let q = index.analyze_query(query);
            let terms = index.query_terms(&q);
            for k in [1, 3, 10] {
                let key = |v: Vec<(crate::index::Ref, f64)>| {
                    v.into_iter()
                        .map(|(r, s)| (index.meta_at(r).id, s.to_bits()))
                        .collect::<Vec<_>>()
                };
                let scorers = index.scorers(&terms, &params);
                let pruned = key(index.score_pruned(&terms, &scorers, &Filter::everything(), k));
                let every =
                    key(index.score_terms_exhaustive(&terms, &params, &Filter::everything(), k));
                assert_eq!(pruned, every, "{query} k {k}");
            }
        }
        assert!(BLOCK_SKIPS.with(|n| n.get()) > 0, "no block was skipped");
    }
}
