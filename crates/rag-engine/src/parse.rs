//! Parsing input files: text and Markdown documents, FAQ tables, synonym and fact lists.

use rag_core::{FaqStatus, SynonymGroup, Timestamp};
use serde::Deserialize;
use thiserror::Error;

/// Why a file could not be read.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ParseError {
    /// The file contains NUL bytes: it is not text.
    #[error("binary file (NUL byte at offset {offset}); only UTF-8 text, Markdown, JSONL and CSV are supported")]
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
    /// An extension ragscope does not read yet.
    #[error("unsupported file type {0:?}; supported: .txt .md .markdown .jsonl .csv")]
    Unsupported(String),
    /// A bad line in a JSONL or CSV FAQ file.
    #[error("line {line}: {message}")]
    BadRecord {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

/// An FAQ entry as read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct FaqDraft {
    /// Question.
    pub question: String,
    /// Answer.
    pub answer: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Source URL.
    pub source_url: Option<String>,
    /// Status (approved unless the file says otherwise).
    pub status: FaqStatus,
    /// Validity start.
    pub valid_from: Option<Timestamp>,
    /// Validity end.
    pub valid_until: Option<Timestamp>,
}

/// What a file turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A document to chunk.
    Document {
        /// Title: the first Markdown heading, else the file name.
        title: String,
        /// Its text.
        text: String,
        /// Whether it is Markdown.
        markdown: bool,
    },
    /// FAQ entries.
    Faqs(Vec<FaqDraft>),
}

/// Checks that bytes are UTF-8 text and returns it without a BOM.
pub fn decode_text(bytes: &[u8]) -> Result<&str, ParseError> {
    if let Some(offset) = bytes.iter().take(64 * 1024).position(|b| *b == 0) {
        return Err(ParseError::Binary { offset });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError::InvalidUtf8 { offset: e.valid_up_to() })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(text)
}

/// Parses a file by its name's extension.
pub fn parse_file(name: &str, bytes: &[u8]) -> Result<Parsed, ParseError> {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "txt" | "text" | "md" | "markdown" => {
            let text = decode_text(bytes)?;
            let markdown = ext.starts_with('m');
            let stem = std::path::Path::new(name).file_stem().and_then(|s| s.to_str()).unwrap_or(name);
            let title = markdown
                .then(|| text.lines().find_map(|l| l.trim().strip_prefix("# ").map(|t| t.trim().to_owned())))
                .flatten()
                .unwrap_or_else(|| stem.to_owned());
            Ok(Parsed::Document { title, text: text.to_owned(), markdown })
        }
        "jsonl" | "ndjson" => parse_faq_jsonl(decode_text(bytes)?).map(Parsed::Faqs),
        "csv" => parse_faq_csv(decode_text(bytes)?).map(Parsed::Faqs),
        other => Err(ParseError::Unsupported(if other.is_empty() { name.to_owned() } else { format!(".{other}") })),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Tags {
    List(Vec<String>),
    Text(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TimeValue {
    Unix(i64),
    Text(String),
}

#[derive(Deserialize)]
struct FaqRecord {
    question: String,
    answer: String,
    #[serde(default)]
    tags: Option<Tags>,
    #[serde(default)]
    source_url: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    valid_from: Option<TimeValue>,
    #[serde(default)]
    valid_until: Option<TimeValue>,
}

fn split_tags(s: &str) -> Vec<String> {
    s.split([',', ';', '|', '，']).map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
}

fn parse_time(v: TimeValue, line: usize) -> Result<Timestamp, ParseError> {
    match v {
        TimeValue::Unix(t) => Ok(t),
        TimeValue::Text(s) => parse_time_text(&s).ok_or_else(|| ParseError::BadRecord {
            line,
            message: format!("time {s:?} is neither RFC 3339 (2026-05-01T00:00:00Z), a date (2026-05-01) nor unix seconds"),
        }),
    }
}

/// Parses RFC 3339, a plain date (midnight UTC) or unix seconds.
pub fn parse_time_text(s: &str) -> Option<Timestamp> {
    let s = s.trim();
    if let Ok(t) = s.parse::<i64>() {
        return Some(t);
    }
    if let Ok(t) = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
        return Some(t.unix_timestamp());
    }
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(s, &fmt).ok().map(|d| d.midnight().assume_utc().unix_timestamp())
}

fn draft(r: FaqRecord, line: usize) -> Result<FaqDraft, ParseError> {
    let question = r.question.trim().to_owned();
    let answer = r.answer.trim().to_owned();
    if question.is_empty() || answer.is_empty() {
        return Err(ParseError::BadRecord { line, message: "question and answer must not be empty".into() });
    }
    let status = match r.status.as_deref().map(str::trim) {
        None | Some("") => FaqStatus::Approved,
        Some(s) => FaqStatus::parse(s).ok_or_else(|| ParseError::BadRecord {
            line,
            message: format!("status {s:?} is not approved, pending or disabled"),
        })?,
    };
    Ok(FaqDraft {
        question,
        answer,
        tags: match r.tags {
            None => vec![],
            Some(Tags::List(l)) => l.into_iter().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect(),
            Some(Tags::Text(t)) => split_tags(&t),
        },
        source_url: r.source_url.filter(|s| !s.trim().is_empty()),
        status,
        valid_from: r.valid_from.map(|v| parse_time(v, line)).transpose()?,
        valid_until: r.valid_until.map(|v| parse_time(v, line)).transpose()?,
    })
}

/// FAQ entries from JSON lines with `question`, `answer` and optional `tags`,
/// `source_url`, `status`, `valid_from`, `valid_until`.
pub fn parse_faq_jsonl(text: &str) -> Result<Vec<FaqDraft>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let rec: FaqRecord =
            serde_json::from_str(line).map_err(|e| ParseError::BadRecord { line: i + 1, message: e.to_string() })?;
        out.push(draft(rec, i + 1)?);
    }
    if out.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(out)
}

/// FAQ entries from CSV with a header row naming at least `question` and `answer`.
pub fn parse_faq_csv(text: &str) -> Result<Vec<FaqDraft>, ParseError> {
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| ParseError::BadRecord { line: 1, message: e.to_string() })?.clone();
    let col = |name: &str| headers.iter().position(|h| h.trim().eq_ignore_ascii_case(name));
    let (Some(q), Some(a)) = (col("question"), col("answer")) else {
        return Err(ParseError::BadRecord { line: 1, message: "the header must name the columns question and answer".into() });
    };
    let (tags, url, status) = (col("tags"), col("source_url"), col("status"));
    let (from, until) = (col("valid_from"), col("valid_until"));
    let mut out = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| ParseError::BadRecord { line, message: e.to_string() })?;
        let get = |c: Option<usize>| c.and_then(|c| rec.get(c)).map(str::to_owned).filter(|s| !s.trim().is_empty());
        out.push(draft(
            FaqRecord {
                question: get(Some(q)).unwrap_or_default(),
                answer: get(Some(a)).unwrap_or_default(),
                tags: get(tags).map(Tags::Text),
                source_url: get(url),
                status: get(status),
                valid_from: get(from).map(TimeValue::Text),
                valid_until: get(until).map(TimeValue::Text),
            },
            line,
        )?);
    }
    if out.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(out)
}

/// Synonym groups: one per line, terms separated by tabs; `#` starts a comment.
pub fn parse_synonyms_tsv(text: &str) -> Vec<SynonymGroup> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| SynonymGroup { terms: l.split('\t').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect() })
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
            return Err(ParseError::BadRecord { line: i + 1, message: "expected key<TAB>value[<TAB>synonym|synonym]".into() });
        }
        let syn = cols.next().map(|s| s.split('|').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()).unwrap_or_default();
        out.push((key.to_owned(), value.to_owned(), syn));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_binary_and_bad_utf8() {
        assert_eq!(parse_file("a.txt", b"ab\0cd"), Err(ParseError::Binary { offset: 2 }));
        assert_eq!(parse_file("a.txt", b"ok \xff\xfe"), Err(ParseError::InvalidUtf8 { offset: 3 }));
        assert_eq!(parse_file("a.txt", b"  \n"), Err(ParseError::Empty));
        assert!(matches!(parse_file("a.exe", b"MZ"), Err(ParseError::Unsupported(_))));
    }

    #[test]
    fn reads_faq_csv_and_jsonl() {
        let csv = "question,answer,tags\n怎么退款,在订单页申请,退款;售后\n";
        let Parsed::Faqs(f) = parse_file("f.csv", csv.as_bytes()).unwrap() else { panic!("not faqs") };
        assert_eq!(f[0].tags, ["退款", "售后"]);
        let jsonl = "{\"question\":\"q\",\"answer\":\"a\",\"valid_until\":\"2026-01-02\"}\n";
        let Parsed::Faqs(f) = parse_file("f.jsonl", jsonl.as_bytes()).unwrap() else { panic!("not faqs") };
        assert_eq!(f[0].valid_until, Some(1767312000));
        assert!(matches!(parse_file("f.jsonl", b"{\"question\":\"q\"}"), Err(ParseError::BadRecord { line: 1, .. })));
    }

    #[test]
    fn markdown_title_from_heading() {
        let Parsed::Document { title, .. } = parse_file("x.md", "# 保修政策\n\n内容".as_bytes()).unwrap() else {
            panic!("not a document")
        };
        assert_eq!(title, "保修政策");
    }
}
