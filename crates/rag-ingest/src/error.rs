//! Typed, per-file ingestion errors.

use thiserror::Error;

/// Why one file could not be ingested. The caller reports it for that file and
/// carries on with the others.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IngestError {
    /// Neither the name nor the content matches a format ragscope reads.
    #[error(
        "unsupported format {0}; supported: .txt .md .markdown .html .htm .pdf .docx .jsonl .csv"
    )]
    Unsupported(String),
    /// The file claims a format but its content is broken.
    #[error("malformed {format} file: {reason}")]
    Malformed {
        /// The format it was read as (`pdf`, `docx`, ...).
        format: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A bad record in an FAQ table; the whole file is refused.
    #[error("line {line}: {message}")]
    BadRecord {
        /// 1-based line number (the CSV header is line 1).
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// A PDF whose pages carry no extractable text (a scan, or only images).
    #[error("PDF has no text layer ({pages} page(s), no extractable text; scanned? OCR it first)")]
    NoTextLayer {
        /// Number of pages in the file.
        pages: usize,
    },
    /// The bytes are not valid in any encoding tried.
    #[error("text encoding could not be decided (tried {tried}); save the file as UTF-8")]
    EncodingUndecidable {
        /// Encodings tried, comma separated.
        tried: String,
    },
    /// Over a size limit: the file itself, or what it decompresses to.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What was measured (`file`, `word/document.xml (decompressed)`, ...).
        what: String,
        /// Size seen (for decompressed data: at least this many bytes).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file is empty or holds only whitespace / no text.
    #[error("the file is empty (no text)")]
    Empty,
}

impl IngestError {
    /// A stable snake_case code for events, logs and API responses.
    pub fn code(&self) -> &'static str {
        match self {
            IngestError::Unsupported(_) => "unsupported_format",
            IngestError::Malformed { .. } => "malformed_file",
            IngestError::BadRecord { .. } => "bad_record",
            IngestError::NoTextLayer { .. } => "no_text_layer",
            IngestError::EncodingUndecidable { .. } => "encoding_undecidable",
            IngestError::TooLarge { .. } => "too_large",
            IngestError::Empty => "empty_file",
        }
    }

    /// Every code [`IngestError::code`] can return.
    pub const CODES: &'static [&'static str] = &[
        "unsupported_format",
        "malformed_file",
        "bad_record",
        "no_text_layer",
        "encoding_undecidable",
        "too_large",
        "empty_file",
    ];

    pub(crate) fn malformed(format: &'static str, reason: impl Into<String>) -> Self {
        IngestError::Malformed {
            format,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed() {
        let all = [
            IngestError::Unsupported(String::new()),
            IngestError::malformed("pdf", ""),
            IngestError::BadRecord {
                line: 1,
                message: String::new(),
            },
            IngestError::NoTextLayer { pages: 1 },
            IngestError::EncodingUndecidable {
                tried: String::new(),
            },
            IngestError::TooLarge {
                what: String::new(),
                size: 1,
                limit: 0,
            },
            IngestError::Empty,
        ];
        for e in &all {
            assert!(IngestError::CODES.contains(&e.code()), "{}", e.code());
        }
        assert_eq!(all.len(), IngestError::CODES.len());
    }
}
