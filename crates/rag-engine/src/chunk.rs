//! Structure-aware chunking for plain text and Markdown.
//!
//! Split by headings, then paragraphs, then sentences (Chinese 。！？；… and
//! English punctuation), packing pieces up to a target size with the
//! previous piece's last sentence as overlap. Every chunk keeps its heading
//! path and its byte range in the document's text.

/// Chunk sizes, in characters.
#[derive(Debug, Clone, Copy)]
pub struct ChunkParams {
    /// Target chunk length.
    pub target_chars: usize,
    /// Texts shorter than this are never split.
    pub min_split_chars: usize,
}

impl Default for ChunkParams {
    fn default() -> Self {
        ChunkParams { target_chars: 800, min_split_chars: 200 }
    }
}

/// A chunk before ids are assigned.
#[derive(Debug, Clone, PartialEq)]
pub struct RawChunk {
    /// Headings above it.
    pub heading_path: Vec<String>,
    /// Byte start in the text.
    pub start: usize,
    /// Byte end in the text.
    pub end: usize,
}

/// A section: text under one heading path.
struct Section {
    headings: Vec<String>,
    start: usize,
    end: usize,
}

fn heading_level(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    let hashes = trimmed.bytes().take_while(|b| *b == b'#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with([' ', '\t']) {
        Some((hashes, trimmed[hashes..].trim()))
    } else {
        None
    }
}

fn sections(text: &str, markdown: bool) -> Vec<Section> {
    let mut out = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        if markdown && line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if markdown && !in_fence {
            if let Some((level, title)) = heading_level(line) {
                if offset > start {
                    out.push(Section { headings: stack.iter().map(|(_, t)| t.clone()).collect(), start, end: offset });
                }
                while stack.last().is_some_and(|(l, _)| *l >= level) {
                    stack.pop();
                }
                stack.push((level, title.to_owned()));
                start = offset;
            }
        }
        offset += line.len();
    }
    if offset > start {
        out.push(Section { headings: stack.iter().map(|(_, t)| t.clone()).collect(), start, end: offset });
    }
    out
}

/// Byte ranges of sentences in `text[start..end]`, each including its terminator.
fn sentences(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut s = start;
    let slice = &text[start..end];
    let mut iter = slice.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let boundary = match c {
            '。' | '！' | '？' | '；' | '…' | '\n' => true,
            '.' | '!' | '?' | ';' => iter.peek().is_none_or(|(_, n)| n.is_whitespace()),
            _ => false,
        };
        if boundary {
            let e = start + i + c.len_utf8();
            if text[s..e].trim().is_empty() {
                s = e;
                continue;
            }
            out.push((s, e));
            s = e;
        }
    }
    if s < end && !text[s..end].trim().is_empty() {
        out.push((s, end));
    }
    out
}

fn trimmed(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let slice = &text[start..end];
    let lead = slice.len() - slice.trim_start().len();
    let trail = slice.len() - slice.trim_end().len();
    (lead + trail < slice.len()).then(|| (start + lead, end - trail))
}

/// Splits `text` into chunks.
pub fn chunk_text(text: &str, markdown: bool, params: ChunkParams) -> Vec<RawChunk> {
    let mut out = Vec::new();
    if text.chars().count() < params.min_split_chars {
        if let Some((s, e)) = trimmed(text, 0, text.len()) {
            let headings = sections(text, markdown).into_iter().next().map(|s| s.headings).unwrap_or_default();
            out.push(RawChunk { heading_path: headings, start: s, end: e });
        }
        return out;
    }
    for sec in sections(text, markdown) {
        let sents = sentences(text, sec.start, sec.end);
        let mut cur: Option<(usize, usize)> = None;
        let mut last_sentence: Option<(usize, usize)> = None;
        for (s, e) in sents {
            match cur {
                None => cur = Some((s, e)),
                Some((cs, _)) if text[cs..e].chars().count() <= params.target_chars => cur = Some((cs, e)),
                Some((cs, ce)) => {
                    if let Some(r) = trimmed(text, cs, ce) {
                        out.push(RawChunk { heading_path: sec.headings.clone(), start: r.0, end: r.1 });
                    }
                    // Overlap: start the next chunk with the previous sentence when it is short.
                    let overlap_start = last_sentence
                        .filter(|(ls, le)| text[*ls..*le].chars().count() * 4 <= params.target_chars)
                        .map(|(ls, _)| ls)
                        .unwrap_or(s);
                    cur = Some((overlap_start, e));
                }
            }
            last_sentence = Some((s, e));
        }
        if let Some((cs, ce)) = cur {
            if let Some(r) = trimmed(text, cs, ce) {
                out.push(RawChunk { heading_path: sec.headings.clone(), start: r.0, end: r.1 });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_by_heading_and_keeps_offsets() {
        let text = "# Title\n\nIntro line.\n\n## Part A\n\nAlpha. Beta.\n\n## Part B\n\n甲。乙！\n";
        let chunks = chunk_text(text, true, ChunkParams { target_chars: 10, min_split_chars: 0 });
        for c in &chunks {
            assert!(!text[c.start..c.end].trim().is_empty());
        }
        let a: Vec<&RawChunk> = chunks.iter().filter(|c| c.heading_path == ["Title", "Part A"]).collect();
        assert!(!a.is_empty());
        assert!(chunks.iter().any(|c| text[c.start..c.end].contains("甲。")));
    }

    #[test]
    fn short_text_is_one_chunk() {
        let chunks = chunk_text("短短一句话。", false, ChunkParams::default());
        assert_eq!(chunks.len(), 1);
    }

    #[test]
    fn long_text_respects_target() {
        let text = "这是一个句子。".repeat(400);
        let chunks = chunk_text(&text, false, ChunkParams::default());
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert!(text[c.start..c.end].chars().count() <= 800 + 10);
        }
    }
}
