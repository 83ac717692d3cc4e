//! Added (special) tokens: found in the raw or the normalised text before
//! the model runs, with their `single_word`, `lstrip` and `rstrip` options.

use super::BertTokenizer;

/// One token of the `added_tokens` list.
#[derive(Debug, Clone)]
pub(super) struct AddedToken {
    pub(super) id: u32,
    pub(super) content: String,
    pub(super) single_word: bool,
    pub(super) lstrip: bool,
    pub(super) rstrip: bool,
    /// Matched in the normalised text rather than the raw text.
    pub(super) normalized: bool,
}

/// A piece of text after added tokens were split out.
pub(super) enum Piece {
    Text(String),
    Token(u32),
}

impl BertTokenizer {
    /// Splits `text` around occurrences of added tokens (those matched in
    /// normalised text when `normalized`, else those matched in raw text).
    pub(super) fn split_added(&self, text: &str, normalized: bool) -> Vec<Piece> {
        let tokens: Vec<&AddedToken> = self
            .added
            .iter()
            .filter(|t| t.normalized == normalized)
            .collect();
        if tokens.is_empty() {
            return vec![Piece::Text(text.to_owned())];
        }
        let mut pieces = Vec::new();
        // Start of the text not yet emitted.
        let mut emitted = 0;
        let mut pos = 0;
        while pos < text.len() {
            let rest = &text[pos..];
            let found = tokens.iter().find(|t| {
                rest.starts_with(t.content.as_str())
                    && (!t.single_word || is_word_boundary(text, pos, pos + t.content.len()))
            });
            let Some(token) = found else {
                pos += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
            let mut start = pos;
            let mut end = pos + token.content.len();
            if token.lstrip {
                let before = text[emitted..start].trim_end();
                start = emitted + before.len();
            }
            if token.rstrip {
                let after = &text[end..];
                end += after.len() - after.trim_start().len();
            }
            if start > emitted {
                pieces.push(Piece::Text(text[emitted..start].to_owned()));
            }
            pieces.push(Piece::Token(token.id));
            emitted = end;
            pos = end;
        }
        if emitted < text.len() {
            pieces.push(Piece::Text(text[emitted..].to_owned()));
        }
        pieces
    }
}

/// Whether the match `text[start..end]` is not glued to word characters.
fn is_word_boundary(text: &str, start: usize, end: usize) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let before = text[..start]
        .chars()
        .next_back()
        .is_none_or(|c| !is_word(c));
    let after = text[end..].chars().next().is_none_or(|c| !is_word(c));
    before && after
}
