//! [`WriteOp`]: one change inside a store's atomic write.

use crate::ids::{DocId, FactId, FaqId};
use crate::model::{Chunk, Document, Fact, FaqEntry, KbSettings, SynonymGroup, UserWord};

/// One change inside an atomic write.
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// Insert or replace a document with all its chunks.
    PutDocument {
        /// The document.
        document: Document,
        /// Its chunks.
        chunks: Vec<Chunk>,
    },
    /// Delete a document, its chunks and everything derived from them. FAQ
    /// entries drafted from it that nobody edited are deleted with it; edited
    /// ones are human knowledge now and stay, unlinked (`source_doc` cleared)
    /// unless a [`WriteOp::RelinkDrafts`] earlier in the same write moved them.
    DeleteDocument(DocId),
    /// Insert or replace an FAQ entry. An insert with a `source_doc` needs
    /// that document to exist in the knowledge base; a replace keeps the
    /// stored `source_doc` (links change only through the draft operations).
    PutFaq(FaqEntry),
    /// Delete the FAQ entries drafted from this document that nobody edited
    /// (and their vectors), as they are at the moment of the write.
    DeleteUneditedDrafts(DocId),
    /// Point the entries drafted from `from` that a person edited at `to`
    /// (the new version of the same source); `to` must exist.
    RelinkDrafts {
        /// The replaced document.
        from: DocId,
        /// Its new version.
        to: DocId,
    },
    /// Delete an FAQ entry.
    DeleteFaq(FaqId),
    /// Insert or replace a fact.
    PutFact(Fact),
    /// Delete a fact.
    DeleteFact(FactId),
    /// Add a synonym group.
    AddSynonyms(SynonymGroup),
    /// Add a word to the segmenter's user dictionary.
    AddUserWord(UserWord),
    /// Store vectors of passages in the knowledge base's embedding space.
    /// The first vectors fix the space; vectors of another space are refused.
    PutVectors {
        /// The space they belong to.
        space: crate::model::EmbeddingSpace,
        /// The vectors.
        vectors: Vec<crate::model::PassageVector>,
    },
    /// Store the sentence vectors of passages beside their passage vectors
    /// (a passage of several sentences; see [`crate::SentenceVectors`]).
    /// Each is kept only while the passage's stored vector was made from the
    /// text of this hash; storing a new passage vector drops them.
    PutSentenceVectors(Vec<(crate::PassageId, String, crate::SentenceVectors)>),
    /// Store a second embedder's vectors of passages beside their passage
    /// vectors: per passage, its whole text's vector then its sentences'
    /// (or, for an FAQ entry, its question's). Kept, as sentence vectors
    /// are, only while the passage's stored vector was made from the text
    /// of this hash; each is read back only for the model that made it.
    PutSecondVectors {
        /// The second embedder's model id.
        model: String,
        /// Per passage: its id, the hash of its embedded text, its vectors.
        items: Vec<(crate::PassageId, String, crate::SentenceVectors)>,
    },
    /// Replace the knowledge base's settings.
    PutSettings(KbSettings),
    /// Forget every vector and the embedding space (before re-embedding with another model).
    ClearVectors,
    /// Insert or replace a URL source (its record; its pages' documents are
    /// written with `PutDocument`).
    PutSource(crate::source::Source),
    /// Delete a URL source's record (its documents are deleted with `DeleteDocument`).
    DeleteSource(crate::ids::SourceId),
}
