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
            return RankedList { path: PathKind::Substring, hits: vec![], notes: vec!["no pattern to look for".into()] };
        }
        let Ok(ac) = AhoCorasick::new(&patterns) else {
            return RankedList { path: PathKind::Substring, hits: vec![], notes: vec!["patterns could not be compiled".into()] };
        };
        let n = self.text_count as usize;
        // For every passage, which patterns occur (bit set; at most 64 patterns count).
        let mut found: Vec<u64> = vec![0; n];
        // Occurrences of key-term patterns per passage, for ranking among equal coverage.
        let mut occurrences: Vec<u32> = vec![0; n];
        let mut df = vec![0u32; patterns.len()];
        for (ord, text) in self.match_text.iter().enumerate() {
            let mut bits = 0u64;
            let mut count = 0u32;
            for m in ac.find_overlapping_iter(text.as_str()) {
                let p = m.pattern().as_usize();
                count += 1;
                if p < 64 {
                    bits |= 1 << p;
                }
            }
            if bits != 0 {
                found[ord] = bits;
                occurrences[ord] = count;
                for (p, d) in df.iter_mut().enumerate().take(64) {
                    if bits & (1 << p) != 0 {
                        *d += 1;
                    }
                }
            }
        }
        let weights: Vec<f64> = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let len_factor = (p.chars().count() as f64).min(8.0).sqrt();
                let whole_bonus = if i == 0 && *p == whole { 2.0 } else { 1.0 };
                idf(n as f32, df[i] as f32) as f64 * len_factor * whole_bonus
            })
            .collect();
        // Coverage of the key terms (weighted by rarity and length): a substring
        // match means the passage says what the query says, not one of its words.
        let key_start = usize::from(patterns.first().is_some_and(|p| *p == whole));
        let key_total: f64 = weights[key_start..patterns.len().min(64)].iter().sum();
        let min_coverage = f64::from(MIN_COVERAGE);
        let mut scored: Vec<(u32, f64)> = found
            .iter()
            .enumerate()
            .filter(|(ord, bits)| **bits != 0 && filter.allows(&self.passages[*ord]))
            .filter_map(|(ord, bits)| {
                let has = |p: usize| bits & (1 << p) != 0;
                let whole_found = key_start == 1 && has(0);
                let covered: f64 = (key_start..patterns.len().min(64)).filter(|p| has(*p)).map(|p| weights[p]).sum();
                let coverage = if key_total > 0.0 { covered / key_total } else { 0.0 };
                if !whole_found && coverage < min_coverage {
                    return None;
                }
                // Among equal coverage, passages where the terms recur densely rank first.
                let len = self.match_text[ord].chars().count().max(1) as f64;
                let density = occurrences[ord] as f64 / len;
                Some((ord as u32, coverage + if whole_found { 1.0 } else { 0.0 } + 0.1 * density.min(1.0)))
            })
            .collect();
        top_k(&mut scored, k);
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, (ord, score))| Hit {
                id: self.passages[ord as usize].id,
                rank: i as u32 + 1,
                score,
                matched: (0..patterns.len().min(64))
                    .filter(|p| found[ord as usize] & (1 << p) != 0)
                    .map(|p| patterns[p].clone())
                    .collect(),
            })
            .collect();
        RankedList { path: PathKind::Substring, hits, notes: vec![format!("patterns: {}", patterns.join(" | "))] }
    }
}
