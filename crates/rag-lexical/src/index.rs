//! The in-memory inverted index of one knowledge base.

use crate::filter::Filter;
use crate::fuzzy::FuzzyVocab;
use crate::ngram::NgramIndex;
use crate::synonyms::SynonymTable;
use rag_core::{
    AnalyzedQuery, KbSnapshot, Passage, PassageId, PassageKind, PassageView, TokenKind,
};
use rag_text::{detect_language, normalize, normalize_for_match, Analyzer, Mode};
use rustc_hash::FxHashMap;

/// Fields: title, body, tags (words), and the character bigrams of Chinese text.
pub(crate) const FIELDS: usize = 4;
/// The word fields: title, body, tags.
pub(crate) const WORD_FIELDS: usize = 3;
/// The field of Chinese character bigrams.
pub(crate) const GRAMS: usize = 3;

/// One passage's occurrences of one term, per field.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Posting {
    pub ord: u32,
    pub tf: [u16; FIELDS],
}

/// A vocabulary entry.
#[derive(Debug, Clone)]
pub(crate) struct Term {
    pub text: Box<str>,
    pub kind: TokenKind,
    pub postings: Vec<Posting>,
    /// Passages containing the term in each field.
    pub df: [u32; FIELDS],
    /// Passages containing the term in any word field (the flat field's df).
    pub word_df: u32,
}

/// The immutable index of one knowledge base snapshot.
#[derive(Debug)]
pub struct LexicalIndex {
    pub(crate) analyzer: Analyzer,
    pub(crate) passages: Vec<Passage>,
    pub(crate) ord_of: FxHashMap<PassageId, u32>,
    /// Ordinals of passages in the text index (chunks and FAQ entries).
    pub(crate) text_count: u32,
    pub(crate) vocab: FxHashMap<Box<str>, u32>,
    pub(crate) terms: Vec<Term>,
    pub(crate) lengths: Vec<[u32; FIELDS]>,
    /// Average length of each field; the last entry is the flat word field (title + body + tags).
    pub(crate) avg_len: [f32; FIELDS + 1],
    /// Normalised title + body + tags of each text passage, for substring matching.
    pub(crate) match_text: Vec<String>,
    /// N-gram candidate filter over `match_text`.
    pub(crate) ngrams: NgramIndex,
    pub(crate) fuzzy: FuzzyVocab,
    pub(crate) synonyms: SynonymTable,
    /// Ordinals of fact passages.
    pub(crate) facts: Vec<u32>,
    /// The language most of the text is written in.
    language: rag_core::Language,
    /// Whether some passage is restricted to an owner (else every viewer
    /// sees the whole vocabulary).
    owned: bool,
    seq: u64,
}

/// A passage analysed the way the index analyses it; stores that keep term
/// statistics themselves (PostgreSQL) store exactly this.
#[derive(Debug, Clone, PartialEq)]
pub struct PassageTerms {
    /// Tokens of the title, body and tags fields, then the Chinese character
    /// bigrams of all three, in that order.
    pub fields: [Vec<(String, TokenKind)>; FIELDS],
    /// Normalised title, body and tags, one per line: what substring matching reads.
    pub match_text: String,
}

/// Analyses a text passage (chunk or FAQ entry) for indexing.
pub fn passage_terms(analyzer: &Analyzer, p: &Passage) -> PassageTerms {
    analyse(analyzer, p)
}

fn analyse(analyzer: &Analyzer, p: &Passage) -> PassageTerms {
    let mut grams = Vec::new();
    let mut take = |text: &str| -> Vec<(String, TokenKind)> {
        let mut words = Vec::new();
        for t in analyzer.analyze(text, Mode::Index) {
            if t.kind == TokenKind::HanBigram {
                grams.push((t.text, t.kind));
            } else {
                words.push((t.text, t.kind));
            }
        }
        words
    };
    let tags = p.tags.join(" ");
    // Allocated at its final size: these strings stay in the index.
    let parts = [
        normalize_for_match(&p.title),
        normalize_for_match(&p.body),
        normalize_for_match(&tags),
    ];
    let mut match_text = String::with_capacity(parts.iter().map(|t| t.len() + 1).sum());
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            match_text.push('\n');
        }
        match_text.push_str(part);
    }
    let fields = [take(&p.title), take(&p.body), take(&tags), Vec::new()];
    let [title, body, tags, _] = fields;
    PassageTerms {
        fields: [title, body, tags, grams],
        match_text,
    }
}

impl LexicalIndex {
    /// Builds the index of a snapshot. Analysis runs on all available cores.
    pub fn build(analyzer: &Analyzer, snapshot: &KbSnapshot) -> Self {
        Self::build_in_batches(analyzer, snapshot, ANALYSIS_BATCH_BYTES)
    }

    fn build_in_batches(analyzer: &Analyzer, snapshot: &KbSnapshot, batch_bytes: usize) -> Self {
        let analyzer = analyzer.with_user_words(
            snapshot
                .user_words
                .iter()
                .map(|w| (w.word.as_str(), w.freq)),
        );
        // Text passages first (dense ordinals 0..text_count), facts after.
        let mut passages: Vec<Passage> = snapshot
            .passages
            .iter()
            .filter(|p| p.kind() != PassageKind::Fact && p.searchable)
            .cloned()
            .collect();
        let text_count = passages.len() as u32;
        passages.extend(
            snapshot
                .passages
                .iter()
                .filter(|p| p.kind() == PassageKind::Fact)
                .cloned(),
        );
        let facts = (text_count..passages.len() as u32).collect();

        let mut vocab: FxHashMap<Box<str>, u32> = FxHashMap::default();
        let mut terms: Vec<Term> = Vec::new();
        let mut lengths = Vec::with_capacity(text_count as usize);
        let mut match_text = Vec::with_capacity(text_count as usize);
        let mut totals = [0u64; FIELDS];
        let mut local: FxHashMap<u32, [u16; FIELDS]> = FxHashMap::default();
        // Analysed tokens take about ten times the bytes of their text, so
        // passages are analysed in batches of bounded text size and folded
        // into the index before the next batch: the build's peak memory stays
        // near the size of the index instead of growing with every token.
        let analysed = text_batches(&passages[..text_count as usize], batch_bytes)
            .flat_map(|batch| analyse_parallel(&analyzer, batch));
        for (ord, a) in analysed.enumerate() {
            local.clear();
            let mut len = [0u32; FIELDS];
            for (field, tokens) in a.fields.into_iter().enumerate() {
                len[field] = tokens.len() as u32;
                totals[field] += tokens.len() as u64;
                for (text, kind) in tokens {
                    let id = match vocab.get(text.as_str()) {
                        Some(id) => *id,
                        None => {
                            let id = terms.len() as u32;
                            let text: Box<str> = text.into_boxed_str();
                            vocab.insert(text.clone(), id);
                            terms.push(Term {
                                text,
                                kind,
                                postings: Vec::new(),
                                df: [0; FIELDS],
                                word_df: 0,
                            });
                            id
                        }
                    };
                    let tf = local.entry(id).or_insert([0; FIELDS]);
                    tf[field] = tf[field].saturating_add(1);
                }
            }
            let mut entries: Vec<(u32, [u16; FIELDS])> =
                local.iter().map(|(k, v)| (*k, *v)).collect();
            entries.sort_unstable_by_key(|e| e.0);
            for (id, tf) in entries {
                let term = &mut terms[id as usize];
                for (df, &n) in term.df.iter_mut().zip(&tf) {
                    if n > 0 {
                        *df += 1;
                    }
                }
                if tf[..WORD_FIELDS].iter().any(|t| *t > 0) {
                    term.word_df += 1;
                }
                term.postings.push(Posting {
                    ord: ord as u32,
                    tf,
                });
            }
            lengths.push(len);
            match_text.push(a.match_text);
        }
        // Posting lists grew by doubling; the index is immutable from here on.
        for term in &mut terms {
            term.postings.shrink_to_fit();
        }
        terms.shrink_to_fit();
        vocab.shrink_to_fit();
        let n = text_count.max(1) as f32;
        let mut avg_len = [0f32; FIELDS + 1];
        for f in 0..FIELDS {
            avg_len[f] = (totals[f] as f32 / n).max(1.0);
        }
        avg_len[FIELDS] = (totals[..WORD_FIELDS].iter().sum::<u64>() as f32 / n).max(1.0);

        let language = corpus_language(&match_text);
        let fuzzy = FuzzyVocab::build(&terms);
        let ngrams = NgramIndex::build(&match_text);
        let synonyms = SynonymTable::build(&analyzer, &snapshot.synonyms);
        let ord_of = passages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id, i as u32))
            .collect();
        let owned = passages.iter().any(|p| p.owner.is_some());
        LexicalIndex {
            analyzer,
            passages,
            ord_of,
            text_count,
            vocab,
            terms,
            lengths,
            avg_len,
            match_text,
            ngrams,
            fuzzy,
            synonyms,
            facts,
            language,
            owned,
            seq: snapshot.seq,
        }
    }

    /// The commit sequence number of the snapshot this index was built from.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The language most of the knowledge base is written in.
    pub fn language(&self) -> rag_core::Language {
        self.language
    }

    /// The analyzer of this knowledge base (with its user dictionary).
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// Number of searchable text passages (chunks and FAQ entries).
    pub fn len(&self) -> usize {
        self.text_count as usize
    }

    /// Whether the index holds no text passage.
    pub fn is_empty(&self) -> bool {
        self.text_count == 0
    }

    /// Number of distinct terms.
    pub fn vocabulary_size(&self) -> usize {
        self.terms.len()
    }

    /// Analyses a query the way this index analysed its passages.
    pub fn analyze_query(&self, raw: &str) -> AnalyzedQuery {
        let normalized = normalize(raw).text;
        AnalyzedQuery {
            raw: raw.to_owned(),
            language: detect_language(&normalized),
            tokens: self.analyzer.analyze(raw, Mode::Query),
            key_terms: self.analyzer.key_terms(raw),
            normalized,
        }
    }

    /// Every passage of the index.
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// A passage by id.
    pub fn passage(&self, id: PassageId) -> Option<&Passage> {
        self.ord_of.get(&id).map(|o| &self.passages[*o as usize])
    }

    /// The passage as shown with a hit, with `matched` terms highlighted in its body.
    pub fn view(&self, id: PassageId, matched: &[String]) -> Option<PassageView> {
        let p = self.passage(id)?;
        Some(PassageView {
            id,
            kind: p.kind(),
            title: p.title.clone(),
            body: p.body.clone(),
            source: p.source.clone(),
            highlights: crate::highlight(&self.analyzer, &p.body, matched),
        })
    }

    pub(crate) fn term_id(&self, text: &str) -> Option<u32> {
        self.vocab.get(text).copied()
    }

    /// The term, if some passage the filter's viewer may see contains it:
    /// what notes and typo look-ups consult, so that the words of another
    /// owner's documents are never revealed (as "known", or as a correction).
    pub(crate) fn visible_term_id(&self, text: &str, filter: &Filter) -> Option<u32> {
        let id = self.term_id(text)?;
        self.term_visible(id, filter).then_some(id)
    }

    /// Whether a passage the filter's viewer may see contains term `id`.
    pub(crate) fn term_visible(&self, id: u32, filter: &Filter) -> bool {
        if !self.owned || filter.sees_everything() {
            return true;
        }
        self.terms[id as usize]
            .postings
            .iter()
            .any(|p| filter.sees_owner_of(&self.passages[p.ord as usize]))
    }
}

/// Text (title and body bytes) analysed per batch while building.
const ANALYSIS_BATCH_BYTES: usize = 1 << 20;

/// Consecutive runs of passages with about `budget` bytes of text each (at
/// least one passage per run).
fn text_batches(passages: &[Passage], budget: usize) -> impl Iterator<Item = &[Passage]> {
    let mut rest = passages;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut n = 0;
        while n < rest.len() && (n == 0 || bytes < budget) {
            bytes += rest[n].title.len() + rest[n].body.len();
            n += 1;
        }
        let (batch, tail) = rest.split_at(n);
        rest = tail;
        Some(batch)
    })
}

fn analyse_parallel(analyzer: &Analyzer, passages: &[Passage]) -> Vec<PassageTerms> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if threads <= 1 || passages.len() < 256 {
        return passages.iter().map(|p| analyse(analyzer, p)).collect();
    }
    let chunk = passages.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = passages
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|p| analyse(analyzer, p))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("analysis thread panicked"))
            .collect()
    })
}

/// The language of a corpus from its Han characters and Latin letters (a
/// Chinese character weighs about as much as four letters).
fn corpus_language(texts: &[String]) -> rag_core::Language {
    let (mut han, mut latin) = (0usize, 0usize);
    for t in texts {
        for c in t.chars() {
            if rag_text::is_han(c) {
                han += 1;
            } else if c.is_ascii_alphabetic() {
                latin += 1;
            }
        }
    }
    let latin = latin / 4;
    match (han, latin) {
        (0, 0) => rag_core::Language::Unknown,
        _ if han >= 4 * latin => rag_core::Language::Zh,
        _ if latin >= 4 * han => rag_core::Language::En,
        _ => rag_core::Language::Mixed,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rag_core::{Bm25Params, FaqId};

    /// A searchable FAQ passage (also used by the other modules' tests).
    pub(crate) fn faq(q: &str, a: &str) -> Passage {
        Passage {
            id: PassageId::Faq(FaqId::generate()),
            title: q.into(),
            body: a.into(),
            tags: vec![],
            aliases: vec![],
            doc: None,
            source: None,
            span: None,
            created_at: 0,
            valid_from: None,
            valid_until: None,
            searchable: true,
            owner: None,
        }
    }

    #[test]
    fn batches_cover_every_passage_in_order() {
        let passages: Vec<Passage> = (0..7)
            .map(|i| faq(&format!("q{i}"), &"x".repeat(i * 10)))
            .collect();
        for budget in [1, 25, 60, 10_000] {
            let batches: Vec<&[Passage]> = text_batches(&passages, budget).collect();
            let ids: Vec<PassageId> = batches
                .iter()
                .flat_map(|b| b.iter().map(|p| p.id))
                .collect();
            assert_eq!(
                ids,
                passages.iter().map(|p| p.id).collect::<Vec<_>>(),
                "budget {budget}"
            );
            assert!(batches.iter().all(|b| !b.is_empty()));
            // A batch only goes past the budget with its last passage.
            for b in &batches {
                let bytes: usize = b[..b.len() - 1]
                    .iter()
                    .map(|p| p.title.len() + p.body.len())
                    .sum();
                assert!(bytes < budget, "budget {budget}: {bytes}");
            }
        }
        assert_eq!(text_batches(&passages, 1).count(), 7);
        assert_eq!(text_batches(&passages, 10_000).count(), 1);
    }

    #[test]
    fn batched_build_equals_one_batch() {
        let mut passages = vec![
            faq("怎么申请退款", "在订单页点击申请退款，三个工作日内原路退回"),
            faq("营业时间", "每天 16:00 开门，次日 02:00 打烊"),
            faq(
                "How do I reset my password?",
                "Open settings, choose Security and press Reset password.",
            ),
        ];
        for i in 0..300 {
            passages.push(faq(
                &format!("问题 {i} question"),
                &format!("答案 answer number {i} 退款 refund {}", i % 7),
            ));
        }
        let snapshot = KbSnapshot {
            passages,
            ..Default::default()
        };
        let analyzer = Analyzer::new();
        let one = LexicalIndex::build_in_batches(&analyzer, &snapshot, usize::MAX);
        let many = LexicalIndex::build_in_batches(&analyzer, &snapshot, 64);
        assert_eq!(one.vocabulary_size(), many.vocabulary_size());
        assert_eq!(one.lengths, many.lengths);
        assert_eq!(one.match_text, many.match_text);
        for q in ["退款", "refund answer 3", "营业时间", "reset password"] {
            let (a, b) = (one.analyze_query(q), many.analyze_query(q));
            let params = Bm25Params::default();
            let (la, lb) = (
                one.bm25(&a, 50, &params, &crate::Filter::everything()),
                many.bm25(&b, 50, &params, &crate::Filter::everything()),
            );
            assert!(!la.hits.is_empty(), "{q}");
            let key = |l: &rag_core::RankedList| {
                l.hits
                    .iter()
                    .map(|h| (h.id, h.score.to_bits()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(key(&la), key(&lb), "{q}");
        }
    }
}
