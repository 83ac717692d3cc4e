//! The synonym path and the synonym table it uses.

use crate::bm25::WeightedTerm;
use crate::filter::Filter;
use crate::index::LexicalIndex;
use rag_core::{AnalyzedQuery, Bm25Params, PathKind, RankedList, SynonymGroup};
use rag_text::{is_han, normalize_for_match, Analyzer, Mode};

/// Weight of a synonym's terms relative to the query's own.
const EXPANSION_WEIGHT: f32 = 0.8;

/// One way of saying something.
#[derive(Debug, Clone)]
pub(crate) struct Phrase {
    pub text: String,
    /// Normalised match form (for Chinese: matched as a substring of the query).
    pub match_form: String,
    /// Query-mode terms (for alphabetic phrases: all must be among the query's terms).
    pub tokens: Vec<String>,
    pub han: bool,
}

impl Phrase {
    pub(crate) fn new(analyzer: &Analyzer, text: &str) -> Self {
        let match_form = normalize_for_match(text);
        Phrase {
            text: text.trim().to_owned(),
            han: match_form.chars().any(is_han),
            tokens: analyzer
                .analyze(text, Mode::Query)
                .into_iter()
                .filter(|t| t.kind.retrieves())
                .map(|t| t.text)
                .collect(),
            match_form,
        }
    }

    /// Whether the query says this phrase.
    pub(crate) fn occurs_in(&self, q: &AnalyzedQuery, query_match_form: &str) -> bool {
        if self.match_form.is_empty() {
            return false;
        }
        if self.han {
            query_match_form.contains(&self.match_form)
        } else {
            !self.tokens.is_empty()
                && self
                    .tokens
                    .iter()
                    .all(|t| q.tokens.iter().any(|qt| qt.text == *t))
        }
    }
}

/// The knowledge base's synonym groups, analysed.
#[derive(Debug, Default)]
pub(crate) struct SynonymTable {
    pub groups: Vec<Vec<Phrase>>,
}

/// A group that fired: the phrase the query used and the others.
pub(crate) struct Fired<'a> {
    pub said: &'a Phrase,
    pub others: Vec<&'a Phrase>,
}

impl SynonymTable {
    pub(crate) fn build(analyzer: &Analyzer, groups: &[SynonymGroup]) -> Self {
        SynonymTable {
            groups: groups
                .iter()
                .map(|g| {
                    g.terms
                        .iter()
                        .filter(|t| !t.trim().is_empty())
                        .map(|t| Phrase::new(analyzer, t))
                        .collect::<Vec<_>>()
                })
                .filter(|g: &Vec<Phrase>| g.len() >= 2)
                .collect(),
        }
    }

    pub(crate) fn fired<'a>(&'a self, q: &AnalyzedQuery) -> Vec<Fired<'a>> {
        let qm = normalize_for_match(&q.raw);
        let mut out = Vec::new();
        for g in &self.groups {
            // The longest phrase said wins (「退款时间」 over 「退款」 when both are members).
            let said = g
                .iter()
                .filter(|p| p.occurs_in(q, &qm))
                .max_by_key(|p| p.match_form.len());
            if let Some(said) = said {
                out.push(Fired {
                    said,
                    others: g.iter().filter(|p| !std::ptr::eq(*p, said)).collect(),
                });
            }
        }
        out
    }

    /// Every phrase in a group with any of `names`, `names` included.
    pub(crate) fn siblings(&self, analyzer: &Analyzer, names: &[String]) -> Vec<Phrase> {
        let mut out: Vec<Phrase> = names.iter().map(|n| Phrase::new(analyzer, n)).collect();
        for g in &self.groups {
            if g.iter()
                .any(|p| out.iter().any(|o| o.match_form == p.match_form))
            {
                for p in g {
                    if !out.iter().any(|o| o.match_form == p.match_form) {
                        out.push(p.clone());
                    }
                }
            }
        }
        out
    }
}

impl LexicalIndex {
    /// BM25 over the query plus the other members of every synonym group the
    /// query fired. Returns no hits when no group fired, so it never
    /// duplicates the BM25 path.
    pub fn synonym(
        &self,
        q: &AnalyzedQuery,
        k: usize,
        params: &Bm25Params,
        filter: &Filter,
    ) -> RankedList {
        let Some((expansion, notes)) = self.synonym_expansion(q) else {
            return RankedList {
                path: PathKind::Synonym,
                hits: vec![],
                notes: vec!["no synonym fired".into()],
            };
        };
        let mut terms = self.query_terms(q);
        for e in &expansion {
            let known = self.segments.iter().any(|s| s.term(&e.text).is_some());
            if known && !terms.iter().any(|w| *w.text == *e.text) {
                terms.push(WeightedTerm {
                    text: e.text.as_str().into(),
                    weight: e.weight,
                    gram: e.gram,
                    retrieves: e.retrieves,
                });
            }
        }
        let scored = self.score_terms(&terms, params, filter, k);
        self.ranked(PathKind::Synonym, scored, &terms, notes)
    }
}

impl LexicalIndex {
    /// The synonym groups the query fires, each as the phrase the query said
    /// followed by the group's other members (what the query log records).
    pub fn fired_synonym_groups(&self, q: &AnalyzedQuery) -> Vec<Vec<String>> {
        self.synonyms
            .fired(q)
            .iter()
            .map(|f| {
                std::iter::once(f.said.text.clone())
                    .chain(f.others.iter().map(|p| p.text.clone()))
                    .collect()
            })
            .collect()
    }

    /// The synonym path's expansion for a store that scores terms itself: the
    /// other members' terms of every group the query fired (each once, none
    /// of the query's own), with the path's notes; `None` when no group fired.
    pub fn synonym_expansion(
        &self,
        q: &AnalyzedQuery,
    ) -> Option<(Vec<rag_core::QueryTerm>, Vec<String>)> {
        let fired = self.synonyms.fired(q);
        if fired.is_empty() {
            return None;
        }
        let mut terms: Vec<rag_core::QueryTerm> = Vec::new();
        let mut notes = Vec::new();
        for f in &fired {
            notes.push(format!(
                "{} → {}",
                f.said.text,
                f.others
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            for p in &f.others {
                for t in &p.tokens {
                    if !q.tokens.iter().any(|qt| qt.text == *t)
                        && !terms.iter().any(|w| w.text == *t)
                    {
                        terms.push(rag_core::QueryTerm {
                            text: t.clone(),
                            weight: EXPANSION_WEIGHT,
                            gram: false,
                            retrieves: true,
                        });
                    }
                }
            }
        }
        Some((terms, notes))
    }
}
