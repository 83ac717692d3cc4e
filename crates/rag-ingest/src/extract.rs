//! Format detection and extraction entry points.

use serde::{Deserialize, Serialize};

use crate::doc::{ExtractedDoc, Format};
use crate::faq::FaqRow;
use crate::{decode_text, sha256_hex, IngestError, TextEncoding};

/// Size limits. The caller checks a file's size with [`check_size`] before
/// reading it (so a 200 MB file is refused without being read);
/// [`extract`] checks again on the bytes it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file accepted, in bytes. Default 64 MiB.
    pub max_file_bytes: u64,
    /// Largest decompressed zip entry (DOCX), in bytes. Default 128 MiB.
    pub max_decompressed_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 64 << 20,
            max_decompressed_bytes: 128 << 20,
        }
    }
}

/// Refuses a file by its size, before reading it.
pub fn check_size(len: u64, limits: &Limits) -> Result<(), IngestError> {
    if len > limits.max_file_bytes {
        return Err(IngestError::TooLarge {
            what: "file".into(),
            size: len,
            limit: limits.max_file_bytes,
        });
    }
    Ok(())
}

/// What a file turned out to hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum Content {
    /// A document to chunk.
    Document(ExtractedDoc),
    /// FAQ entries.
    Faqs {
        /// The entries, in file order.
        rows: Vec<FaqRow>,
        /// The encoding the table was decoded from.
        encoding: TextEncoding,
    },
}

/// The result of extracting one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// The format it was read as.
    pub format: Format,
    /// sha256 (hex) of the file's bytes: the same file twice is skipped.
    pub content_hash: String,
    /// What it holds.
    pub content: Content,
}

/// The lower-case extension of a path or URL (query and fragment removed).
fn extension(name: &str) -> Option<String> {
    let name = name.split(['?', '#']).next().unwrap_or(name);
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    last.rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .filter(|e| !e.is_empty())
}

fn looks_like_html(bytes: &[u8]) -> bool {
    let head: Vec<u8> = bytes
        .iter()
        .take(1024)
        .skip_while(|b| b.is_ascii_whitespace() || **b == 0xef || **b == 0xbb || **b == 0xbf)
        .map(u8::to_ascii_lowercase)
        .collect();
    head.starts_with(b"<!doctype html")
        || head.starts_with(b"<html")
        || (head.starts_with(b"<") && head.windows(5).any(|w| w == b"<body"))
}

fn is_pdf(bytes: &[u8]) -> bool {
    // The header may follow up to 1 KiB of junk.
    bytes[..bytes.len().min(1024)]
        .windows(5)
        .any(|w| w == b"%PDF-")
}

const OLE2: &[u8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1";

/// Decides the format from the name's extension, an optional media type
/// (`Content-Type` of a fetched URL) and the content. The content wins over a
/// wrong name where it is unambiguous (a PDF named `.txt` is read as PDF); a
/// name that promises a binary format the content does not have is a
/// malformed file.
pub fn detect_format(
    name: &str,
    media_type: Option<&str>,
    bytes: &[u8],
) -> Result<Format, IngestError> {
    let ext = extension(name);
    let ext = ext.as_deref();
    let media = media_type.map(|m| {
        m.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    let media = media.as_deref();
    if bytes.is_empty() {
        return Err(IngestError::Empty);
    }
    if is_pdf(bytes) {
        return Ok(Format::Pdf);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return match ext {
            Some("docx") | None => Ok(Format::Docx),
            _ if media
                == Some(
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                ) =>
            {
                Ok(Format::Docx)
            }
            Some(e) => Err(IngestError::Unsupported(format!(".{e} (a zip archive)"))),
        };
    }
    if bytes.starts_with(OLE2) {
        return Err(IngestError::Unsupported(
            "Word 97-2003 / OLE2 file; save it as .docx".into(),
        ));
    }
    match ext {
        Some("pdf") => return Err(IngestError::malformed("pdf", "no %PDF- header")),
        Some("docx") => return Err(IngestError::malformed("docx", "not a zip archive")),
        Some("md" | "markdown" | "mdown" | "mkd") => return Ok(Format::Markdown),
        Some("html" | "htm" | "xhtml") => return Ok(Format::Html),
        Some("jsonl" | "ndjson") => return Ok(Format::FaqJsonl),
        Some("csv") => return Ok(Format::FaqCsv),
        Some("txt" | "text") => return Ok(Format::Text),
        _ => {}
    }
    match media {
        Some("text/html" | "application/xhtml+xml") => return Ok(Format::Html),
        Some("text/markdown" | "text/x-markdown") => return Ok(Format::Markdown),
        Some("application/pdf") => return Err(IngestError::malformed("pdf", "no %PDF- header")),
        Some("text/plain") => return Ok(Format::Text),
        _ => {}
    }
    if looks_like_html(bytes) {
        return Ok(Format::Html);
    }
    match ext {
        None => Ok(Format::Text),
        Some(e) => Err(IngestError::Unsupported(format!(".{e}"))),
    }
}

/// Extracts one file: detects its format, decodes and extracts its text and
/// structure (or FAQ rows), and hashes its bytes. Synchronous and CPU-bound:
/// call it from a blocking thread.
pub fn extract(
    name: &str,
    media_type: Option<&str>,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extraction, IngestError> {
    check_size(bytes.len() as u64, limits)?;
    let format = detect_format(name, media_type, bytes)?;
    let content_hash = sha256_hex(bytes);
    let doc = |builder: crate::doc::TextBuilder,
               title: Option<String>,
               encoding: Option<TextEncoding>,
               pages| {
        if builder.blocks.is_empty() {
            return Err(IngestError::Empty);
        }
        Ok(Content::Document(ExtractedDoc {
            format,
            encoding,
            title,
            text: builder.text,
            blocks: builder.blocks,
            pages,
        }))
    };
    let content = match format {
        Format::Text => {
            let d = decode_text(bytes)?;
            doc(
                crate::plain::extract(&d.text),
                None,
                Some(d.encoding),
                vec![],
            )?
        }
        Format::Markdown => {
            let d = decode_text(bytes)?;
            let (b, title) = crate::markdown::extract(&d.text);
            doc(b, title, Some(d.encoding), vec![])?
        }
        Format::Html => {
            let d = decode_text(bytes)?;
            let (b, title) = crate::html::extract(&d.text);
            doc(b, title, Some(d.encoding), vec![])?
        }
        Format::Pdf => {
            let (b, pages) = crate::pdf::extract(bytes)?;
            doc(b, None, None, pages)?
        }
        Format::Docx => {
            let (b, title) = crate::docx::extract(bytes, limits)?;
            doc(b, title, None, vec![])?
        }
        Format::FaqJsonl | Format::FaqCsv => {
            let d = decode_text(bytes)?;
            let rows = if format == Format::FaqJsonl {
                crate::faq::parse_jsonl(&d.text)?
            } else {
                crate::faq::parse_csv(&d.text)?
            };
            Content::Faqs {
                rows,
                encoding: d.encoding,
            }
        }
    };
    Ok(Extraction {
        format,
        content_hash,
        content,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection() {
        assert_eq!(
            detect_format("a/b.PDF", None, b"%PDF-1.7\n"),
            Ok(Format::Pdf)
        );
        assert_eq!(
            detect_format("notes.txt", None, b"%PDF-1.4 ..."),
            Ok(Format::Pdf)
        );
        assert_eq!(
            detect_format(
                "https://x.cn/p?id=1",
                Some("text/html; charset=gbk"),
                b"<p>x"
            ),
            Ok(Format::Html)
        );
        assert_eq!(
            detect_format("https://x.cn/page", None, b"  <!DOCTYPE html><html>"),
            Ok(Format::Html)
        );
        assert_eq!(detect_format("x.md", None, b"# t"), Ok(Format::Markdown));
        assert_eq!(
            detect_format("faq.CSV", None, b"question,answer"),
            Ok(Format::FaqCsv)
        );
        assert_eq!(detect_format("README", None, b"plain"), Ok(Format::Text));
        assert_eq!(
            detect_format("x.docx", None, b"PK\x03\x04...."),
            Ok(Format::Docx)
        );
        assert!(matches!(
            detect_format("x.xlsx", None, b"PK\x03\x04"),
            Err(IngestError::Unsupported(_))
        ));
        assert!(matches!(
            detect_format("x.doc", None, OLE2),
            Err(IngestError::Unsupported(_))
        ));
        assert!(matches!(
            detect_format("x.pdf", None, b"hello"),
            Err(IngestError::Malformed { format: "pdf", .. })
        ));
        assert!(matches!(
            detect_format("x.docx", None, b"hello"),
            Err(IngestError::Malformed { format: "docx", .. })
        ));
        assert!(matches!(
            detect_format("x.exe", None, b"MZ\x90"),
            Err(IngestError::Unsupported(_))
        ));
        assert_eq!(detect_format("x.txt", None, b""), Err(IngestError::Empty));
    }

    #[test]
    fn size_limit() {
        let limits = Limits {
            max_file_bytes: 4,
            ..Limits::default()
        };
        assert!(matches!(
            extract("a.txt", None, b"12345", &limits),
            Err(IngestError::TooLarge {
                size: 5,
                limit: 4,
                ..
            })
        ));
        assert_eq!(
            check_size(200 << 20, &Limits::default())
                .unwrap_err()
                .code(),
            "too_large"
        );
    }
}
