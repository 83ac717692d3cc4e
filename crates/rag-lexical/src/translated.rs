//! The translated path: BM25 over the translations of the question's words
//! in the other language, from a bilingual dictionary ([`Bilingual`]). A
//! Chinese question finds English passages and the reverse, through words
//! rather than vectors; a question whose words have no translation, or
//! whose translations the knowledge base does not hold, returns nothing.

use crate::bm25::WeightedTerm;
use crate::filter::Filter;
use crate::index::LexicalIndex;
use rag_core::{AnalyzedQuery, Bm25Params, Language, PathKind, QueryTerm, RankedList, TokenKind};
use rag_text::{Analyzer, Bilingual, Mode};

/// The note of a path none of whose translations the caller's passages hold.
pub const NOTHING_HERE: &str = "no translation occurs in this knowledge base";

/// Sources named in the path's note.
const NOTE_SOURCES: usize = 8;

/// The translated path's terms for a query: each word's translations, as
/// the index analyses them, weighted 1/√n for a word with n translated
/// terms (so that a word with many senses counts about as much as one with
/// one), none of the query's own terms; and the path's note. `None` when no
/// word of the query has a translation.
pub fn translated_terms(
    analyzer: &Analyzer,
    dict: &Bilingual,
    q: &AnalyzedQuery,
) -> Option<(Vec<QueryTerm>, Vec<String>)> {
    let translations = dict.translate(&q.tokens);
    if translations.is_empty() {
        return None;
    }
    let mut terms: Vec<QueryTerm> = Vec::new();
    for t in &translations {
        let mut own: Vec<QueryTerm> = Vec::new();
        for target in &t.targets {
            for token in analyzer.analyze(target, Mode::Query) {
                if !token.kind.retrieves()
                    || is_single_han(&token)
                    || q.tokens.iter().any(|qt| qt.text == token.text)
                    || own.iter().any(|o| o.text == token.text)
                {
                    continue;
                }
                own.push(QueryTerm {
                    text: token.text,
                    weight: 1.0,
                    gram: token.kind.is_bigram(),
                    retrieves: true,
                });
            }
        }
        let weight = 1.0 / (own.len().max(1) as f32).sqrt();
        for mut term in own {
            term.weight = weight;
            match terms.iter_mut().find(|x| x.text == term.text) {
                Some(x) => x.weight = x.weight.max(weight),
                None => terms.push(term),
            }
        }
    }
    let mut note = translations
        .iter()
        .take(NOTE_SOURCES)
        .map(|t| format!("{} → {}", t.source, t.targets.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    if translations.len() > NOTE_SOURCES {
        note.push_str(&format!("; {} more", translations.len() - NOTE_SOURCES));
    }
    Some((terms, vec![note]))
}

/// A one-character Chinese word cut from a translation (有 of 有作用, 连
/// and 系 of 连系): as common as a stop word in Chinese text and no translation
/// of anything alone, it is left out. On the mixed XQuAD development set
/// the path without them gave hybrid nDCG@10 0.9015 against 0.9023 and
/// lexical 0.7976 against 0.7948 (docs/quality.md), and over PostgreSQL
/// its p50 at 100,000 documents went from 67 to 40 ms.
fn is_single_han(token: &rag_core::Token) -> bool {
    token.kind == TokenKind::Han && token.text.chars().count() == 1
}

/// The language a question's words are translated into (`Unknown` for a
/// question in neither or both, whose translations may match anything).
pub fn other_language(question: Language) -> Language {
    match question {
        Language::Zh => Language::En,
        Language::En => Language::Zh,
        _ => Language::Unknown,
    }
}

impl LexicalIndex {
    /// The translated path's terms for this index's analyzer (see [`translated_terms`]).
    pub fn translated_terms(
        &self,
        dict: &Bilingual,
        q: &AnalyzedQuery,
    ) -> Option<(Vec<QueryTerm>, Vec<String>)> {
        translated_terms(&self.analyzer, dict, q)
    }

    /// BM25 over the translations of the query's words (see the module).
    pub fn translated(
        &self,
        dict: &Bilingual,
        q: &AnalyzedQuery,
        k: usize,
        params: &Bm25Params,
        filter: &Filter,
    ) -> RankedList {
        let Some((terms, mut notes)) = self.translated_terms(dict, q) else {
            return RankedList {
                path: PathKind::Translated,
                hits: vec![],
                notes: vec!["no word of the question has a dictionary translation".into()],
            };
        };
        let terms: Vec<WeightedTerm> = terms
            .into_iter()
            .filter(|t| self.segments.iter().any(|s| s.term(&t.text).is_some()))
            .map(|t| WeightedTerm {
                text: t.text.into(),
                weight: t.weight,
                gram: t.gram,
                retrieves: t.retrieves,
            })
            .collect();
        if !terms.iter().any(|t| self.term_visible(&t.text, filter)) {
            notes.push(NOTHING_HERE.into());
        }
        // Passages in the other language only: those in the question's
        // language, or mixed, are BM25's to find.
        let filter = filter.clone().only_in(other_language(q.language));
        let scored = self.score_terms(&terms, params, &filter, k);
        self.ranked(PathKind::Translated, scored, &terms, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::Language;

    const SAMPLE: &str = "\
銀行 银行 [yin2 hang2] /bank/
退款 退款 [tui4 kuan3] /to refund/refund/
營業時間 营业时间 [ying2 ye4 shi2 jian1] /business hours/opening hours/
連繫 连系 [lian2 xi4] /liaison/
";

    fn query(a: &Analyzer, text: &str) -> AnalyzedQuery {
        AnalyzedQuery {
            raw: text.into(),
            normalized: text.into(),
            language: rag_text::detect_language(text),
            tokens: a.analyze(text, Mode::Query),
            key_terms: vec![],
        }
    }

    #[test]
    fn each_word_weighs_about_one_whatever_its_number_of_senses() {
        let a = Analyzer::new();
        let dict = Bilingual::parse(SAMPLE, &a).unwrap();
        let (terms, notes) = translated_terms(&a, &dict, &query(&a, "银行营业时间")).unwrap();
        let weight = |t: &str| terms.iter().find(|x| x.text == t).unwrap().weight;
        assert_eq!(weight("bank"), 1.0);
        // busi, hour, open: three terms of one word.
        assert!((weight("hour") - 1.0 / 3f32.sqrt()).abs() < 1e-6);
        assert_eq!(terms.len(), 4);
        assert_eq!(notes, vec!["银行 → bank; 营业时间 → busi, hour, open"]);
        let (terms, _) = translated_terms(&a, &dict, &query(&a, "refund please")).unwrap();
        assert_eq!(terms[0].text, "退款");
        assert!(translated_terms(&a, &dict, &query(&a, "你好")).is_none());
        assert_eq!(query(&a, "refund").language, Language::En);
    }

    #[test]
    fn one_character_words_of_a_translation_are_left_out() {
        let a = Analyzer::new();
        // 连系 is cut into 连, 系 and the bigram 连系.
        let cut = a.analyze("连系", Mode::Query);
        assert!(cut.iter().any(is_single_han), "{cut:?}");
        let dict = Bilingual::parse(SAMPLE, &a).unwrap();
        let (terms, notes) = translated_terms(&a, &dict, &query(&a, "liaison")).unwrap();
        assert_eq!(notes, vec!["liaison → 连系"]);
        assert_eq!(terms.len(), 1);
        assert!(
            terms.iter().all(|t| t.text.chars().count() > 1),
            "{terms:?}"
        );
    }
}
