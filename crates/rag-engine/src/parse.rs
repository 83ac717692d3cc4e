//! Parsing the lexicon files: synonym and fact lists (TSV), and the UTF-8
//! check they share. Documents and FAQ tables are read by `rag_ingest`.

use rag_core::{SynonymGroup, Timestamp};
use thiserror::Error;

/// Why a file could not be read.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ParseError {
    /// The file contains NUL bytes: it is not text.
    #[error("binary file (NUL byte at offset {offset}); expected UTF-8 text")]
    Binary {
        /// Offset of the first NUL byte.
        offset: usize,
    },
    /// Not valid UTF-8.
    #[error("not valid UTF-8 (first bad byte at offset {offset})")]
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// Nothing but whitespace.
    #[error("the file is empty")]
    Empty,
    /// A bad line.
    #[error("line {line}: {message}")]
    BadRecord {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

/// Checks that bytes are UTF-8 text and returns it without a BOM.
pub fn decode_text(bytes: &[u8]) -> Result<&str, ParseError> {
    if let Some(offset) = bytes.iter().take(64 * 1024).position(|b| *b == 0) {
        return Err(ParseError::Binary { offset });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(text)
}

/// Parses RFC 3339, a plain date (midnight UTC) or unix seconds.
pub fn parse_time_text(s: &str) -> Option<Timestamp> {
    rag_ingest::faq::parse_time(s)
}

/// Synonym groups: one per line, terms separated by tabs; `#` starts a comment.
pub fn parse_synonyms_tsv(text: &str) -> Vec<SynonymGroup> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| SynonymGroup {
            terms: l
                .split('\t')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        })
        .filter(|g| g.terms.len() >= 2)
        .collect()
}

/// Facts: `key<TAB>value<TAB>synonym|synonym`; `#` starts a comment.
pub fn parse_facts_tsv(text: &str) -> Result<Vec<(String, String, Vec<String>)>, ParseError> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        let mut cols = l.split('\t');
        let key = cols.next().unwrap_or_default().trim();
        let value = cols.next().unwrap_or_default().trim();
        if key.is_empty() || value.is_empty() {
            return Err(ParseError::BadRecord {
                line: i + 1,
                message: "expected key<TAB>value[<TAB>synonym|synonym]".into(),
            });
        }
        let syn = cols
            .next()
            .map(|s| {
                s.split('|')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        out.push((key.to_owned(), value.to_owned(), syn));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_binary_and_bad_utf8() {
        assert_eq!(
            decode_text(b"ab\0cd"),
            Err(ParseError::Binary { offset: 2 })
        );
        assert_eq!(
            decode_text(b"ok \xff\xfe"),
            Err(ParseError::InvalidUtf8 { offset: 3 })
        );
        assert_eq!(decode_text(b"  \n"), Err(ParseError::Empty));
        assert_eq!(decode_text(b"\xef\xbb\xbfa\tb"), Ok("a\tb"));
    }

    #[test]
    fn reads_synonyms_facts_and_times() {
        assert_eq!(
            parse_synonyms_tsv("# c\n退款\t退钱\n单独\n")[0].terms,
            ["退款", "退钱"]
        );
        let facts = parse_facts_tsv("营业时间\t16:00–次日02:00\t几点开门|开门时间\n").unwrap();
        assert_eq!(facts[0].2, ["几点开门", "开门时间"]);
        assert!(matches!(
            parse_facts_tsv("key-only\n"),
            Err(ParseError::BadRecord { line: 1, .. })
        ));
        assert_eq!(parse_time_text("2026-01-02"), Some(1767312000));
    }
}
