//! Term sets for overlap scores, from the analyzer.

use rag_text::{Analyzer, Mode};
use std::collections::HashSet;

/// The distinct search terms of `text` (query mode: stop words removed, stemmed).
pub(crate) fn term_set(analyzer: &Analyzer, text: &str) -> HashSet<String> {
    analyzer
        .analyze(text, Mode::Query)
        .into_iter()
        .filter(|t| t.kind.retrieves())
        .map(|t| t.text)
        .collect()
}

/// Share of `of`'s terms found in `within` (0 when `of` has none).
pub(crate) fn overlap(of: &HashSet<String>, within: &HashSet<String>) -> f64 {
    if of.is_empty() {
        return 0.0;
    }
    of.iter().filter(|t| within.contains(*t)).count() as f64 / of.len() as f64
}
