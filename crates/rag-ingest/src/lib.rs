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
#![warn(missing_docs)]

mod doc;
mod docx;
mod encoding;
mod error;
mod extract;
pub mod faq;
mod hash;
mod html;
mod markdown;
mod pdf;
mod plain;

pub use doc::{Block, BlockKind, ExtractedDoc, Format};
pub use encoding::{decode_text, DecodedText, TextEncoding};
pub use error::IngestError;
pub use extract::{check_size, detect_format, extract, Content, Extraction, Limits};
pub use faq::FaqRow;
pub use hash::sha256_hex;

mod chunk;
mod sentence;

pub use chunk::{chunk, ApproxTokenCounter, ChunkParams, ChunkParamsError, DocChunk, TokenCounter};
