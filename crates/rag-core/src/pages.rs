//! Pages of a knowledge base's passages, read one at a time
//! ([`StoreRead::passages_page`](crate::StoreRead::passages_page)).

use crate::ids::{DocId, FaqId};
use crate::model::Passage;

/// Where a page ended: the last passage it read, in the order pages are
/// read in. Callers pass it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassageCursor {
    /// A document's chunk: its document's creation time and id, and its
    /// ordinal in the document.
    Chunk {
        /// The document's creation time.
        created_at: crate::model::Timestamp,
        /// The document.
        doc: DocId,
        /// The chunk's place in the document.
        ordinal: i64,
    },
    /// An FAQ entry: its creation time and id.
    Faq {
        /// The entry's creation time.
        created_at: crate::model::Timestamp,
        /// The entry.
        id: FaqId,
    },
}

/// One page of a knowledge base's text passages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassagePage {
    /// The passages, each with the text hash of its stored vector (`None`:
    /// it has no vector).
    pub passages: Vec<(Passage, Option<String>)>,
    /// Where the next page starts; `None` after the last.
    pub next: Option<PassageCursor>,
}
