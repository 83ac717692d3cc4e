//! Normalisation with an offset map back to the original text.

use rustc_hash::FxHashMap;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

/// Normalised text plus, for every byte of it, the byte range of the original
/// character it came from.
#[derive(Debug, Clone, Default)]
pub struct Normalized {
    /// The normalised text.
    pub text: String,
    orig_start: Vec<u32>,
    orig_end: Vec<u32>,
}

impl Normalized {
    /// Maps a byte range of the normalised text back to the original text.
    ///
    /// `start < end <= text.len()` must hold.
    pub fn original_range(&self, start: usize, end: usize) -> (usize, usize) {
        debug_assert!(start < end && end <= self.text.len());
        (
            self.orig_start[start] as usize,
            self.orig_end[end - 1] as usize,
        )
    }
}

/// Traditional→Simplified, character by character.
///
/// The table is derived once from OpenCC's T2S dictionaries: every CJK ideograph
/// is converted on its own (separated by newlines, so no phrase rule fires), and
/// the ones that change are kept. One character in, one character out keeps the
/// offset map exact.
fn t2s_table() -> &'static FxHashMap<char, char> {
    static TABLE: OnceLock<FxHashMap<char, char>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let chars: Vec<char> = (0x3400u32..=0x4DBF)
            .chain(0x4E00..=0x9FFF)
            .filter_map(char::from_u32)
            .collect();
        let mut joined = String::with_capacity(chars.len() * 4);
        for c in &chars {
            joined.push(*c);
            joined.push('\n');
        }
        let mut table = FxHashMap::default();
        let Ok(cc) =
            ferrous_opencc::OpenCC::from_config(ferrous_opencc::config::BuiltinConfig::T2s)
        else {
            return table;
        };
        let converted = cc.convert(&joined);
        let out: Vec<&str> = converted.split('\n').collect();
        if out.len() < chars.len() {
            return table;
        }
        for (c, s) in chars.iter().zip(out) {
            let mut it = s.chars();
            if let (Some(d), None) = (it.next(), it.next()) {
                if d != *c {
                    table.insert(*c, d);
                }
            }
        }
        table
    })
}

/// Folds one character (already NFKC-normalised) and pushes the result.
#[inline]
fn push_folded(out: &mut String, c: char) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
    } else if crate::is_han(c) {
        out.push(*t2s_table().get(&c).unwrap_or(&c));
    } else {
        for l in c.to_lowercase() {
            out.push(l);
        }
    }
}

/// NFKC, full-width→half-width, case folding and Traditional→Simplified.
pub fn normalize(input: &str) -> Normalized {
    let mut text = String::with_capacity(input.len());
    let mut orig_start = Vec::with_capacity(input.len());
    let mut orig_end = Vec::with_capacity(input.len());
    for (i, c) in input.char_indices() {
        let before = text.len();
        if c.is_ascii() {
            text.push(c.to_ascii_lowercase());
        } else {
            for d in std::iter::once(c).nfkc() {
                push_folded(&mut text, d);
            }
        }
        let end = (i + c.len_utf8()) as u32;
        for _ in before..text.len() {
            orig_start.push(i as u32);
            orig_end.push(end);
        }
    }
    Normalized {
        text,
        orig_start,
        orig_end,
    }
}

/// Normalises for substring matching: [`normalize`], then every run of
/// whitespace and punctuation becomes one space, trimmed at both ends.
pub fn normalize_for_match(input: &str) -> String {
    let n = normalize(input);
    let mut out = String::with_capacity(n.text.len());
    let mut pending_space = false;
    for c in n.text.chars() {
        if c.is_alphanumeric() || crate::is_han(c) {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.push(c);
        } else {
            pending_space = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_width_and_case_fold() {
        let n = normalize("ＡＢＣ１２３，Ｈｅｌｌｏ");
        assert_eq!(n.text, "abc123,hello");
        // The 'h' came from the full-width 'Ｈ' at byte 21.
        let pos = n.text.find('h').unwrap();
        assert_eq!(n.original_range(pos, pos + 1), (21, 24));
    }

    #[test]
    fn traditional_to_simplified() {
        assert_eq!(normalize("營業時間").text, "营业时间");
        assert_eq!(normalize("退款發票").text, "退款发票");
        assert_eq!(normalize("简体不变").text, "简体不变");
    }

    #[test]
    fn match_form_collapses_punctuation() {
        assert_eq!(normalize_for_match("  能不能，少辣？ "), "能不能 少辣");
    }
}
