//! The extracted document: plain text plus its block structure.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::TextEncoding;

/// The formats ragscope reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Plain text.
    Text,
    /// Markdown (CommonMark with tables).
    Markdown,
    /// An HTML page; only its main text is kept.
    Html,
    /// PDF with a text layer.
    Pdf,
    /// Word 2007+ (Office Open XML).
    Docx,
    /// FAQ entries as JSON lines.
    FaqJsonl,
    /// FAQ entries as CSV with a header row.
    FaqCsv,
}

impl Format {
    /// Short lower-case name (`pdf`, `faq_csv`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "markdown",
            Format::Html => "html",
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::FaqJsonl => "faq_jsonl",
            Format::FaqCsv => "faq_csv",
        }
    }
}

/// What a block of the extracted text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BlockKind {
    /// A heading; level 1 is outermost.
    Heading {
        /// 1..=9.
        level: u8,
    },
    /// A paragraph (also a block quote's paragraph, a footnote, a PDF paragraph).
    Paragraph,
    /// A list item, written with a `- ` or `1. ` prefix.
    ListItem,
    /// Preformatted text or a code block, line breaks kept.
    Code,
    /// A table row, cells joined with ` | `.
    TableRow,
}

/// A block: a byte range of [`ExtractedDoc::text`]. Blocks are in order,
/// do not overlap, never start or end with whitespace, and are separated by
/// `"\n\n"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// What it is.
    #[serde(flatten)]
    pub kind: BlockKind,
    /// Byte start.
    pub start: usize,
    /// Byte end.
    pub end: usize,
}

/// A document's text as extracted from its file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedDoc {
    /// The format it was read as.
    pub format: Format,
    /// For text-based formats, the encoding the bytes were decoded from.
    pub encoding: Option<TextEncoding>,
    /// A title found in the file (first level-1 heading, HTML `<title>`, DOCX
    /// title), if any; the caller falls back to the file name.
    pub title: Option<String>,
    /// The plain text; chunk offsets point into it.
    pub text: String,
    /// Its structure.
    pub blocks: Vec<Block>,
    /// For PDFs, the byte range of each page's text (a page without text has an
    /// empty range at the position it would have had). Empty for other formats.
    pub pages: Vec<Range<usize>>,
}

impl ExtractedDoc {
    /// The text of a block.
    pub fn block_text(&self, b: &Block) -> &str {
        &self.text[b.start..b.end]
    }
}

/// Builds the text and its blocks.
#[derive(Debug, Default)]
pub(crate) struct TextBuilder {
    pub(crate) text: String,
    pub(crate) blocks: Vec<Block>,
}

impl TextBuilder {
    /// Appends a block (trimmed; nothing if blank).
    pub(crate) fn push(&mut self, kind: BlockKind, s: &str) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        let start = self.text.len();
        self.text.push_str(s);
        self.blocks.push(Block {
            kind,
            start,
            end: self.text.len(),
        });
    }

    pub(crate) fn first_heading(&self, level: u8) -> Option<String> {
        self.blocks
            .iter()
            .find(|b| b.kind == BlockKind::Heading { level })
            .map(|b| self.text[b.start..b.end].to_owned())
    }
}

/// Whether a character is Han (or another script written without spaces).
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xf900..=0xfaff | 0x20000..=0x3134f | 0xac00..=0xd7af)
}

/// Joins soft-wrapped lines: Han next to Han without a space, else one space.
pub(crate) fn join_lines(lines: &[&str]) -> String {
    let mut out = String::new();
    for line in lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        if let (Some(a), Some(b)) = (out.chars().last(), line.chars().next()) {
            if !(is_cjk_punct(a) || is_cjk(a) && is_cjk(b)) {
                out.push(' ');
            }
        }
        out.push_str(line);
    }
    out
}

pub(crate) fn is_cjk_punct(c: char) -> bool {
    matches!(c, '\u{3000}'..='\u{303f}' | '\u{ff01}'..='\u{ff0f}' | '\u{ff1a}'..='\u{ff20}' | '\u{2026}' | '\u{201c}' | '\u{201d}')
}

/// Collapses runs of whitespace into one space.
pub(crate) fn collapse_ws(s: &str, out: &mut String) {
    let mut pending = false;
    for c in s.chars() {
        if c.is_whitespace() {
            pending = true;
        } else {
            if pending && !out.is_empty() && !out.ends_with([' ', '\n']) {
                out.push(' ');
            }
            pending = false;
            out.push(c);
        }
    }
    if pending && !out.is_empty() && !out.ends_with([' ', '\n']) {
        out.push(' ');
    }
}
