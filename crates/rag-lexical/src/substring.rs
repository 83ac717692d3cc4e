//! The substring path: the normalised query and its key terms as substrings.

use crate::bm25::{idf, top_k};
use crate::filter::Filter;
use crate::index::LexicalIndex;
use aho_corasick::AhoCorasick;
use rag_core::{AnalyzedQuery, Hit, PathKind, RankedList};
use rag_text::normalize_for_match;

impl LexicalIndex {
    /// Passages containing the whole query or its key terms as substrings of
    /// their normalised text. Each pattern found counts its rarity (idf over
    /// this path's own matches) and its length; the whole query counts double.
    /// Ties go to the shorter passage.
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
        let mut df = vec![0u32; patterns.len()];
        for (ord, text) in self.match_text.iter().enumerate() {
            let mut bits = 0u64;
            for m in ac.find_overlapping_iter(text.as_str()) {
                let p = m.pattern().as_usize();
                if p < 64 {
                    bits |= 1 << p;
                }
            }
            if bits != 0 {
                found[ord] = bits;
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
        let mut scored: Vec<(u32, f64)> = found
            .iter()
            .enumerate()
            .filter(|(ord, bits)| **bits != 0 && filter.allows(&self.passages[*ord]))
            .map(|(ord, bits)| {
                let s: f64 = (0..patterns.len().min(64)).filter(|p| bits & (1 << p) != 0).map(|p| weights[p]).sum();
                // Denser passages first among equals: a tiny length penalty.
                let len = self.match_text[ord].len() as f64;
                (ord as u32, s - len * 1e-9)
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
