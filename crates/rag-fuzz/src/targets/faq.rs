//! FAQ tables through [`rag_ingest::extract`]: CSV with a header row, and
//! JSON lines.

use rag_ingest::{extract, faq, Limits};

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of the CSV tables.
pub const CSV_GRAMMAR: Grammar = Grammar {
    dict: &[
        "question,answer",
        "question,answer,tags,source_url,status,valid_from,valid_until\n",
        "Question,ANSWER,Tags\n",
        ",",
        "\"",
        "\"\"",
        "\n",
        "\r\n",
        "\r",
        ";",
        "|",
        "，",
        "；",
        "approved",
        "pending",
        "disabled",
        "2026-05-01",
        "2026-05-01T00:00:00Z",
        "2026-02-30",
        "9999-12-31T23:59:60+23:59",
        "-99999-01-01",
        "1767312000",
        "javascript:alert(1)",
        "https://example.org/faq",
        "\u{feff}",
        "\t",
    ],
    nest: &[("\"", "\""), ("\"\"", "")],
    text: true,
};

/// Tokens of the JSONL tables.
pub const JSONL_GRAMMAR: Grammar = Grammar {
    dict: &[
        "{\"question\":\"q\",\"answer\":\"a\"}\n",
        "\"question\":",
        "\"answer\":",
        "\"tags\":",
        "\"source_url\":",
        "\"status\":",
        "\"valid_from\":",
        "\"valid_until\":",
        "\"pending\"",
        "\"disabled\"",
        "\"2026-05-01\"",
        "\"2026-05-01T00:00:00+08:00\"",
        "9223372036854775807",
        "-9223372036854775809",
        "1e400",
        "null",
        "true",
        "[]",
        "[\"a\",\"b\"]",
        "\"a, b; c\"",
        "{}",
        "\\u0000",
        "\\ud800",
        "\\udc00\\ud800",
        "\\\"",
        "\n",
        "\r\n",
        ",",
        ":",
    ],
    nest: &[("[", "]"), ("{\"a\":", "}"), ("{\"tags\":[", "]}")],
    text: true,
};

fn times(text: &str, sig: &mut Sig) {
    // parse_time runs on every time cell (and the CLI's --as-of flag).
    for cell in text
        .split([',', '\n', '"', '\t'])
        .filter(|c| !c.is_empty())
        .take(200)
    {
        sig.add(faq::parse_time(cell).is_some());
    }
}

/// A CSV table.
pub fn run_csv(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let r = extract("faq.csv", Some("text/csv"), bytes, &Limits::default());
    check::extraction(&r, &mut sig);
    times(&String::from_utf8_lossy(bytes), &mut sig);
    sig.finish()
}

/// A JSONL table.
pub fn run_jsonl(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let r = extract("faq.jsonl", None, bytes, &Limits::default());
    check::extraction(&r, &mut sig);
    if let Ok(text) = std::str::from_utf8(bytes) {
        // The rows the extraction found are those parse_jsonl finds directly.
        if let (Ok(x), Ok(rows)) = (&r, faq::parse_jsonl(text)) {
            if let rag_ingest::Content::Faqs { rows: got, .. } = &x.content {
                if !text.contains('\r') && !text.starts_with('\u{feff}') {
                    ensure!(*got == rows, "extract and parse_jsonl disagree");
                }
            }
        }
    }
    sig.finish()
}
