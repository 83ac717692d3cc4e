//! Citation markers in an answer: parsing, removing those outside the packed
//! range, and listing the sources actually cited.
//!
//! Recognised markers: `[1]`, `[1, 2]`, `[1][2]`, `[1,2]`, full-width `［1］`
//! and `【1】`, with `,` `，` `、` or spaces between numbers. A marker whose
//! numbers are all in range is left as written; one with some numbers out of
//! range is rewritten with the valid ones; one with none is removed (with the
//! space before it).

use rag_core::event::ContextSource;
use rag_core::{PassageId, PassageKind};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// A citation marker found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Byte range of the whole marker.
    pub range: Range<usize>,
    /// The numbers it cites, in order.
    pub numbers: Vec<u32>,
}

/// Finds the citation markers of `text`, in order.
pub fn find_markers(text: &str) -> Vec<Marker> {
    let mut out = Vec::new();
    let mut iter = text.char_indices().peekable();
    while let Some((start, c)) = iter.next() {
        if !matches!(c, '[' | '［' | '【') {
            continue;
        }
        let mut numbers = Vec::new();
        let mut current = String::new();
        let mut end = None;
        let mut look = iter.clone();
        for (b, c) in look.by_ref() {
            match c {
                '0'..='9' => current.push(c),
                ',' | '，' | '、' | ' ' => {
                    if !current.is_empty() {
                        numbers.push(current.parse::<u32>().unwrap_or(u32::MAX));
                        current.clear();
                    }
                }
                ']' | '］' | '】' => {
                    if !current.is_empty() {
                        numbers.push(current.parse::<u32>().unwrap_or(u32::MAX));
                    }
                    end = Some(b + c.len_utf8());
                    break;
                }
                _ => break,
            }
            if current.len() > 6 {
                break;
            }
        }
        if let Some(end) = end.filter(|_| !numbers.is_empty()) {
            out.push(Marker {
                range: start..end,
                numbers,
            });
            iter = look;
        }
    }
    out
}

/// A citation removed because its number is not a packed source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedCitation {
    /// The number cited.
    pub n: u32,
    /// Byte offset of its marker in the original answer.
    pub at: usize,
}

/// A packed source the answer cites, with what a client needs to link it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CitedSource {
    /// The `[n]` number.
    pub n: u32,
    /// The passage (for a chunk, the engine resolves its document and offsets).
    pub id: PassageId,
    /// Chunk, FAQ entry or fact.
    pub kind: PassageKind,
    /// Title.
    pub title: String,
    /// Source path or URL, when known.
    pub source: Option<String>,
}

/// An answer after its citations were checked against the packed range.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedCitations {
    /// The answer with out-of-range citations removed.
    pub text: String,
    /// What was removed.
    pub removed: Vec<RemovedCitation>,
    /// The sources cited, by number.
    pub cited: Vec<CitedSource>,
}

/// Removes citations outside `1..=sources.len()` and lists the sources cited.
pub fn check_citations(answer: &str, sources: &[ContextSource]) -> CheckedCitations {
    let valid = |n: u32| sources.iter().any(|s| s.n == n);
    let mut text = String::with_capacity(answer.len());
    let mut removed = Vec::new();
    let mut cited_numbers: Vec<u32> = Vec::new();
    let mut last = 0usize;
    for m in find_markers(answer) {
        let good: Vec<u32> = m.numbers.iter().copied().filter(|&n| valid(n)).collect();
        removed.extend(
            m.numbers
                .iter()
                .filter(|&&n| !valid(n))
                .map(|&n| RemovedCitation {
                    n,
                    at: m.range.start,
                }),
        );
        for &n in &good {
            if !cited_numbers.contains(&n) {
                cited_numbers.push(n);
            }
        }
        let before = &answer[last..m.range.start];
        if good.len() == m.numbers.len() {
            text.push_str(before);
            text.push_str(&answer[m.range.clone()]);
        } else if good.is_empty() {
            text.push_str(before.strip_suffix(' ').unwrap_or(before));
        } else {
            text.push_str(before);
            text.push_str(&format!(
                "[{}]",
                good.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        last = m.range.end;
    }
    text.push_str(&answer[last..]);
    cited_numbers.sort_unstable();
    let cited = cited_numbers
        .into_iter()
        .filter_map(|n| sources.iter().find(|s| s.n == n))
        .map(|s| CitedSource {
            n: s.n,
            id: s.passage.id,
            kind: s.passage.kind,
            title: s.passage.title.clone(),
            source: s.passage.source.clone(),
        })
        .collect();
    CheckedCitations {
        text,
        removed,
        cited,
    }
}

/// `text` without its citation markers (and the spaces before them).
pub fn strip_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in find_markers(text) {
        out.push_str(text[last..m.range.start].trim_end_matches(' '));
        last = m.range.end;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{ChunkId, PassageView};

    fn sources(n: u32) -> Vec<ContextSource> {
        (1..=n)
            .map(|n| {
                let id = PassageId::Chunk(ChunkId::generate());
                ContextSource {
                    n,
                    passage: PassageView {
                        id,
                        kind: PassageKind::Chunk,
                        title: format!("T{n}"),
                        body: String::new(),
                        source: Some(format!("docs/{n}.md")),
                        highlights: vec![],
                    },
                }
            })
            .collect()
    }

    #[test]
    fn markers_of_every_form() {
        let found: Vec<Vec<u32>> =
            find_markers("a [1] b [2, 3]【4】［5］[6][7] [x] [] arr[0 [8、9]")
                .into_iter()
                .map(|m| m.numbers)
                .collect();
        assert_eq!(
            found,
            vec![
                vec![1],
                vec![2, 3],
                vec![4],
                vec![5],
                vec![6],
                vec![7],
                vec![8, 9]
            ]
        );
    }

    #[test]
    fn out_of_range_citations_are_removed_and_reported() {
        let answer = "电机保修 5 年 [1]。桌面保修 2 年 [7]。线材 [2, 9]。另见【3】。";
        let c = check_citations(answer, &sources(3));
        assert_eq!(
            c.text,
            "电机保修 5 年 [1]。桌面保修 2 年。线材 [2]。另见【3】。"
        );
        assert_eq!(
            c.removed,
            vec![
                RemovedCitation {
                    n: 7,
                    at: answer.find("[7]").unwrap()
                },
                RemovedCitation {
                    n: 9,
                    at: answer.find("[2, 9]").unwrap()
                }
            ]
        );
        assert_eq!(
            c.cited.iter().map(|s| s.n).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(c.cited[1].source.as_deref(), Some("docs/2.md"));
        let c = check_citations("Nothing cited [0].", &sources(2));
        assert_eq!(c.text, "Nothing cited.");
        assert!(c.cited.is_empty());
    }

    #[test]
    fn stripping_markers() {
        assert_eq!(
            strip_markers("Load is 80 kg [1][2]. Yes [3]"),
            "Load is 80 kg. Yes"
        );
    }
}
