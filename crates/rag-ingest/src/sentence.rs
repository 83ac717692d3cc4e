//! Sentence boundaries for Chinese and English.

use crate::doc::is_cjk;

const CLOSERS: &[char] = &['"', '\'', '”', '’', '」', '』', '）', ')', '】', ']', '》'];
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "no",
    "nos", "fig", "figs", "approx", "inc", "ltd", "co", "corp", "dept", "est", "min", "max", "vol",
    "p", "pp", "ed", "eds", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
    "nov", "dec", "mon", "tue", "wed", "thu", "fri", "sat", "sun", "u.s", "u.k", "a.m", "p.m",
];

/// The word just before byte `i` (letters, digits and inner dots).
fn word_before(s: &str, i: usize) -> &str {
    let start = s[..i]
        .rfind(|c: char| !(c.is_alphanumeric() || c == '.'))
        .map_or(0, |p| p + s[p..].chars().next().map_or(1, char::len_utf8));
    &s[start..i]
}

/// Whether the `.` at byte `i` of `s` ends a sentence, given what follows it.
fn period_ends_sentence(s: &str, i: usize, next: Option<char>) -> bool {
    let word = word_before(s, i);
    if word.is_empty() {
        return true;
    }
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return false;
    }
    // An initial ("J. Smith") or a list number at the start ("1. Unpack").
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if c.is_uppercase() {
            return false;
        }
    }
    if word.bytes().all(|b| b.is_ascii_digit()) && s[..i - word.len()].trim().is_empty() {
        return false;
    }
    // A lower-case continuation is rarely a new sentence.
    !next.is_some_and(|c| c.is_lowercase())
}

/// Trimmed byte ranges of the sentences of `text[start..end]`, in order,
/// covering every non-whitespace byte.
pub(crate) fn sentences(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let s = &text[start..end];
    let mut out = Vec::new();
    let mut sent_start = 0;
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut k = 0;
    while k < chars.len() {
        let (i, c) = chars[k];
        let strong = matches!(c, '。' | '！' | '？' | '；' | '…' | '!' | '?' | '．');
        let semicolon = c == ';';
        let period = c == '.';
        if !(strong || semicolon || period) {
            k += 1;
            continue;
        }
        // Absorb runs of terminators and closing quotes/brackets.
        let mut m = k + 1;
        while m < chars.len()
            && (matches!(chars[m].1, '。' | '！' | '？' | '…' | '!' | '?' | '.')
                || CLOSERS.contains(&chars[m].1))
        {
            m += 1;
        }
        let after = chars.get(m).map(|&(_, c)| c);
        let next_visible = chars[m..]
            .iter()
            .map(|&(_, c)| c)
            .find(|c| !c.is_whitespace());
        let cjk_term = strong && !matches!(c, '!' | '?');
        let boundary = if cjk_term {
            true
        } else if after.is_some_and(|a| !a.is_whitespace()) {
            // "3.5", "a.m.", "example.com", "?!x": no boundary unless CJK follows.
            after.is_some_and(is_cjk)
        } else if period {
            period_ends_sentence(s, i, next_visible)
        } else {
            true
        };
        if boundary {
            let e = chars.get(m).map_or(s.len(), |&(p, _)| p);
            push_trimmed(s, sent_start, e, start, &mut out);
            sent_start = e;
        }
        k = m;
    }
    push_trimmed(s, sent_start, s.len(), start, &mut out);
    out
}

fn push_trimmed(s: &str, a: usize, b: usize, base: usize, out: &mut Vec<(usize, usize)>) {
    let piece = &s[a..b];
    let lead = piece.len() - piece.trim_start().len();
    let trail = piece.len() - piece.trim_end().len();
    if lead + trail < piece.len() {
        out.push((base + a + lead, base + b - trail));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<&str> {
        sentences(s, 0, s.len())
            .into_iter()
            .map(|(a, b)| &s[a..b])
            .collect()
    }

    #[test]
    fn chinese_and_english() {
        assert_eq!(
            split("营业到凌晨两点。可以点夜宵吗？可以！“真的吗？”他问。"),
            [
                "营业到凌晨两点。",
                "可以点夜宵吗？",
                "可以！",
                "“真的吗？”",
                "他问。"
            ]
        );
        assert_eq!(
            split("Dr. Smith paid $3.50 at 9 a.m. on Monday. See e.g. the U.S. page! Done? Yes."),
            [
                "Dr. Smith paid $3.50 at 9 a.m. on Monday.",
                "See e.g. the U.S. page!",
                "Done?",
                "Yes."
            ]
        );
        assert_eq!(
            split("1. Unpack the desk. J. R. Smith wrote it."),
            ["1. Unpack the desk.", "J. R. Smith wrote it."]
        );
        assert_eq!(
            split("版本 v2.1 发布了……下一版呢；以后再说"),
            ["版本 v2.1 发布了……", "下一版呢；", "以后再说"]
        );
        assert_eq!(
            split("Visit example.com today. 好的。OK"),
            ["Visit example.com today.", "好的。", "OK"]
        );
    }
}
