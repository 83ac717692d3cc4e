//! Ingestion core of ragscope: what a file holds, as text with structure,
//! split into chunks.
//!
//! * [`extract`] detects the format (extension, media type, content) and
//!   returns an [`ExtractedDoc`] (plain text, blocks with heading levels,
//!   PDF page ranges, detected encoding) or FAQ rows, plus the sha256 of the
//!   bytes. Every failure is a typed [`IngestError`] for that one file.
//! * [`chunk`] splits a document by headings, paragraphs and sentences to a
//!   token budget measured by the caller's [`TokenCounter`].
//!
//! Synchronous and compute-only: the caller reads files and fetches URLs.
//!
//! ```
//! use rag_ingest::{chunk, extract, ChunkParams, Content, Limits};
//!
//! let md = "# 保修\n\n## 电机\n\n电机保修两年。Motors are covered for two years.\n";
//! let ex = extract("warranty.md", None, md.as_bytes(), &Limits::default())?;
//! let Content::Document(doc) = ex.content else { unreachable!() };
//! // Count tokens with the active embedder's tokenizer; any Fn(&str) -> usize works.
//! let count = |s: &str| s.chars().filter(|c| !c.is_whitespace()).count();
//! let chunks = chunk(&doc, &ChunkParams::default(), &count)?;
//! assert_eq!(chunks[0].heading_path, ["保修", "电机"]);
//! assert_eq!(chunks[0].text, &doc.text[chunks[0].start..chunks[0].end]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod doc;
mod docx;
mod encoding;
mod error;
mod extract;
pub mod faq;
mod hash;
mod html;
mod html_depth;
mod markdown;
mod pdf;
mod plain;

pub use doc::{Block, BlockKind, ExtractedDoc, Format};
pub use encoding::{decode_text, DecodedText, TextEncoding};
pub use error::IngestError;
pub use extract::{check_size, detect_format, extract, Content, Extraction, Limits};
pub use faq::FaqRow;
pub use hash::sha256_hex;
pub use html::{links as html_links, MAX_PAGE_LINKS};

mod chunk;
mod sentence;

pub use chunk::{
    chunk, ApproxTokenCounter, ChunkParams, ChunkParamsError, DocChunk, TokenCounter,
    MAX_HEADING_CHARS,
};
