//! The typo-tolerant path: character trigrams for alphabetic terms, pinyin
//! for Chinese homophones (the typos a pinyin input method makes).

use crate::bm25::WeightedTerm;
use crate::filter::Filter;
use crate::index::{LexicalIndex, Term};
use rag_core::{AnalyzedQuery, Bm25Params, PathKind, RankedList, TokenKind};
use rag_text::{is_han, pinyin_key};
use rustc_hash::FxHashMap;

/// Weight of a same-pinyin correction, relative to an exact term.
pub const HOMOPHONE_SIMILARITY: f32 = 0.9;
/// Corrections kept per unknown term.
pub const MAX_CORRECTIONS: usize = 3;

/// Trigram and pinyin look-up tables over the vocabulary.
#[derive(Debug, Default)]
pub(crate) struct FuzzyVocab {
    trigrams: FxHashMap<u64, Vec<u32>>,
    trigram_len: FxHashMap<u32, u16>,
    pinyin: FxHashMap<String, Vec<u32>>,
}

/// The distinct trigrams of a word, padded as pg_trgm does ("  w", " wo", …, "d ").
fn trigrams(word: &str) -> Vec<u64> {
    let chars: Vec<char> = "  "
        .chars()
        .chain(word.chars())
        .chain(" ".chars())
        .collect();
    let mut out: Vec<u64> = chars
        .windows(3)
        .map(|w| ((w[0] as u64) << 42) | ((w[1] as u64) << 21) | w[2] as u64)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl FuzzyVocab {
    pub(crate) fn build(terms: &[Term]) -> Self {
        let mut v = FuzzyVocab::default();
        for (id, t) in terms.iter().enumerate() {
            let id = id as u32;
            let chars = t.text.chars().count();
            match t.kind {
                TokenKind::Word | TokenKind::Ident if chars >= 3 => {
                    let tg = trigrams(&t.text);
                    v.trigram_len.insert(id, tg.len() as u16);
                    for g in tg {
                        v.trigrams.entry(g).or_default().push(id);
                    }
                }
                TokenKind::Han | TokenKind::HanBigram if chars >= 2 && t.word_df > 0 => {
                    if let Some(key) = pinyin_key(&t.text) {
                        v.pinyin.entry(key).or_default().push(id);
                    }
                }
                _ => {}
            }
        }
        v
    }
}

/// One suspected typo and what it was read as.
#[derive(Debug, Clone)]
struct Correction {
    from: String,
    to: u32,
    similarity: f32,
}

impl LexicalIndex {
    fn trigram_corrections(&self, word: &str, threshold: f32) -> Vec<Correction> {
        let tg = trigrams(word);
        let mut shared: FxHashMap<u32, u16> = FxHashMap::default();
        for g in &tg {
            if let Some(ids) = self.fuzzy.trigrams.get(g) {
                for id in ids {
                    *shared.entry(*id).or_default() += 1;
                }
            }
        }
        let mut out: Vec<Correction> = shared
            .into_iter()
            .filter_map(|(id, s)| {
                let other = *self.fuzzy.trigram_len.get(&id)? as f32;
                let sim = s as f32 / (tg.len() as f32 + other - s as f32);
                (sim >= threshold).then(|| Correction {
                    from: word.to_owned(),
                    to: id,
                    similarity: sim,
                })
            })
            .collect();
        // Most similar first; among equals the more common term (a likelier intended word).
        out.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then_with(|| {
                    self.terms[b.to as usize]
                        .postings
                        .len()
                        .cmp(&self.terms[a.to as usize].postings.len())
                })
                .then_with(|| a.to.cmp(&b.to))
        });
        out.truncate(MAX_CORRECTIONS);
        out
    }

    fn homophone_corrections(&self, normalized: &str) -> Vec<Correction> {
        let mut out = Vec::new();
        for window in han_windows(normalized) {
            if self.term_id(&window).is_some() {
                continue;
            }
            let Some(key) = pinyin_key(&window) else {
                continue;
            };
            if let Some(ids) = self.fuzzy.pinyin.get(&key) {
                for id in ids.iter().take(MAX_CORRECTIONS) {
                    out.push(Correction {
                        from: window.clone(),
                        to: *id,
                        similarity: HOMOPHONE_SIMILARITY,
                    });
                }
            }
        }
        out
    }

    /// Typo-tolerant recall. Query terms missing from the vocabulary are read as
    /// the vocabulary terms most similar by character trigrams (similarity ≥
    /// `threshold`); windows of Chinese characters that are not words are read
    /// as words with the same toneless pinyin. The query's known terms plus the
    /// corrections, weighted by similarity, are scored with BM25. When nothing
    /// looks like a typo the path returns no hits, so it never duplicates BM25.
    pub fn fuzzy(
        &self,
        q: &AnalyzedQuery,
        k: usize,
        threshold: f32,
        params: &Bm25Params,
        filter: &Filter,
    ) -> RankedList {
        let mut corrections = Vec::new();
        for t in &q.tokens {
            if matches!(t.kind, TokenKind::Word | TokenKind::Ident)
                && t.text.chars().count() >= 3
                && self.term_id(&t.text).is_none()
            {
                corrections.extend(self.trigram_corrections(&t.text, threshold));
            }
        }
        corrections.extend(self.homophone_corrections(&q.normalized));
        if corrections.is_empty() {
            return RankedList {
                path: PathKind::Fuzzy,
                hits: vec![],
                notes: vec!["no unknown term to correct".into()],
            };
        }
        let notes = corrections
            .iter()
            .map(|c| {
                format!(
                    "{} → {} ({:.2})",
                    c.from, self.terms[c.to as usize].text, c.similarity
                )
            })
            .collect();
        let mut terms = self.query_terms(q);
        terms.extend(corrections.iter().map(|c| WeightedTerm {
            id: c.to,
            weight: c.similarity,
            gram: false,
        }));
        let scored = self.score_terms(&terms, params, filter, k);
        self.ranked(PathKind::Fuzzy, scored, &terms, notes)
    }
}

/// The windows of two to four characters of every run of Chinese characters
/// in `normalized`, run by run, shorter windows first: where the typo path
/// looks for homophones of words the vocabulary lacks.
pub fn han_windows(normalized: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, out: &mut Vec<String>| {
        for len in 2..=4usize {
            for w in run.windows(len) {
                out.push(w.iter().collect());
            }
        }
        run.clear();
    };
    for c in normalized.chars() {
        if is_han(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn trigram_similarity_of_a_typo() {
        let a = super::trigrams("refnd");
        let b = super::trigrams("refund");
        let shared = a.iter().filter(|g| b.contains(g)).count() as f32;
        let sim = shared / (a.len() + b.len()) as f32 - 0.0;
        let jaccard = shared / (a.len() as f32 + b.len() as f32 - shared);
        assert!(sim > 0.0);
        assert!(jaccard >= 0.3, "{jaccard}");
    }
}
