//! Splitting runs of letters and digits into words and identifiers.

/// A word found in a Latin run: byte range in the normalised text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub start: usize,
    pub end: usize,
}

/// Characters that may join two parts of one identifier.
fn is_connector(c: char) -> bool {
    matches!(c, '.' | ':' | ',' | '-' | '/' | '_')
}

/// Whether a connector between `prev_part` and the character after it joins them.
///
/// `.` `:` `,` `/` join digits (3.5, 16:00, 1,000, 2024/05); `-` joins when
/// either side is a number or the left side is a single letter (A-12, e-mail);
/// `_` always joins (snake_case identifiers).
fn joins(connector: char, prev_part: &str, prev: char, next: char) -> bool {
    match connector {
        '_' => true,
        '-' => prev.is_ascii_digit() || next.is_ascii_digit() || prev_part.chars().count() == 1,
        _ => prev.is_ascii_digit() && next.is_ascii_digit(),
    }
}

/// Whether `c` can be part of a Latin-run word.
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() && !crate::is_han(c)
}

/// Splits the normalised text `text[start..end]` (a run of word characters and
/// connectors) into words, calling `emit` for each.
pub(crate) fn split_run(text: &str, start: usize, end: usize, mut emit: impl FnMut(Word)) {
    let run = &text[start..end];
    let chars: Vec<(usize, char)> = run.char_indices().collect();
    let mut word_start: Option<usize> = None;
    // Start of the current part (since the last joining connector) for the single-letter rule.
    let mut part_start = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let (off, c) = chars[i];
        if is_word_char(c) {
            if word_start.is_none() {
                word_start = Some(off);
                part_start = off;
            }
            i += 1;
            continue;
        }
        // A connector (or anything else): does it join?
        let joined = match (word_start, chars.get(i + 1)) {
            (Some(_), Some(&(_, next))) if is_connector(c) && is_word_char(next) => {
                let prev = chars[i - 1].1;
                joins(c, &run[part_start..off], prev, next)
            }
            _ => false,
        };
        if joined {
            part_start = off + c.len_utf8();
        } else if let Some(ws) = word_start.take() {
            emit(Word {
                start: start + ws,
                end: start + off,
            });
        }
        i += 1;
    }
    if let Some(ws) = word_start {
        emit(Word {
            start: start + ws,
            end,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        let mut out = Vec::new();
        split_run(s, 0, s.len(), |w| out.push(&s[w.start..w.end]));
        out
    }

    #[test]
    fn identifiers_stay_whole() {
        assert_eq!(
            words("a-12 3.5km 16:00 iphone15 snake_case"),
            ["a-12", "3.5km", "16:00", "iphone15", "snake_case"]
        );
        assert_eq!(words("state-of-the-art"), ["state", "of", "the", "art"]);
        assert_eq!(words("end. next"), ["end", "next"]);
        assert_eq!(words("1,000 e-mail"), ["1,000", "e-mail"]);
        assert_eq!(words("don't"), ["don", "t"]);
    }
}
