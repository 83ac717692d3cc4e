//! The derived indexes of one knowledge base at one commit, and how a
//! commit's changes carry them to the next.

use crate::dense::DenseIndex;
use rag_core::{EmbeddingSpace, KbChanges};
use rag_lexical::LexicalIndex;

/// The derived indexes of one knowledge base at one commit.
#[derive(Debug)]
pub struct KbIndex {
    /// The lexical index.
    pub lexical: LexicalIndex,
    /// The dense index: `None` when the knowledge base has no vectors or the
    /// store searches them itself, an error message when they could not be loaded.
    pub dense: Option<Result<DenseIndex, String>>,
    /// The embedding space of the stored vectors, if any.
    pub space: Option<EmbeddingSpace>,
    /// How many vectors the store holds for the knowledge base. When the
    /// store searches vectors itself this is the count of the last full
    /// build (it only chooses between exact and graph search there);
    /// otherwise the live vectors of the dense index.
    pub vectors: usize,
    /// Whether the store searches the vectors itself.
    pub store_dense: bool,
    /// `Some(n)` when the store holds the text and searches it itself
    /// (PostgreSQL): `lexical` then indexes the head only (facts, synonyms,
    /// dictionary; [`rag_core::RecallHead`]), passages are read from the
    /// store by id (`passages.rs`), and `n` is the number of searchable
    /// text passages at this commit.
    pub store_passages: Option<usize>,
}

impl KbIndex {
    /// The commit sequence these indexes reflect.
    pub fn seq(&self) -> u64 {
        self.lexical.seq()
    }

    /// The indexes of a knowledge base whose store holds its text and
    /// searches it: the head's facts, synonyms and dictionary, and its
    /// counts (CPU work: call on a blocking thread).
    pub fn of_head(analyzer: &rag_text::Analyzer, head: rag_core::RecallHead) -> KbIndex {
        let (han, latin) = head.script;
        KbIndex {
            lexical: LexicalIndex::build(analyzer, &head.snapshot).with_script(han, latin),
            dense: None,
            space: head.snapshot.space,
            vectors: head.vectors,
            store_dense: true,
            store_passages: Some(head.passages),
        }
    }

    /// The number of searchable text passages (chunks and FAQ entries).
    pub fn text_passages(&self) -> usize {
        self.store_passages.unwrap_or_else(|| self.lexical.len())
    }

    /// The indexes after `changes`, sharing what did not change, with what
    /// the lexical update cost; `None` when a full build is needed (the
    /// vectors were cleared or their space changed).
    pub fn apply(&self, changes: &KbChanges) -> Option<(KbIndex, rag_lexical::ApplyReport)> {
        // A head is read again whole (it is small); nothing is applied to it.
        if self.store_passages.is_some()
            || changes.vectors_reset
            || (changes.space != self.space && self.space.is_some())
        {
            return None;
        }
        let (lexical, report) = self.lexical.apply(changes);
        let dense = match &self.dense {
            _ if self.store_dense => None,
            Some(Ok(d)) => Some(
                d.apply(changes, &self.lexical, &lexical)?
                    .map_err(|e| e.to_string()),
            ),
            // Vectors arrived for the first time, or the old ones could not
            // be loaded: build from scratch.
            None if changes.space.is_some() => return None,
            None => None,
            Some(Err(_)) => return None,
        };
        let vectors = match &dense {
            Some(Ok(d)) => d.len(),
            _ => self.vectors,
        };
        Some((
            KbIndex {
                lexical,
                dense,
                space: changes.space.clone(),
                vectors,
                store_dense: self.store_dense,
                store_passages: None,
            },
            report,
        ))
    }
}
