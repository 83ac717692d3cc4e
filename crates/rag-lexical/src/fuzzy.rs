//! The typo-tolerant path: character trigrams for alphabetic terms, pinyin
//! for Chinese homophones (the typos a pinyin input method makes).

use crate::bm25::WeightedTerm;
use crate::filter::Filter;
use crate::index::LexicalIndex;
use crate::segment::Term;
use rag_core::{AnalyzedQuery, Bm25Params, PathKind, RankedList, TokenKind};
use rag_text::{is_han, pinyin_key};
use rustc_hash::FxHashMap;

/// Weight of a same-pinyin correction, relative to an exact term.
pub const HOMOPHONE_SIMILARITY: f32 = 0.9;
/// Corrections kept per unknown term.
pub const MAX_CORRECTIONS: usize = 3;
/// Vocabulary words most similar to an unknown word by trigrams whose edit
/// distance to it is checked (both stores take the same ones, in the same
/// order).
pub const TYPO_CANDIDATES: usize = 32;

/// The corrections of an unknown `word` among `candidates`, its most
/// similar vocabulary words by trigrams (best first): those within the
/// edits a word of its length may carry ([`rag_text::typo_edits_allowed`]),
/// the fewest edits first and, among equals, in the candidates' order, at
/// most [`MAX_CORRECTIONS`]. Each comes with its weight in the search, 1
/// less the share of the word's characters that were edited (refnud →
/// refund: 1 − 1/6). Trigram similarity alone mistook a swap of two
/// letters in a short word (refnud and refund share 3 of 11 trigrams) for
/// a worse match than another word (north and norman share 3 of 10).
pub fn typo_corrections<T: AsRef<str> + Clone>(word: &str, candidates: &[T]) -> Vec<(T, f32)> {
    let chars = word.chars().count();
    let allowed = rag_text::typo_edits_allowed(chars);
    let mut near: Vec<(usize, &T)> = candidates
        .iter()
        .filter_map(|c| rag_text::osa_distance_within(word, c.as_ref(), allowed).map(|d| (d, c)))
        .filter(|(d, _)| *d > 0)
        .collect();
    // Stable: the candidates' order among equals.
    near.sort_by_key(|(d, _)| *d);
    near.truncate(MAX_CORRECTIONS);
    near.into_iter()
        .map(|(d, c)| (c.clone(), 1.0 - d as f32 / chars.max(1) as f32))
        .collect()
}

/// The words made by swapping two neighbouring letters of `word`, left to
/// right, for a word of letters long enough to carry a typo. They join an
/// unknown word's candidates when the vocabulary holds them: a swap near
/// the start of a short word leaves few trigrams in common (lcok and lock
/// share 2 of 10), so trigram similarity alone would not propose them.
pub fn swap_variants(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    if rag_text::typo_edits_allowed(chars.len()) == 0 || !chars.iter().all(|c| c.is_alphabetic()) {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for i in 0..chars.len() - 1 {
        if chars[i] == chars[i + 1] {
            continue;
        }
        let mut v = chars.clone();
        v.swap(i, i + 1);
        let v: String = v.into_iter().collect();
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

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

/// The three tables of a [`FuzzyVocab`], for encoding.
type FuzzyParts<'a> = (
    &'a FxHashMap<u64, Vec<u32>>,
    &'a FxHashMap<u32, u16>,
    &'a FxHashMap<String, Vec<u32>>,
);

impl FuzzyVocab {
    /// The tables (for encoding).
    pub(crate) fn parts(&self) -> FuzzyParts<'_> {
        (&self.trigrams, &self.trigram_len, &self.pinyin)
    }

    /// From decoded tables.
    pub(crate) fn from_parts(
        trigrams: FxHashMap<u64, Vec<u32>>,
        trigram_len: FxHashMap<u32, u16>,
        pinyin: FxHashMap<String, Vec<u32>>,
    ) -> Self {
        FuzzyVocab {
            trigrams,
            trigram_len,
            pinyin,
        }
    }

    /// Estimated heap bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.trigrams.capacity() * (size_of::<(u64, Vec<u32>)>() + 1)
            + self
                .trigrams
                .values()
                .map(|l| l.capacity() * 4)
                .sum::<usize>()
            + self.trigram_len.capacity() * (size_of::<(u32, u16)>() + 1)
            + self.pinyin.capacity() * (size_of::<(String, Vec<u32>)>() + 1)
            + self
                .pinyin
                .iter()
                .map(|(k, l)| k.capacity() + l.capacity() * 4)
                .sum::<usize>()
    }

    pub(crate) fn build(vocab: &crate::vocab::Vocab, terms: &[Term]) -> Self {
        let mut v = FuzzyVocab::default();
        for (id, t) in terms.iter().enumerate() {
            let id = id as u32;
            let text = vocab.text(id);
            let chars = text.chars().count();
            match t.kind {
                TokenKind::Word | TokenKind::Ident if chars >= 3 => {
                    let tg = trigrams(text);
                    v.trigram_len.insert(id, tg.len() as u16);
                    for g in tg {
                        v.trigrams.entry(g).or_default().push(id);
                    }
                }
                TokenKind::Han | TokenKind::HanBigram if chars >= 2 && t.word_df > 0 => {
                    if let Some(key) = pinyin_key(text) {
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
    to: Box<str>,
    /// Its weight in the search.
    weight: f32,
}

impl LexicalIndex {
    fn trigram_corrections(&self, word: &str, threshold: f32, filter: &Filter) -> Vec<Correction> {
        let tg = trigrams(word);
        // Similarity depends on the two words only, so each segment's
        // vocabulary gives the same figure for a term it shares.
        let mut found: FxHashMap<Box<str>, f32> = FxHashMap::default();
        for seg in &self.segments {
            let mut shared: FxHashMap<u32, u16> = FxHashMap::default();
            for g in &tg {
                if let Some(ids) = seg.fuzzy.trigrams.get(g) {
                    for id in ids {
                        *shared.entry(*id).or_default() += 1;
                    }
                }
            }
            for (id, s) in shared {
                let Some(other) = seg.fuzzy.trigram_len.get(&id) else {
                    continue;
                };
                let sim = s as f32 / (tg.len() as f32 + *other as f32 - s as f32);
                if sim >= threshold {
                    found.insert(seg.vocab.text(id).into(), sim);
                }
            }
        }
        // (term, similarity, passages holding it)
        let mut out: Vec<(Box<str>, f32, u32)> = found
            .into_iter()
            .filter(|(text, _)| self.term_visible(text, filter))
            .map(|(text, sim)| {
                let common = self.term_stats(&text).map_or(0, |s| s.passages);
                (text, sim, common)
            })
            .collect();
        // Most similar first; among equals the more common term (a likelier
        // intended word), then the term itself.
        out.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| b.2.cmp(&a.2))
                .then_with(|| a.0.cmp(&b.0))
        });
        out.truncate(TYPO_CANDIDATES);
        let mut candidates: Vec<Box<str>> = out.into_iter().map(|(t, _, _)| t).collect();
        for v in swap_variants(word) {
            if !candidates.iter().any(|c| **c == *v) && self.term_visible(&v, filter) {
                candidates.push(v.into());
            }
        }
        typo_corrections(word, &candidates)
            .into_iter()
            .map(|(to, weight)| Correction {
                from: word.to_owned(),
                to,
                weight,
            })
            .collect()
    }

    fn homophone_corrections(&self, q: &AnalyzedQuery, filter: &Filter) -> Vec<Correction> {
        let known = |w: &str| self.term_visible(w, filter);
        let mut out = Vec::new();
        for window in han_windows(q) {
            if !window.may_be_typo(known) {
                continue;
            }
            let Some(key) = pinyin_key(&window.text) else {
                continue;
            };
            let mut texts: Vec<&str> = self
                .segments
                .iter()
                .filter_map(|seg| seg.fuzzy.pinyin.get(&key).map(|ids| (seg, ids)))
                .flat_map(|(seg, ids)| ids.iter().map(|id| seg.vocab.text(*id)))
                .collect();
            texts.sort_unstable();
            texts.dedup();
            // Words of live passages only, the more common first.
            let mut candidates: Vec<(&str, u32)> = texts
                .into_iter()
                .filter_map(|t| {
                    let s = self.term_stats(t)?;
                    (s.word_df > 0 && self.term_visible(t, filter)).then_some((t, s.word_df))
                })
                .collect();
            candidates.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            for (text, _) in candidates.into_iter().take(MAX_CORRECTIONS) {
                out.push(Correction {
                    from: window.text.clone(),
                    to: text.into(),
                    weight: HOMOPHONE_SIMILARITY,
                });
            }
        }
        out
    }

    /// Typo-tolerant recall. Query terms missing from the vocabulary are read
    /// as the vocabulary terms a typo or two away among those most similar
    /// by character trigrams (similarity ≥ `threshold`; see
    /// [`typo_corrections`]); windows of Chinese characters that are not
    /// words are read as words with the same toneless pinyin, unless they
    /// hold a stop word or cut through a word of the query that the
    /// knowledge base contains (see [`HanWindow`]). The query's known terms
    /// plus the corrections, each at its weight, are scored with BM25. When
    /// nothing looks like a typo the path returns no hits, so it never
    /// duplicates BM25.
    pub fn fuzzy(
        &self,
        q: &AnalyzedQuery,
        k: usize,
        threshold: f32,
        params: &Bm25Params,
        filter: &Filter,
    ) -> RankedList {
        let mut corrections = Vec::new();
        let mut uncorrected = Vec::new();
        for t in &q.tokens {
            if matches!(t.kind, TokenKind::Word | TokenKind::Ident)
                && t.text.chars().count() >= 3
                && !self.term_visible(&t.text, filter)
            {
                let found = self.trigram_corrections(&t.text, threshold, filter);
                if found.is_empty() {
                    uncorrected.push(t.text.as_str());
                }
                corrections.extend(found);
            }
        }
        corrections.extend(self.homophone_corrections(q, filter));
        if corrections.is_empty() {
            return RankedList {
                path: PathKind::Fuzzy,
                hits: vec![],
                notes: vec![no_correction_note(&uncorrected)],
            };
        }
        let notes = corrections
            .iter()
            .map(|c| format!("{} → {} ({:.2})", c.from, c.to, c.weight))
            .collect();
        let mut terms = self.query_terms(q);
        terms.extend(corrections.iter().map(|c| WeightedTerm {
            text: c.to.clone(),
            weight: c.weight,
            gram: false,
            retrieves: true,
        }));
        let scored = self.score_terms(&terms, params, filter, k);
        self.ranked(PathKind::Fuzzy, scored, &terms, notes)
    }
}

/// The typo path's note when it corrected nothing: which unknown words no
/// vocabulary word is a typo away from, if any.
pub fn no_correction_note(uncorrected: &[&str]) -> String {
    if uncorrected.is_empty() {
        "no unknown term to correct".into()
    } else {
        format!(
            "no word of the knowledge base is a typo away from: {}",
            uncorrected.join(", ")
        )
    }
}

/// A window of two to four Chinese characters of a query: a possible typo
/// that the typo path reads as the vocabulary words with the same pinyin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HanWindow {
    /// The characters.
    pub text: String,
    /// The query's words (two characters or more, as the analyzer segmented
    /// the query) that the window starts or ends inside of.
    pub cuts: Vec<String>,
    /// Whether a character of the window is one the analyzer dropped from
    /// the query as a stop word (的, 是, 谁, 哪里…).
    pub has_stop_word: bool,
}

impl HanWindow {
    /// Whether the window may be a misspelt word, given which strings the
    /// knowledge base contains: not when it is itself known, and not when it
    /// cuts through a known word. A correctly typed question is mostly made of
    /// known words, and a window straddling two of them (是一 of 是一个) is not
    /// a typo; a pinyin typo leaves a string the segmenter cannot read as
    /// known words (退宽 → 退 + 宽), and windows over those stay candidates.
    /// Windows over stop words (队的, 谁为) are not read as typos either: the
    /// search ignores those characters, and their homophones are noise.
    pub fn may_be_typo(&self, known: impl Fn(&str) -> bool) -> bool {
        !self.has_stop_word && !known(&self.text) && !self.cuts.iter().any(|w| known(w))
    }
}

/// The windows of two to four characters of every run of Chinese characters
/// of the query's normalised text, run by run, shorter windows first: where
/// the typo path looks for homophones of words the vocabulary lacks. Each
/// window lists the query words it cuts through, found by aligning the
/// query's Chinese tokens, in order, with the runs (characters between them
/// are stop words the analyzer dropped).
pub fn han_windows(q: &AnalyzedQuery) -> Vec<HanWindow> {
    let mut words = q
        .tokens
        .iter()
        .filter(|t| t.kind == TokenKind::Han)
        .map(|t| t.text.chars().collect::<Vec<char>>())
        .peekable();
    let mut out = Vec::new();
    let mut run: Vec<char> = Vec::new();
    let mut flush = |run: &mut Vec<char>, out: &mut Vec<HanWindow>| {
        // For each character, the range of the multi-character word it is in.
        let mut word_at: Vec<Option<(usize, usize)>> = vec![None; run.len()];
        let mut in_word = vec![false; run.len()];
        let mut p = 0;
        while p < run.len() {
            match words.peek() {
                Some(w) if run[p..].starts_with(w) => {
                    in_word[p..p + w.len()].fill(true);
                    if w.len() > 1 {
                        word_at[p..p + w.len()].fill(Some((p, p + w.len())));
                    }
                    p += w.len();
                    words.next();
                }
                _ => p += 1,
            }
        }
        for len in 2..=4usize {
            for start in 0..run.len().saturating_sub(len - 1) {
                let end = start + len;
                let mut cut: Vec<(usize, usize)> = [word_at[start], word_at[end - 1]]
                    .into_iter()
                    .flatten()
                    .filter(|&(s, e)| s < start || e > end)
                    .collect();
                cut.dedup();
                let cuts = cut
                    .iter()
                    .map(|&(s, e)| run[s..e].iter().collect())
                    .collect();
                out.push(HanWindow {
                    text: run[start..end].iter().collect(),
                    cuts,
                    has_stop_word: in_word[start..end].contains(&false),
                });
            }
        }
        run.clear();
    };
    for c in q.normalized.chars() {
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
    use super::*;
    use crate::index::tests::faq;
    use rag_core::KbSnapshot;
    use rag_text::Analyzer;

    fn index(texts: &[&str]) -> LexicalIndex {
        let snapshot = KbSnapshot {
            passages: texts.iter().map(|t| faq("", t)).collect(),
            ..Default::default()
        };
        LexicalIndex::build(&Analyzer::new(), &snapshot)
    }

    /// Another owner's words are not revealed: not as known words (BM25's
    /// note), not as corrections of a near miss (trigram or homophone).
    #[test]
    fn another_owners_words_stay_hidden_from_notes_and_corrections() {
        let mut secret = faq("", "zebrafish 配送费 genome");
        secret.owner = Some("alice".into());
        let snapshot = KbSnapshot {
            passages: vec![faq("", "public refund policy 退款"), secret],
            ..Default::default()
        };
        let index = LexicalIndex::build(&Analyzer::new(), &snapshot);
        let bob = Filter::new(
            &Default::default(),
            0,
            &rag_core::Viewer::Owner("bob".into()),
        );
        let alice = Filter::new(
            &Default::default(),
            0,
            &rag_core::Viewer::Owner("alice".into()),
        );
        let p = Bm25Params::default();
        let q = index.analyze_query("zebrafish");
        let note = |f: &Filter| index.bm25(&q, 10, &p, f).notes.join(" ");
        assert!(
            note(&bob).contains("not in the vocabulary: zebrafish"),
            "{}",
            note(&bob)
        );
        assert!(!note(&alice).contains("zebrafish"), "{}", note(&alice));
        for typo in ["zebrafsh", "陪送费"] {
            let q = index.analyze_query(typo);
            let seen = |f: &Filter| index.fuzzy(&q, 10, 0.3, &p, f).notes.join(" ");
            assert!(
                !seen(&bob).contains("zebrafish") && !seen(&bob).contains("配送费"),
                "{typo}: {}",
                seen(&bob)
            );
            assert!(seen(&alice).contains("→"), "{typo}: {}", seen(&alice));
        }
    }

    fn corrections(index: &LexicalIndex, query: &str) -> Vec<String> {
        let q = index.analyze_query(query);
        index
            .fuzzy(&q, 10, 0.3, &Bm25Params::default(), &Filter::everything())
            .notes
    }

    /// A swap of two letters is read as the word meant although the two
    /// share few trigrams; a word several edits from another is not its
    /// typo, however many trigrams they share.
    #[test]
    fn english_typos_are_read_by_edit_distance() {
        let index = index(&[
            "how do I get a refund",
            "refer a friend",
            "revert the payment",
            "the norman conquest",
            "launch date",
            "lock the door",
        ]);
        let notes = |query: &str| {
            let q = index.analyze_query(query);
            let p = Bm25Params::default();
            let threshold = rag_core::RetrievalParams::default().fuzzy_threshold;
            index
                .fuzzy(&q, 10, threshold, &p, &Filter::everything())
                .notes
        };
        assert_eq!(notes("refnud"), vec!["refnud → refund (0.83)".to_owned()]);
        assert_eq!(notes("lcok"), vec!["lcok → lock (0.75)".to_owned()]);
        assert_eq!(swap_variants("lcok"), ["clok", "lock", "lcko"]);
        assert!(swap_variants("ab").is_empty() && swap_variants("a12b").is_empty());
        assert_eq!(
            notes("north punch"),
            vec!["no word of the knowledge base is a typo away from: north, punch".to_owned()]
        );
        assert_eq!(
            notes("refund"),
            vec!["no unknown term to correct".to_owned()]
        );
    }

    #[test]
    fn windows_know_the_words_they_cut_and_the_stop_words_they_hold() {
        let index = index(&["大学实验室的开放时间"]);
        let q = index.analyze_query("实验室的门");
        let windows = han_windows(&q);
        let get = |t: &str| windows.iter().find(|w| w.text == t).unwrap();
        assert_eq!(get("验室").cuts, vec!["实验室".to_owned()]);
        assert!(get("实验室").cuts.is_empty());
        assert!(get("室的").has_stop_word);
        assert!(!get("验室").has_stop_word);
        // Shorter windows first, run by run.
        assert_eq!(windows[0].text, "实验");
        assert_eq!(windows.len(), 4 + 3 + 2);
    }

    #[test]
    fn homophone_typos_are_read_but_correctly_typed_words_are_left_alone() {
        let index = index(&[
            "在订单页申请退款",
            "配送费按距离计算",
            "大学实验室的开放时间",
            "实际到账时间",
            "对德贸易",
        ]);
        // Typos: strings the segmenter cannot read as known words.
        assert!(corrections(&index, "退宽")
            .iter()
            .any(|n| n.starts_with("退宽 → 退款")));
        assert!(corrections(&index, "陪送费多少")
            .iter()
            .any(|n| n.contains("→ 配送费")));
        // 室几 sounds like 实际, but it cuts the known word 实验室.
        assert_eq!(
            corrections(&index, "实验室几点开放"),
            vec!["no unknown term to correct".to_owned()]
        );
        // 队的 sounds like 对德, but 的 is a stop word.
        assert_eq!(
            corrections(&index, "球队的实验室"),
            vec!["no unknown term to correct".to_owned()]
        );
    }

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
