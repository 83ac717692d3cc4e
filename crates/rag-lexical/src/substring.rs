//! The substring path: the normalised query and its key terms as substrings.

use crate::bm25::{idf, top_k};
use crate::filter::Filter;
use crate::index::{LexicalIndex, Ref};
use crate::ngram::{self, Membership};
use aho_corasick::AhoCorasick;
use rag_core::{AnalyzedQuery, Hit, PathKind, RankedList};
use rag_text::normalize_for_match;

/// Share of the query's key terms (weighted) a passage must contain.
pub const MIN_COVERAGE: f32 = 0.6;

/// The patterns of the substring path and how they are scored; shared by the
/// in-memory index and stores that find candidates themselves.
#[derive(Debug, Clone)]
pub struct SubstringPlan {
    /// The patterns: the whole normalised query first (when it has at least
    /// two characters), then the key terms; at most 64.
    pub patterns: Vec<String>,
    /// Whether `patterns[0]` is the whole query.
    pub whole_first: bool,
    matcher: AhoCorasick,
}

/// What one passage's text says about the patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubstringMatch {
    /// Bit `i` is set when pattern `i` occurs.
    pub bits: u64,
    /// Occurrences of all patterns, overlapping ones included.
    pub count: u32,
}

impl SubstringPlan {
    /// The plan of a query, or the note saying why there is none.
    pub fn new(q: &AnalyzedQuery) -> Result<Self, String> {
        let whole = normalize_for_match(&q.raw);
        let mut patterns: Vec<String> = Vec::new();
        if whole.chars().count() >= 2 {
            patterns.push(whole.clone());
        }
        for t in &q.key_terms {
            let t = normalize_for_match(t);
            if !t.is_empty() && !patterns.contains(&t) {
                patterns.push(t);
            }
        }
        if patterns.is_empty() {
            return Err("no pattern to look for".into());
        }
        patterns.truncate(64);
        let matcher =
            AhoCorasick::new(&patterns).map_err(|_| "patterns could not be compiled".to_owned())?;
        let whole_first = patterns.first().is_some_and(|p| *p == whole);
        Ok(SubstringPlan {
            patterns,
            whole_first,
            matcher,
        })
    }

    /// The note every list of this path carries.
    pub fn note(&self) -> String {
        format!("patterns: {}", self.patterns.join(" | "))
    }

    /// Index of the first key-term pattern.
    fn key_start(&self) -> usize {
        usize::from(self.whole_first)
    }

    /// Pattern weights from how many of `n` text passages contain each
    /// (rarer and longer weigh more; the whole query counts double).
    pub fn weights(&self, dfs: &[usize], n: usize) -> Vec<f64> {
        self.patterns
            .iter()
            .zip(dfs)
            .enumerate()
            .map(|(i, (p, df))| {
                let len_factor = (p.chars().count() as f64).min(8.0).sqrt();
                let whole_bonus = if i == 0 && self.whole_first { 2.0 } else { 1.0 };
                idf(n as f32, *df as f32) as f64 * len_factor * whole_bonus
            })
            .collect()
    }

    /// The patterns in `text`.
    pub fn find(&self, text: &str) -> SubstringMatch {
        let (mut bits, mut count) = (0u64, 0u32);
        for m in self.matcher.find_overlapping_iter(text) {
            bits |= 1 << m.pattern().as_usize();
            count += 1;
        }
        SubstringMatch { bits, count }
    }

    /// The score of a passage whose text has `chars` characters, or `None`
    /// when it contains neither the whole query nor enough of the key terms.
    pub fn score(&self, weights: &[f64], m: SubstringMatch, chars: usize) -> Option<f64> {
        if m.bits == 0 {
            return None;
        }
        let has = |p: usize| m.bits & (1 << p) != 0;
        let key_total: f64 = weights[self.key_start()..].iter().sum();
        let whole_found = self.whole_first && has(0);
        let covered: f64 = (self.key_start()..self.patterns.len())
            .filter(|p| has(*p))
            .map(|p| weights[p])
            .sum();
        let coverage = if key_total > 0.0 {
            covered / key_total
        } else {
            0.0
        };
        if !whole_found && coverage < f64::from(MIN_COVERAGE) {
            return None;
        }
        let density = m.count as f64 / chars.max(1) as f64;
        Some(coverage + if whole_found { 1.0 } else { 0.0 } + 0.1 * density.min(1.0))
    }

    /// The patterns a match found, in pattern order.
    pub fn matched(&self, bits: u64) -> Vec<String> {
        (0..self.patterns.len())
            .filter(|p| bits & (1 << p) != 0)
            .map(|p| self.patterns[p].clone())
            .collect()
    }
}

impl LexicalIndex {
    /// Live passages holding an n-gram key: the lists' counts less the dead
    /// passages they hold.
    fn live_count(&self, key: u64) -> usize {
        let mut n = 0;
        for (seg, dead) in self.segments.iter().zip(&self.dead) {
            let Some(list) = seg.ngrams.list(key) else {
                continue;
            };
            n += list.len();
            if dead.count() > 0 {
                let mut it = list.iter();
                let held = dead.iter().filter(|o| it.seek(*o) == Some(*o)).count();
                n -= held.min(list.len());
            }
        }
        n
    }

    /// Live passages holding every one of `keys` (pattern `p`'s), each
    /// segment's list kept in `cache` for the rest of the query.
    fn live_candidates(&self, keys: &[u64], p: usize, cache: &mut Lists) -> usize {
        (0..self.segments.len())
            .map(|si| {
                let dead = &self.dead[si];
                let c = cache.get(self, si, p, keys);
                if dead.count() == 0 {
                    c.len()
                } else {
                    c.iter().filter(|o| !dead.contains(**o)).count()
                }
            })
            .sum()
    }

    /// Passages containing the whole query, or most of its key terms, as
    /// substrings of their normalised text. Key terms weigh by rarity and
    /// length: rarity over the live passages whose n-grams hold the term
    /// (estimated from its rarest n-gram when that one is in more than
    /// [`EXACT_DF_LIMIT`] passages); a passage must cover at least 60% of
    /// that weight. Score: coverage, plus 1 when the whole query occurs, plus a
    /// small share for how densely the terms occur.
    ///
    /// The n-gram index finds the passages to read: those that may hold the
    /// whole query, and those holding enough key terms. As MaxScore does for
    /// BM25, only the heaviest key terms propose passages (a passage holding
    /// none of them cannot reach 60%); the others are looked up for those
    /// passages only. At most [`verify_cap`] passages are read, the most
    /// promising first, and the list's notes say so when more might match.
    pub fn substring(&self, q: &AnalyzedQuery, k: usize, filter: &Filter) -> RankedList {
        let plan = match SubstringPlan::new(q) {
            Ok(p) => p,
            Err(note) => {
                return RankedList {
                    path: PathKind::Substring,
                    hits: vec![],
                    notes: vec![note],
                }
            }
        };
        let patterns = &plan.patterns;
        let n = self.text_count as usize;
        // Each pattern's n-gram keys (`None`: it cannot be looked up, every
        // passage may hold it) and how many live passages hold its rarest.
        let keys: Vec<Option<Vec<u64>>> = patterns.iter().map(|p| ngram::keys(p)).collect();
        let mut lists = Lists::new(self.segments.len(), patterns.len());
        let dfs: Vec<usize> = keys
            .iter()
            .enumerate()
            .map(|(p, ks)| match ks {
                None => n,
                Some(ks) => {
                    let rarest = ks.iter().map(|k| self.live_count(*k)).min().unwrap_or(n);
                    if rarest <= EXACT_DF_LIMIT {
                        self.live_candidates(ks, p, &mut lists)
                    } else {
                        rarest
                    }
                }
            })
            .collect();
        let weights = plan.weights(&dfs, n);
        let key_start = plan.key_start();
        let key_total: f64 = weights[key_start..].iter().sum();
        let min_weight = key_total * (f64::from(MIN_COVERAGE) - 1e-12);
        let enough = |w: f64| key_total > 0.0 && w >= min_weight;
        // Key terms that cannot be looked up count as held by every passage.
        let everywhere: f64 = (key_start..patterns.len())
            .filter(|p| keys[*p].is_none())
            .map(|p| weights[p])
            .sum();
        // The heaviest key terms, until the rest cannot reach 60% alone.
        let mut lookup: Vec<usize> = (key_start..patterns.len())
            .filter(|p| keys[*p].is_some())
            .collect();
        lookup.sort_by(|a, b| weights[*b].total_cmp(&weights[*a]).then(a.cmp(b)));
        let mut rest: f64 = lookup.iter().map(|p| weights[*p]).sum::<f64>() + everywhere;
        let mut proposing = 0;
        while proposing < lookup.len() && enough(rest) {
            rest -= weights[lookup[proposing]];
            proposing += 1;
        }
        // The most a passage can promise, and (below the 60% with a margin
        // for the order the weights are added in) what gives up on it.
        let reachable: f64 = lookup.iter().map(|p| weights[*p]).sum::<f64>() + everywhere;
        let hopeless_below = min_weight - 1e-9 * key_total.abs();
        // Every passage is a candidate when the unsearchable key terms
        // reach 60% alone, or the whole query cannot be looked up.
        let scan_all = enough(everywhere) || (plan.whole_first && keys[0].is_none());

        let mut eligible: Vec<Candidate> = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            let dead = &self.dead[si];
            let whole: Vec<u32> = match (plan.whole_first, &keys[0]) {
                (true, Some(ks)) if !scan_all => lists.get(self, si, 0, ks).to_vec(),
                _ => Vec::new(),
            };
            let mut proposed: Vec<u32> = if scan_all {
                (0..seg.len() as u32).collect()
            } else {
                let mut all: Vec<u32> = lookup[..proposing]
                    .iter()
                    .flat_map(|p| {
                        lists
                            .get(self, si, *p, keys[*p].as_deref().unwrap_or_default())
                            .to_vec()
                    })
                    .chain(whole.iter().copied())
                    .collect();
                all.sort_unstable();
                all.dedup();
                all
            };
            proposed.retain(|o| !dead.contains(*o));
            // What each proposed passage's n-grams promise: the weight of
            // the key terms it may hold, added in pattern order.
            let mut members: Vec<Option<Membership<'_>>> = (0..patterns.len())
                .map(|p| {
                    let ks = keys[p].as_deref().filter(|_| p >= key_start)?;
                    Some(match lists.take(si, p) {
                        Some(holders) => Membership::of_holders(holders),
                        None => Membership::new(&seg.ngrams, ks),
                    })
                })
                .collect();
            let mut held = vec![false; patterns.len()];
            let mut is_whole = whole.iter().peekable();
            for ord in proposed {
                let may_be_whole = match (plan.whole_first, scan_all) {
                    (false, _) => false,
                    (true, true) => true,
                    (true, false) => {
                        while is_whole.next_if(|w| **w < ord).is_some() {}
                        is_whole.peek() == Some(&&ord)
                    }
                };
                // The heaviest terms first: once what is left cannot reach
                // 60%, the other lists are not sought for this passage (as
                // MaxScore drops a candidate).
                let mut possible = reachable;
                let mut hopeless = false;
                for &p in &lookup {
                    if !may_be_whole && possible < hopeless_below {
                        hopeless = true;
                        break;
                    }
                    held[p] = members[p].as_mut().is_some_and(|m| m.holds(ord));
                    if !held[p] {
                        possible -= weights[p];
                    }
                }
                if hopeless {
                    continue;
                }
                let mut promise = 0.0;
                for (p, w) in weights.iter().enumerate().skip(key_start) {
                    if keys[p].is_none() || held[p] {
                        promise += w;
                    }
                }
                if !(may_be_whole || enough(promise)) || !filter.allows(&seg.passages[ord as usize])
                {
                    continue;
                }
                eligible.push(Candidate {
                    r: Ref {
                        seg: si as u32,
                        ord,
                    },
                    whole: may_be_whole,
                    promise,
                });
            }
        }
        // Read at most `cap` of them: those that may hold the whole query
        // first, then by promised weight, then by passage id, so which are
        // read does not depend on how passages are spread over segments.
        let cap = verify_cap(k);
        let considered = eligible.len();
        if eligible.len() > cap {
            let order = |a: &Candidate, b: &Candidate| {
                b.whole
                    .cmp(&a.whole)
                    .then(b.promise.total_cmp(&a.promise))
                    .then_with(|| self.meta_at(a.r).id.cmp(&self.meta_at(b.r).id))
            };
            eligible.select_nth_unstable_by(cap - 1, order);
            eligible.truncate(cap);
        }
        let mut scored: Vec<((Ref, u64), f64)> = Vec::new();
        for c in &eligible {
            let text = self.segments[c.r.seg as usize]
                .match_text
                .get(c.r.ord as usize);
            let m = plan.find(text);
            if let Some(score) = plan.score(&weights, m, text.chars().count()) {
                scored.push(((c.r, m.bits), score));
            }
        }
        top_k(&mut scored, k, |(r, _)| self.meta_at(*r).id);
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, ((r, bits), score))| Hit {
                id: self.meta_at(r).id,
                rank: i as u32 + 1,
                score,
                matched: plan.matched(bits),
            })
            .collect();
        let mut notes = vec![plan.note()];
        if considered > cap {
            notes.push(format!(
                "{considered} passages may match; the {cap} most promising were read"
            ));
        }
        RankedList {
            path: PathKind::Substring,
            hits,
            notes,
        }
    }
}

/// A pattern whose rarest n-gram is in at most this many live passages
/// weighs by the passages holding all its n-grams; above, by that n-gram's
/// count (intersecting such lists costs more than the estimate is off).
pub const EXACT_DF_LIMIT: usize = 16_384;

/// Each segment's passages holding a pattern's n-grams, intersected at most
/// once per query.
struct Lists(Vec<Vec<Option<Vec<u32>>>>);

impl Lists {
    fn new(segments: usize, patterns: usize) -> Self {
        Lists(vec![vec![None; patterns]; segments])
    }

    fn get(&mut self, index: &LexicalIndex, si: usize, p: usize, keys: &[u64]) -> &[u32] {
        self.0[si][p].get_or_insert_with(|| index.segments[si].ngrams.candidates_of(keys))
    }

    fn take(&mut self, si: usize, p: usize) -> Option<Vec<u32>> {
        self.0[si][p].take()
    }
}

/// A passage the substring path may read.
struct Candidate {
    r: Ref,
    /// Its n-grams hold the whole query's.
    whole: bool,
    /// The weight of the key terms whose n-grams it holds.
    promise: f64,
}

/// How many passages the substring path reads at most for `k` results.
pub fn verify_cap(k: usize) -> usize {
    k.saturating_mul(40).max(2000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tests::faq;
    use rag_core::{KbChanges, KbSnapshot};
    use rag_text::Analyzer;

    /// Every passage read and scored: what the path returns when nothing
    /// is capped.
    fn scanned(
        index: &LexicalIndex,
        q: &AnalyzedQuery,
        k: usize,
    ) -> Vec<(rag_core::PassageId, u64)> {
        let plan = SubstringPlan::new(q).unwrap();
        let n = index.text_count as usize;
        // Weights as the path computes them (from the n-gram holders).
        let weights = {
            let keys: Vec<Option<Vec<u64>>> =
                plan.patterns.iter().map(|p| ngram::keys(p)).collect();
            let mut lists = Lists::new(index.segments.len(), plan.patterns.len());
            let dfs: Vec<usize> = keys
                .iter()
                .enumerate()
                .map(|(p, ks)| match ks {
                    None => n,
                    Some(ks) => index.live_candidates(ks, p, &mut lists),
                })
                .collect();
            plan.weights(&dfs, n)
        };
        let mut scored: Vec<(Ref, f64)> = Vec::new();
        for (si, seg) in index.segments.iter().enumerate() {
            for ord in 0..seg.len() {
                let text = seg.match_text.get(ord);
                let m = plan.find(text);
                if let Some(score) = plan.score(&weights, m, text.chars().count()) {
                    scored.push((
                        Ref {
                            seg: si as u32,
                            ord: ord as u32,
                        },
                        score,
                    ));
                }
            }
        }
        top_k(&mut scored, k, |r| index.meta_at(*r).id);
        scored
            .into_iter()
            .map(|(r, s)| (index.meta_at(r).id, s.to_bits()))
            .collect()
    }

    #[test]
    fn a_large_segment_finds_what_reading_every_passage_finds() {
        // More passages than a small segment, so n-gram lists are sought
        // passage by passage and hopeless passages are given up early.
        let syllables = [
            "ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "du", "pe", "退", "配", "密",
        ];
        let words: Vec<String> = syllables
            .iter()
            .flat_map(|a| syllables.iter().map(move |b| format!("{a}{b}x")))
            .collect();
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as usize) % n
        };
        let passages: Vec<_> = (0..ngram::SMALL_SEGMENT as usize + 4_000)
            .map(|i| {
                let body: Vec<&str> = (0..4).map(|_| words[next(words.len())].as_str()).collect();
                faq(&format!("q{i}"), &body.join(" "))
            })
            .collect();
        let index = LexicalIndex::build(
            &Analyzer::new(),
            &KbSnapshot {
                passages,
                seq: 1,
                ..Default::default()
            },
        );
        assert_eq!(index.segment_count(), 1);
        let mut compared = 0;
        for q in [
            "kalox mirux tesax",
            "nokax vidux pelox kamix",
            "退配x 密退x",
            "rutex sanox dukax vilox pepex",
            "kakax",
        ] {
            let q = index.analyze_query(q);
            let list = index.substring(&q, 10, &Filter::everything());
            if list.notes.iter().any(|n| n.contains("may match")) {
                continue;
            }
            let got: Vec<_> = list
                .hits
                .iter()
                .map(|h| (h.id, h.score.to_bits()))
                .collect();
            assert_eq!(got, scanned(&index, &q, 10), "{}", q.raw);
            compared += 1;
        }
        assert!(compared >= 3, "only {compared} queries were not capped");
    }

    #[test]
    fn reads_are_capped_the_same_way_however_passages_are_segmented() {
        let analyzer = Analyzer::new();
        // More passages holding the query's word than the cap for 10 hits.
        let passages: Vec<_> = (0..2600)
            .map(|i| {
                let filler = "x".repeat(i % 13);
                faq(
                    &format!("question {i}"),
                    &format!("refund {filler} policy {i}"),
                )
            })
            .collect();
        let whole = LexicalIndex::build(
            &analyzer,
            &KbSnapshot {
                passages: passages.clone(),
                seq: 2,
                ..Default::default()
            },
        );
        let (first, rest) = passages.split_at(1300);
        let half = LexicalIndex::build(
            &analyzer,
            &KbSnapshot {
                passages: first.to_vec(),
                seq: 1,
                ..Default::default()
            },
        );
        let (split, _) = half.apply(&KbChanges {
            seq: 2,
            upserted: rest.to_vec(),
            ..Default::default()
        });
        assert!(split.segment_count() > 1 || whole.segment_count() == 1);
        let key = |index: &LexicalIndex| {
            let q = index.analyze_query("refund policy");
            let list = index.substring(&q, 10, &Filter::everything());
            (
                list.hits
                    .iter()
                    .map(|h| (h.id, h.score.to_bits()))
                    .collect::<Vec<_>>(),
                list.notes,
            )
        };
        let (hits, notes) = key(&whole);
        assert_eq!(hits.len(), 10);
        assert!(
            notes.iter().any(|n| n.contains("2600 passages may match")),
            "{notes:?}"
        );
        assert_eq!(key(&split), (hits, notes));
    }
}
