//! The sentence-support check: each sentence of an answer against the
//! sources it cites, by term overlap and by embedding similarity, so that
//! support is found across languages (a Chinese sentence over an English
//! source shares almost no terms with it; the embeddings carry it).
//!
//! A sentence's citations are the markers inside it; a sentence without any
//! takes those of the next cited sentence on the same line (a citation at the
//! end of a quoted paragraph covers the paragraph). Sentences that cite nothing are reported as uncited, not
//! checked. Every cited source's body is split into sentences; the best
//! matching source sentence is reported with its byte range in the body. A
//! sentence is supported when that match reaches the term-overlap threshold
//! or the cosine threshold, and every number the sentence states appears in
//! the cited passage: embeddings barely tell "5 years" from "10 years", so
//! numbers are compared as numbers (digits, and in the passage also English
//! number words and Chinese numerals, so "five-year" and 「五年」 count as 5).

use crate::citations::{find_markers, strip_markers};
use crate::embed::{cosine, embed_checked, SentenceEmbedder};
use crate::sentences::split_sentences;
use crate::terms::{overlap, term_set};
use rag_core::event::ContextSource;
use rag_core::PassageId;
use rag_text::Analyzer;
use serde::{Deserialize, Serialize};

/// Thresholds of the check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SupportConfig {
    /// Share of the answer sentence's terms found in the source sentence.
    pub min_overlap: f64,
    /// Cosine similarity of the two sentences' embeddings. The default suits
    /// multilingual-e5-small, whose cosines are compressed: in the golden
    /// tests, Chinese–English paraphrases score 0.85–0.91 and invented
    /// sentences of the same domain 0.78–0.79.
    pub min_cosine: f32,
}

impl Default for SupportConfig {
    fn default() -> Self {
        SupportConfig {
            min_overlap: 0.6,
            min_cosine: 0.82,
        }
    }
}

/// The best-matching source sentence for an answer sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupportMatch {
    /// The source's `[n]`.
    pub n: u32,
    /// The passage.
    pub id: PassageId,
    /// Byte range of the supporting sentence in the passage body.
    pub span: (usize, usize),
    /// The supporting sentence.
    pub text: String,
    /// Term overlap (share of the answer sentence's terms).
    pub overlap: f64,
    /// Cosine similarity, when embeddings were available.
    pub cosine: Option<f32>,
    /// Numbers of the answer sentence that the cited passage does not contain.
    pub missing_numbers: Vec<String>,
}

/// The verdict on one sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// A cited source backs it.
    Supported {
        /// The supporting span.
        support: SupportMatch,
        /// Whether the term overlap alone reaches its threshold.
        by_terms: bool,
        /// Whether the embedding similarity alone reaches its threshold.
        by_embedding: bool,
    },
    /// No cited source backs it.
    Unsupported {
        /// The closest span found, for a reader to judge.
        closest: Option<SupportMatch>,
    },
    /// It cites no source, so it was not checked.
    Uncited,
}

/// One answer sentence and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentenceSupport {
    /// Byte range in the answer.
    pub range: (usize, usize),
    /// The sentence without its citation markers.
    pub text: String,
    /// Sources it cites (its own markers, or inherited on its line).
    pub cites: Vec<u32>,
    /// The verdict.
    pub verdict: Verdict,
}

/// The check of a whole answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupportReport {
    /// Per sentence, in order.
    pub sentences: Vec<SentenceSupport>,
    /// Why embeddings were not used, when they were not (terms only then).
    pub embedding_note: Option<String>,
}

impl SupportReport {
    /// Sentences that cite sources which do not back them.
    pub fn unsupported(&self) -> impl Iterator<Item = &SentenceSupport> {
        self.sentences
            .iter()
            .filter(|s| matches!(s.verdict, Verdict::Unsupported { .. }))
    }
}

struct AnswerSentence {
    range: (usize, usize),
    text: String,
    cites: Vec<u32>,
    line: usize,
}

fn answer_sentences(answer: &str, sources: &[ContextSource]) -> Vec<AnswerSentence> {
    let mut out: Vec<AnswerSentence> = split_sentences(answer)
        .into_iter()
        .map(|s| {
            let raw = s.text(answer);
            let mut cites: Vec<u32> = Vec::new();
            for m in find_markers(raw) {
                for n in m.numbers {
                    if sources.iter().any(|s| s.n == n) && !cites.contains(&n) {
                        cites.push(n);
                    }
                }
            }
            let text = clean(&strip_markers(raw));
            let line = answer[..s.start].matches('\n').count();
            AnswerSentence {
                range: (s.start, s.end),
                text,
                cites,
                line,
            }
        })
        .collect();
    // Inherit citations within a line from the next cited sentence.
    for i in 0..out.len() {
        if !out[i].cites.is_empty() {
            continue;
        }
        let line = out[i].line;
        let next = out[i + 1..]
            .iter()
            .take_while(|s| s.line == line)
            .find(|s| !s.cites.is_empty());
        if let Some(c) = next.map(|s| s.cites.clone()) {
            out[i].cites = c;
        }
    }
    out
}

/// Strips list markers and quotation marks around a quoted sentence.
fn clean(s: &str) -> String {
    s.trim()
        .trim_matches(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '「' | '」' | '『' | '』' | '“' | '”' | '"' | '·' | '-' | '•' | '*'
                )
        })
        .to_string()
}

struct SourceSentence {
    n: u32,
    id: PassageId,
    span: (usize, usize),
    text: String,
}

fn source_sentences(sources: &[ContextSource], wanted: &[u32]) -> Vec<SourceSentence> {
    sources
        .iter()
        .filter(|s| wanted.contains(&s.n))
        .flat_map(|s| {
            split_sentences(&s.passage.body)
                .into_iter()
                .map(move |sp| SourceSentence {
                    n: s.n,
                    id: s.passage.id,
                    span: (sp.start, sp.end),
                    text: sp.text(&s.passage.body).to_string(),
                })
        })
        .collect()
}

/// The texts [`check_support`] will ask an embedder for, so they can be
/// embedded beforehand (as [`crate::PrecomputedEmbeddings`]).
pub fn support_texts(answer: &str, sources: &[ContextSource]) -> Vec<String> {
    let sentences: Vec<AnswerSentence> = answer_sentences(answer, sources)
        .into_iter()
        .filter(|s| !s.cites.is_empty())
        .collect();
    let mut wanted: Vec<u32> = sentences
        .iter()
        .flat_map(|s| s.cites.iter().copied())
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut texts: Vec<String> = sentences.into_iter().map(|s| s.text).collect();
    texts.extend(
        source_sentences(sources, &wanted)
            .into_iter()
            .map(|s| s.text),
    );
    let mut seen = std::collections::HashSet::new();
    texts.retain(|t| seen.insert(t.clone()));
    texts
}

/// Checks every sentence of `answer` (citations already checked) against the
/// sources it cites. Without an embedder, or when it fails, only term
/// overlap is used and the report says why.
pub fn check_support(
    analyzer: &Analyzer,
    answer: &str,
    sources: &[ContextSource],
    embedder: Option<&dyn SentenceEmbedder>,
    config: &SupportConfig,
) -> SupportReport {
    let sentences = answer_sentences(answer, sources);
    let mut wanted: Vec<u32> = sentences
        .iter()
        .flat_map(|s| s.cites.iter().copied())
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let candidates = source_sentences(sources, &wanted);

    let checked: Vec<&AnswerSentence> = sentences.iter().filter(|s| !s.cites.is_empty()).collect();
    let (vectors, embedding_note) = match embedder {
        None => (None, Some("no embedder: term overlap only".to_string())),
        Some(e) => {
            let texts: Vec<&str> = checked
                .iter()
                .map(|s| s.text.as_str())
                .chain(candidates.iter().map(|c| c.text.as_str()))
                .collect();
            if texts.is_empty() {
                (None, None)
            } else {
                match embed_checked(e, &texts) {
                    Ok(v) => {
                        let (a, c) = v.split_at(checked.len());
                        (Some((a.to_vec(), c.to_vec())), None)
                    }
                    Err(e) => (
                        None,
                        Some(format!("embeddings unavailable ({e}): term overlap only")),
                    ),
                }
            }
        }
    };
    let candidate_terms: Vec<_> = candidates
        .iter()
        .map(|c| term_set(analyzer, &c.text))
        .collect();
    let passage_numbers: Vec<(u32, Vec<String>)> = sources
        .iter()
        .map(|s| (s.n, numbers(&s.passage.body, true)))
        .collect();

    let mut checked_index = 0usize;
    let out = sentences
        .iter()
        .map(|s| {
            if s.cites.is_empty() {
                return SentenceSupport {
                    range: s.range,
                    text: s.text.clone(),
                    cites: vec![],
                    verdict: Verdict::Uncited,
                };
            }
            let ai = checked_index;
            checked_index += 1;
            let terms = term_set(analyzer, &s.text);
            let stated = numbers(&s.text, false);
            let mut best: Option<(bool, f64, SupportMatch, bool, bool)> = None;
            for (ci, c) in candidates.iter().enumerate() {
                if !s.cites.contains(&c.n) {
                    continue;
                }
                let ov = overlap(&terms, &candidate_terms[ci]);
                let cos = vectors.as_ref().map(|(a, cv)| cosine(&a[ai], &cv[ci]));
                let by_terms = ov >= config.min_overlap;
                let by_embedding = cos.is_some_and(|x| x >= config.min_cosine);
                let known = passage_numbers
                    .iter()
                    .find(|(n, _)| *n == c.n)
                    .map(|(_, v)| v.as_slice())
                    .unwrap_or(&[]);
                let missing_numbers: Vec<String> = stated
                    .iter()
                    .filter(|x| !known.contains(x))
                    .cloned()
                    .collect();
                let ok = (by_terms || by_embedding) && missing_numbers.is_empty();
                let key = ov + cos.unwrap_or(0.0) as f64;
                let better = match &best {
                    None => true,
                    Some((bok, bkey, ..)) => (ok, key) > (*bok, *bkey),
                };
                if better {
                    let m = SupportMatch {
                        n: c.n,
                        id: c.id,
                        span: c.span,
                        text: c.text.clone(),
                        overlap: ov,
                        cosine: cos,
                        missing_numbers,
                    };
                    best = Some((ok, key, m, by_terms, by_embedding));
                }
            }
            let verdict = match best {
                Some((true, _, support, by_terms, by_embedding)) => Verdict::Supported {
                    support,
                    by_terms,
                    by_embedding,
                },
                Some((false, _, m, ..)) => Verdict::Unsupported { closest: Some(m) },
                None => Verdict::Unsupported { closest: None },
            };
            SentenceSupport {
                range: s.range,
                text: s.text.clone(),
                cites: s.cites.clone(),
                verdict,
            }
        })
        .collect();
    SupportReport {
        sentences: out,
        embedding_note,
    }
}

const EN_NUMBERS: &[(&str, &str)] = &[
    ("zero", "0"),
    ("one", "1"),
    ("two", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
    ("fifteen", "15"),
    ("twenty", "20"),
    ("thirty", "30"),
    ("forty", "40"),
    ("fifty", "50"),
    ("sixty", "60"),
    ("ninety", "90"),
    ("hundred", "100"),
];
const ZH_NUMBERS: &[(char, &str)] = &[
    ('零', "0"),
    ('一', "1"),
    ('二', "2"),
    ('两', "2"),
    ('三', "3"),
    ('四', "4"),
    ('五', "5"),
    ('六', "6"),
    ('七', "7"),
    ('八', "8"),
    ('九', "9"),
    ('十', "10"),
];

/// The numbers a text states, normalised ("3.50" → "3.5"). Digits always;
/// with `words`, also English number words and Chinese numerals (passage
/// side only: in an answer, 「一般」 or "the one" would be false numbers).
fn numbers(text: &str, words: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |n: String| {
        if !out.contains(&n) {
            out.push(n);
        }
    };
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let mut j = i;
            while j < chars.len()
                && (chars[j].is_ascii_digit()
                    || (chars[j] == '.' && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
            {
                j += 1;
            }
            let raw: String = chars[i..j].iter().collect();
            let n = if raw.contains('.') {
                raw.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                raw.trim_start_matches('0').to_string()
            };
            push(if n.is_empty() { "0".into() } else { n });
            i = j;
        } else {
            if words {
                if let Some((_, d)) = ZH_NUMBERS.iter().find(|(c, _)| *c == chars[i]) {
                    push(d.to_string());
                }
            }
            i += 1;
        }
    }
    if words {
        for w in text.split(|c: char| !c.is_ascii_alphabetic()) {
            let w = w.to_ascii_lowercase();
            if let Some((_, d)) = EN_NUMBERS.iter().find(|(e, _)| *e == w) {
                push(d.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{ChunkId, PassageKind, PassageView};

    fn source(n: u32, body: &str) -> ContextSource {
        let id = PassageId::Chunk(ChunkId::generate());
        ContextSource {
            n,
            passage: PassageView {
                id,
                kind: PassageKind::Chunk,
                title: format!("T{n}"),
                body: body.into(),
                source: None,
                highlights: vec![],
            },
        }
    }

    #[test]
    fn terms_alone_support_a_same_language_answer_and_flag_an_invented_one() {
        let a = Analyzer::new();
        let sources = vec![
            source(
                1,
                "The Lumen Desk Pro lifts up to 120 kg. It has two motors.",
            ),
            source(2, "Returns are free within 30 days."),
        ];
        let answer = "The Pro lifts up to 120 kg [1]. Returns are free within 30 days [2]. It also floats on water [1]. Thanks!";
        let r = check_support(&a, answer, &sources, None, &SupportConfig::default());
        assert_eq!(r.sentences.len(), 4);
        match &r.sentences[0].verdict {
            Verdict::Supported {
                support,
                by_terms: true,
                by_embedding: false,
            } => {
                assert_eq!(support.n, 1);
                assert_eq!(
                    &sources[0].passage.body[support.span.0..support.span.1],
                    "The Lumen Desk Pro lifts up to 120 kg."
                );
            }
            v => panic!("{v:?}"),
        }
        assert!(matches!(r.sentences[1].verdict, Verdict::Supported { .. }));
        assert!(
            matches!(r.sentences[2].verdict, Verdict::Unsupported { .. }),
            "{:?}",
            r.sentences[2]
        );
        assert_eq!(r.sentences[3].verdict, Verdict::Uncited);
        assert_eq!(r.unsupported().count(), 1);
        assert!(r.embedding_note.is_some());
    }

    #[test]
    fn a_sentence_is_checked_only_against_what_it_cites() {
        let a = Analyzer::new();
        let sources = vec![source(1, "电机保修 5 年。"), source(2, "桌面保修 2 年。")];
        let r = check_support(
            &a,
            "电机保修 5 年 [2]。",
            &sources,
            None,
            &SupportConfig::default(),
        );
        assert!(
            matches!(r.sentences[0].verdict, Verdict::Unsupported { .. }),
            "{:?}",
            r.sentences[0]
        );
    }

    #[test]
    fn citations_cover_their_line() {
        let a = Analyzer::new();
        let sources = vec![source(1, "本店营业到次日 02:00。每晚 01:30 停止接单。")];
        let answer = "摘录如下：\n· 「本店营业到次日 02:00。每晚 01:30 停止接单。」[1]";
        let r = check_support(&a, answer, &sources, None, &SupportConfig::default());
        assert_eq!(r.sentences.len(), 3);
        assert_eq!(r.sentences[0].verdict, Verdict::Uncited);
        assert_eq!(r.sentences[1].cites, vec![1]);
        assert!(
            r.sentences
                .iter()
                .skip(1)
                .all(|s| matches!(s.verdict, Verdict::Supported { .. })),
            "{r:?}"
        );
        // Quoted verbatim: the two answer sentences are the two source sentences.
        assert_eq!(
            support_texts(answer, &sources),
            vec!["本店营业到次日 02:00。", "每晚 01:30 停止接单。"]
        );
    }

    #[test]
    fn numbers_must_be_in_the_cited_passage() {
        assert_eq!(numbers("保修 05 年，3.50 米", false), vec!["5", "3.5"]);
        assert_eq!(numbers("five-year warranty, 两年", true), vec!["2", "5"]);
        let a = Analyzer::new();
        let sources = vec![source(
            1,
            "The motors have a five-year warranty. Other parts: 2 years.",
        )];
        let r = check_support(
            &a,
            "The motors have a 5-year warranty [1]. The motors have a 10-year warranty [1].",
            &sources,
            None,
            &SupportConfig::default(),
        );
        assert!(
            matches!(r.sentences[0].verdict, Verdict::Supported { .. }),
            "{:?}",
            r.sentences[0]
        );
        match &r.sentences[1].verdict {
            Verdict::Unsupported { closest: Some(m) } => assert_eq!(m.missing_numbers, vec!["10"]),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_failing_embedder_falls_back_to_terms() {
        struct Broken;
        impl SentenceEmbedder for Broken {
            fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
                Err("down".into())
            }
        }
        let a = Analyzer::new();
        let r = check_support(
            &a,
            "Free returns [1].",
            &[source(1, "Returns are free.")],
            Some(&Broken),
            &SupportConfig::default(),
        );
        assert!(r.embedding_note.as_deref().unwrap().contains("down"));
        assert!(matches!(
            r.sentences[0].verdict,
            Verdict::Supported { by_terms: true, .. }
        ));
    }
}
