//! The FAQ lookup tool's output for agents: approved FAQ hits as
//! `Q: … A: … Source: …` blocks, or `No relevant FAQs found for: <query>`.

use rag_core::{FaqEntry, FaqStatus, PassageKind, PassageView};
use serde::{Deserialize, Serialize};

/// One FAQ hit for the tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaqToolHit {
    /// The question.
    pub question: String,
    /// The full answer.
    pub answer: String,
    /// Where it came from (URL), when known.
    pub source: Option<String>,
}

impl FaqToolHit {
    /// From an FAQ entry; `None` unless it is approved.
    pub fn from_entry(entry: &FaqEntry) -> Option<Self> {
        (entry.status == FaqStatus::Approved).then(|| FaqToolHit {
            question: entry.question.clone(),
            answer: entry.answer.clone(),
            source: entry.source_url.clone(),
        })
    }

    /// From a passage view of an FAQ entry (the body must be the full
    /// answer, not a snippet); `None` for other kinds. Only approved entries
    /// are searchable, so an FAQ hit is approved.
    pub fn from_view(view: &PassageView) -> Option<Self> {
        (view.kind == PassageKind::Faq).then(|| FaqToolHit {
            question: view.title.clone(),
            answer: view.body.clone(),
            source: view.source.clone(),
        })
    }
}

/// The tool output for `query` over `hits` (best first).
pub fn format_faq_tool(query: &str, hits: &[FaqToolHit]) -> String {
    if hits.is_empty() {
        return format!("No relevant FAQs found for: {}", query.trim());
    }
    hits.iter()
        .map(|h| {
            format!(
                "Q: {}\nA: {}\nSource: {}",
                one_line(&h.question),
                one_line(&h.answer),
                h.source
                    .as_deref()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("FAQ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Line breaks inside a field would break the format: they become spaces.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_and_miss() {
        let hits = vec![
            FaqToolHit {
                question: "你们的营业时间是几点到几点？".into(),
                answer: "每天 11:00–次日 02:00。\n01:30 停止接单。".into(),
                source: Some("https://demo.ragscope.local/faq/opening-hours".into()),
            },
            FaqToolHit {
                question: "Do you deliver?".into(),
                answer: "Yes.".into(),
                source: None,
            },
        ];
        assert_eq!(
            format_faq_tool("营业时间", &hits),
            "Q: 你们的营业时间是几点到几点？\nA: 每天 11:00–次日 02:00。 01:30 停止接单。\nSource: https://demo.ragscope.local/faq/opening-hours\n\nQ: Do you deliver?\nA: Yes.\nSource: FAQ"
        );
        assert_eq!(
            format_faq_tool(" 披萨 ", &[]),
            "No relevant FAQs found for: 披萨"
        );
    }
}
