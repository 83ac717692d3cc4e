//! Sentence splitting for Chinese, English and mixed text, with byte ranges.
//!
//! A sentence ends at 。！？；!?; or `…`, at a `.` followed by white space or
//! the end of the text (not inside numbers such as 3.5, not after common
//! abbreviations such as "e.g." or "No."), and at every line break (list
//! items and table rows are sentences of their own). Closing quotes and
//! brackets after the terminator, and citation markers such as `[1]` right
//! after it, stay with the sentence. Leading list markers (`-`, `*`, `•`,
//! `#`, `>`) and white space are not part of a sentence; pieces with no
//! letter, digit or Han character (table rules like `|---|`) are skipped.

/// A sentence: its byte range in the text it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentenceSpan {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset one past the last character.
    pub end: usize,
}

impl SentenceSpan {
    /// The sentence's text in `text`.
    pub fn text<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start..self.end]
    }
}

const STRONG: &[char] = &['。', '！', '？', '；', '!', '?', ';', '…', '｡'];
const CLOSERS: &[char] = &['」', '』', '”', '’', '"', '\'', ')', '）', '】', '》', ']'];
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "etc", "mr", "mrs", "ms", "dr", "no", "vs", "approx", "fig", "st",
];

/// Splits `text` into sentences, in order.
pub fn split_sentences(text: &str) -> Vec<SentenceSpan> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start = 0usize;
    let mut i = 0usize;
    while i < chars.len() {
        let (at, c) = chars[i];
        let ends = if c == '\n' || c == '\r' {
            push(text, start, at, &mut out);
            start = at + c.len_utf8();
            i += 1;
            continue;
        } else if STRONG.contains(&c) {
            true
        } else if c == '.' {
            period_ends_sentence(text, &chars, i)
        } else {
            false
        };
        if !ends {
            i += 1;
            continue;
        }
        // Absorb repeated terminators (?!, ……, ...), closing quotes and brackets.
        let mut j = i + 1;
        while j < chars.len()
            && (STRONG.contains(&chars[j].1) || chars[j].1 == '.' || CLOSERS.contains(&chars[j].1))
        {
            j += 1;
        }
        // Absorb citation markers right after the sentence, with spaces before them.
        loop {
            let mut k = j;
            while k < chars.len() && chars[k].1 == ' ' {
                k += 1;
            }
            match citation_len(&chars, k) {
                Some(len) => j = k + len,
                None => break,
            }
        }
        let end = chars.get(j).map(|&(b, _)| b).unwrap_or(text.len());
        push(text, start, end, &mut out);
        start = end;
        i = j;
    }
    push(text, start, text.len(), &mut out);
    out
}

/// Number of chars of a citation marker (`[1]`, `[1, 2]`, `［1］`, `【1】`) starting at `k`.
fn citation_len(chars: &[(usize, char)], k: usize) -> Option<usize> {
    let open = chars.get(k)?.1;
    if !matches!(open, '[' | '［' | '【') {
        return None;
    }
    let mut j = k + 1;
    let mut digits = 0;
    while let Some(&(_, c)) = chars.get(j) {
        if c.is_ascii_digit() {
            digits += 1;
        } else if !matches!(c, ',' | '，' | '、' | ' ') {
            break;
        }
        j += 1;
    }
    match chars.get(j) {
        Some(&(_, ']' | '］' | '】')) if digits > 0 => Some(j + 1 - k),
        _ => None,
    }
}

fn period_ends_sentence(text: &str, chars: &[(usize, char)], i: usize) -> bool {
    let next = chars.get(i + 1).map(|&(_, c)| c);
    let prev = i.checked_sub(1).map(|p| chars[p].1);
    // 3.5, v1.2, example.com
    if let (Some(p), Some(n)) = (prev, next) {
        if p.is_alphanumeric() && n.is_alphanumeric() {
            return false;
        }
    }
    match next {
        None => {}
        Some(n) if n.is_whitespace() || CLOSERS.contains(&n) || matches!(n, '[' | '［' | '【') => {
        }
        Some(n) if rag_text::is_han(n) => {}
        _ => return false,
    }
    // The word before the period.
    let at = chars[i].0;
    let word_start = text[..at]
        .rfind(|c: char| c.is_whitespace() || c == '(')
        .map(|p| p + 1)
        .unwrap_or(0);
    let word = text[word_start..at].to_lowercase();
    let word = word.trim_start_matches(['(', '"', '\'']);
    if ABBREVIATIONS.contains(&word) {
        return false;
    }
    // A single capital letter: an initial (J. Smith).
    if word.chars().count() == 1
        && word.chars().all(|c| c.is_alphabetic())
        && prev.is_some_and(char::is_uppercase)
    {
        return false;
    }
    true
}

fn push(text: &str, start: usize, end: usize, out: &mut Vec<SentenceSpan>) {
    let piece = &text[start..end];
    let lead = piece.len()
        - piece
            .trim_start_matches(|c: char| {
                c.is_whitespace() || matches!(c, '-' | '*' | '•' | '·' | '#' | '>')
            })
            .len();
    let trimmed = piece[lead..].trim_end();
    if trimmed.is_empty()
        || !trimmed
            .chars()
            .any(|c| c.is_alphanumeric() || rag_text::is_han(c))
    {
        return;
    }
    let s = start + lead;
    out.push(SentenceSpan {
        start: s,
        end: s + trimmed.len(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<&str> {
        split_sentences(text).iter().map(|s| s.text(text)).collect()
    }

    #[test]
    fn chinese_terminators() {
        assert_eq!(
            split("本店营业到次日02:00。最晚接单时间是01:30！可以吗？可以；但要提前。"),
            vec![
                "本店营业到次日02:00。",
                "最晚接单时间是01:30！",
                "可以吗？",
                "可以；",
                "但要提前。"
            ]
        );
    }

    #[test]
    fn english_periods_numbers_and_abbreviations() {
        assert_eq!(
            split("The Pro lifts 120 kg. It moves at 3.5 cm/s, e.g. when loaded. Really?! Yes."),
            vec![
                "The Pro lifts 120 kg.",
                "It moves at 3.5 cm/s, e.g. when loaded.",
                "Really?!",
                "Yes."
            ]
        );
    }

    #[test]
    fn quotes_citations_and_lines_stay_together() {
        assert_eq!(
            split("他说：「可以退款。」[1] 然后呢？\n- Rated load is 80 kg. [2][3] Next line\n|---|---|\n# Heading"),
            vec!["他说：「可以退款。」[1]", "然后呢？", "Rated load is 80 kg. [2][3]", "Next line", "Heading"]
        );
    }

    #[test]
    fn ranges_point_into_the_text() {
        let text = "  第一句。Second one.  ";
        for s in split_sentences(text) {
            assert!(text.is_char_boundary(s.start) && text.is_char_boundary(s.end));
            assert_eq!(s.text(text).trim(), s.text(text));
        }
        assert_eq!(split(""), Vec::<&str>::new());
        assert_eq!(split("no terminator"), vec!["no terminator"]);
    }
}
