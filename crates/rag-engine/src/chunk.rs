//! Chunking: documents are split by `rag_ingest::chunk` (headings, then
//! paragraphs, then sentences, to a token budget with overlap); this module
//! runs it with the job's token counter and turns its chunks into stored
//! [`Chunk`]s.

use crate::job::TokenCountFn;
use rag_core::{Chunk, ChunkId, DocId};
use rag_ingest::{ApproxTokenCounter, ChunkParamsError, DocChunk, ExtractedDoc};

/// Chunk sizes, in tokens (the engine's default is `rag_ingest`'s: 400
/// tokens, 60 of overlap, documents under 200 characters kept whole).
pub use rag_ingest::ChunkParams;

/// Splits a document, counting tokens with `counter` or, without one, with
/// [`ApproxTokenCounter`].
pub(crate) fn split(
    doc: &ExtractedDoc,
    params: &ChunkParams,
    counter: Option<&TokenCountFn>,
) -> Result<Vec<DocChunk>, ChunkParamsError> {
    match counter {
        Some(f) => {
            let f = |s: &str| f(s);
            rag_ingest::chunk(doc, params, &f)
        }
        None => rag_ingest::chunk(doc, params, &ApproxTokenCounter),
    }
}

/// Stored chunks of document `doc`, with fresh ids.
pub(crate) fn to_chunks(doc: DocId, chunks: Vec<DocChunk>) -> Vec<Chunk> {
    chunks
        .into_iter()
        .map(|c| Chunk {
            id: ChunkId::generate(),
            doc,
            ordinal: c.ordinal,
            heading_path: c.heading_path,
            text: c.text,
            start: c.start,
            end: c.end,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_ingest::{extract, Content, Limits};

    fn doc(name: &str, text: &str) -> ExtractedDoc {
        match extract(name, None, text.as_bytes(), &Limits::default())
            .unwrap()
            .content
        {
            Content::Document(d) => d,
            other => panic!("not a document: {other:?}"),
        }
    }

    #[test]
    fn chunks_keep_heading_paths_and_offsets() {
        let d = doc(
            "a.md",
            "# Title\n\nIntro line.\n\n## Part A\n\nAlpha. Beta.\n\n## Part B\n\n甲。乙！\n",
        );
        let params = ChunkParams {
            target_tokens: 8,
            overlap_tokens: 0,
            min_split_chars: 0,
        };
        let chunks = to_chunks(DocId::generate(), split(&d, &params, None).unwrap());
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.ordinal as usize, i);
            assert_eq!(c.text, d.text[c.start..c.end]);
        }
        assert!(chunks
            .iter()
            .any(|c| c.heading_path == ["Title", "Part A"] && c.text.contains("Alpha")));
        assert!(chunks
            .iter()
            .any(|c| c.heading_path == ["Title", "Part B"] && c.text.contains("甲。")));
    }

    #[test]
    fn the_given_counter_decides_sizes() {
        let d = doc("a.txt", &"这是一个句子。".repeat(200));
        let params = ChunkParams {
            target_tokens: 100,
            overlap_tokens: 0,
            min_split_chars: 200,
        };
        // One token per character (1,400 tokens) versus one per sentence (200 tokens).
        let per_char: TokenCountFn = std::sync::Arc::new(|s: &str| s.chars().count());
        let per_sentence: TokenCountFn =
            std::sync::Arc::new(|s: &str| s.matches('。').count().max(1));
        let a = split(&d, &params, Some(&per_char)).unwrap();
        let b = split(&d, &params, Some(&per_sentence)).unwrap();
        assert!(a.len() >= 14 && b.len() <= 3, "{} vs {}", a.len(), b.len());
        assert!(a.iter().all(|c| c.text.chars().count() <= 100));
    }
}
