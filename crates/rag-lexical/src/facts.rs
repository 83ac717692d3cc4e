//! The structured-facts path.

use crate::bm25::top_k;
use crate::index::LexicalIndex;
use rag_core::{AnalyzedQuery, Hit, PathKind, RankedList};
use rag_text::normalize_for_match;

impl LexicalIndex {
    /// Facts whose key, a synonym of the key, or a synonym-table sibling of
    /// either is said in the query. Longer matched names rank first; the key
    /// itself beats its synonyms.
    pub fn facts(&self, q: &AnalyzedQuery, k: usize) -> RankedList {
        let qm = normalize_for_match(&q.raw);
        let mut scored: Vec<(usize, f64)> = Vec::new();
        let mut matched_names: Vec<(usize, String)> = Vec::new();
        for (ord, p) in self.facts.iter().enumerate() {
            let mut names = vec![p.title.clone()];
            names.extend(p.aliases.iter().cloned());
            let phrases = self.synonyms.siblings(&self.analyzer, &names);
            let best = phrases
                .iter()
                .enumerate()
                .filter(|(_, ph)| ph.occurs_in(q, &qm))
                .map(|(i, ph)| {
                    (
                        ph.match_form.chars().count() as f64 + if i == 0 { 0.5 } else { 0.0 },
                        ph.text.clone(),
                    )
                })
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((score, name)) = best {
                scored.push((ord, score));
                matched_names.push((ord, name));
            }
        }
        top_k(&mut scored, k, |o| self.facts[*o].id);
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(i, (ord, score))| Hit {
                id: self.facts[ord].id,
                rank: i as u32 + 1,
                score,
                matched: matched_names
                    .iter()
                    .filter(|(o, _)| *o == ord)
                    .map(|(_, n)| n.clone())
                    .collect(),
            })
            .collect();
        let notes = if self.facts.is_empty() {
            vec!["no facts in this knowledge base".into()]
        } else {
            vec![]
        };
        RankedList {
            path: PathKind::Fact,
            hits,
            notes,
        }
    }
}
