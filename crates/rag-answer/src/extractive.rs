//! The extractive generator: a deterministic answer made of the packed
//! sources' best-matching sentences, quoted verbatim with `[n]` citations,
//! inside a short frame in the question's language that says it is an
//! extractive answer, not one written by a language model.
//!
//! It cannot translate. A Chinese question answered from English sources
//! gets the English sentences verbatim inside a Chinese frame (each quote
//! marked 「英文原文」), and the reverse.
//!
//! Units: the whole body of an FAQ entry or fact (it is the answer), and the
//! sentences of document chunks. A unit scores its share of the question's
//! terms, plus half the share matched by its source's title, plus (when
//! embeddings are given) the cosine of unit and question, plus a small prior
//! for the source's rank. The best unit is always quoted; others join when
//! they score at least half as well, up to the configured limits. When no
//! unit shares a term with the question and no embeddings are given (a
//! question in another language than its sources), the opening of source
//! [1] is quoted, and the frame says so.

use crate::embed::{cosine, embed_checked, SentenceEmbedder};
use crate::lang::AnswerLanguage;
use crate::sentences::split_sentences;
use crate::terms::{overlap, term_set};
use rag_core::event::ContextSource;
use rag_core::{GenEvent, PassageKind};
use rag_text::Analyzer;
use serde::{Deserialize, Serialize};

/// The generator's name in events and logs.
pub const EXTRACTIVE_NAME: &str = "extractive";

/// Limits of an extractive answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtractiveConfig {
    /// At most this many quotes.
    pub max_quotes: usize,
    /// At most this many quotes from one source.
    pub max_quotes_per_source: usize,
    /// At most this many characters quoted in all.
    pub max_chars: usize,
    /// A quoted unit longer than this is cut at this many characters (FAQ answers).
    pub max_unit_chars: usize,
}

impl Default for ExtractiveConfig {
    fn default() -> Self {
        ExtractiveConfig {
            max_quotes: 3,
            max_quotes_per_source: 2,
            max_chars: 600,
            max_unit_chars: 400,
        }
    }
}

/// One verbatim quote in the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    /// The source's `[n]`.
    pub n: u32,
    /// Byte range in the source body.
    pub span: (usize, usize),
    /// The quoted text.
    pub text: String,
    /// Its score.
    pub score: f64,
    /// Whether it is written in another language than the question.
    pub other_language: bool,
}

/// An extractive answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractiveAnswer {
    /// The answer text (frame and quotes with citations).
    pub text: String,
    /// The question's language, which the frame is written in.
    pub language: AnswerLanguage,
    /// The quotes, in answer order.
    pub quotes: Vec<Quote>,
    /// True when nothing matched the question and the opening of source [1] was quoted.
    pub fallback: bool,
    /// Why embeddings were not used, when some were given but failed.
    pub embedding_note: Option<String>,
}

struct Unit {
    n: u32,
    index: usize,
    span: (usize, usize),
    text: String,
}

fn units(sources: &[ContextSource], max_unit_chars: usize) -> Vec<Unit> {
    let mut out = Vec::new();
    for s in sources {
        let body = &s.passage.body;
        match s.passage.kind {
            PassageKind::Faq | PassageKind::Fact => {
                let trimmed = body.trim();
                if trimmed.is_empty() {
                    continue;
                }
                let start = body.find(trimmed).unwrap_or(0);
                let mut end = start + trimmed.len();
                if trimmed.chars().count() > max_unit_chars {
                    // Cut at the last sentence end within the limit, else at the limit.
                    let limit = start
                        + trimmed
                            .char_indices()
                            .nth(max_unit_chars)
                            .map(|(b, _)| b)
                            .unwrap_or(trimmed.len());
                    end = split_sentences(body)
                        .iter()
                        .map(|sp| sp.end)
                        .filter(|&e| e <= limit && e > start)
                        .max()
                        .unwrap_or(limit);
                }
                out.push(Unit {
                    n: s.n,
                    index: 0,
                    span: (start, end),
                    text: body[start..end].to_string(),
                });
            }
            PassageKind::Chunk => {
                for (index, sp) in split_sentences(body).into_iter().enumerate() {
                    let mut end = sp.end;
                    let text = sp.text(body);
                    if text.chars().count() > max_unit_chars {
                        end = sp.start
                            + text
                                .char_indices()
                                .nth(max_unit_chars)
                                .map(|(b, _)| b)
                                .unwrap_or(text.len());
                    }
                    out.push(Unit {
                        n: s.n,
                        index,
                        span: (sp.start, end),
                        text: body[sp.start..end].to_string(),
                    });
                }
            }
        }
    }
    out
}

/// Builds the extractive answer to `question` from `sources` (as packed).
/// With no sources it is the miss reply.
pub fn extractive_answer(
    analyzer: &Analyzer,
    question: &str,
    sources: &[ContextSource],
    embedder: Option<&dyn SentenceEmbedder>,
    config: &ExtractiveConfig,
) -> ExtractiveAnswer {
    let language = AnswerLanguage::of(question);
    let all = units(sources, config.max_unit_chars.max(1));
    if all.is_empty() {
        return ExtractiveAnswer {
            text: crate::miss::miss_reply(language).to_string(),
            language,
            quotes: vec![],
            fallback: false,
            embedding_note: None,
        };
    }
    let q_terms = term_set(analyzer, question);
    let title_share: Vec<(u32, f64)> = sources
        .iter()
        .map(|s| {
            (
                s.n,
                overlap(&q_terms, &term_set(analyzer, &s.passage.title)),
            )
        })
        .collect();

    let mut embedding_note = None;
    let cosines: Option<Vec<f32>> = embedder.and_then(|e| {
        let texts: Vec<&str> = std::iter::once(question)
            .chain(all.iter().map(|u| u.text.as_str()))
            .collect();
        match embed_checked(e, &texts) {
            Ok(v) => Some(v[1..].iter().map(|u| cosine(&v[0], u)).collect()),
            Err(err) => {
                embedding_note = Some(format!("embeddings unavailable ({err}): term overlap only"));
                None
            }
        }
    });

    let mut scored: Vec<(f64, f64, usize)> = all
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let lexical = overlap(&q_terms, &term_set(analyzer, &u.text));
            let title = title_share
                .iter()
                .find(|(n, _)| *n == u.n)
                .map(|(_, t)| *t)
                .unwrap_or(0.0);
            let semantic = cosines.as_ref().map(|c| c[i] as f64).unwrap_or(0.0);
            let prior = 0.05 / u.n as f64;
            let evidence = lexical + semantic;
            (evidence + 0.5 * title + prior, evidence, i)
        })
        .collect();
    // Best first; ties by source number, then position: deterministic.
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(all[a.2].n.cmp(&all[b.2].n))
            .then(all[a.2].index.cmp(&all[b.2].index))
    });

    let fallback = scored.iter().all(|&(_, evidence, _)| evidence == 0.0);
    let mut chosen: Vec<(usize, f64)> = Vec::new();
    let mut used_chars = 0usize;
    if fallback {
        // Nothing matched: the opening of the best-ranked source.
        for (i, u) in all
            .iter()
            .enumerate()
            .filter(|(_, u)| u.n == all[0].n)
            .take(config.max_quotes_per_source.max(1))
        {
            let c = u.text.chars().count();
            if !chosen.is_empty() && used_chars + c > config.max_chars {
                break;
            }
            used_chars += c;
            chosen.push((i, 0.0));
        }
    } else {
        let best = scored[0].0;
        for &(score, evidence, i) in &scored {
            if chosen.len() >= config.max_quotes.max(1) {
                break;
            }
            if !chosen.is_empty() && (score < best * 0.5 || evidence == 0.0) {
                break;
            }
            let u = &all[i];
            if chosen.iter().filter(|(j, _)| all[*j].n == u.n).count()
                >= config.max_quotes_per_source.max(1)
            {
                continue;
            }
            let c = u.text.chars().count();
            if !chosen.is_empty() && used_chars + c > config.max_chars {
                continue;
            }
            used_chars += c;
            chosen.push((i, score));
        }
    }
    // Quotes in source order, then in text order.
    chosen.sort_by_key(|&(i, _)| (all[i].n, all[i].index));
    let quotes: Vec<Quote> = chosen
        .iter()
        .map(|&(i, score)| {
            let u = &all[i];
            let other_language = AnswerLanguage::of_source(&u.text).is_some_and(|l| l != language);
            Quote {
                n: u.n,
                span: u.span,
                text: u.text.clone(),
                score,
                other_language,
            }
        })
        .collect();
    let text = render(language, &quotes, fallback);
    ExtractiveAnswer {
        text,
        language,
        quotes,
        fallback,
        embedding_note,
    }
}

impl ExtractiveAnswer {
    /// The answer as generator events: one delta per line (frame, then each
    /// quote), then [`GenEvent::Done`]. No usage: nothing was generated.
    pub fn events(&self) -> Vec<GenEvent> {
        let mut out: Vec<GenEvent> = self
            .text
            .split_inclusive('\n')
            .map(|l| GenEvent::Delta(l.to_string()))
            .collect();
        out.push(GenEvent::Done);
        out
    }
}

fn render(language: AnswerLanguage, quotes: &[Quote], fallback: bool) -> String {
    let mut out = String::new();
    match (language, fallback) {
        (AnswerLanguage::Zh, false) => out.push_str("【抽取式回答】以下内容直接摘自知识库原文，并非大模型生成："),
        (AnswerLanguage::Zh, true) => out.push_str("【抽取式回答】没有找到与问题字面相符的句子，以下是最相关资料的开头，直接摘自知识库原文，并非大模型生成："),
        (AnswerLanguage::En, false) => out.push_str("Extractive answer, quoted from the knowledge base (not written by a language model):"),
        (AnswerLanguage::En, true) => out.push_str(
            "Extractive answer: no sentence matches the question's words, so this is the opening of the most relevant source, quoted from the knowledge base (not written by a language model):",
        ),
    }
    for q in quotes {
        let text = q.text.trim();
        match language {
            AnswerLanguage::Zh => {
                let note = if q.other_language {
                    "（英文原文）"
                } else {
                    ""
                };
                out.push_str(&format!("\n· 「{text}」[{}]{note}", q.n));
            }
            AnswerLanguage::En => {
                let note = if q.other_language {
                    " (original in Chinese)"
                } else {
                    ""
                };
                out.push_str(&format!("\n- \"{text}\" [{}]{note}", q.n));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{FaqId, PassageId, PassageView};

    fn src(n: u32, kind: PassageKind, title: &str, body: &str) -> ContextSource {
        let id = PassageId::Faq(FaqId::generate());
        ContextSource {
            n,
            passage: PassageView {
                id,
                kind,
                title: title.into(),
                body: body.into(),
                source: None,
                highlights: vec![],
            },
        }
    }

    #[test]
    fn picks_the_matching_sentence_and_cites_it() {
        let a = Analyzer::new();
        let sources = vec![
            src(1, PassageKind::Chunk, "Weight capacity", "Every desk is rated for a load. The Pro lifts up to 120 kg. Keep heavy items in the middle."),
            src(2, PassageKind::Chunk, "Warranty", "Motors are covered for 5 years."),
        ];
        let ans = extractive_answer(
            &a,
            "How many kg can the Pro lift?",
            &sources,
            None,
            &ExtractiveConfig::default(),
        );
        assert_eq!(ans.language, AnswerLanguage::En);
        assert!(!ans.fallback);
        assert_eq!(ans.quotes[0].text, "The Pro lifts up to 120 kg.");
        assert_eq!(
            &sources[0].passage.body[ans.quotes[0].span.0..ans.quotes[0].span.1],
            ans.quotes[0].text
        );
        assert!(ans.text.starts_with("Extractive answer"));
        assert!(
            ans.text.contains("- \"The Pro lifts up to 120 kg.\" [1]"),
            "{}",
            ans.text
        );
        assert!(!ans.text.contains("Motors"), "{}", ans.text);
        // Deterministic.
        assert_eq!(
            ans,
            extractive_answer(
                &a,
                "How many kg can the Pro lift?",
                &sources,
                None,
                &ExtractiveConfig::default()
            )
        );
        let events = ans.events();
        assert_eq!(events.last(), Some(&GenEvent::Done));
        let joined: String = events
            .iter()
            .filter_map(|e| {
                if let GenEvent::Delta(d) = e {
                    Some(d.as_str())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(joined, ans.text);
        assert_eq!(events.len(), ans.text.lines().count() + 1);
    }

    #[test]
    fn faq_answers_are_quoted_whole_in_a_chinese_frame() {
        let a = Analyzer::new();
        let sources = vec![src(
            1,
            PassageKind::Faq,
            "你们的营业时间是几点到几点？",
            "本店营业时间为每天 11:00–次日 02:00。每晚 01:30 停止接单。",
        )];
        let ans = extractive_answer(
            &a,
            "营业时间是几点？",
            &sources,
            None,
            &ExtractiveConfig::default(),
        );
        assert_eq!(ans.text, "【抽取式回答】以下内容直接摘自知识库原文，并非大模型生成：\n· 「本店营业时间为每天 11:00–次日 02:00。每晚 01:30 停止接单。」[1]");
    }

    #[test]
    fn a_chinese_question_over_english_sources_quotes_them_verbatim() {
        let a = Analyzer::new();
        let sources = vec![src(
            1,
            PassageKind::Chunk,
            "Weight capacity",
            "The Pro lifts up to 120 kg. Keep heavy items in the middle.",
        )];
        let ans = extractive_answer(
            &a,
            "升降桌能承重多少？",
            &sources,
            None,
            &ExtractiveConfig::default(),
        );
        assert!(ans.fallback);
        assert_eq!(ans.language, AnswerLanguage::Zh);
        assert!(
            ans.text.starts_with("【抽取式回答】没有找到"),
            "{}",
            ans.text
        );
        assert!(
            ans.text
                .contains("· 「The Pro lifts up to 120 kg.」[1]（英文原文）"),
            "{}",
            ans.text
        );
        assert!(ans.quotes.iter().all(|q| q.other_language));
    }

    #[test]
    fn embeddings_pick_across_languages() {
        // Toy vectors: the question points where the second sentence points.
        let a = Analyzer::new();
        let sources = vec![src(
            1,
            PassageKind::Chunk,
            "Desk",
            "Keep heavy items in the middle. The Pro lifts up to 120 kg.",
        )];
        let e = crate::PrecomputedEmbeddings::from_pairs([
            ("升降桌能承重多少？".to_string(), vec![0.0, 1.0]),
            (
                "Keep heavy items in the middle.".to_string(),
                vec![1.0, 0.0],
            ),
            ("The Pro lifts up to 120 kg.".to_string(), vec![0.1, 1.0]),
        ]);
        let ans = extractive_answer(
            &a,
            "升降桌能承重多少？",
            &sources,
            Some(&e),
            &ExtractiveConfig::default(),
        );
        assert!(!ans.fallback);
        assert_eq!(ans.quotes.len(), 1, "{:?}", ans.quotes);
        assert_eq!(ans.quotes[0].text, "The Pro lifts up to 120 kg.");
        assert!(ans.text.starts_with("【抽取式回答】以下内容"));
    }

    #[test]
    fn no_sources_is_the_miss_reply() {
        let ans = extractive_answer(
            &Analyzer::new(),
            "Do you sell pizza?",
            &[],
            None,
            &ExtractiveConfig::default(),
        );
        assert_eq!(ans.text, crate::miss::miss_reply(AnswerLanguage::En));
    }
}
