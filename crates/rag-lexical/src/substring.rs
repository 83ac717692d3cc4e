//! The substring path: the normalised query and its key terms as substrings.

use crate::bm25::{idf, top_k};
use crate::filter::Filter;
use crate::index::LexicalIndex;
use aho_corasick::AhoCorasick;
use rag_core::{AnalyzedQuery, Hit, PathKind, RankedList};
use rag_text::normalize_for_match;

/// Share of the query's key terms (weighted) a passage must contain.
const MIN_COVERAGE: f32 = 0.6;

impl LexicalIndex {
    /// Passages containing the whole query, or most of its key terms, as
    /// substrings of their normalised text. Key terms weigh by rarity (idf over
    /// this path's own matches) and length; a passage must cover at least
    /// 60% of that weight. Score: coverage, plus 1 when the whole query occurs,
    /// plus a small share for how densely the terms occur.
    pub fn substring(&self, q: &AnalyzedQuery, k: usize, filter: &Filter) -> RankedList {
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
            return RankedList {
                path: PathKind::Substring,
                hits: vec![],
                notes: vec!["no pattern to look for".into()],
            };
        }
        // At most 64 patterns: matches are tracked in a 64-bit set.
        patterns.truncate(64);
        let Ok(ac) = AhoCorasick::new(&patterns) else {
            return RankedList {
                path: PathKind::Substring,
                hits: vec![],
                notes: vec!["patterns could not be compiled".into()],
            };
        };
        let n = self.text_count as usize;
        // Candidates per pattern from the n-gram index (None: every passage).
        let candidates: Vec<Option<Vec<u32>>> =
            patterns.iter().map(|p| self.ngrams.candidates(p)).collect();
        // Weights: rarity (idf over the candidate count, exact for short
        // patterns, an upper bound on the document frequency for longer ones)
        // times a length factor; the whole query counts double.
        let whole_first = patterns.first().is_some_and(|p| *p == whole);
        let weights: Vec<f64> = patterns
            .iter()
            .zip(&candidates)
            .enumerate()
            .map(|(i, (p, c))| {
                let df = c.as_ref().map_or(n, Vec::len);
                let len_factor = (p.chars().count() as f64).min(8.0).sqrt();
                let whole_bonus = if i == 0 && whole_first { 2.0 } else { 1.0 };
                idf(n as f32, df as f32) as f64 * len_factor * whole_bonus
            })
            .collect();
        // Coverage of the key terms (weighted): a substring match means the
        // passage says what the query says, not one of its words.
        let key_start = usize::from(whole_first);
        let key_total: f64 = weights[key_start..].iter().sum();
        let min_coverage = f64::from(MIN_COVERAGE);

        // Upper bound of each passage's coverage from the candidate lists; only
        // passages that could reach the threshold (or contain the whole query)
        // are verified by scanning their text.
        let mut bound = vec![0f64; n];
        let mut everywhere = 0f64;
        for p in key_start..patterns.len() {
            match &candidates[p] {
                Some(list) => list.iter().for_each(|o| bound[*o as usize] += weights[p]),
                None => everywhere += weights[p],
            }
        }
        let mut verify: Vec<u32> = (0..n as u32)
            .filter(|o| {
                key_total > 0.0
                    && (bound[*o as usize] + everywhere) / key_total >= min_coverage - 1e-12
            })
            .collect();
        if whole_first {
            match &candidates[0] {
                Some(list) => verify.extend(list),
                None => verify = (0..n as u32).collect(),
            }
            verify.sort_unstable();
            verify.dedup();
        }

        let mut scored: Vec<(u32, f64)> = Vec::new();
        let mut found_bits: Vec<(u32, u64)> = Vec::new();
        for ord in verify {
            let o = ord as usize;
            if !filter.allows(&self.passages[o]) {
                continue;
            }
            let text = self.match_text[o].as_str();
            let (mut bits, mut count) = (0u64, 0u32);
            for m in ac.find_overlapping_iter(text) {
                bits |= 1 << m.pattern().as_usize();
                count += 1;
            }
            if bits == 0 {
                continue;
            }
            let has = |p: usize| bits & (1 << p) != 0;
            let whole_found = whole_first && has(0);
            let covered: f64 = (key_start..patterns.len())
                .filter(|p| has(*p))
                .map(|p| weights[p])
                .sum();
            let coverage = if key_total > 0.0 {
                covered / key_total
            } else {
                0.0
            };
            if !whole_found && coverage < min_coverage {
                continue;
            }
            // Among equal coverage, passages where the terms recur densely rank first.
            let density = count as f64 / text.chars().count().max(1) as f64;
            scored.push((
                ord,
                coverage + if whole_found { 1.0 } else { 0.0 } + 0.1 * density.min(1.0),
            ));
            found_bits.push((ord, bits));
        }
        top_k(&mut scored, k);
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, (ord, score))| Hit {
                id: self.passages[ord as usize].id,
                rank: i as u32 + 1,
                score,
                matched: {
                    let bits = found_bits
                        .iter()
                        .find(|(o, _)| *o == ord)
                        .map_or(0, |(_, b)| *b);
                    (0..patterns.len())
                        .filter(|p| bits & (1 << p) != 0)
                        .map(|p| patterns[p].clone())
                        .collect()
                },
            })
            .collect();
        RankedList {
            path: PathKind::Substring,
            hits,
            notes: vec![format!("patterns: {}", patterns.join(" | "))],
        }
    }
}
