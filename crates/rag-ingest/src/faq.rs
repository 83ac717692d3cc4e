//! FAQ tables. The fields are those of `demo/faq.jsonl` and of the engine's
//! current loader: `question`, `answer`, optional `tags` (a list, or a string
//! split on `, ; | ，`), `source_url`, `status` (approved, pending, disabled),
//! `valid_from`, `valid_until` (unix seconds, RFC 3339 or a date). A bad
//! record refuses the whole file with its line number.

use rag_core::{FaqStatus, Timestamp};
use serde::{Deserialize, Serialize};

use crate::IngestError;

/// One FAQ entry as read from a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaqRow {
    /// 1-based line of the record (CSV: counting the header as line 1).
    pub line: usize,
    /// The question.
    pub question: String,
    /// The answer.
    pub answer: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Where the answer comes from.
    pub source_url: Option<String>,
    /// Approved unless the file says otherwise.
    pub status: FaqStatus,
    /// Validity start, unix seconds.
    pub valid_from: Option<Timestamp>,
    /// Validity end, unix seconds.
    pub valid_until: Option<Timestamp>,
    /// sha256 of `"question: answer"` (the embedding text): a re-sync keeps
    /// the vector of an entry whose hash did not change.
    pub hash: String,
}

impl FaqRow {
    /// The text to embed, as the seeds' Captain does: `"question: answer"`.
    pub fn embedding_text(&self) -> String {
        format!("{}: {}", self.question, self.answer)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TagsField {
    List(Vec<String>),
    One(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TimeField {
    Seconds(i64),
    Text(String),
}

#[derive(Deserialize)]
struct JsonRecord {
    question: String,
    answer: String,
    #[serde(default)]
    tags: Option<TagsField>,
    #[serde(default)]
    source_url: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    valid_from: Option<TimeField>,
    #[serde(default)]
    valid_until: Option<TimeField>,
}

fn tags_from_text(s: &str) -> Vec<String> {
    s.split([',', ';', '|', '，', '；'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Unix seconds, RFC 3339, or a date (midnight UTC).
pub fn parse_time(s: &str) -> Option<Timestamp> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    if let Ok(t) = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
        return Some(t.unix_timestamp());
    }
    let date = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(s, &date)
        .ok()
        .map(|d| d.midnight().assume_utc().unix_timestamp())
}

fn time_field(
    f: Option<TimeField>,
    line: usize,
    field: &str,
) -> Result<Option<Timestamp>, IngestError> {
    match f {
        None => Ok(None),
        Some(TimeField::Seconds(n)) => Ok(Some(n)),
        Some(TimeField::Text(s)) if s.trim().is_empty() => Ok(None),
        Some(TimeField::Text(s)) => parse_time(&s).map(Some).ok_or_else(|| IngestError::BadRecord {
            line,
            message: format!("{field} {s:?} is not unix seconds, RFC 3339 (2026-05-01T00:00:00Z) or a date (2026-05-01)"),
        }),
    }
}

fn row(r: JsonRecord, line: usize) -> Result<FaqRow, IngestError> {
    let question = r.question.trim().to_owned();
    let answer = r.answer.trim().to_owned();
    if question.is_empty() || answer.is_empty() {
        return Err(IngestError::BadRecord {
            line,
            message: "question and answer must not be empty".into(),
        });
    }
    let status = match r.status.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => FaqStatus::Approved,
        Some(s) => {
            FaqStatus::parse(&s.to_ascii_lowercase()).ok_or_else(|| IngestError::BadRecord {
                line,
                message: format!("status {s:?} is not approved, pending or disabled"),
            })?
        }
    };
    let tags = match r.tags {
        None => vec![],
        Some(TagsField::List(l)) => l
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(TagsField::One(s)) => tags_from_text(&s),
    };
    let valid_from = time_field(r.valid_from, line, "valid_from")?;
    let valid_until = time_field(r.valid_until, line, "valid_until")?;
    let source_url = r
        .source_url
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    if let Some(u) = &source_url {
        if !rag_core::link::is_web_link(u) {
            return Err(IngestError::BadRecord {
                line,
                message: format!(
                    "source_url {:?} is not an http or https link",
                    u.chars().take(80).collect::<String>()
                ),
            });
        }
    }
    let hash = crate::sha256_hex(format!("{question}: {answer}").as_bytes());
    Ok(FaqRow {
        line,
        question,
        answer,
        tags,
        source_url,
        status,
        valid_from,
        valid_until,
        hash,
    })
}

/// FAQ entries from JSON lines (blank lines are skipped).
pub fn parse_jsonl(text: &str) -> Result<Vec<FaqRow>, IngestError> {
    let mut rows = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let rec: JsonRecord = serde_json::from_str(l).map_err(|e| IngestError::BadRecord {
            line: i + 1,
            message: e.to_string(),
        })?;
        rows.push(row(rec, i + 1)?);
    }
    if rows.is_empty() {
        return Err(IngestError::Empty);
    }
    Ok(rows)
}

/// FAQ entries from CSV whose header names at least `question` and `answer`
/// (case-insensitive; other columns as in JSONL, unknown ones ignored).
pub fn parse_csv(text: &str) -> Result<Vec<FaqRow>, IngestError> {
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    let header = rd
        .headers()
        .map_err(|e| IngestError::BadRecord {
            line: 1,
            message: e.to_string(),
        })?
        .clone();
    let find = |name: &str| {
        header
            .iter()
            .position(|h| h.trim().eq_ignore_ascii_case(name))
    };
    let (Some(q), Some(a)) = (find("question"), find("answer")) else {
        return Err(IngestError::BadRecord {
            line: 1,
            message: "the header must name the columns question and answer".into(),
        });
    };
    let cols = [
        find("tags"),
        find("source_url"),
        find("status"),
        find("valid_from"),
        find("valid_until"),
    ];
    let mut rows = Vec::new();
    for rec in rd.records() {
        let rec = rec.map_err(|e| IngestError::BadRecord {
            line: e.position().map_or(0, |p| p.line() as usize),
            message: e.to_string(),
        })?;
        let line = rec.position().map_or(0, |p| p.line() as usize);
        let cell = |c: Option<usize>| {
            c.and_then(|c| rec.get(c))
                .map(str::to_owned)
                .filter(|s| !s.trim().is_empty())
        };
        let jr = JsonRecord {
            question: cell(Some(q)).unwrap_or_default(),
            answer: cell(Some(a)).unwrap_or_default(),
            tags: cell(cols[0]).map(TagsField::One),
            source_url: cell(cols[1]),
            status: cell(cols[2]),
            valid_from: cell(cols[3]).map(TimeField::Text),
            valid_until: cell(cols[4]).map(TimeField::Text),
        };
        rows.push(row(jr, line)?);
    }
    if rows.is_empty() {
        return Err(IngestError::Empty);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_links_are_stored_from_tables() {
        let bad =
            parse_jsonl(r#"{"question": "q", "answer": "a", "source_url": "javascript:alert(1)"}"#);
        assert!(
            matches!(bad, Err(IngestError::BadRecord { line: 1, .. })),
            "{bad:?}"
        );
        let csv = "question,answer,source_url\nq,a,java\tscript:alert(1)\n";
        assert!(matches!(parse_csv(csv), Err(IngestError::BadRecord { .. })));
        let ok =
            parse_jsonl(r#"{"question": "q", "answer": "a", "source_url": "https://x.example/p"}"#)
                .unwrap();
        assert_eq!(ok[0].source_url.as_deref(), Some("https://x.example/p"));
    }

    #[test]
    fn reads_the_demo_faq() {
        let text = include_str!("../../../demo/faq.jsonl");
        let rows = parse_jsonl(text).unwrap();
        assert_eq!(
            rows.len(),
            text.lines().filter(|l| !l.trim().is_empty()).count()
        );
        assert_eq!(rows[0].question, "你们的营业时间是几点到几点？");
        assert_eq!(rows[0].tags, ["营业", "营业时间"]);
        assert_eq!(
            rows[0].source_url.as_deref(),
            Some("https://demo.ragscope.local/faq/opening-hours")
        );
        assert_eq!(rows[0].status, FaqStatus::Approved);
    }

    #[test]
    fn csv_with_tags_status_and_dates() {
        let csv = "Question,Answer,tags,status,valid_until,source_url\n怎么退款,\"在订单页申请，1-3 天到账\",退款;售后,pending,2026-01-02,\n";
        let rows = parse_csv(csv).unwrap();
        assert_eq!(rows[0].line, 2);
        assert_eq!(rows[0].answer, "在订单页申请，1-3 天到账");
        assert_eq!(rows[0].tags, ["退款", "售后"]);
        assert_eq!(rows[0].status, FaqStatus::Pending);
        assert_eq!(rows[0].valid_until, Some(1_767_312_000));
        assert_eq!(rows[0].source_url, None);
    }

    #[test]
    fn bad_records_name_their_line() {
        assert_eq!(parse_csv("q,a\nx,y\n").unwrap_err().code(), "bad_record");
        let e = parse_jsonl("{\"question\":\"q\",\"answer\":\"a\"}\n\n{\"question\":\"q\"}\n")
            .unwrap_err();
        assert!(matches!(e, IngestError::BadRecord { line: 3, .. }), "{e:?}");
        let e = parse_csv("question,answer,valid_from\nq,a,tomorrow\n").unwrap_err();
        assert!(matches!(e, IngestError::BadRecord { line: 2, .. }), "{e:?}");
    }
}
