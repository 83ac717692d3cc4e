//! Context packing: ranked hits become numbered sources `[n] title\n body`
//! within a budget of sources and characters.
//!
//! Sources are taken in rank order. A source that would pass the character
//! budget is dropped (with the reason) and packing goes on with the next,
//! smaller ones, so the packed sources stay in rank order. The first source
//! alone is never dropped for size: when it is longer than the whole budget,
//! its body is cut at a sentence boundary (or a character boundary) to fit
//! and marked as truncated. Duplicates and sources with no text are dropped.

use crate::sentences::split_sentences;
use rag_core::event::ContextSource;
use rag_core::{FusedHit, PassageId, PassageView};
use serde::{Deserialize, Serialize};

/// A packing budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PackProfile {
    /// Profile name shown in events ("faq", "document" or a knowledge base's own).
    pub name: String,
    /// At most this many sources.
    pub max_sources: usize,
    /// At most this many characters (Unicode scalar values) of rendered
    /// sources, `[n] title\n body` each, separators not counted.
    pub max_chars: usize,
}

impl Default for PackProfile {
    fn default() -> Self {
        PackProfile::document()
    }
}

impl PackProfile {
    /// FAQ / customer-service answers: the top 3 within 800 characters.
    pub fn faq() -> Self {
        PackProfile {
            name: "faq".into(),
            max_sources: 3,
            max_chars: 800,
        }
    }

    /// Document Q&A: the top 6 within 6,000 characters.
    pub fn document() -> Self {
        PackProfile {
            name: "document".into(),
            max_sources: 6,
            max_chars: 6_000,
        }
    }

    /// A built-in profile by name.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "faq" => Some(Self::faq()),
            "document" => Some(Self::document()),
            _ => None,
        }
    }
}

/// A ranked candidate with its text.
#[derive(Debug, Clone, PartialEq)]
pub struct PackCandidate {
    /// The fused (or reranked) hit.
    pub hit: FusedHit,
    /// Its passage; the body should be the full text, not a snippet.
    pub passage: PassageView,
}

/// Why a candidate was not packed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum PackDropReason {
    /// The source limit was reached.
    MaxSources {
        /// The limit.
        max_sources: usize,
    },
    /// It did not fit in the characters left.
    CharBudget {
        /// Characters it needs.
        needed: usize,
        /// Characters left when it came up.
        remaining: usize,
    },
    /// The same passage was already packed.
    Duplicate,
    /// Title and body are empty.
    Empty,
}

impl std::fmt::Display for PackDropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PackDropReason::MaxSources { max_sources } => {
                write!(f, "source limit of {max_sources} reached")
            }
            PackDropReason::CharBudget { needed, remaining } => {
                write!(
                    f,
                    "needs {needed} characters, {remaining} left in the budget"
                )
            }
            PackDropReason::Duplicate => write!(f, "already packed"),
            PackDropReason::Empty => write!(f, "no text"),
        }
    }
}

/// A candidate left out of the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackDropped {
    /// The passage.
    pub id: PassageId,
    /// Its rank in the input.
    pub rank: u32,
    /// Why.
    pub reason: PackDropReason,
}

/// The packed context.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    /// The profile used.
    pub profile: PackProfile,
    /// Numbered sources, `n` from 1, in rank order.
    pub sources: Vec<ContextSource>,
    /// Candidates left out, in rank order.
    pub dropped: Vec<PackDropped>,
    /// Numbers of sources whose body was cut to fit the budget.
    pub truncated: Vec<u32>,
    /// Characters used (rendered sources).
    pub chars: usize,
}

impl Packed {
    /// The sources rendered as `[n] title\n body`, separated by blank lines.
    pub fn render(&self) -> String {
        self.sources
            .iter()
            .map(render_source)
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// One source as `[n] title\n body` (the title line is left out when empty).
pub fn render_source(s: &ContextSource) -> String {
    if s.passage.title.trim().is_empty() {
        format!("[{}] {}", s.n, s.passage.body.trim())
    } else {
        format!(
            "[{}] {}\n{}",
            s.n,
            s.passage.title.trim(),
            s.passage.body.trim()
        )
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Packs `candidates` (best first) within `profile`.
pub fn pack(candidates: &[PackCandidate], profile: &PackProfile) -> Packed {
    let mut sources: Vec<ContextSource> = Vec::new();
    let mut dropped = Vec::new();
    let mut truncated = Vec::new();
    let mut used = 0usize;
    for c in candidates {
        let drop = |reason| PackDropped {
            id: c.passage.id,
            rank: c.hit.rank,
            reason,
        };
        if c.passage.title.trim().is_empty() && c.passage.body.trim().is_empty() {
            dropped.push(drop(PackDropReason::Empty));
            continue;
        }
        if sources.iter().any(|s| s.passage.id == c.passage.id) {
            dropped.push(drop(PackDropReason::Duplicate));
            continue;
        }
        if sources.len() >= profile.max_sources {
            dropped.push(drop(PackDropReason::MaxSources {
                max_sources: profile.max_sources,
            }));
            continue;
        }
        let n = sources.len() as u32 + 1;
        let mut source = ContextSource {
            n,
            passage: c.passage.clone(),
        };
        source.passage.title = source.passage.title.trim().to_string();
        source.passage.body = source.passage.body.trim().to_string();
        let needed = chars(&render_source(&source));
        let remaining = profile.max_chars.saturating_sub(used);
        if needed > remaining {
            if !sources.is_empty() {
                dropped.push(drop(PackDropReason::CharBudget { needed, remaining }));
                continue;
            }
            // The first source alone is larger than the budget: cut its body.
            let overhead = needed - chars(&source.passage.body);
            let keep = remaining.saturating_sub(overhead);
            if keep == 0 {
                dropped.push(drop(PackDropReason::CharBudget { needed, remaining }));
                continue;
            }
            source.passage.body = cut_to(&source.passage.body, keep);
            source
                .passage
                .highlights
                .retain(|&(_, e)| e <= source.passage.body.len());
            truncated.push(n);
        }
        used += chars(&render_source(&source));
        sources.push(source);
    }
    Packed {
        profile: profile.clone(),
        sources,
        dropped,
        truncated,
        chars: used,
    }
}

/// The longest prefix of `body` of at most `max_chars` characters, ending at a
/// sentence end when one is in the second half of the allowance.
fn cut_to(body: &str, max_chars: usize) -> String {
    let limit = body
        .char_indices()
        .nth(max_chars)
        .map(|(b, _)| b)
        .unwrap_or(body.len());
    let best_sentence_end = split_sentences(body)
        .iter()
        .map(|s| s.end)
        .filter(|&e| e <= limit)
        .max();
    match best_sentence_end {
        Some(e) if chars(&body[..e]) * 2 >= max_chars => body[..e].to_string(),
        _ => body[..limit].to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{ChunkId, PassageKind};

    fn cand(rank: u32, title: &str, body: &str) -> PackCandidate {
        let id = PassageId::Chunk(ChunkId::generate());
        PackCandidate {
            hit: FusedHit {
                id,
                rank,
                score: 1.0 / rank as f64,
                normalized: 1.0 / rank as f64,
                contributions: vec![],
            },
            passage: PassageView {
                id,
                kind: PassageKind::Chunk,
                title: title.into(),
                body: body.into(),
                source: None,
                highlights: vec![],
            },
        }
    }

    #[test]
    fn faq_profile_keeps_three_in_rank_order_and_reports_the_rest() {
        let c: Vec<_> = (1..=5)
            .map(|r| cand(r, &format!("问题{r}"), "答案。"))
            .collect();
        let p = pack(&c, &PackProfile::faq());
        assert_eq!(
            p.sources.iter().map(|s| s.n).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(p.sources[2].passage.title, "问题3");
        assert_eq!(p.dropped.len(), 2);
        assert_eq!(p.dropped[0].rank, 4);
        assert_eq!(
            p.dropped[0].reason,
            PackDropReason::MaxSources { max_sources: 3 }
        );
        assert_eq!(
            p.render().split("\n\n").next().unwrap(),
            "[1] 问题1\n答案。"
        );
        assert_eq!(p.chars, 3 * chars("[1] 问题1\n答案。"));
    }

    #[test]
    fn a_source_too_large_is_dropped_and_smaller_later_ones_still_fit() {
        let long = "很长的内容。".repeat(125); // 750 characters
        let c = vec![
            cand(1, "A", &"短。".repeat(50)),
            cand(2, "B", &long),
            cand(3, "C", "短句。"),
        ];
        let p = pack(&c, &PackProfile::faq());
        assert_eq!(
            p.sources
                .iter()
                .map(|s| s.passage.title.as_str())
                .collect::<Vec<_>>(),
            vec!["A", "C"]
        );
        assert_eq!(p.sources[1].n, 2, "numbers stay consecutive");
        match &p.dropped[0].reason {
            PackDropReason::CharBudget { needed, remaining } => {
                assert_eq!(*needed, chars(&format!("[2] B\n{long}")));
                assert_eq!(
                    *remaining,
                    800 - chars(&format!("[1] A\n{}", "短。".repeat(50)))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(p.chars <= 800);
    }

    #[test]
    fn an_oversized_first_source_is_cut_at_a_sentence_end() {
        let body = "First sentence is here. ".repeat(60);
        let p = pack(
            &[cand(1, "Doc", &body)],
            &PackProfile {
                name: "t".into(),
                max_sources: 3,
                max_chars: 100,
            },
        );
        assert_eq!(p.truncated, vec![1]);
        assert!(p.chars <= 100, "{}", p.chars);
        assert!(
            p.sources[0].passage.body.ends_with("here."),
            "{:?}",
            p.sources[0].passage.body
        );
    }

    #[test]
    fn duplicates_and_empty_passages_are_dropped() {
        let a = cand(1, "A", "x");
        let mut dup = a.clone();
        dup.hit.rank = 2;
        let p = pack(&[a, dup, cand(3, " ", " ")], &PackProfile::document());
        assert_eq!(p.sources.len(), 1);
        assert_eq!(
            p.dropped
                .iter()
                .map(|d| d.reason.clone())
                .collect::<Vec<_>>(),
            vec![PackDropReason::Duplicate, PackDropReason::Empty]
        );
    }
}
