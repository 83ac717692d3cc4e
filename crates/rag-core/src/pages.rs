//! Pages of a knowledge base's passages
//! ([`StoreRead::passages_page`](crate::StoreRead::passages_page)) and of
//! its FAQ entries ([`StoreRead::faqs_page`](crate::StoreRead::faqs_page)),
//! read one at a time.

use crate::ids::{DocId, FaqId};
use crate::model::{FaqEntry, FaqStatus, Passage};

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

/// The text form of a listing's (`created_at`, id) key handed to clients
/// as a cursor: 48 lowercase hex digits (the creation time's bits, then the
/// id's).
pub fn encode_key(created_at: crate::model::Timestamp, id: &uuid::Uuid) -> String {
    format!("{:016x}{}", created_at as u64, id.simple())
}

/// Reads [`encode_key`]'s form; anything else is `None`.
pub fn decode_key(text: &str) -> Option<(crate::model::Timestamp, uuid::Uuid)> {
    let lower = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if text.len() != 48 || !text.as_bytes().iter().all(lower) {
        return None;
    }
    let created_at = u64::from_str_radix(&text[..16], 16).ok()? as i64;
    let id = uuid::Uuid::try_parse(&text[16..]).ok()?;
    Some((created_at, id))
}

/// Where a page of the FAQ listing starts: right after the entry with this
/// key. The listing is ordered by (`created_at`, `id`), which no edit
/// changes, so paging goes on correctly across inserts, edits and deletes:
/// every entry present from the first page to the last is listed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FaqCursor {
    /// The last listed entry's creation time.
    pub created_at: crate::model::Timestamp,
    /// The last listed entry's id.
    pub id: FaqId,
}

impl FaqCursor {
    /// The key of a listed entry.
    pub fn of(faq: &FaqEntry) -> Self {
        FaqCursor {
            created_at: faq.created_at,
            id: faq.id,
        }
    }

    /// The opaque text form handed to clients ([`encode_key`]).
    pub fn encode(&self) -> String {
        encode_key(self.created_at, &self.id.0)
    }

    /// Reads [`FaqCursor::encode`]'s form; anything else is `None`.
    pub fn decode(text: &str) -> Option<Self> {
        let (created_at, id) = decode_key(text)?;
        Some(FaqCursor {
            created_at,
            id: FaqId(id),
        })
    }
}

/// Which page of a knowledge base's FAQ entries to read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FaqQuery {
    /// Start after this entry (`None`: the first page).
    pub after: Option<FaqCursor>,
    /// At most this many entries (1 to [`crate::MAX_PAGE_LIMIT`]; callers
    /// validate).
    pub limit: usize,
    /// Only entries of this status.
    pub status: Option<FaqStatus>,
    /// Only entries whose question, answer or tags contain this text
    /// (letters A to Z in either case). Entries are read in order until the
    /// page is full, so a rare text reads much of the knowledge base: a
    /// filter for people looking through a listing, not a search.
    pub contains: Option<String>,
    /// Count the entries of the asked status ([`FaqPage::total`]): a
    /// listing shown to people does; a tool reading every page need not
    /// count on each.
    pub with_total: bool,
}

impl FaqQuery {
    /// Whether `faq` passes the filters (not the cursor).
    pub fn admits(&self, faq: &FaqEntry) -> bool {
        self.status.is_none_or(|s| faq.status == s)
            && self.contains.as_deref().is_none_or(|text| {
                let text = text.to_ascii_lowercase();
                let has = |s: &str| s.to_ascii_lowercase().contains(&text);
                has(&faq.question) || has(&faq.answer) || faq.tags.iter().any(|t| has(t))
            })
    }
}

/// One page of a knowledge base's FAQ entries.
#[derive(Debug, Clone, PartialEq)]
pub struct FaqPage {
    /// The entries, in (`created_at`, `id`) order.
    pub faqs: Vec<FaqEntry>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<FaqCursor>,
    /// How many entries of the knowledge base have the asked status (all
    /// of them when none is asked), counted through an index: the
    /// `contains` filter aside. `None` unless asked for
    /// ([`FaqQuery::with_total`]).
    pub total: Option<usize>,
}

impl FaqPage {
    /// A page from up to `limit + 1` entries read in order: the extra one
    /// only tells that another page follows.
    pub fn from_rows(mut faqs: Vec<FaqEntry>, limit: usize, total: Option<usize>) -> Self {
        let next = if faqs.len() > limit {
            faqs.truncate(limit);
            faqs.last().map(FaqCursor::of)
        } else {
            None
        };
        FaqPage { faqs, next, total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faq_cursors_read_back_and_nothing_else_reads() {
        let c = FaqCursor {
            created_at: 1_700_000_000_123,
            id: FaqId::generate(),
        };
        assert_eq!(FaqCursor::decode(&c.encode()), Some(c));
        let negative = FaqCursor {
            created_at: -5,
            id: FaqId::generate(),
        };
        assert_eq!(FaqCursor::decode(&negative.encode()), Some(negative));
        for bad in [
            "",
            "zz",
            &c.encode()[1..],
            &c.encode().to_uppercase(),
            &format!("{}0", c.encode()),
        ] {
            assert_eq!(FaqCursor::decode(bad), None, "{bad:?}");
        }
    }
}
