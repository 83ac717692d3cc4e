//! Chunking ([`rag_ingest::chunk`]) of extracted documents.
//!
//! The first four bytes of an input choose the parameters (budget, overlap,
//! minimum split size), the format (plain text or Markdown) and the token
//! counter; the rest is the file. Invariants: every chunk's text is
//! `doc.text[start..end]`, trimmed and non-empty; character offsets and
//! token counts are right; ends strictly increase; a chunk is within the
//! budget unless the whole document is below the split size; headings in
//! heading paths are bounded; and every non-blank character of every block
//! is in some chunk.

use rag_ingest::{
    chunk, extract, ApproxTokenCounter, ChunkParams, Content, ExtractedDoc, Limits, TokenCounter,
};

use super::Sig;
use crate::mutate::Grammar;

/// Tokens of the texts chunked.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "# ",
        "## ",
        "\n\n",
        "\n",
        ". ",
        "。",
        "！",
        "？",
        "，",
        "、",
        "：",
        "; ",
        ", ",
        "—",
        "...",
        "\u{2026}",
        "- ",
        "1. ",
        "```\n",
        "| a | b |\n|---|---|\n",
        "word ",
        "supercalifragilisticexpialidocious",
        "电机保修两年",
        "Mr. ",
        "3.14",
        "e.g. ",
        "\u{3000}",
        "\u{00a0}",
        "\t",
    ],
    nest: &[("> ", ""), ("- ", ""), ("(", ")"), ("「", "」")],
    text: true,
};

/// One token per character.
fn per_char(s: &str) -> usize {
    s.chars().count()
}

/// One token per started three bytes: long tokens, few of them.
fn per_3_bytes(s: &str) -> usize {
    s.len().div_ceil(3)
}

const TARGETS: [usize; 8] = [8, 9, 16, 33, 64, 128, 400, 510];
const MIN_SPLIT: [usize; 4] = [0, 1, 200, 1000];

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let (head, body) = bytes.split_at(bytes.len().min(4));
    let b = |i: usize| head.get(i).copied().unwrap_or(0) as usize;
    let target = TARGETS[b(0) % TARGETS.len()];
    let params = ChunkParams {
        target_tokens: target,
        overlap_tokens: (target / 2) * (b(1) % 5) / 4,
        min_split_chars: MIN_SPLIT[b(2) % MIN_SPLIT.len()],
    };
    let name = if b(3) % 2 == 0 { "f.txt" } else { "f.md" };
    let counter: &dyn TokenCounter = match (b(3) / 2) % 3 {
        0 => &ApproxTokenCounter,
        1 => &per_char,
        _ => &per_3_bytes,
    };
    sig.add(b(3) % 6);
    let Ok(x) = extract(name, None, body, &Limits::default()) else {
        return sig.add(0u8).finish();
    };
    let Content::Document(doc) = &x.content else {
        return sig.add(1u8).finish();
    };
    let chunks = match chunk(doc, &params, counter) {
        Ok(c) => c,
        Err(e) => panic!("invariant: valid parameters {params:?} refused: {e}"),
    };
    check_chunks(doc, &params, counter, &chunks);
    sig.magnitude(chunks.len())
        .add(chunks.iter().map(|c| c.heading_path.len()).max())
        .add(doc.blocks.len().min(8))
        .finish()
}

/// The invariants of a document's chunks.
pub fn check_chunks(
    doc: &ExtractedDoc,
    params: &ChunkParams,
    counter: &dyn TokenCounter,
    chunks: &[rag_ingest::DocChunk],
) {
    let text = &doc.text;
    ensure!(!chunks.is_empty(), "no chunks for a document with text");
    let small = text.chars().count() < params.min_split_chars;
    if small {
        ensure!(
            chunks.len() == 1,
            "{} chunks of a small document",
            chunks.len()
        );
    }
    // Character offsets, computed in one pass over the starts in order.
    let mut starts: Vec<(usize, usize)> = chunks.iter().map(|c| c.start).zip(0..).collect();
    starts.sort_unstable();
    let mut char_starts = vec![0; chunks.len()];
    let (mut byte, mut chars) = (0, 0);
    for (s, i) in starts {
        ensure!(
            s <= text.len() && text.is_char_boundary(s),
            "chunk {i} starts at {s}, not a character boundary"
        );
        chars += text[byte..s].chars().count();
        byte = s;
        char_starts[i] = chars;
    }
    let mut prev_end = None;
    for (i, c) in chunks.iter().enumerate() {
        ensure!(
            c.ordinal as usize == i,
            "chunk {i} has ordinal {}",
            c.ordinal
        );
        ensure!(
            c.start < c.end && c.end <= text.len() && text.is_char_boundary(c.end),
            "chunk {i} {}..{} of a {}-byte text",
            c.start,
            c.end,
            text.len()
        );
        ensure!(
            c.text == text[c.start..c.end],
            "chunk {i}'s text is not doc.text[{}..{}]",
            c.start,
            c.end
        );
        ensure!(c.text.trim() == c.text, "chunk {i} is not trimmed");
        ensure!(
            c.char_start == char_starts[i],
            "chunk {i} char_start {} != {}",
            c.char_start,
            char_starts[i]
        );
        ensure!(
            c.char_end == c.char_start + c.text.chars().count(),
            "chunk {i} char_end {}",
            c.char_end
        );
        ensure!(
            c.tokens == counter.count_tokens(&c.text),
            "chunk {i} says {} tokens",
            c.tokens
        );
        ensure!(
            small || c.tokens <= params.target_tokens,
            "chunk {i} has {} tokens, over the budget of {}",
            c.tokens,
            params.target_tokens
        );
        ensure!(
            c.heading_path.len() <= 9,
            "heading path of {}",
            c.heading_path.len()
        );
        // Every chunk holds its path: a huge heading must not be copied
        // into each (issue 15's bounded memory).
        ensure!(
            c.heading_path
                .iter()
                .all(|h| h.chars().count() <= rag_ingest::MAX_HEADING_CHARS),
            "chunk {i} has a heading of {} characters",
            c.heading_path
                .iter()
                .map(|h| h.chars().count())
                .max()
                .unwrap_or(0)
        );
        ensure!(
            c.hash == rag_ingest::sha256_hex(c.text.as_bytes()),
            "chunk {i}'s hash"
        );
        if let Some(p) = prev_end {
            ensure!(c.end > p, "chunk {i} ends at {}, not after {p}", c.end);
        }
        prev_end = Some(c.end);
    }
    // Coverage: merge the chunk ranges, then every gap inside a block is blank.
    let mut ranges: Vec<(usize, usize)> = chunks.iter().map(|c| (c.start, c.end)).collect();
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut m = 0;
    for (bi, b) in doc.blocks.iter().enumerate() {
        let mut pos = b.start;
        while pos < b.end {
            while m < merged.len() && merged[m].1 <= pos {
                m += 1;
            }
            let next = merged.get(m).map_or(b.end, |r| r.0.max(pos)).min(b.end);
            if next > pos {
                let gap = &text[pos..next];
                ensure!(
                    gap.trim().is_empty(),
                    "block {bi}: {:?} is in no chunk",
                    super::check::clip(gap)
                );
            }
            pos = merged.get(m).map_or(b.end, |r| r.1.max(next));
        }
    }
}
