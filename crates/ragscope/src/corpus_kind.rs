//! Whether a BEIR corpus is a set of FAQ questions or of document passages.
//!
//! `ragscope eval --kind auto` (the default) loads a corpus as FAQ entries
//! when its rows look like questions already answered: no titles, one line
//! each, and short. Customer-service sets (banking77, bq) are such corpora;
//! SciFact, CMRC and XQuAD (titled passages of several hundred bytes) are not.

use crate::eval::CorpusDoc;

/// How a corpus is loaded into the evaluation knowledge base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusKind {
    /// One FAQ entry per row: question = the row's text, no answer.
    Faq,
    /// One document with one chunk per row.
    Doc,
}

/// A row counts as short up to this many bytes of UTF-8 (about 35 English
/// words or 65 Chinese characters).
const SHORT_ROW_BYTES: usize = 200;
/// Share of rows that must be short, untitled single lines.
const SHORT_SHARE: f64 = 0.95;
/// Median row length of a question set at most (bytes).
const MEDIAN_BYTES: usize = 120;

/// The kind `--kind auto` picks for `corpus`, and why (for the report).
pub fn detect(corpus: &[CorpusDoc]) -> (CorpusKind, String) {
    if corpus.is_empty() {
        return (CorpusKind::Doc, "an empty corpus".into());
    }
    let n = corpus.len();
    let titled = corpus.iter().filter(|d| !d.title.trim().is_empty()).count();
    let short = corpus
        .iter()
        .filter(|d| {
            d.title.trim().is_empty() && d.text.len() <= SHORT_ROW_BYTES && !d.text.contains('\n')
        })
        .count();
    let mut lengths: Vec<usize> = corpus.iter().map(|d| d.text.len()).collect();
    lengths.sort_unstable();
    let median = lengths[n / 2];
    let share = short as f64 / n as f64;
    if titled * 100 <= n && share >= SHORT_SHARE && median <= MEDIAN_BYTES {
        (
            CorpusKind::Faq,
            format!(
                "{:.1} % of the {n} rows are untitled single lines of at most {SHORT_ROW_BYTES} bytes (median {median}): questions, loaded as FAQ entries",
                share * 100.0
            ),
        )
    } else {
        (
            CorpusKind::Doc,
            format!(
                "{titled} of {n} rows have titles, {:.1} % are short single lines, median {median} bytes: passages, loaded as documents",
                share * 100.0
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(title: &str, text: &str) -> CorpusDoc {
        CorpusDoc {
            id: "x".into(),
            title: title.into(),
            text: text.into(),
        }
    }

    #[test]
    fn short_untitled_questions_are_faq_entries() {
        let corpus: Vec<CorpusDoc> = (0..40)
            .map(|i| row("", &format!("How do I reset my card PIN number {i}?")))
            .chain([row("", "怎么更换绑定还款的卡")])
            .collect();
        assert_eq!(detect(&corpus).0, CorpusKind::Faq);
    }

    #[test]
    fn titled_or_long_passages_are_documents() {
        let titled: Vec<CorpusDoc> = (0..40).map(|_| row("A title", "Short text.")).collect();
        assert_eq!(detect(&titled).0, CorpusKind::Doc);
        let long = "word ".repeat(100);
        let passages: Vec<CorpusDoc> = (0..40).map(|_| row("", &long)).collect();
        assert_eq!(detect(&passages).0, CorpusKind::Doc);
        let lines: Vec<CorpusDoc> = (0..40).map(|_| row("", "one\ntwo")).collect();
        assert_eq!(detect(&lines).0, CorpusKind::Doc);
        assert_eq!(detect(&[]).0, CorpusKind::Doc);
    }
}
