//! PDF with a text layer, through `pdf-extract` (pure Rust, on `lopdf`).
//!
//! `pdf-extract` panics on some malformed or unusual files; the panic is
//! caught and reported as a malformed file. A PDF whose pages yield no text
//! is reported as having no text layer, never as an empty document.

use std::ops::Range;

use crate::doc::{join_lines, BlockKind, TextBuilder};
use crate::IngestError;

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Text and page ranges of a PDF.
pub(crate) fn extract(bytes: &[u8]) -> Result<(TextBuilder, Vec<Range<usize>>), IngestError> {
    if !bytes.starts_with(b"%PDF-") {
        return Err(IngestError::malformed("pdf", "no %PDF- header"));
    }
    let pages = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem_by_pages(bytes))
        .map_err(|p| {
            IngestError::malformed(
                "pdf",
                format!("the PDF reader failed: {}", panic_message(p.as_ref())),
            )
        })?
        .map_err(|e| IngestError::malformed("pdf", e.to_string()))?;
    if pages.is_empty() {
        return Err(IngestError::malformed("pdf", "no readable pages"));
    }
    let mut out = TextBuilder::default();
    let mut ranges = Vec::with_capacity(pages.len());
    for page in &pages {
        let first_block = out.blocks.len();
        let mut para: Vec<&str> = Vec::new();
        for line in page.lines().chain(std::iter::once("")) {
            if line.trim().is_empty() {
                if !para.is_empty() {
                    out.push(BlockKind::Paragraph, &collapse_spaces(&join_lines(&para)));
                    para.clear();
                }
            } else {
                para.push(line);
            }
        }
        let range = match (out.blocks.get(first_block), out.blocks.last()) {
            (Some(f), Some(l)) => f.start..l.end,
            _ => out.text.len()..out.text.len(),
        };
        ranges.push(range);
    }
    if out.blocks.is_empty() {
        return Err(IngestError::NoTextLayer { pages: pages.len() });
    }
    Ok((out, ranges))
}

fn collapse_spaces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
    out
}
