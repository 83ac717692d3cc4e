//! Structure-aware chunking.
//!
//! A document is split into sections at headings (a section starts with its
//! heading, so the heading's words are in the chunk; a heading with no text
//! of its own joins the next section). A section that fits the token budget
//! is one chunk. A larger one is cut into sentences (paragraph, list item and
//! heading starts are remembered), sentences longer than the budget at soft
//! punctuation, then between words; the pieces are packed greedily up to the
//! budget, preferring to end a chunk at a paragraph start once it is half
//! full. Consecutive chunks of a section overlap by whole trailing sentences
//! up to the overlap budget. Texts shorter than `min_split_chars` are one
//! chunk. Every chunk's text is exactly `doc.text[start..end]`.

use serde::Serialize;

use crate::doc::{is_cjk, BlockKind, ExtractedDoc};
use crate::sentence::sentences;

/// Counts tokens the way the active embedder's tokenizer does. Any
/// `Fn(&str) -> usize` is one.
pub trait TokenCounter {
    /// The number of tokens of `text` (without special tokens).
    fn count_tokens(&self, text: &str) -> usize;
}

impl<F: Fn(&str) -> usize> TokenCounter for F {
    fn count_tokens(&self, text: &str) -> usize {
        self(text)
    }
}

/// A tokenizer-free estimate for callers without a tokenizer (and tests):
/// one token per CJK character or punctuation mark, and one per started
/// four characters of a Latin word. Usually over-counts XLM-R pieces, so it
/// is a safe budget for e5.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxTokenCounter;

impl TokenCounter for ApproxTokenCounter {
    fn count_tokens(&self, text: &str) -> usize {
        let mut n = 0;
        let mut word = 0usize;
        for c in text.chars() {
            if c.is_alphanumeric() && !is_cjk(c) {
                word += 1;
                continue;
            }
            n += word.div_ceil(4);
            word = 0;
            if !c.is_whitespace() {
                n += 1;
            }
        }
        n + word.div_ceil(4)
    }
}

/// Chunk sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkParams {
    /// Largest chunk, in tokens of the caller's counter. e5 takes at most 510
    /// (leave room for its `passage: ` prefix). Default 400.
    pub target_tokens: usize,
    /// Overlap between consecutive chunks of a section, in tokens (whole
    /// sentences only; none when the last sentence is longer). Default 60.
    pub overlap_tokens: usize,
    /// A document with fewer characters than this is one chunk. Default 200.
    pub min_split_chars: usize,
}

impl Default for ChunkParams {
    fn default() -> Self {
        ChunkParams {
            target_tokens: 400,
            overlap_tokens: 60,
            min_split_chars: 200,
        }
    }
}

/// Parameters that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid chunk parameters: {0}")]
pub struct ChunkParamsError(pub String);

impl ChunkParams {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), ChunkParamsError> {
        if self.target_tokens < 8 {
            return Err(ChunkParamsError(format!(
                "target_tokens {} is below 8",
                self.target_tokens
            )));
        }
        if self.overlap_tokens * 2 > self.target_tokens {
            return Err(ChunkParamsError(format!(
                "overlap_tokens {} is over half of target_tokens {}",
                self.overlap_tokens, self.target_tokens
            )));
        }
        Ok(())
    }
}

/// A chunk of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DocChunk {
    /// Position in the document, from 0.
    pub ordinal: u32,
    /// Headings above it, outermost first, each cut to
    /// [`MAX_HEADING_CHARS`] characters.
    pub heading_path: Vec<String>,
    /// Byte offset into [`ExtractedDoc::text`].
    pub start: usize,
    /// Byte offset one past the end.
    pub end: usize,
    /// Character (Unicode scalar) offset of `start`.
    pub char_start: usize,
    /// Character offset of `end`.
    pub char_end: usize,
    /// `doc.text[start..end]`.
    pub text: String,
    /// Tokens of `text` by the caller's counter.
    pub tokens: usize,
    /// sha256 (hex) of `text`: a re-sync keeps the vector of a chunk whose
    /// hash is unchanged.
    pub hash: String,
}

#[derive(Debug, Clone, Copy)]
struct Atom {
    start: usize,
    end: usize,
    tokens: usize,
    /// Starts a heading, paragraph, list item or row: a good place to cut.
    block_start: bool,
}

struct Section {
    path: Vec<String>,
    start: usize,
    end: usize,
    blocks: std::ops::Range<usize>,
}

/// The longest heading kept in a heading path, in characters. Every chunk
/// of a section holds its path, so an enormous heading (a Markdown
/// paragraph turned setext heading, a DOCX body in a heading style) would
/// otherwise be copied into each of its thousands of chunks.
pub const MAX_HEADING_CHARS: usize = 256;

/// A heading as it appears in heading paths: cut to [`MAX_HEADING_CHARS`].
fn heading_label(text: &str) -> String {
    match text.char_indices().nth(MAX_HEADING_CHARS) {
        Some((cut, _)) => text[..cut].trim_end().to_owned(),
        None => text.to_owned(),
    }
}

fn sections(doc: &ExtractedDoc) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut stack: Vec<(u8, String)> = Vec::new();
    let mut cur: Option<Section> = None;
    let mut cur_has_body = false;
    for (i, b) in doc.blocks.iter().enumerate() {
        if let BlockKind::Heading { level } = b.kind {
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            stack.push((level, heading_label(&doc.text[b.start..b.end])));
            let path: Vec<String> = stack.iter().map(|(_, t)| t.clone()).collect();
            match cur.take() {
                // A heading with no text of its own joins the next section.
                Some(mut s) if !cur_has_body => {
                    s.path = path;
                    s.end = b.end;
                    s.blocks.end = i + 1;
                    cur = Some(s);
                }
                prev => {
                    out.extend(prev);
                    cur = Some(Section {
                        path,
                        start: b.start,
                        end: b.end,
                        blocks: i..i + 1,
                    });
                }
            }
            cur_has_body = false;
        } else {
            match cur.as_mut() {
                Some(s) => {
                    s.end = b.end;
                    s.blocks.end = i + 1;
                }
                None => {
                    cur = Some(Section {
                        path: vec![],
                        start: b.start,
                        end: b.end,
                        blocks: i..i + 1,
                    })
                }
            }
            cur_has_body = true;
        }
    }
    out.extend(cur);
    out
}

/// Byte positions inside `text[a..b]` where a piece may end, best first by
/// kind: after soft punctuation, then at word boundaries, then anywhere.
fn cut_points(text: &str, a: usize, b: usize) -> [Vec<usize>; 3] {
    let mut soft = Vec::new();
    let mut word = Vec::new();
    let mut any = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in text[a..b].char_indices() {
        let pos = a + i;
        if let Some(p) = prev {
            any.push(pos);
            if matches!(p, '，' | '、' | '：' | ',' | ':' | '—') && !c.is_ascii_digit() {
                soft.push(pos);
            }
            if (p.is_whitespace() && !c.is_whitespace()) || is_cjk(p) || is_cjk(c) {
                word.push(pos);
            }
        }
        prev = Some(c);
    }
    [soft, word, any]
}

fn trim_range(text: &str, a: usize, b: usize) -> Option<(usize, usize)> {
    let s = &text[a..b];
    let lead = s.len() - s.trim_start().len();
    let trail = s.len() - s.trim_end().len();
    (lead + trail < s.len()).then_some((a + lead, b - trail))
}

/// The longest piece cut from an over-long sentence, in bytes per token of
/// the budget: well above what any tokenizer's tokens average (XLM-R's
/// average 3–5 bytes of Latin text and 3–6 of Chinese), so the cut is still
/// made by tokens; only a text whose tokens are longer (a counter that calls
/// a long run one token) gets pieces shorter than the budget.
const MAX_PIECE_BYTES_PER_TOKEN: usize = 24;

/// The largest char boundary of `text` at or below `i`.
fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Splits an over-long sentence into pieces that fit the budget.
fn split_long(
    text: &str,
    a: usize,
    b: usize,
    target: usize,
    counter: &dyn TokenCounter,
    out: &mut Vec<Atom>,
    block_start: bool,
) {
    let mut a = a;
    let mut first = block_start;
    // Only a window at the front of what is left is looked at for each
    // piece, so a sentence of any length is split in linear time.
    let window = target.saturating_mul(MAX_PIECE_BYTES_PER_TOKEN).max(64);
    while let Some((s, e)) = trim_range(text, a, b) {
        let w_end = floor_char_boundary(text, s.saturating_add(window).min(e));
        if w_end == e {
            let tokens = counter.count_tokens(&text[s..e]);
            if tokens <= target {
                out.push(Atom {
                    start: s,
                    end: e,
                    tokens,
                    block_start: first,
                });
                return;
            }
        }
        let points = cut_points(text, s, w_end);
        let fits = |p: usize| {
            trim_range(text, s, p).is_some_and(|(x, y)| counter.count_tokens(&text[x..y]) <= target)
        };
        // Soft punctuation is used only if it keeps the piece at least a third full.
        let min_len = |p: usize| {
            trim_range(text, s, p).map_or(0, |(x, y)| counter.count_tokens(&text[x..y])) * 3
                >= target
        };
        let mut cut = None;
        for (kind, pts) in points.iter().enumerate() {
            // Counts grow with the prefix: binary search the last point that fits.
            let n = pts.partition_point(|p| fits(*p));
            if n > 0 && (kind > 0 || min_len(pts[n - 1])) {
                cut = Some(pts[n - 1]);
                break;
            }
        }
        // Not even one character fits: take one character.
        let cut = cut.unwrap_or_else(|| s + text[s..].chars().next().map_or(1, char::len_utf8));
        if let Some((x, y)) = trim_range(text, s, cut) {
            out.push(Atom {
                start: x,
                end: y,
                tokens: counter.count_tokens(&text[x..y]),
                block_start: first,
            });
            first = false;
        }
        a = cut;
    }
}

fn atoms(
    doc: &ExtractedDoc,
    sec: &Section,
    target: usize,
    counter: &dyn TokenCounter,
) -> Vec<Atom> {
    let text = &doc.text;
    let mut out = Vec::new();
    for b in &doc.blocks[sec.blocks.clone()] {
        let pieces: Vec<(usize, usize)> = match b.kind {
            BlockKind::Heading { .. } | BlockKind::TableRow => vec![(b.start, b.end)],
            BlockKind::Code => {
                let mut lines = Vec::new();
                let mut pos = b.start;
                for l in text[b.start..b.end].split_inclusive('\n') {
                    lines.extend(trim_range(text, pos, pos + l.len()));
                    pos += l.len();
                }
                lines
            }
            BlockKind::Paragraph | BlockKind::ListItem => sentences(text, b.start, b.end),
        };
        for (k, (s, e)) in pieces.into_iter().enumerate() {
            split_long(text, s, e, target, counter, &mut out, k == 0);
        }
    }
    out
}

fn sum_tokens(atoms: &[Atom], i: usize, j: usize) -> usize {
    atoms[i..j].iter().map(|a| a.tokens).sum()
}

/// Packs the atoms of one section into chunk ranges (atom index ranges).
fn pack(
    text: &str,
    atoms: &[Atom],
    p: &ChunkParams,
    counter: &dyn TokenCounter,
) -> Vec<(usize, usize)> {
    let n = atoms.len();
    let mut out = Vec::new();
    let mut start = 0;
    let mut min_end = 1;
    let real = |i: usize, j: usize| counter.count_tokens(&text[atoms[i].start..atoms[j - 1].end]);
    while start < n {
        let mut j = start + 1;
        let mut sum = atoms[start].tokens;
        while j < n && sum + atoms[j].tokens <= p.target_tokens {
            sum += atoms[j].tokens;
            j += 1;
        }
        while j > start + 1 && real(start, j) > p.target_tokens {
            j -= 1;
        }
        if j < min_end {
            // The overlap leaves no room for new text: shorten it.
            start += 1;
            continue;
        }
        if j < n {
            // Prefer ending at a paragraph (or heading) start once half full.
            // (Estimated from the pieces' counts: this is only a preference.)
            let mut prefix = sum_tokens(atoms, start, j);
            let mut best = None;
            for k in (min_end.max(start + 1)..j).rev() {
                prefix -= atoms[k].tokens;
                if prefix * 2 < p.target_tokens {
                    break;
                }
                if atoms[k].block_start {
                    best = Some(k);
                    break;
                }
            }
            if let Some(k) = best {
                j = k;
            }
        }
        out.push((start, j));
        if j == n {
            break;
        }
        min_end = j + 1;
        let mut k = j;
        let mut overlap = 0;
        while k > start + 1 && overlap + atoms[k - 1].tokens <= p.overlap_tokens {
            overlap += atoms[k - 1].tokens;
            k -= 1;
        }
        start = k;
    }
    out
}

/// Splits a document into chunks. Sections are chunked independently;
/// chunks come out in text order with strictly increasing ends.
pub fn chunk(
    doc: &ExtractedDoc,
    params: &ChunkParams,
    counter: &dyn TokenCounter,
) -> Result<Vec<DocChunk>, ChunkParamsError> {
    params.validate()?;
    let text = &doc.text;
    let mut ranges: Vec<(Vec<String>, usize, usize)> = Vec::new();
    let secs = sections(doc);
    if text.chars().count() < params.min_split_chars {
        if let (Some(first), Some(last)) = (secs.first(), secs.last()) {
            let path = secs
                .iter()
                .find(|s| {
                    s.blocks
                        .clone()
                        .any(|i| !matches!(doc.blocks[i].kind, BlockKind::Heading { .. }))
                })
                .unwrap_or(first)
                .path
                .clone();
            ranges.push((path, first.start, last.end));
        }
    } else {
        for sec in &secs {
            let whole = counter.count_tokens(&text[sec.start..sec.end]);
            if whole <= params.target_tokens {
                ranges.push((sec.path.clone(), sec.start, sec.end));
                continue;
            }
            let atoms = atoms(doc, sec, params.target_tokens, counter);
            for (i, j) in pack(text, &atoms, params, counter) {
                ranges.push((sec.path.clone(), atoms[i].start, atoms[j - 1].end));
            }
        }
    }
    let mut cursor = (0usize, 0usize); // (byte, char), moves forward only
    let mut char_at = |byte: usize| {
        if byte < cursor.0 {
            cursor = (0, 0);
        }
        let c = cursor.1 + text[cursor.0..byte].chars().count();
        cursor = (byte, c);
        c
    };
    Ok(ranges
        .into_iter()
        .enumerate()
        .map(|(i, (heading_path, start, end))| {
            let char_start = char_at(start);
            let char_end = char_start + text[start..end].chars().count();
            let chunk_text = text[start..end].to_owned();
            DocChunk {
                ordinal: i as u32,
                heading_path,
                start,
                end,
                char_start,
                char_end,
                tokens: counter.count_tokens(&chunk_text),
                hash: crate::sha256_hex(chunk_text.as_bytes()),
                text: chunk_text,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::{Block, Format};

    #[test]
    fn a_huge_heading_is_cut_in_heading_paths() {
        // A Markdown paragraph over a `-` line is such a heading: its words
        // must not be copied into each of its thousands of chunks.
        let heading = "word ".repeat(20_000);
        let heading = heading.trim_end();
        let text = format!("{heading}\n\nBody.");
        let doc = ExtractedDoc {
            format: Format::Markdown,
            encoding: None,
            title: None,
            blocks: vec![
                Block {
                    kind: BlockKind::Heading { level: 2 },
                    start: 0,
                    end: heading.len(),
                },
                Block {
                    kind: BlockKind::Paragraph,
                    start: heading.len() + 2,
                    end: text.len(),
                },
            ],
            text,
            pages: vec![],
        };
        let params = ChunkParams {
            target_tokens: 16,
            overlap_tokens: 0,
            min_split_chars: 1,
        };
        let chunks = chunk(&doc, &params, &ApproxTokenCounter).unwrap();
        assert!(chunks.len() > 1000, "{}", chunks.len());
        for c in &chunks {
            assert_eq!(c.heading_path.len(), 1);
            assert_eq!(c.heading_path[0].chars().count(), MAX_HEADING_CHARS);
            assert!(heading.starts_with(&c.heading_path[0]));
        }
        assert_eq!(heading_label("short"), "short");
    }
}
