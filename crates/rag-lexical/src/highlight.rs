//! Byte ranges of matched terms in a text, for `<mark>`-style highlighting.

use rag_text::{normalize, Analyzer, Mode};

/// Ranges of `text` (original bytes, sorted, non-overlapping) where a term of
/// `matched` occurs: analysed terms (stemmed words, Chinese words) and, for
/// substring matches, the normalised pattern itself.
pub fn highlight(analyzer: &Analyzer, text: &str, matched: &[String]) -> Vec<(usize, usize)> {
    if matched.is_empty() || text.is_empty() {
        return Vec::new();
    }
    let mut ranges: Vec<(usize, usize)> = analyzer
        .analyze(text, Mode::Index)
        .into_iter()
        .filter(|t| matched.contains(&t.text))
        .map(|t| (t.start, t.end))
        .collect();
    // Substring patterns: find them in the normalised text and map back.
    let norm = normalize(text);
    for m in matched.iter().filter(|m| !m.is_empty() && !m.contains(' ')) {
        let mut from = 0;
        while let Some(pos) = norm.text[from..].find(m.as_str()) {
            let s = from + pos;
            let e = s + m.len();
            ranges.push(norm.original_range(s, e));
            from = e;
        }
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highlights_stemmed_and_chinese_terms() {
        let a = Analyzer::new();
        let text = "Refunds are quick. 退款三天到账";
        let r = highlight(&a, text, &["refund".into(), "退款".into()]);
        let shown: Vec<&str> = r.iter().map(|(s, e)| &text[*s..*e]).collect();
        assert_eq!(shown, ["Refunds", "退款"]);
    }
}
